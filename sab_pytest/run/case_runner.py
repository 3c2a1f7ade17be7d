"""The run-ahead case runner: one per process (per xdist worker), for every strategy.

Why: a run's cost is model latency, and a case is a chain of model calls (agent, then judges, or
a whole episode). pytest runs one item at a time, so a worker that waited for each case in turn
would pay cases x calls x latency. The runner runs the worker's *whole cases* ahead of the items,
up to ``concurrency`` at a time on daemon threads (each case with its own engine, leased by the
function it runs), and keeps each result in memory until the item of that case asks for it.

* What to run ahead comes from ``upcoming()``, called whenever a thread is free: the worker's
  queue of cases, in the order its items will run (it can grow, when an idle worker receives
  more, or shrink, when another worker takes over cases this one has not started).
* ``result(key)`` is what an item calls: a finished case is handed over (and forgotten), a
  running one is waited for, one that has not started is run next, before any run-ahead case.
  The item never runs a case on its own thread, so ``concurrency`` bounds the cases running,
  run-ahead and items together. (The model calls in flight have their own, tighter bound: the
  process's ``slots.CallSlots``, which every request takes; the runtime runs more cases than
  call slots (``runtime.cases_at_once``), so that no slot idles while a case is between calls.)
* A case's exception is re-raised by ``result`` of that case's key, on that item, never another.
* ``stop()`` starts nothing more and cancels running cases at their next model call: it sets the
  ``stop`` event, which the cases' contexts (``models.CallContext.stop``) watch; finished results
  stay available, and ``result`` of a case that never finished raises ``RunnerStopped``. The
  threads are daemons, so an interrupted session never waits for them.
* ``lock`` and ``is_started`` let a caller that gives cases away (the xdist queue adapter) do so
  atomically: a case is started exactly once, under the lock.

Plain Python: ``CaseRunner(evaluate, upcoming, concurrency=8)`` works without pytest.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from sab_pytest.errors import Cancelled

T = TypeVar("T")
R = TypeVar("R")

IDLE_POLL_S = 0.05  # how often an idle thread looks again at a queue that may grow


class RunnerStopped(Exception):
    """The runner was stopped before this case finished: it has no result."""


@dataclass
class _Slot:
    """One case the runner knows about: running, or finished with a result or an exception."""

    done: threading.Event
    result: Any = None
    error: BaseException | None = None


class CaseRunner(Generic[T, R]):
    """Run ``fn(case)`` for the cases of ``upcoming()`` ahead of time; see the module docstring.

    ``key(case)`` identifies a case (``result`` is called with the key); ``upcoming`` returns the
    cases still to be reported, in order. ``fn`` runs on the runner's threads. ``stop`` is the
    event ``stop()`` sets: give the one the cases' model contexts watch (``Runtime.stop``), so that
    running cases stop at their next model call (a new event when not given).
    """

    def __init__(self, fn: Callable[[T], R], upcoming: Callable[[], Sequence[T]], *, concurrency: int,
                 key: Callable[[T], Hashable], name: str = "sab-runner", stop: threading.Event | None = None) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self.fn = fn
        self.upcoming = upcoming
        self.concurrency = concurrency
        self.key = key
        self.name = name
        self.lock = threading.RLock()
        self._wake = threading.Condition(self.lock)  # idle runner threads wait here
        self._picked = threading.Condition(self.lock)  # an item waiting for its case to be started
        self._slots: dict[Hashable, _Slot] = {}
        self._urgent: list[T] = []  # cases an item waits for and nobody started
        self._stop = stop if stop is not None else threading.Event()
        self._threads: list[threading.Thread] = []
        self._idle = 0  # threads waiting in ``_take``
        self._polling = False  # one of them looks at the queue now and then
        self.started_count = 0  # cases started, for tests and logs
        self.running = 0
        self.max_running = 0

    # -- lifecycle -------------------------------------------------------------------------------
    def start(self) -> CaseRunner[T, R]:
        with self.lock:
            if not self._threads:
                for n in range(self.concurrency):
                    thread = threading.Thread(target=self._work, name=f"{self.name}-{n}", daemon=True)
                    self._threads.append(thread)
                    thread.start()
        return self

    def stop(self) -> None:
        """Start no new case; running cases stop at their next model call. Never blocks."""
        self._stop.set()
        with self.lock:
            self._wake.notify_all()
            self._picked.notify_all()

    @property
    def stopped(self) -> bool:
        return self._stop.is_set()

    # -- asking ----------------------------------------------------------------------------------
    def is_started(self, key: Hashable) -> bool:
        """Whether the case ``key`` was started (it will not be started again). Hold ``lock``
        around this and whatever you decide from it."""
        with self.lock:
            return key in self._slots

    def result(self, case: T, *, run_here_at: float | None = None) -> R:
        """The result of ``case``: handed over once, waiting for it (or running it next) if needed.

        ``run_here_at`` (a ``time.monotonic()`` instant): if no thread has started the case by
        then (all busy with others), it runs in the caller's thread, so that a case whose time
        limit is past ends at once (as its own error) instead of waiting for a free thread.
        Re-raises the exception the case raised; ``RunnerStopped`` when the runner was stopped
        before the case finished.
        """
        k = self.key(case)
        here = False
        with self.lock:
            slot = self._slots.get(k)
            if slot is None:
                if self._stop.is_set():
                    raise RunnerStopped(f"{k}: the run was stopped before this case started")
                self._urgent.append(case)
                self._wake.notify()
            while slot is None:  # not picked up yet: wait for a thread to start it
                if self._stop.is_set():
                    raise RunnerStopped(f"{k}: the run was stopped before this case started")
                wait = IDLE_POLL_S
                if run_here_at is not None:
                    wait = min(wait, run_here_at - time.monotonic())
                    if wait <= 0:
                        slot = self._slots[k] = _Slot(done=threading.Event())
                        self.started_count += 1
                        here = True
                        break
                self._picked.wait(wait)
                slot = self._slots.get(k)
        if here:
            try:
                slot.result = self.fn(case)
            except BaseException as exc:  # re-raised below, as a runner thread's would be
                slot.error = exc
            finally:
                slot.done.set()
        slot.done.wait()
        with self.lock:
            self._slots[k] = _Slot(done=slot.done)  # keep the key (started once), drop the result
        if isinstance(slot.error, Cancelled):
            raise RunnerStopped(f"{k}: the run was stopped while this case ran")
        if slot.error is not None:
            raise slot.error
        return slot.result

    def forget(self, case: T) -> None:
        """Let ``case`` run again: its result was handed over and its item runs once more (a rerun
        after an infrastructure error). A case still running is left alone."""
        with self.lock:
            slot = self._slots.get(self.key(case))
            if slot is not None and slot.done.is_set():
                del self._slots[self.key(case)]

    # -- work ------------------------------------------------------------------------------------
    def _take(self) -> tuple[T, _Slot] | None:
        """The next case to start (urgent first, then the queue's first unstarted one), marked
        started under the lock; None when stopped.

        An idle thread waits: one of them (the poller) looks at the queue every ``IDLE_POLL_S``,
        since nothing tells the runner when it grows; the others sleep until woken, one at a time
        (an item asked for its case, or the thread woken before them found work and started it),
        or all at once when the runner stops. So a worker with many idle threads does not spend
        its CPU on each of them scanning the queue whenever anything happens.
        """
        with self._wake:
            while not self._stop.is_set():
                case = self._next_case()
                if case is not None:
                    slot = _Slot(done=threading.Event())
                    self._slots[self.key(case)] = slot
                    self.started_count += 1
                    self.running += 1
                    self.max_running = max(self.max_running, self.running)
                    if self._idle:
                        self._wake.notify()  # there may be more: the next idle thread looks
                    self._picked.notify_all()
                    return case, slot
                self._idle += 1
                try:
                    if self._polling:
                        self._wake.wait()
                    else:
                        self._polling = True
                        try:
                            self._wake.wait(IDLE_POLL_S)
                        finally:
                            self._polling = False
                finally:
                    self._idle -= 1
            return None

    def _next_case(self) -> T | None:
        while self._urgent:
            case = self._urgent.pop(0)
            if self.key(case) not in self._slots:
                return case
        for case in self.upcoming():
            if self.key(case) not in self._slots:
                return case
        return None

    def _work(self) -> None:
        while True:
            taken = self._take()
            if taken is None:
                return
            case, slot = taken
            try:
                slot.result = self.fn(case)
            except BaseException as exc:  # re-raised on the case's own item by ``result``
                slot.error = exc
            finally:
                with self.lock:
                    self.running -= 1
                slot.done.set()
