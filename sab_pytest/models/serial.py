"""One call at a time to a server that cannot overlap streams, run-wide.

Why: llama-cpp-python's server (one model, one generation at a time) ends a running stream as soon
as another request waits for the model (its ``interrupt_requests``, on by default). With two calls
in flight, anywhere in the run, every stream is cut; asked whole instead, a long answer outlasts
``--sab-timeout`` and slow can no longer be told from hung. So once a stream was cut
(``stream.StreamCut``), the run sends that server one request at a time: a marker file in the run
directory tells every process, and a lock file held for the length of each request is the one turn.
Waiting for the turn is not the case's work (the case budget is extended by it) and ends when the
run stops. Without a run directory the turn is this process's alone.
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

import filelock

from sab_pytest.models.context import CallContext

POLL_S = 0.05  # how often a waiting call looks for its turn (and whether its case was stopped)

#: per server (by its name's hash), this process's requests sent without the turn: [in flight, ever sent].
#: Why: requests sent just before the turn was needed still run when the first turns are taken, and
#: cut the stream of the call in its turn; that cut says nothing about the server cutting lone streams.
_outside: dict[str, list[int]] = {}
_outside_lock = threading.Lock()


class SerialTurn:
    """The run-wide turn of one server, used once ``mark()`` said the server needs it."""

    def __init__(self, server: str, directory: Path | None = None) -> None:
        name = hashlib.sha256(server.encode()).hexdigest()[:12]
        with _outside_lock:
            self._outside = _outside.setdefault(name, [0, 0])
        self.marker = directory / f"serial-{name}" if directory is not None else None
        self.lock_path = directory / f"serial-{name}.lock" if directory is not None else None
        self._marked = False
        self._local = threading.Lock()  # the turn within this process (and the whole turn without a directory)

    @property
    def needed(self) -> bool:
        """Whether requests to this server go one at a time (some process of the run saw a cut stream)."""
        if not self._marked and self.marker is not None and self.marker.exists():
            self._marked = True
        return self._marked

    def mark(self) -> None:
        """From now on, run-wide, one request at a time to this server."""
        self._marked = True
        if self.marker is not None:
            with contextlib.suppress(OSError):
                self.marker.touch()

    @contextlib.contextmanager
    def turn(self, ctx: CallContext, check: Callable[[], None] | None = None) -> Iterator[Callable[[], bool]]:
        """Hold the server's one turn for a request (at once when the server does not need turns).
        While waiting, ``ctx.check`` and ``check`` (the run's breaker) end the wait when the case or
        the run stops. Yields ``crowded``: whether a request of this process sent without the turn
        ran beside the one in the turn (a stream cut then is not the server cutting lone streams)."""
        if not self.needed:
            with _outside_lock:
                self._outside[0] += 1
                self._outside[1] += 1
            try:
                yield lambda: False
            finally:
                with _outside_lock:
                    self._outside[0] -= 1
            return

        def still_wanted() -> None:
            ctx.check()
            if check is not None:
                check()
            ctx.extend(POLL_S)

        while not self._local.acquire(timeout=POLL_S):
            still_wanted()
        try:
            with self._file_turn(still_wanted):
                with _outside_lock:
                    running, sent = self._outside

                def crowded() -> bool:
                    with _outside_lock:
                        return running > 0 or self._outside[0] > 0 or self._outside[1] != sent

                yield crowded
        finally:
            self._local.release()

    @contextlib.contextmanager
    def _file_turn(self, still_wanted: Callable[[], None]) -> Iterator[None]:
        """The turn across processes: an exclusive lock on the run directory's lock file."""
        handle: IO[bytes] | None = None
        if self.lock_path is not None:
            with contextlib.suppress(OSError):
                handle = open(self.lock_path, "a+b")  # noqa: SIM115 - held for the whole request
        if handle is None:  # no run directory (left): this process's turn is all there is
            yield
            return
        try:
            while not filelock.lock_descriptor(handle.fileno(), blocking=False):
                still_wanted()
                time.sleep(POLL_S)
            yield
        finally:
            handle.close()  # releases the lock
