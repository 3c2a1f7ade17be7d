"""How many calls the server can take: a limit on this process's calls in flight that follows
queueing at the server, not only its 429s.

Why: a self-hosted server (llama.cpp, Ollama, a small vLLM) answers a few requests at a time and
queues the rest; it never says 429. ``--sab-concurrency 8`` against a one-slot server puts seven
calls in its queue, each waiting for the ones before it: the time of a call grows with the calls in
flight until it passes ``--sab-timeout``, the client gives up, and its retry queues behind the work
the server is still doing for the call that gave up. The server's pace cannot be raised; the calls
in flight must come down to what it serves at once.

How (TCP Vegas' idea, as in Netflix's concurrency-limits): the time of a call without queueing is
the quickest seen (``base``, per endpoint: the agent's and the judges' calls meet in one queue
there, and a base learnt per kind of call would take the first judge call, made while the agents'
calls queue, for the server's own time); a call that took more than ``TOLERANCE`` times that
waited in a queue (when longer by ``QUEUE_SLACK_S`` too: against a fast server, a loaded machine's
jitter alone is 1.5 x), so the limit shrinks in proportion (``TOLERANCE x base / time``, at most
halved: Gradient2's rule), once per round trip (answers to calls sent before the last cut carry
old news); a call near the base time found a free slot, so the limit grows by about one call per
round trip (additive, ``1/limit`` per answer), never past ``--sab-concurrency``. A timed-out
attempt is the strongest sign of a queue and halves the limit. A run starts at two calls
(``start``; one would leave the run standing while its first call is a long one) and adds one per
answer until the first sign of a queue (TCP's slow start: doubling each round trip): a burst of
``--sab-concurrency`` calls into a one-slot server at the start would queue past ``--sab-timeout``
before a single answer could tell the limit to come down, and the server would go on working for
the calls that gave up. Against a one-slot server the limit settles at one or two calls (with two,
each waits for at most one other); a server with free slots answers as fast at N calls as at one,
so the limit stays at N.

What a call takes is normalised by its answer's length (seconds per ``SIZE_OFFSET`` + completion
tokens): a long plan takes longer than a short verdict without any queue. Streamed calls should
give their time to first token instead, which is free of the answer's length (``sample(seconds,
tokens=0)``).

Per process, not run-wide: each xdist worker measures the same server and its limit converges the
same way; with W workers a one-slot server sees W to 2W calls at the floor of one each, which the
server's own queue absorbs without a timeout as long as ``--sab-timeout`` exceeds W answers. A
run-wide count of calls in flight would need every call to take and give back a shared lock, and a
killed worker would leak its count. Rate limits (429s) are handled beside this, run-wide
(``slots.Pace`` and ``models.pacing``). Plain Python, thread-safe.
"""

from __future__ import annotations

import threading
import time

TOLERANCE = 1.5  # a call up to this many times the base time is not counted as queued (Gradient2 uses 1.5)
SIZE_OFFSET = 32  # tokens' worth of fixed cost per call (the request, the prompt's processing)
QUEUE_SLACK_S = 0.1  # and by more than this: the scheduling jitter of a loaded machine is no queue
FORGET = 0.001  # the base creeps up by this share per answer, so that a lucky quick one ages out


class Capacity:
    """The limit (1..``size``) on calls in flight that the server's times say it can take."""

    def __init__(self, size: int, start: int | None = None) -> None:
        self.size = size
        self.limit = float(min(size, start or size))
        self.slow_start = start is not None and start < size  # +1 per answer until the first queue
        self.base: dict[str, float] = {}
        self.queued = 0  # answers that came back queued (tests and the bench)
        self.lowest = float(size)  # the lowest the limit went
        self._cut_at = float("-inf")  # ``clock()`` of the last decrease
        self.clock = time.monotonic  # a test may drive its own
        # what a call may take beyond TOLERANCE x base and still count as unqueued: a test whose
        # fake server answers in a fraction of a real one's time scales it down in proportion
        self.slack_s = QUEUE_SLACK_S
        self._lock = threading.Lock()

    def allowed(self) -> int:
        """Calls in flight the server takes now (at least 1)."""
        return max(1, min(self.size, int(self.limit + 0.5)))

    def sample(self, key: str, seconds: float, tokens: int = 0, in_flight: int | None = None) -> None:
        """One answer of ``key`` (an endpoint) took ``seconds`` for ``tokens`` completion
        tokens, with ``in_flight`` calls of this process in flight when it ended (None: unknown)."""
        if seconds <= 0:
            return
        cost = seconds / (SIZE_OFFSET + max(0, tokens))
        sent_at = self.clock() - seconds
        with self._lock:
            base = self.base.get(key)
            if base is None:  # the first answer sets the base and says nothing of a queue yet
                self.base[key] = cost
                return
            if cost < base:
                self.base[key] = base = cost
            else:
                self.base[key] = base = base * (1.0 + FORGET)
            if seconds > TOLERANCE * base * (SIZE_OFFSET + max(0, tokens)) + self.slack_s:
                self.queued += 1
                if sent_at >= self._cut_at:
                    self._cut(max(0.5, TOLERANCE * base / cost))
            elif in_flight is None or in_flight + 1 >= self.allowed():
                # only a limit that is used grows: idle slots tell nothing about the server
                self._set(self.limit + (1.0 if self.slow_start else 1.0 / max(1.0, self.limit)))

    def timed_out(self) -> None:
        """An attempt got no answer in time: the server's queue is longer than it serves."""
        with self._lock:
            self._cut(0.5)

    def _cut(self, factor: float) -> None:
        self.slow_start = False
        self._cut_at = self.clock()
        self._set(self.limit * factor)

    def _set(self, value: float) -> None:
        self.limit = max(1.0, min(float(self.size), value))
        self.lowest = min(self.lowest, self.limit)
