"""Warm the response cache ahead of the tests, to get past the serial latency floor.

Why: an xdist worker runs one case at a time (one engine per process), and a case is a chain of
model calls (agent, then judges). Serially, a run costs cases x calls x latency / workers. The
model calls of later cases do not depend on the engine, so a few threads per worker can make them
early ("run the agent and the judges for this case with no engine"); the answers land in the
response cache, and when the real test reaches the case its calls are cache hits, or wait for the
call already in flight instead of repeating it.

All workers walk the same list in the same order. The cache's per-request lock keeps two
processes from making the same call, and in prefetch mode a call already claimed elsewhere raises
``CallInFlight``, so the thread gives that item up and moves on instead of waiting.

Errors are swallowed: the real test makes the call again and reports what went wrong. The threads
are daemons and ``stop`` cancels what has not started (items and the next call of a running item),
so a session never waits on them at exit.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from .cache import CallInFlight, PrefetchCancelled, prefetch_mode, release_claims

T = TypeVar("T")


@dataclass
class PrefetchStats:
    """What the prefetcher did (for logs and the bench)."""

    done: int = 0  # fn returned
    skipped: int = 0  # another owner had a call of this item in flight
    passed: int = 0  # the test itself had already reached the item
    failed: int = 0  # fn raised (swallowed; the test will retry and report)
    cancelled: int = 0  # stopped in the middle of an item


def _default_key(item: Any) -> Hashable:
    """The item itself when hashable; else its identity (records holding dicts or lists are not
    hashable, and the test layer passes the very objects it collected)."""
    try:
        hash(item)
    except TypeError:
        return ("id", id(item))
    return item


class Prefetcher(Generic[T]):
    """Call ``fn(item)`` for ``items`` in order on ``concurrency`` daemon threads.

    ``mark_reached(item)`` tells the prefetcher that the test is at ``item`` (the test will make
    those calls itself), so items up to that one are not started any more. Items are recognised by
    ``key(item)`` (default: the item if hashable, else its identity; pass e.g. ``key=lambda c: c.id``
    when ``mark_reached`` receives equal but different objects).
    """

    def __init__(self, fn: Callable[[T], Any], items: Sequence[T], concurrency: int, *,
                 key: Callable[[T], Hashable] | None = None, name: str = "sab-prefetch") -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self.fn = fn
        self.items = list(items)
        self.concurrency = concurrency
        self.name = name
        self.stats = PrefetchStats()
        self._key = key or _default_key
        self._index_of: dict[Hashable, int] = {}
        for i, item in enumerate(self.items):
            self._index_of.setdefault(self._key(item), i)
        self._next = 0
        self._reached = -1
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._finished = threading.Event()
        self._running = 0

    # -- lifecycle -------------------------------------------------------------------------------
    def start(self) -> Prefetcher[T]:
        if self._threads:
            return self
        count = min(self.concurrency, len(self.items))
        self._running = count
        if count == 0:
            self._finished.set()
        for n in range(count):
            thread = threading.Thread(target=self._run, name=f"{self.name}-{n}", daemon=True)
            self._threads.append(thread)
            thread.start()
        return self

    def stop(self, wait: float | None = 0.0) -> None:
        """Start no new item and no new model call. With ``wait`` (seconds), give calls already
        in flight that long to land in the cache (other workers may be waiting for them); then
        release the locks of calls still running, so that nobody waits for an abandoned call.
        The threads are daemons: whatever still runs never blocks interpreter exit."""
        self._stop.set()
        if wait:
            self._finished.wait(wait)
        if not self._finished.is_set():
            release_claims(self._stop)

    def join(self, timeout: float | None = None) -> bool:
        """Wait until every item was handled (or ``stop`` took effect); True when finished."""
        return self._finished.wait(timeout)

    def __enter__(self) -> Prefetcher[T]:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- steering -------------------------------------------------------------------------------
    def mark_reached(self, item: T) -> None:
        """The test is now running ``item``: skip it and everything before it."""
        index = self._index_of.get(self._key(item))
        if index is not None:
            with self._lock:
                self._reached = max(self._reached, index)

    # -- work -------------------------------------------------------------------------------------
    def _take(self) -> T | None:
        with self._lock:
            while not self._stop.is_set() and self._next < len(self.items):
                index = self._next
                self._next += 1
                if index <= self._reached:
                    self.stats.passed += 1
                    continue
                return self.items[index]
            return None

    def _run(self) -> None:
        try:
            with prefetch_mode(self._stop):
                while True:
                    item = self._take()
                    if item is None:
                        return
                    try:
                        self.fn(item)
                    except PrefetchCancelled:
                        self._count("cancelled")
                    except CallInFlight:
                        self._count("skipped")
                    except Exception:  # the real test redoes the call and reports the error
                        self._count("failed")
                    else:
                        self._count("done")
        finally:
            with self._lock:
                self._running -= 1
                if self._running == 0:
                    self._finished.set()

    def _count(self, name: str) -> None:
        with self._lock:
            setattr(self.stats, name, getattr(self.stats, name) + 1)
