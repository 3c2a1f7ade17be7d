"""The one retry policy: how long to wait before trying again, and how to wait.

Why one module: model calls (failures and rate limits), the THOR client, the endpoint check and the
response cache's waits all back off, and one policy keeps their spreads, ceilings and ways of
waiting alike. Each caller holds a ``RetryPolicy`` whose numbers say
what differs (a THOR keep-alive connection is retried at once; a cache poll starts at milliseconds)
and asks it for the next pause; ``wait`` is the one way to spend it: on the run's breaker where the
caller has one, so that the run's stop wakes it (a caller without a breaker sleeps the pause out).
It sits low in the layers (beside ``fetch``): the cache below the models uses it too. Standard
library only.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from typing import Protocol

# Longest pause between two attempts of a model call. With the default 6 retries, a call rides out an
# outage of 25-51 s (jittered) before it fails for good; that first failure is also how long a run
# against an endpoint that died takes to stop (the breaker's other calls then fail fast).
BACKOFF_MAX_S = 20.0
MAX_RETRY_AFTER_S = 120.0  # a server asking for a longer pause is treated as a permanent refusal


@dataclass(frozen=True)
class RetryPolicy:
    """Pauses between attempts: exponential (``base * factor**attempt`` up to ``cap``), jittered
    down to ``jitter`` of that (workers that failed together do not come back in lock-step), or
    what the server asked (``Retry-After``) spread up by ``spread`` (calls told the same instant do
    not all come back at it). ``first``, when set, is the pause before the first retry (THOR: at
    once, as a dropped keep-alive connection is the usual cause). ``max_retry_after`` is the longest
    wait a server may ask for before its answer counts as a refusal."""

    base: float = 1.0
    cap: float = BACKOFF_MAX_S
    factor: float = 2.0
    jitter: float = 0.5  # the pause is drawn from [jitter, 1] x the exponential step; 1.0: none
    spread: float = 0.1  # a server-told wait is drawn from [1, 1 + spread] x what it asked
    first: float | None = None
    max_retry_after: float = MAX_RETRY_AFTER_S

    def step(self, attempt: int) -> float:
        """The exponential step after ``attempt`` failures (0-based), before jitter."""
        if self.first is not None:  # the exponential starts after the first pause
            if attempt == 0:
                return self.first
            attempt -= 1
        return min(self.cap, self.base * self.factor ** min(attempt, 64))

    def pause(self, attempt: int, told: float | None = None) -> float:
        """Seconds before the next attempt: ``told`` (the server's ``Retry-After``) spread a little,
        else the jittered exponential step."""
        if told is not None:
            return told * random.uniform(1.0, 1.0 + self.spread)
        step = self.step(attempt)
        return step if self.jitter >= 1.0 else step * random.uniform(self.jitter, 1.0)

    def asks_too_much(self, told: float | None) -> bool:
        """Whether the server's ``Retry-After`` is past the longest wait this policy honours."""
        return told is not None and told > self.max_retry_after

    def worst_wait(self, retries: int) -> float:
        """The most back-off ``retries`` retries can take (for a lock's declared budget)."""
        return min(self.cap, self.max_retry_after) * retries


class Waker(Protocol):
    """What ``wait`` needs of a run's breaker (``run.breaker.RunState`` is one): a sleep that wakes
    (raising) when the run stops and, ``while_healthy``, returns False once the endpoint is failing."""

    def wait(self, seconds: float, *, while_healthy: bool = False) -> bool: ...


def wait(seconds: float, breaker: Waker | None = None, *, while_healthy: bool = False) -> bool:
    """Spend ``seconds`` of back-off: a plain sleep alone, else on the breaker so that a run's stop
    wakes it. Returns False when ``while_healthy`` and the breaker reports the endpoint failing
    (retrying is pointless), True after the whole pause."""
    if breaker is None:
        time.sleep(max(0.0, seconds))
        return True
    return breaker.wait(seconds, while_healthy=while_healthy)
