"""What the fake server does to look like a real, busy API: a request-per-minute limit (a token
bucket answering HTTP 429 with the headers OpenAI sends) and a hang after N calls (the server keeps
accepting requests and never answers them).

Why a token bucket: it is how providers describe their limits (a rate plus a burst), and it gives
a precise time until the next request is allowed, which is what ``Retry-After`` /
``retry-after-ms`` carry.

The headers are OpenAI's, with their meanings: ``x-ratelimit-limit-requests`` is the limit per
minute, ``-remaining-requests`` what is left of that minute's worth, ``-reset-requests`` the time
until it is whole again (OpenAI's duration spelling, ``"6m0s"``, ``"1.2s"``, ``"20ms"``). Like
OpenAI, which enforces a per-minute limit over shorter periods ("quantized"), the fake refuses on
the burst bucket while the per-minute count still shows requests left: a client learns the rate
from the headers, never the burst, and must spread its requests rather than spend the "remaining".
"""

from __future__ import annotations

import math
import threading
import time

from sab_pytest.testing.fake_replies import Reply

HANG_S = 10.0 ** 6  # "never": the server's stop wakes a hung answer


def duration_text(seconds: float) -> str:
    """A duration in OpenAI's ``x-ratelimit-reset-*`` spelling: ``"120ms"``, ``"1.5s"``, ``"1m3s"``."""
    if seconds < 1.0:
        return f"{max(1, math.ceil(seconds * 1000))}ms"
    minutes, rest = divmod(seconds, 60.0)
    return (f"{int(minutes)}m" if minutes else "") + f"{rest:.3g}s"


class RateLimit:
    """``rpm`` requests per minute with a bucket of ``burst`` (default: one second's worth).

    ``take()`` spends one token: None when the request may be answered, else the 429 to send.
    ``headers()`` are the ``x-ratelimit-*`` headers an answer carries. ``retry_after_ms``: whether
    a 429 carries the precise ``retry-after-ms`` beside the whole-second ``Retry-After``.
    """

    def __init__(self, rpm: float, burst: int | None = None, *, retry_after_ms: bool = True) -> None:
        if rpm <= 0:
            raise ValueError("a request-per-minute limit must be > 0")
        self.rpm = float(rpm)
        self.rate = self.rpm / 60.0
        self.burst = float(burst if burst is not None else max(1, math.ceil(self.rate)))
        self.retry_after_ms = retry_after_ms
        self.tokens = self.burst
        self.minute = self.rpm  # the per-minute count the headers show (refilled at the same rate)
        self.refused = 0  # 429s sent
        self.allowed = 0
        self._at = time.monotonic()
        self._lock = threading.Lock()

    def _refill(self) -> None:
        now = time.monotonic()
        self.tokens = min(self.burst, self.tokens + (now - self._at) * self.rate)
        self.minute = min(self.rpm, self.minute + (now - self._at) * self.rate)
        self._at = now

    def take(self) -> Reply | None:
        with self._lock:
            self._refill()
            if self.tokens >= 1.0:
                self.tokens -= 1.0
                self.minute = max(0.0, self.minute - 1.0)
                self.allowed += 1
                return None
            self.refused += 1
            wait = (1.0 - self.tokens) / self.rate
            headers = self._headers_locked()
        headers["Retry-After"] = str(max(1, math.ceil(wait)))
        if self.retry_after_ms:
            headers["retry-after-ms"] = str(math.ceil(wait * 1000))
        return Reply.error(429, f"Rate limit reached: limit {self.rpm:g} requests per minute (fake server). "
                                f"Please try again in {duration_text(wait)}.", headers=headers)

    def headers(self) -> dict[str, str]:
        with self._lock:
            self._refill()
            return self._headers_locked()

    def _headers_locked(self) -> dict[str, str]:
        """OpenAI's request headers: the limit per minute, what is left of it, and the time until
        it is whole again."""
        whole = (self.rpm - self.minute) / self.rate
        return {"x-ratelimit-limit-requests": f"{self.rpm:g}",
                "x-ratelimit-remaining-requests": str(int(self.minute)),
                "x-ratelimit-reset-requests": duration_text(whole) if whole > 0 else "0s"}


class HangAfter:
    """Answers the first ``calls`` chat requests, then none (each waits until the server stops)."""

    def __init__(self, calls: int) -> None:
        self.calls = int(calls)
        self.seen = 0
        self.hung_at: float | None = None  # time.monotonic() of the first request left unanswered
        self._lock = threading.Lock()

    def hangs(self) -> bool:
        with self._lock:
            self.seen += 1
            if self.seen <= self.calls:
                return False
            if self.hung_at is None:
                self.hung_at = time.monotonic()
            return True
