"""The endpoint check handed to an xdist worker (``run.endpoint_check``): the worker's verdict is
the controller's, and the controller checks by itself whenever there is no verdict to trust."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from sab_pytest.errors import UsageError
from sab_pytest.run import endpoint_check
from sab_pytest.run.endpoint_check import VERDICT_NAME, check_for_controller, wait_for_worker
from sab_pytest.settings import Settings

SETTINGS = Settings(model="agent-x")


class Checks:
    """Stands in for ``check_endpoints``: counts the checks made and fails them with ``error``."""

    def __init__(self, error: BaseException | None = None) -> None:
        self.error = error
        self.made = 0

    def __call__(self, settings: Settings) -> None:
        self.made += 1
        if self.error is not None:
            raise self.error


@pytest.fixture
def checks(monkeypatch: pytest.MonkeyPatch) -> Checks:
    made = Checks()
    monkeypatch.setattr(endpoint_check, "check_endpoints", made)
    return made


def _verdict_of_worker(directory: Path, checks: Checks) -> None:
    """What a worker leaves: ``check_for_controller``'s verdict, once its thread is done."""
    check_for_controller(SETTINGS, directory)
    deadline = time.monotonic() + 10
    while not (directory / VERDICT_NAME).exists() and time.monotonic() < deadline:
        time.sleep(0.01)


def test_a_passed_check_in_the_worker_is_not_made_again(tmp_path: Path, checks: Checks) -> None:
    _verdict_of_worker(tmp_path, checks)
    wait_for_worker(SETTINGS, tmp_path, alive=lambda: True)
    assert checks.made == 1  # the worker's only


def test_a_failed_check_in_the_worker_is_the_controllers_usage_error(tmp_path: Path, checks: Checks) -> None:
    checks.error = UsageError("cannot reach the model API at http://127.0.0.1:9/v1: refused")
    _verdict_of_worker(tmp_path, checks)
    checks.error = None
    with pytest.raises(UsageError, match=r"^cannot reach the model API at http://127\.0\.0\.1:9/v1: refused$"):
        wait_for_worker(SETTINGS, tmp_path, alive=lambda: True)
    assert checks.made == 1


def test_a_check_that_broke_in_the_worker_is_made_by_the_controller(tmp_path: Path, checks: Checks) -> None:
    checks.error = KeyError("a bug")
    _verdict_of_worker(tmp_path, checks)
    assert "crashed" in (tmp_path / VERDICT_NAME).read_text()
    checks.error = RuntimeError("the same bug, now where it shows")
    with pytest.raises(RuntimeError, match="where it shows"):
        wait_for_worker(SETTINGS, tmp_path, alive=lambda: True)
    assert checks.made == 2


def test_the_controller_waits_for_a_live_workers_verdict(tmp_path: Path, checks: Checks) -> None:
    later = threading.Timer(0.3, lambda: (tmp_path / VERDICT_NAME).write_text('{"ok": true}'))
    later.start()
    started = time.monotonic()
    wait_for_worker(SETTINGS, tmp_path, alive=lambda: True)
    assert time.monotonic() - started >= 0.3 and checks.made == 0


def test_a_worker_that_ends_without_a_verdict_leaves_the_check_to_the_controller(tmp_path: Path,
                                                                                  checks: Checks) -> None:
    ends_at = time.monotonic() + 0.2
    started = time.monotonic()
    wait_for_worker(SETTINGS, tmp_path, alive=lambda: time.monotonic() < ends_at, patience_s=60)
    assert checks.made == 1 and time.monotonic() - started < 5  # at once, not after the patience


def test_a_worker_silent_past_the_patience_leaves_the_check_to_the_controller(tmp_path: Path,
                                                                               checks: Checks) -> None:
    started = time.monotonic()
    wait_for_worker(SETTINGS, tmp_path, alive=lambda: True, patience_s=0.2)
    assert checks.made == 1 and 0.2 <= time.monotonic() - started < 5


def test_a_torn_verdict_is_no_verdict(tmp_path: Path, checks: Checks) -> None:
    (tmp_path / VERDICT_NAME).write_text('{"ok": tr')
    wait_for_worker(SETTINGS, tmp_path, alive=lambda: False)
    assert checks.made == 1
