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

How many of the N are open adapts to rate limits (``Pace``): a rate-limited answer halves the share
of N the run's processes use, each answer adds a little back (additive increase, multiplicative
decrease, as TCP does), so that the run settles just under the endpoint's limit instead of
sending requests that come back 429. The share lives in one small file of the run directory, so
the xdist workers slow down together. They also adapt to queueing at a server that never says 429
(a self-hosted one with few slots): ``capacity.Capacity`` lowers them while calls take longer than
the server's time for one (``measured``, ``timed_out``).
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import json
import math
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from sab_pytest.fetch import atomic_write_bytes
from sab_pytest.run.capacity import Capacity

POLL_S = 0.1  # how often a waiting request asks ``check`` whether it should give up
CUT_EVERY_S = 2.0  # at most one decrease per this long: a burst of 429s is one congestion event
READ_EVERY_S = 0.5  # how often a process reads the run's shared share


class Pace:
    """The share (0..1] of its call slots each process of the run uses; 1 until a rate limit.

    ``cut()`` halves it (at most once per ``CUT_EVERY_S``, run-wide), ``grow(open_slots, size)``
    adds one slot's worth per ``open_slots`` answers (about one more call in flight per round
    trip). With ``path`` the share is shared through that file: replaced atomically, read at most
    every ``READ_EVERY_S``, and a missing or garbled file reads as "no limit seen" (1.0): the
    file steers speed only, never correctness. Lost updates between processes are harmless.
    """

    def __init__(self, path: Path | None = None) -> None:
        self.path = path
        self.share = 1.0
        self.cut_at = 0.0
        self.cuts = 0  # decreases made by this process (the bench prints them)
        self._read_at = 0.0

    def current(self) -> float:
        now = time.monotonic()
        if self.path is not None and now - self._read_at >= READ_EVERY_S:
            self._read_at = now
            self.share, self.cut_at = _read_pace(self.path)
        return self.share

    def cut(self) -> bool:
        """Halve the share unless someone did so in the last ``CUT_EVERY_S``; whether it did."""
        self._read_at = 0.0
        self.current()
        now = time.time()
        if now - self.cut_at < CUT_EVERY_S:
            return False
        self.share, self.cut_at = max(0.001, self.share / 2), now
        self.cuts += 1
        self._write()
        return True

    def grow(self, open_slots: int, size: int) -> None:
        if self.current() >= 1.0:
            return  # the common case: no rate limit seen, no file written
        self.share = min(1.0, self.share + 1.0 / (size * max(1, open_slots)))
        self._write()

    def _write(self) -> None:
        if self.path is not None:
            with contextlib.suppress(OSError):
                atomic_write_bytes(self.path, json.dumps({"share": self.share, "cut_at": self.cut_at}).encode())


def _read_pace(path: Path) -> tuple[float, float]:
    try:
        data = json.loads(path.read_bytes())
        share, cut_at = float(data["share"]), float(data.get("cut_at", 0.0))
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return 1.0, 0.0
    if not (math.isfinite(share) and math.isfinite(cut_at)):
        return 1.0, 0.0
    return min(1.0, max(0.001, share)), cut_at


class CallSlots:
    """``size`` slots for requests in flight; ``slot()`` holds one for the length of a block, and
    ``case()`` marks where a case starts on a thread (its calls are counted from there).
    ``pace`` (default: one of this process alone) opens fewer than ``size`` while the endpoint
    rate-limits: ``congested()`` on a rate-limited answer, ``relieved()`` on an answer; ``capacity``
    (default: starting at ``size``) while the server queues: ``measured()``, ``timed_out()``."""

    def __init__(self, size: int, pace: Pace | None = None, capacity: Capacity | None = None) -> None:
        if size < 1:
            raise ValueError("a call limit must be at least 1")
        self.size = size
        self.pace = pace or Pace()
        self.capacity = capacity or Capacity(size)
        self._lock = threading.Lock()
        self._held = 0  # slots granted and not yet given back
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
            if self._held < self.open_slots() and not self._waiting:
                self._held += 1
            else:
                ticket = threading.Event()
                entry = (made, next(self._arrivals), ticket)
                heapq.heappush(self._waiting, entry)
        if ticket is not None:
            try:
                while not ticket.wait(POLL_S):
                    if check is not None:
                        check()
                    with self._lock:  # another process may have opened more slots
                        self._hand_on()
            except BaseException:
                with self._lock:
                    if ticket.is_set():
                        self._held -= 1
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
                self._held -= 1
                self._hand_on()

    def open_slots(self) -> int:
        """How many of the ``size`` slots are open now: all, unless the endpoint rate-limits or queues."""
        shared = math.ceil(self.pace.current() * self.size - 1e-9)
        return max(1, min(self.size, shared, self.capacity.allowed()))

    def congested(self) -> None:
        """A request was rate-limited: fewer calls in flight (run-wide, see ``Pace``)."""
        self.pace.cut()

    def relieved(self) -> None:
        """A request was answered: a little more in flight, up to ``size``."""
        self.pace.grow(self.open_slots(), self.size)
        with self._lock:
            self._hand_on()

    def measured(self, key: str, seconds: float, tokens: int = 0) -> None:
        """An answer of ``key`` (endpoint and model) took ``seconds`` for ``tokens`` completion
        tokens: the server's queue, if any, shows in it (``capacity.Capacity``)."""
        self.capacity.sample(key, seconds, tokens, self.in_flight)
        with self._lock:
            self._hand_on()

    def timed_out(self) -> None:
        """An attempt got no answer within its timeout: fewer calls in flight."""
        self.capacity.timed_out()

    def _hand_on(self) -> None:
        """Give open slots to the first waiters (lock held)."""
        limit = self.open_slots()
        while self._waiting and self._held < limit:
            self._held += 1
            heapq.heappop(self._waiting)[2].set()
