"""The retry loop of model calls: attempts until an answer, a permanent failure, the end of the
case's budget or the run's stop, holding one of the process's call slots throughout, with rate
limits waited out as back-pressure and hung endpoints detected; the run's breaker hears the outcome.

The pauses come from the one ``retry.RetryPolicy``: failures back off by ``policy``, rate limits by
``throttle`` (the same policy with a wider spread around the server's Retry-After). Rate limits and
queueing are ``models.pacing``'s and ``run.capacity``'s: each attempt waits for its turn in the
run's schedule under the endpoint's limit (``_pace``), and reports how long the server took
(``slots.measured``) or that it took too long (``slots.timed_out``).
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field, replace
from typing import Any

from sab_pytest import retry
from sab_pytest.errors import ENDPOINT_DOWN, STOP_KINDS, InfraError
from sab_pytest.models.context import CallContext
from sab_pytest.models.pacing import POLL_S, RatePacer, throttle
from sab_pytest.models.protocols import Breaker, Slots
from sab_pytest.models.transport import Transport
from sab_pytest.models.wire import CAUSE_RATE, CAUSE_SILENT, RATE_LIMIT_WAIT_S, Answer, Failure

HANG_ATTEMPTS = 2  # timed-out attempts in a row of one call, with no answer in the run, that stop it


@dataclass
class RetryLoop:
    """One endpoint's calls with retries. ``name`` and ``server`` word the messages; ``timeout``
    bounds each attempt; ``max_retries`` bounds failed attempts (rate limits not counted), and
    ``rate_limit_wait`` the back-off one call may spend on rate limits. ``breaker`` is the run's
    shared breaker and stop signal and ``slots`` the process's calls in flight (None: alone);
    ``pacer`` the run's send schedule of this endpoint under its rate limit (``models.pacing``)."""

    transport: Transport
    name: str
    server: str
    timeout: float
    max_retries: int = 5
    policy: retry.RetryPolicy = field(default_factory=retry.RetryPolicy)
    rate_limit_wait: float = RATE_LIMIT_WAIT_S
    breaker: Breaker | None = None
    slots: Slots | None = None
    pacer: RatePacer | None = None

    @property
    def throttle_policy(self) -> retry.RetryPolicy:
        """Rate limits back off like failures, with a wider spread around the server's wait."""
        return replace(self.policy, spread=0.25)

    def call(self, params: dict[str, Any], ctx: CallContext) -> Answer:
        """One answer, retrying what can be retried; the run's breaker hears the final outcome.

        The call holds one of the process's slots (``slots.CallSlots``) until the breaker has heard
        its outcome, retries included: a call waiting to retry is still a call in flight, and the
        next queued call must see a breaker that this failure has tripped. Time spent queued for a
        slot is not charged to the case's budget.
        """
        with self._slot(ctx) as waited:
            if waited:
                ctx.extend(waited)
            try:
                answer = self._loop(params, ctx)
            except InfraError as exc:
                if exc.kind not in STOP_KINDS:
                    ctx.failures.failure(final=True)
                    if self.breaker is not None:
                        self.breaker.failure(exc.args[0])
                raise
            self.transport.answered = True
            if self.breaker is not None:
                self.breaker.success()
            if self.slots is not None:
                self.slots.relieved()
        return answer

    def _loop(self, params: dict[str, Any], ctx: CallContext) -> Answer:
        """Attempts until an answer, a permanent failure, the case budget's end or the run's stop.

        Once the breaker knows that a call failed for good with no success since (the endpoint is
        failing, not blipping), a failed attempt is not retried: ten calls each sleeping through
        a minute of backoff would keep a dead endpoint's run going for many minutes.

        Rate limits are back-pressure, not failures (``_throttle``): they do not use up retries,
        are not cut short by the breaker, and end the call only at the ``rate_limit_wait`` ceiling.
        Attempts that time out are watched for a hung endpoint (``_check_hung``).
        """
        attempt = 0  # failed attempts so far (rate limits not counted)
        throttled = 0.0  # seconds this call has waited out rate limits
        rounds = 0  # rate-limited answers so far
        silent = 0  # timed-out attempts in a row
        while True:
            if attempt or rounds:
                ctx.check()  # a stopped run does not keep retrying
            if self.breaker is not None:
                self.breaker.check()  # a stopped run makes no new request
            if ctx.expired():
                raise InfraError("model_timeout", f"{self.name}: case time budget spent before an answer")
            left = ctx.left()
            per_try = self.timeout if left is None else max(0.01, min(self.timeout, left))
            self._pace(ctx)
            sent = time.time()
            try:
                answer = self.transport.attempt(params, per_try)
            except Failure as failure:
                if failure.timed_out and self.slots is not None:
                    self.slots.timed_out()
                if failure.rate_limited:
                    throttled = self._throttle(failure, throttled, rounds, ctx)
                    rounds += 1
                    continue
                ctx.failures.failure(final=False)
                silent = silent + 1 if failure.timed_out else 0
                self._give_up_or_wait(failure, attempt, silent, sent, ctx)
                attempt += 1
                continue
            if self.slots is not None:  # how long the server took shows its queue (``run.capacity``)
                self.slots.measured(self.server, time.time() - sent, answer.completion_tokens)
            return answer

    def _pace(self, ctx: CallContext) -> None:
        """Wait for this request's turn in the run's schedule under the endpoint's rate limit
        (``models.pacing``); the wait is not the case's work, and the run's stop ends it."""
        if self.pacer is None:
            return
        wait = self.pacer.reserve()
        while wait is None:  # the endpoint's first answer of the run is awaited
            ctx.check()
            ctx.extend(POLL_S)
            retry.wait(POLL_S, self.breaker)
            wait = self.pacer.reserve()
        if wait > self.rate_limit_wait:
            raise InfraError("model_api", f"{self.name} at {self.server}: the rate limit's schedule asks to "
                             f"wait {wait:.0f}s, more than the {self.rate_limit_wait:g}s one call may wait "
                             f"(--sab-rate-limit-wait); {CAUSE_RATE}")
        if wait > 0:
            ctx.extend(wait)
            retry.wait(wait, self.breaker)

    def _give_up_or_wait(self, failure: Failure, attempt: int, silent: int, sent: float, ctx: CallContext) -> None:
        """After a failed attempt: raise when it ends the call, else wait out the back-off."""
        attempts = attempt + 1
        if failure.timed_out and ctx.expired(margin=0.01):
            raise InfraError("model_timeout", f"{self.name}: case time budget spent; last attempt: "
                             f"{failure.message}") from None
        self._check_hung(silent, sent)
        cause = f"; {failure.cause}" if failure.cause else ""
        tries = f"{attempts} attempt{'s' if attempts > 1 else ''}"
        failing = self.breaker is not None and self.breaker.streak() > 0
        if not failure.retryable or attempt >= self.max_retries or failing:
            why = "; not retried: other calls to this endpoint are failing too" if (
                failing and failure.retryable and attempt < self.max_retries) else ""
            raise InfraError("model_api", f"{self.name} at {self.server}: {failure.message} "
                             f"(after {tries}{why}){cause}") from None
        if self.policy.asks_too_much(failure.retry_after):
            raise InfraError("model_api", f"{self.name} at {self.server}: {failure.message}; "
                             f"the server asks to wait {failure.retry_after:.0f}s, more than the "
                             f"{self.policy.max_retry_after:.0f}s allowed{cause}") from None
        pause = self.policy.pause(attempt, failure.retry_after)
        left = ctx.left()
        if left is not None and pause >= left:
            raise InfraError("model_timeout", f"{self.name}: case time budget too short for the next "
                             f"retry (wait {pause:.1f}s); last error: {failure.message}") from None
        if not retry.wait(pause, self.breaker, while_healthy=True):
            raise InfraError("model_api", f"{self.name} at {self.server}: {failure.message} (after "
                             f"{tries}; not retried: other calls to this endpoint are failing too){cause}") from None

    def _throttle(self, failure: Failure, waited: float, rounds: int, ctx: CallContext) -> float:
        """Wait out one rate-limited answer (``models.pacing.throttle``); the call's back-off so far."""
        return throttle(failure, waited, rounds, ctx, where=f"{self.name} at {self.server}",
                        ceiling=self.rate_limit_wait, policy=self.throttle_policy, slots=self.slots,
                        breaker=self.breaker)

    def _check_hung(self, silent: int, last_sent: float) -> None:
        """Stop the run when this call has timed out ``HANG_ATTEMPTS`` times in a row and no call of
        the run got an answer while its last attempt waited (``last_sent`` on): the endpoint accepts
        requests and answers none. Why this run-level view (and not streaming with a first-byte
        limit): see ``run.breaker.RunState.answered_since``. Without a breaker the call retries."""
        if self.breaker is None or silent < HANG_ATTEMPTS or self.breaker.answered_since(last_sent):
            return
        raise self.breaker.request_stop(
            ENDPOINT_DOWN, f"the model endpoint {self.server} stopped answering: no answer within "
            f"{self.timeout:g}s (--sab-timeout) to {silent} attempts in a row of one call, the last "
            f"{time.time() - last_sent:.0f}s without an answer to any call of the run; {CAUSE_SILENT}").error()

    def _slot(self, ctx: CallContext) -> contextlib.AbstractContextManager[float]:
        """One of the process's slots for a call in flight (``slots.CallSlots``); the wait gives up
        when the run stops."""
        if self.slots is None:
            return contextlib.nullcontext(0.0)

        def check() -> None:
            ctx.check()
            if self.breaker is not None:
                self.breaker.check()

        return self.slots.slot(check)
