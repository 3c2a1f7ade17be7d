"""The xdist adapter (``pytest_layer.xdist_adapter``): the installed xdist has every internal piece the
case scheduling relies on (CI installs the newest xdist, so a change there fails here first, naming the
piece); a piece removed or changed is reported; and a run whose xdist lacks a piece falls back to
xdist's own scheduling with one warning line, with the same outcomes and every case run once."""

from __future__ import annotations

from pathlib import Path

import pytest
import xdist
import xdist.remote
import xdist.scheduler.worksteal
from support.calls import case_calls
from support.tiny_dataset import N_CASES

from sab_pytest.pytest_layer import xdist_adapter
from sab_pytest.results.files import RESULTS_NAME, read_results
from sab_pytest.testing import fake_openai_server

WARNING = "sab: warning: pytest-xdist"


def test_the_installed_xdist_has_every_piece_the_adapter_relies_on() -> None:
    problems = xdist_adapter.missing()
    assert problems == [], (f"pytest-xdist {xdist.__version__} is not what sab_pytest/pytest_layer/xdist_adapter.py "
                            "was written for; runs fall back to xdist's own scheduling. Missing or changed:\n  "
                            + "\n  ".join(problems))


def test_a_removed_method_a_changed_signature_and_an_unassigned_attribute_are_named(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(xdist.scheduler.worksteal.WorkStealingScheduling, "_send_tests")
    monkeypatch.setattr(xdist.remote.WorkerInteractor, "steal", lambda self, indices, force=False: None)
    monkeypatch.delattr(xdist.scheduler.worksteal, "MIN_PENDING")

    def init(self, config, channel):  # xdist's __init__ without the queue
        self.config = config

    monkeypatch.setattr(xdist.remote.WorkerInteractor, "__init__", init)
    problems = xdist_adapter.missing()
    assert problems == [
        "xdist.scheduler.worksteal.MIN_PENDING: missing",
        "xdist.scheduler.worksteal.WorkStealingScheduling._send_tests(self, node, num): missing",
        "xdist.remote.WorkerInteractor.steal(self, indices): parameters are now (self, indices, force=False)",
        "xdist.remote.WorkerInteractor.torun: never assigned",
    ]
    line = xdist_adapter.fallback_line(problems)
    assert line.startswith(f"{WARNING} {xdist.__version__} lacks") and "_send_tests" in line
    assert "not run ahead" in line and "\n" not in line


def test_a_worker_command_handler_that_no_longer_calls_steal_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    handle = xdist.remote.WorkerInteractor.handle_command
    monkeypatch.setattr(xdist.remote.WorkerInteractor, "handle_command", lambda self, command: None)
    assert xdist_adapter.missing() == [
        "xdist.remote.WorkerInteractor.steal: no longer called by the worker's command handler"]
    monkeypatch.setattr(xdist.remote.WorkerInteractor, "handle_command", handle)
    assert xdist_adapter.missing() == []


def test_a_scheduler_protocol_member_the_adapter_lacks_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    protocol = pytest.importorskip("xdist.scheduler.protocol")
    monkeypatch.setattr(protocol.Scheduling, "drain", lambda self: None, raising=False)
    assert xdist_adapter.missing() == [
        "xdist.scheduler.protocol.Scheduling.drain: not implemented by sab-pytest's scheduler"]


def test_without_the_pieces_a_worker_runs_nothing_ahead(monkeypatch: pytest.MonkeyPatch) -> None:
    class WorkerInteractor:  # found by its shape, as in a worker
        steal, nextitem_index = None, None
        torun = type("TestQueue", (), {"lock": None})()

    config = type("Config", (), {"workerinput": {}})()
    config.pluginmanager = type("PM", (), {"get_plugins": lambda self: [WorkerInteractor()]})()
    assert isinstance(xdist_adapter.find_interactor(config), WorkerInteractor)
    monkeypatch.delattr(xdist.remote.TestQueue, "replace")
    assert xdist_adapter.find_interactor(config) is None


# -- the fallback, in a real run under xdist -------------------------------------------------------------

MISSING_PIECE = """
import xdist.scheduler.worksteal

del xdist.scheduler.worksteal.WorkStealingScheduling._send_tests  # as if a newer xdist had renamed it
"""


def _records(out: Path) -> dict[str, tuple]:
    records = read_results(out / RESULTS_NAME)
    return {r["case"]["id"]: (r["passed"], r["message"], r["rejected"], r["error"]) for r in records}


def test_a_run_without_the_pieces_falls_back_with_one_warning_and_the_same_outcomes(
        sab_run, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with fake_openai_server(latency=0.02) as server:
        bench = sab_run("--model", "agent", f"--sab-base-url={server.url}", f"--sab-judge-base-url={server.url}",
                        "--sab-no-cache", "--sab-retries", "0",
                        "-p", "no:cacheprovider")
        # the outcomes to compare with: a run in this process, without xdist (a run under xdist with all
        # its pieces is test_plugin_runner's, which also checks that it warns of nothing)
        normal = bench("-n", "0", "--sab-concurrency", "3", out="normal")
        normal_calls = len(case_calls(server.chat_requests))
        server.reset()
        pytester.makeconftest(MISSING_PIECE)
        # in a process of its own: the conftest takes a piece out of xdist in the run's controller
        fallback = bench("-n", "2", "--sab-concurrency", "3", out="fallback", inprocess=False)
        warnings = [line for line in fallback.outlines if WARNING in line]
        assert len(warnings) == 1, fallback.stdout.str()
        assert "WorkStealingScheduling._send_tests" in warnings[0] and "not run ahead" in warnings[0]
        assert fallback.parseoutcomes() == normal.parseoutcomes()
        assert fallback.ret == normal.ret
        records = _records(pytester.path / "fallback")
        assert len(records) == N_CASES and records == _records(pytester.path / "normal")
        assert len(case_calls(server.chat_requests)) == normal_calls  # no case run twice
        assert server.max_in_flight <= 2  # one case at a time per worker: nothing run ahead
