"""The run's circuit breaker and stop signal, shared by the controller and every xdist worker.

Why files: xdist workers are separate processes, and a model endpoint that dies fails in all of
them at once. A breaker per process would need ten failures *per worker*, and a Ctrl-C sent to
the controller alone never reaches a worker. So one small directory per run (created by the
controller, its path handed to the workers) holds:

* ``state.json``: the current streak of model calls that failed for good (each after its
  retries) with no success between them, across all processes, and when a call was last
  answered (the hung-endpoint check); read-modify-write under a file lock, replaced
  atomically so that unlocked readers see a whole file;
* ``pace.json``: the share of ``--sab-concurrency`` the run's processes use while the endpoint
  rate-limits them (``run.slots.Pace``);
* ``rate-<endpoint>.json``: the send schedule under an endpoint's rate limit, learnt from its
  headers (``models.pacing.RatePacer``);
* ``stop.json``: present once the run must stop, with the reason: ``endpoint_down`` (the streak
  reached ``max_failures``), ``engine_down`` (cases kept failing on their engine, see
  ``engine_failure``), ``output_failed`` (the controller could not write the results file),
  ``budget_spent`` (the priced usage, ``spend``, reached ``--sab-budget``; the total lives in
  ``state.json``) or ``interrupted`` (Ctrl-C on the controller). The first reason wins;
* ``finished-<pid>.jsonl``: the record of every case a process finished (``keep``), so that a
  run that stops while a worker holds results its pytest items have not reported yet (the case
  runner works ahead of them) still has them: the controller adopts them (``kept``).

The model client asks ``check()`` before each attempt (one ``stat``), sleeps between retries with
``wait()`` (which wakes up when the run stops), and reports each call's final outcome with
``failure()`` / ``success()``. A stopped run raises ``InfraError`` with the stop's reason as its
kind, so any caller that treats ``InfraError`` as "this case could not be evaluated" needs
nothing special. Plain Python: works without pytest.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import filelock

from sab_pytest.errors import BUDGET_SPENT, ENDPOINT_DOWN, ENGINE_DOWN, INTERRUPTED, STOP_KINDS, InfraError
from sab_pytest.fetch import atomic_write_bytes
from sab_pytest.results import StoredRecord, error_kind, json_line, read_results
from sab_pytest.settings import DEFAULT_MAX_FAILURES

POLL_S = 0.1  # how often a sleeping retry looks at the stop file and the streak
ANSWERED_EVERY_S = 1.0  # how often a process writes the run's last answer time

_STATE = "state.json"
_STOP = "stop.json"
_LOCK = "state.lock"


def not_run(record: StoredRecord) -> bool:
    """Whether a case's record is the run's stop reaching the case before it could finish (an
    error of a ``STOP_KINDS`` kind): the case was not run, it has no result to keep."""
    return error_kind(record) in STOP_KINDS


@dataclass(frozen=True)
class Stop:
    """Why the run stopped: ``reason`` is one of ``STOP_KINDS``; ``message`` says what happened."""

    reason: str
    message: str

    def error(self) -> InfraError:
        return InfraError(self.reason, self.message)


class RunState:
    """The shared state of one run, in ``directory`` (see the module docstring).

    ``max_failures`` = 0 turns the breaker off (the stop signal still works).
    """

    def __init__(self, directory: Path | str, max_failures: int = DEFAULT_MAX_FAILURES) -> None:
        self.directory = Path(directory)
        self.max_failures = int(max_failures)
        self._stop: Stop | None = None
        self._thread_lock = threading.Lock()
        self._journal: Any = None  # this process's finished-cases file, opened on first ``keep``
        self._journal_pid = 0
        self._journal_failed = False
        self._journal_lock = threading.Lock()
        self._heard_at = 0.0  # when this process last wrote that the server sent something
        self._seen_at = 0.0  # this process's latest answer or chunk, kept at every one (no file write)

    @classmethod
    def create(cls, max_failures: int = DEFAULT_MAX_FAILURES, parent: Path | str | None = None) -> RunState:
        """A fresh run directory (a private temporary directory unless ``parent`` is given)."""
        return cls(tempfile.mkdtemp(prefix="sab-run-", dir=parent), max_failures)

    def __repr__(self) -> str:
        return f"RunState({str(self.directory)!r}, max_failures={self.max_failures})"

    def remove(self) -> None:
        with self._journal_lock:
            if self._journal is not None:
                self._journal.close()
                self._journal = None
        shutil.rmtree(self.directory, ignore_errors=True)

    # -- finished cases --------------------------------------------------------------------------------
    def keep(self, record: StoredRecord) -> None:
        """Keep the record of a case this process finished: one JSON line, flushed (a process
        that is killed next still leaves it). Thread-safe."""
        line = json_line(record)
        with self._journal_lock:
            if self._journal_failed:
                return
            try:
                if self._journal is None or self._journal_pid != os.getpid():
                    self.directory.mkdir(parents=True, exist_ok=True)
                    self._journal = open(self.directory / f"finished-{os.getpid()}.jsonl", "a", encoding="utf-8")  # noqa: SIM115
                    self._journal_pid = os.getpid()
                self._journal.write(line)
                self._journal.flush()
            except OSError:
                # a full disk: the journal is a spare copy for a run that stops early, and the case
                # must not fail for it; the record still reaches the controller through its item
                self._journal_failed = True

    def kept(self) -> list[StoredRecord]:
        """Every record kept by any process of the run so far (a torn last line is skipped)."""
        return [record for path in sorted(self.directory.glob("finished-*.jsonl")) for record in read_results(path)]

    # -- stop signal -------------------------------------------------------------------------------
    def stopped(self) -> Stop | None:
        """The stop, once someone asked for it (cached: a stop is never taken back)."""
        if self._stop is not None:
            return self._stop
        data = _read_json(self.directory / _STOP)
        if data is not None:
            self._stop = Stop(str(data.get("reason", INTERRUPTED)), str(data.get("message", "the run was stopped")))
        return self._stop

    def check(self) -> None:
        """Raise the stop's ``InfraError`` if the run has stopped; cheap enough for every attempt."""
        stop = self.stopped()
        if stop is not None:
            raise stop.error()

    def request_stop(self, reason: str, message: str) -> Stop:
        """Stop the run (every process sees it at its next check); the first reason wins."""
        with self._locked():
            existing = self.stopped()
            if existing is not None:
                return existing
            _write_json(self.directory / _STOP, {"reason": reason, "message": message, "at": time.time()})
            self._stop = Stop(reason, message)
            return self._stop

    def wait(self, seconds: float, *, while_healthy: bool = False) -> bool:
        """Sleep ``seconds``, waking early when the run stops (raises its ``InfraError``).

        With ``while_healthy``, also wake when the endpoint is known to be failing (some call
        failed for good and none has succeeded since); returns False then, True after a full sleep.
        """
        end = time.monotonic() + max(0.0, seconds)
        while True:
            self.check()
            if while_healthy and self.streak() > 0:
                return False
            left = end - time.monotonic()
            if left <= 0:
                return True
            time.sleep(min(POLL_S, left))

    # -- breaker -------------------------------------------------------------------------------------
    def streak(self) -> int:
        """Model calls that failed for good in a row, across all processes, since the last success."""
        data = self._state()
        value = data.get("streak", 0)
        return value if isinstance(value, int) else 0

    def success(self) -> None:
        """A model call got its answer: the streak starts again from zero, and the run's last
        answer is now (written at most every ``ANSWERED_EVERY_S`` by a process)."""
        now = time.time()
        self._seen_at = max(self._seen_at, now)
        state = self._state()
        answered = state.get("answered", 0.0)
        if state.get("streak", 0) == 0 and isinstance(answered, (int, float)) and now - answered < ANSWERED_EVERY_S:
            return  # the common case costs one small read, no lock
        self._update(lambda state: state.update(streak=0,
                                                answered=max(now, float(state.get("answered", 0.0) or 0.0))))

    def heard(self) -> None:
        """The server sent something (a chunk of a streamed answer): it is alive, even before any
        answer is whole. Written at most every ``ANSWERED_EVERY_S`` by a process (one time check
        otherwise), so that a slow server that keeps streaming is never taken for a hung one."""
        now = time.time()
        self._seen_at = max(self._seen_at, now)
        if now - self._heard_at < ANSWERED_EVERY_S:
            return
        self._heard_at = now
        self._update(lambda state: state.update(heard=max(now, float(state.get("heard", 0.0) or 0.0))))

    def heard_during(self, when: float) -> bool:
        """Whether the server sent something (an answer, a chunk) to any call of the run after
        ``when``, with no allowance: the evidence that a call which timed out meanwhile sat in a
        busy server's queue. This process's own answers and chunks count at once (``_seen_at``: the
        file is written at most every ``ANSWERED_EVERY_S``, so a call that times out sooner than
        that would miss the chunks of the call ahead of it); other processes' after their write."""
        data = self._state()
        times = [t for t in (data.get("answered"), data.get("heard"), self._seen_at) if isinstance(t, (int, float))]
        return bool(times) and max(times) > when

    def answered_since(self, when: float) -> bool:
        """Whether any model call of the run (any process) got an answer after ``when`` (``time.time()``).

        The run-level view that tells a hung endpoint from a slow one: a call that timed out twice
        in a row, the second time while no call anywhere was answered, means nothing is being
        answered (the run stops about two ``--sab-timeout`` after the endpoint went quiet, not
        after every call's retries), whereas a slow model keeps answering within ``--sab-timeout``.
        Streamed chunks count as well (``heard``): hung means silent, so a server that keeps
        streaming a long answer to one call is alive while the others wait their turn.
        Conservative: the last answer is written at most every ``ANSWERED_EVERY_S``, so an answer
        up to that long before ``when`` still counts.
        """
        data = self._state()
        times = [t for t in (data.get("answered"), data.get("heard")) if isinstance(t, (int, float))]
        return bool(times) and max(times) >= when - ANSWERED_EVERY_S

    def failure(self, message: str) -> int:
        """A model call failed for good (after its retries); returns the new streak. Trips the
        breaker (stops the run with ``endpoint_down``) when the streak reaches ``max_failures``."""
        streak = self._count("streak", "failures", last=message)
        self._trip(streak, ENDPOINT_DOWN, f"the model endpoint failed {streak} calls in a row with no success "
                   f"between them (across all workers); last: {message}")
        return streak

    # -- engine breaker ------------------------------------------------------------------------------
    def engine_failure(self, message: str) -> int:
        """A case failed because its engine failed (a THOR server or a Unity process died, ...).

        Counted apart from model calls: cases failing in a row on their engine, across all
        processes, with no case between them that ran on an engine without failing. At
        ``max_failures`` the run stops with ``engine_down``: a killed THOR server otherwise turns
        every remaining case into an engine error within seconds. Returns the new streak."""
        streak = self._count("engine_streak", "engine_failures")
        self._trip(streak, ENGINE_DOWN, f"the engine failed {streak} cases in a row with no case running on an "
                   f"engine between them (across all workers); last: {message}")
        return streak

    def engine_success(self) -> None:
        """A case ran on its engine without an engine failure: the engine streak starts again."""
        if int(self._state().get("engine_streak", 0)):  # else: one read, no lock
            self._update(lambda state: state.update(engine_streak=0))

    def spend(self, usd: float, budget: float | None) -> float:
        """Add a finished case's priced usage to the run's total (all processes); returns the
        total. Stops the run (``budget_spent``) once the total reaches ``budget``."""
        def add(state: dict[str, Any]) -> float:
            state["spent_usd"] = float(state.get("spent_usd", 0.0)) + usd
            return state["spent_usd"]

        total = self._update(add)
        if budget is not None and total >= budget:
            self.request_stop(BUDGET_SPENT, f"the priced usage reached --sab-budget ${budget:g} "
                              f"(${total:.4f} spent)")
        return total

    def spent(self) -> float:
        """The run's priced usage so far, in all processes, calls in flight included (``--sab-budget``)."""
        return float(self._state().get("spent_usd", 0.0))

    def reserve(self, usd: float, budget: float) -> tuple[bool, float]:
        """Set ``usd`` aside for a call about to be made, if the run's spending (all processes, calls in
        flight included) stays within ``budget``; returns whether it did and the spending before it.
        One step under the state's lock, so calls sent at once cannot pass the budget together."""
        def take(state: dict[str, Any]) -> tuple[bool, float]:
            spent = float(state.get("spent_usd", 0.0))
            if spent + usd > budget:
                return False, spent
            state["spent_usd"] = spent + usd
            return True, spent

        return self._update(take)

    def unrecorded(self, usage: dict[str, Any]) -> None:
        """Add the usage of a case that the run's stop cut short (it has no record) to the run's: its
        counts added up, its lists (its calls' priced fields) put together."""
        def add(state: dict[str, Any]) -> None:
            totals = state.setdefault("unrecorded_usage", {})
            for key, value in usage.items():
                if isinstance(value, (int, float)):
                    totals[key] = totals.get(key, 0) + value
                elif isinstance(value, list):
                    totals[key] = [*totals.get(key, []), *value]

        self._update(add)

    def unrecorded_usage(self) -> dict[str, Any]:
        """The usage of every case the run's stop cut short, in all processes."""
        found = self._state().get("unrecorded_usage")
        return found if isinstance(found, dict) else {}

    def failures(self) -> int:
        """Model calls that failed for good in this run, in all processes."""
        data = self._state()
        return int(data.get("failures", 0))

    def _state(self) -> dict[str, Any]:
        """``state.json`` as it stands (empty before anything was counted); a whole file, never half."""
        return _read_json(self.directory / _STATE) or {}

    def _update(self, change: Callable[[dict[str, Any]], Any]) -> Any:
        """Read ``state.json``, ``change`` it in place and write it back, under the lock; returns
        what ``change`` returns."""
        with self._locked():
            state = self._state()
            result = change(state)
            _write_json(self.directory / _STATE, state)
        return result

    def _count(self, streak_key: str, total_key: str, **also: Any) -> int:
        """One more failure in a row (``streak_key``) and in all (``total_key``); returns the streak."""
        def bump(state: dict[str, Any]) -> int:
            streak = int(state.get(streak_key, 0)) + 1
            state.update({streak_key: streak, total_key: int(state.get(total_key, 0)) + 1}, **also)
            return streak

        return self._update(bump)

    def _trip(self, streak: int, reason: str, message: str) -> None:
        """Stop the run for ``reason`` once ``streak`` reaches ``max_failures`` (0: never)."""
        if self.max_failures and streak >= self.max_failures:
            self.request_stop(reason, message)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """Exclusive across threads (a lock) and processes (a file lock, ``filelock``'s: ``flock`` on
        POSIX, ``LockFileEx`` on Windows)."""
        with self._thread_lock:
            self.directory.mkdir(parents=True, exist_ok=True)
            with open(self.directory / _LOCK, "a+b") as fh:
                filelock.lock_descriptor(fh.fileno())
                try:
                    yield
                finally:
                    filelock.unlock_descriptor(fh.fileno())


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _write_json(path: Path, data: dict[str, Any]) -> None:
    """Atomic replace: a reader sees the old file or the new one, never half of one."""
    atomic_write_bytes(path, json.dumps(data).encode())
