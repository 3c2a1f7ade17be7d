"""The per-case context of model calls, thread-local: a time budget shared by every model a case
uses (agent, judges, guard), the count of failed attempts, and the run's stop signal. Why thread
local: the case runner runs several cases at once, one thread each, through the same clients."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

from sab_pytest.errors import Cancelled

_budget = threading.local()


@contextlib.contextmanager
def case_budget(seconds: float | None) -> Iterator[None]:
    """Within this block (this thread), model calls give up with ``InfraError("model_timeout")``
    once ``seconds`` have passed, retries and waits included. Nested budgets keep the earlier end.
    """
    previous = getattr(_budget, "deadline", None)
    if seconds is not None:
        end = time.monotonic() + max(0.0, seconds)
        _budget.deadline = end if previous is None else min(previous, end)
    try:
        yield
    finally:
        _budget.deadline = previous


def extend_deadline(seconds: float) -> float | None:
    """Move this thread's case budget end ``seconds`` later (time the case spent queued, not
    working); returns the new end."""
    deadline = getattr(_budget, "deadline", None)
    if deadline is not None:
        deadline = _budget.deadline = deadline + seconds
    return deadline


def current_deadline() -> float | None:
    """The ``time.monotonic()`` instant at which this thread's case budget ends, if any."""
    return getattr(_budget, "deadline", None)


@dataclass
class FailureLog:
    """Requests of one case that got no usable answer: each failed attempt (retries included)
    and each call that failed for good. A failed request is still a request the API received
    (and may bill), so the usage counts it; answers alone cannot, since a failure has none.
    Rate-limited requests (HTTP 429, 503 with Retry-After) are counted apart, with the seconds
    waited for them: back-pressure, not failures."""

    failed_attempts: int = 0
    failed_calls: int = 0
    rate_limited: int = 0
    rate_limit_wait_s: float = 0.0


_failures = threading.local()


@contextlib.contextmanager
def failure_log() -> Iterator[FailureLog]:
    """Within this block (this thread), model clients count their failed requests in the log."""
    previous = getattr(_failures, "log", None)
    log = _failures.log = FailureLog()
    try:
        yield log
    finally:
        _failures.log = previous


def count_rate_limit(waited: float) -> None:
    """One rate-limited request, and the ``waited`` seconds of back-off that followed it."""
    log: FailureLog | None = getattr(_failures, "log", None)
    if log is not None:
        log.rate_limited += 1
        log.rate_limit_wait_s += waited


def count_failure(*, final: bool) -> None:
    log: FailureLog | None = getattr(_failures, "log", None)
    if log is not None:
        if final:
            log.failed_calls += 1
        else:
            log.failed_attempts += 1


@contextlib.contextmanager
def sample_scope(repeat: int) -> Iterator[None]:
    """Within this block (this thread), model requests are repeat ``repeat`` of their case
    (``--sab-repeat``): the client sends ``seed=repeat`` (so the request, and its cache key, differ
    per repeat, and a server that honours seeds samples each repeat apart). 0: no repeat, no seed."""
    previous = getattr(_budget, "repeat", 0)
    _budget.repeat = repeat
    try:
        yield
    finally:
        _budget.repeat = previous


def current_repeat() -> int:
    """This thread's repeat number (``sample_scope``), 0 outside repeats."""
    return int(getattr(_budget, "repeat", 0))


@contextlib.contextmanager
def cancel_scope(stop: threading.Event) -> Iterator[None]:
    """Within this block (this thread), once ``stop`` is set no new model call or retry starts:
    ``check_not_cancelled`` raises ``Cancelled``. The case runner runs every case in one."""
    previous = getattr(_budget, "stop", None)
    _budget.stop = stop
    try:
        yield
    finally:
        _budget.stop = previous


def check_not_cancelled() -> None:
    """Raise ``Cancelled`` if this thread's run was stopped."""
    stop: threading.Event | None = getattr(_budget, "stop", None)
    if stop is not None and stop.is_set():
        raise Cancelled("the run was stopped")
