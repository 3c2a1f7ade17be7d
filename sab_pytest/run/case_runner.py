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
* Batch mode (``between_rounds``): a case whose request waits for a batch raises ``Deferred``; it is
  parked (its slot stays open, its item keeps waiting) and its thread takes the next case. When no
  case runs and none is left to start, one thread calls ``between_rounds()`` (submit, wait, answer
  into the cache) and the parked cases run again; False from it (the wait was cut short) stops the
  runner, and the parked cases end as stopped (``--sab-resume`` runs them).
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

from sab_pytest.batching.errors import Deferred
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
                 key: Callable[[T], Hashable], name: str = "sab-runner", stop: threading.Event | None = None,
                 between_rounds: Callable[[], bool] | None = None) -> None:
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
        self.between_rounds = between_rounds
        self._parked: list[tuple[T, _Slot]] = []  # cases waiting for the next batch round
        self._restart: list[tuple[T, _Slot]] = []  # parked cases whose round is over: run them again
        self._flushing = False
        self.rounds = 0
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
            self._end_parked(self._parked + self._restart, Cancelled("the run was stopped while its batch was pending"))
            self._parked, self._restart = [], []
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
            self._run(case, slot)
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
                if self._restart:
                    self.running += 1
                    return self._restart.pop(0)
                case = self._next_case()
                if case is None and self._parked and not self.running and not self._flushing:
                    self._round()
                    continue
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
            try:
                self._run(*taken)
            finally:
                with self.lock:
                    self.running -= 1

    def _run(self, case: T, slot: _Slot) -> None:
        """Run ``case`` into its ``slot``: its result or exception (re-raised on the case's own item
        by ``result``), or parked for the next batch round (``Deferred``)."""
        try:
            slot.result = self.fn(case)
        except Deferred:
            with self.lock:
                self._parked.append((case, slot))
                self._wake.notify()
            return
        except BaseException as exc:
            slot.error = exc
        slot.done.set()

    def _round(self) -> None:
        """One batch round, called with the lock held by the one thread that found every case parked
        or done; the lock is free while ``between_rounds`` waits."""
        assert self.between_rounds is not None, "a case was deferred in a runner without batch rounds"
        self._flushing, self.rounds = True, self.rounds + 1
        parked, self._parked = self._parked, []
        error: BaseException | None = None
        self.lock.release()
        try:
            go_on = self.between_rounds()
        except BaseException as exc:  # a bug in the round: its cases show it, none hangs
            go_on, error = False, exc
        finally:
            self.lock.acquire()
            self._flushing = False
        if go_on and not self._stop.is_set():
            self._restart.extend(parked)
        else:
            self._end_parked(parked, error or Cancelled("the run stopped while its batch was pending"))
            self._stop.set()
        self._wake.notify_all()
        self._picked.notify_all()

    @staticmethod
    def _end_parked(parked: list[tuple[T, _Slot]], error: BaseException) -> None:
        for _, slot in parked:
            slot.error = error
            slot.done.set()
