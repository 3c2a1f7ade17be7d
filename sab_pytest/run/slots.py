"""Calls in flight: at most N model requests of a process at once, the free slot going to the case
that has made the fewest calls so far.

Why: ``--sab-concurrency N`` promises N calls in flight per worker. Bounding the *cases* that run
at once would keep calls below N whenever a case is between two calls (executing its plan, or
parsing an answer), and would make a worker run its cases in waves: with 33 cases of three calls
each and 16 at a time, the last wave runs one case while 15 slots idle. So the case runner runs
more cases than N, and every model request of the process (agent, judge, guard) takes one of N
slots for as long as it is in flight.

Who gets a slot that comes free: the waiting call whose case has made the fewest calls (ties:
the one that waited longest). A case's calls form a chain, and the run ends when the longest
remaining chain does; serving the cases with the most calls still ahead first (Hu's rule for
unit tasks in chains) keeps every slot busy to the end, where first-come-first-served would leave
the last case started running its chain alone. A case that waits does not starve: a new case
starts only when another finishes. Plain Python, thread-safe.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import threading
import time
from collections.abc import Callable, Iterator

POLL_S = 0.1  # how often a waiting request asks ``check`` whether it should give up


class CallSlots:
    """``size`` slots for requests in flight; ``slot()`` holds one for the length of a block, and
    ``case()`` marks where a case starts on a thread (its calls are counted from there)."""

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError("a call limit must be at least 1")
        self.size = size
        self._lock = threading.Lock()
        self._free = size
        self._waiting: list[tuple[int, int, threading.Event]] = []  # a heap: (calls made, arrival, ticket)
        self._arrivals = itertools.count()
        self._made = threading.local()
        self.in_flight = 0
        self.max_in_flight = 0  # the most requests ever in flight at once (tests and the bench)

    @contextlib.contextmanager
    def case(self) -> Iterator[None]:
        """The calls of this thread inside the block belong to one case (their order of service)."""
        previous = getattr(self._made, "count", 0)
        self._made.count = 0
        try:
            yield
        finally:
            self._made.count = previous

    @contextlib.contextmanager
    def slot(self, check: Callable[[], None] | None = None) -> Iterator[float]:
        """Hold a slot for the block and yield the seconds spent waiting for it.

        ``check`` is called while waiting, every ``POLL_S``; whatever it raises (a stopped run)
        ends the wait, and a slot granted meanwhile is handed on.
        """
        started = time.monotonic()
        made = getattr(self._made, "count", 0)
        ticket: threading.Event | None = None
        with self._lock:
            if self._free and not self._waiting:
                self._free -= 1
            else:
                ticket = threading.Event()
                entry = (made, next(self._arrivals), ticket)
                heapq.heappush(self._waiting, entry)
        if ticket is not None:
            try:
                while not ticket.wait(POLL_S):
                    if check is not None:
                        check()
            except BaseException:
                with self._lock:
                    if ticket.is_set():
                        self._hand_on()
                    else:
                        self._waiting.remove(entry)
                        heapq.heapify(self._waiting)
                raise
        self._made.count = made + 1
        with self._lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            yield time.monotonic() - started
        finally:
            with self._lock:
                self.in_flight -= 1
                self._hand_on()

    def _hand_on(self) -> None:
        """A slot comes free: give it to the first waiter, else back to the pool (lock held)."""
        if self._waiting:
            heapq.heappop(self._waiting)[2].set()
        else:
            self._free += 1
