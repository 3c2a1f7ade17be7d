"""The run's endpoint check: one small chat call per model endpoint before any case, so that a
missing key or a dead URL is one usage error instead of every case failing after its retries.

Who makes the call. The check needs the OpenAI SDK, whose import costs a process about 1.7 s of
CPU (pydantic builds a model class for every type of the API). Without xdist, the one process
makes it on a background thread (``start_endpoint_check``) while it collects. Under xdist the
workers import the SDK anyway for their cases, while the controller calls no model otherwise: so
the controller hands the check to its first worker (``check_for_controller``), which writes its
verdict in the run directory, and the controller waits for that verdict before it schedules any
item (``wait_for_worker``). The controller checks by itself only when that worker ends without a
verdict, or stays silent past ``WORKER_PATIENCE_S``. Either way no case calls a model before the
check has passed, and a failed check is said once, by the controller.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sab_pytest.errors import SabError, UsageError
from sab_pytest.fetch import atomic_write_bytes
from sab_pytest.run.runtime import Runtime
from sab_pytest.settings import Settings

#: the worker's verdict, in the run directory: ``{"ok": true}``, ``{"error": message}`` for a failed
#: check, or ``{"crashed": what}`` when the check itself broke (the controller then checks itself)
VERDICT_NAME = "endpoint-check.json"
#: how long the controller trusts a live worker to deliver its verdict: its start-up, the SDK's
#: import and the check's own attempts (2 per endpoint, 15 s each at most) fit well within it
WORKER_PATIENCE_S = 300.0
POLL_S = 0.02


def check_endpoints(settings: Settings) -> None:
    """One call per endpoint when a model is in the run (``run.runtime.Runtime.preflight``)."""
    if not settings.uses_api:
        return

    Runtime(settings).preflight()


def start_endpoint_check(settings: Settings) -> Callable[[], None]:
    """``check_endpoints`` on a background thread; the returned function waits for it and raises
    its error. The caller must wait before any case may call a model."""
    failed: list[BaseException] = []

    def check() -> None:
        try:
            check_endpoints(settings)
        except BaseException as exc:  # handed to the waiter, raised there
            failed.append(exc)

    thread = threading.Thread(target=check, name="sab-endpoint-check", daemon=True)
    thread.start()

    def wait() -> None:
        thread.join()
        if failed:
            raise failed[0]

    return wait


def check_for_controller(settings: Settings, directory: Path) -> None:
    """In the worker the controller chose: the check on a background thread (it imports the SDK
    while the worker collects), its verdict written to ``directory`` for the controller."""

    def check() -> None:
        verdict: dict[str, Any]
        try:
            check_endpoints(settings)
            verdict = {"ok": True}
        except SabError as exc:
            verdict = {"error": str(exc)}
        except BaseException as exc:  # a bug, not a verdict: the controller checks again and shows it
            verdict = {"crashed": f"{type(exc).__name__}: {exc}"}
        _write(directory / VERDICT_NAME, verdict)

    threading.Thread(target=check, name="sab-endpoint-check", daemon=True).start()


def wait_for_worker(settings: Settings, directory: Path, alive: Callable[[], bool],
                    patience_s: float = WORKER_PATIENCE_S) -> None:
    """The controller's side: wait for the verdict of the worker ``check_for_controller`` runs in
    and raise a failed check as a ``UsageError``. When the worker ended (``alive()`` is false) or
    stayed silent past ``patience_s`` without a verdict, or its check broke, check here instead."""
    path = directory / VERDICT_NAME
    deadline = time.monotonic() + patience_s
    verdict = _read(path)
    while verdict is None and alive() and time.monotonic() < deadline:
        time.sleep(POLL_S)
        verdict = _read(path)
    if verdict is None:
        verdict = _read(path)  # written just before the worker ended
    if verdict is not None and "error" in verdict:
        raise UsageError(str(verdict["error"]))
    if verdict is None or not verdict.get("ok"):
        check_endpoints(settings)


def _write(path: Path, verdict: dict[str, Any]) -> None:
    """Whole or not at all: the controller polls for the file and must never read half of it."""
    with contextlib.suppress(OSError):  # no verdict: the controller checks by itself once this worker is done
        atomic_write_bytes(path, json.dumps(verdict).encode())


def _read(path: Path) -> dict[str, Any] | None:
    try:
        verdict = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return verdict if isinstance(verdict, dict) else None
