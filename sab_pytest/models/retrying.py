"""The retry loop of model calls: attempts until an answer, a permanent failure, the end of the
case's budget or the run's stop, holding one of the process's call slots throughout, with rate
limits waited out as back-pressure and hung endpoints detected; the run's breaker hears the outcome.

The pauses come from the one ``retry.RetryPolicy``: failures back off by ``policy``, rate limits by
``throttle`` (the same policy with a wider spread around the server's Retry-After). Rate limits and
queueing are ``models.pacing``'s and ``run.capacity``'s: each attempt waits for its turn in the
run's schedule under the endpoint's limit (``_pace``), and reports how long the server took
(``slots.measured``) or that it took too long (``slots.timed_out``).

Self-hosted servers: an attempt that timed out while the server was sending to other
calls was queued behind them (a busy server, not a hung one): it is asked again without using up a
retry (its stream is closed first, so the server drops it), and the calls in flight shrink. A
request too large for the server's context is asked again once with the room that is left, or ends
its case as ``context_overflow`` (no retry, no breaker trip). An HTTP error that repeats word for
word ``SAME_FAILURE_ATTEMPTS`` times ends the call sooner: the server fails deterministically.
"""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from sab_pytest import retry
from sab_pytest.errors import ENDPOINT_DOWN, STOP_KINDS, ErrorKind, InfraError
from sab_pytest.models.context import CallContext
from sab_pytest.models.interfaces import Breaker, Slots
from sab_pytest.models.overflow import MIN_ROOM
from sab_pytest.models.pacing import POLL_S, RatePacer, throttle
from sab_pytest.models.provider import Provider
from sab_pytest.models.serial import SerialTurn
from sab_pytest.models.stream import StreamCut
from sab_pytest.models.wire import CAUSE_RATE, CAUSE_SILENT, RATE_LIMIT_WAIT_S, Answer, Failure

HANG_ATTEMPTS = 2  # timed-out attempts in a row of one call, with no byte from the server in the run, that stop it
SAME_FAILURE_ATTEMPTS = 4  # attempts of one call failing with the very same HTTP error that end it


def _alone() -> bool:
    """Without a serial turn, no request is known to have run beside another."""
    return False


@dataclass
class _CallState:
    """What one call's attempts so far tell the next: retries used, rate limits waited out, and
    the runs of like failures that end a call sooner than its retries."""

    failed: int = 0  # failed attempts (rate limits not counted): the retries used
    throttled: float = 0.0  # seconds this call has waited out rate limits
    rate_limited: int = 0  # rate-limited answers
    silent: int = 0  # timed-out attempts in a row (``HANG_ATTEMPTS``)
    same: int = 0  # attempts in a row, after the first, failing with the very same HTTP error
    last: tuple[int | None, str] | None = None  # the last HTTP error, as (status, detail)
    shrunk: bool = False  # asked again with a smaller max_tokens to fit the context

    def failed_with(self, failure: Failure) -> None:
        """Count a failure that uses up a retry in the runs of like failures."""
        self.silent = self.silent + 1 if failure.timed_out else 0
        status = (failure.status, failure.detail) if failure.kind == "status" else None
        self.same = self.same + 1 if status is not None and self.last == status else 0
        self.last = status


@dataclass
class _Attempt:
    """One attempt in flight: whether it was sent in the server's one turn, when it was sent,
    whether a byte came for it (``own``), and whether a request without the turn ran beside it."""

    in_turn: bool
    sent: float = field(default_factory=time.time)
    own: list[bool] = field(default_factory=list)
    crowded: Callable[[], bool] = _alone


@dataclass
class RetryLoop:
    """One endpoint's calls with retries. ``name`` and ``server`` word the messages; ``timeout``
    bounds each attempt; ``max_retries`` bounds failed attempts (rate limits not counted), and
    ``rate_limit_wait`` the back-off one call may spend on rate limits. ``breaker`` is the run's
    shared breaker and stop signal and ``slots`` the process's calls in flight (None: alone);
    ``pacer`` the run's send schedule of this endpoint under its rate limit (``models.pacing``);
    ``serial`` its run-wide one turn, once a cut stream showed it cannot overlap (``models.serial``)."""

    transport: Provider
    name: str
    server: str
    timeout: float
    max_retries: int = 5
    policy: retry.RetryPolicy = field(default_factory=retry.RetryPolicy)
    rate_limit_wait: float = RATE_LIMIT_WAIT_S
    breaker: Breaker | None = None
    slots: Slots | None = None
    pacer: RatePacer | None = None
    serial: SerialTurn | None = None

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
                answer = replace(self._loop(params, ctx), queued_s=waited)
            except InfraError as exc:
                if exc.kind is ErrorKind.CONTENT_FILTER:  # the provider's policy answered: an outcome
                    self._learnt(answered=True)
                elif exc.kind is ErrorKind.CONTEXT_OVERFLOW:  # the server answered: it is not failing
                    ctx.failures.failure(final=True)
                    self._learnt(answered=True)
                elif exc.kind is ErrorKind.TIMEOUT:  # the run's limit per case ended it, not the server
                    ctx.failures.failure(final=True)
                elif exc.kind not in STOP_KINDS:
                    ctx.failures.failure(final=True)
                    if self.breaker is not None:
                        self.breaker.failure(exc.args[0])
                raise
            self._learnt(answered=True)
            if self.breaker is not None:
                self.breaker.success()
            if self.slots is not None:
                self.slots.relieved()
        return answer

    def _loop(self, params: dict[str, Any], ctx: CallContext) -> Answer:
        """Attempts until an answer, a permanent failure, the case budget's end or the run's stop.

        Each failed attempt is classified by ``_next_request``, which either raises (the call ends)
        or returns the request to send again; a cut stream changes how the next one is sent
        (``_after_cut``). Neither uses up a retry unless the failure is one.
        """
        state = _CallState()
        while True:
            per_try = self._ready(ctx)
            sending = _Attempt(in_turn=self.serial is not None and self.serial.needed)
            try:
                answer = self._send(params, per_try, ctx, sending)
            except StreamCut:
                self._after_cut(sending)
                continue
            except Failure as failure:
                if self.pacer is not None:
                    self.pacer.failed()
                params = self._next_request(failure, params, state, sending, ctx)
                continue
            if self.slots is not None:  # how long the server took shows its queue (``run.capacity``)
                self.slots.measured(self.server, time.time() - sending.sent, answer.completion_tokens)
            return answer

    def _ready(self, ctx: CallContext) -> float:
        """Before each attempt: the case and the run still want it, its turn in the rate limit's
        schedule has come; the attempt's timeout (the case's budget bounds it)."""
        ctx.check()  # a stopped case makes no new request (retries, busy and cut-stream passes included)
        if self.breaker is not None:
            self.breaker.check()  # a stopped run makes no new request
            if not self.transport.answered and self.breaker.answered_since(0.0):
                self._learnt(answered=True)  # run-wide: a refused connection now is a server gone
        for turn in (False, True):  # the attempt's timeout is what is left once its turn has come
            if ctx.expired():
                raise ctx.out_of_time(f"{self.name}: {ctx.bound()} spent before an answer")
            if not turn:
                self._pace(ctx)
        left = ctx.left()
        return self.timeout if left is None else max(0.01, min(self.timeout, left))

    def _send(self, params: dict[str, Any], per_try: float, ctx: CallContext, sending: _Attempt) -> Answer:
        """One attempt, in the server's one turn when it needs one; ``sending`` notes when it was
        sent, whether a byte came for it, and whether a request without the turn ran beside it."""
        with self._turn(ctx) as crowded:
            sending.crowded = crowded
            if self.breaker is not None:
                self.breaker.check()  # the run may have stopped while this call waited for its turn
            sending.sent = time.time()
            return self.transport.attempt(params, per_try, functools.partial(self._alive, ctx, sending.own))

    def _after_cut(self, sending: _Attempt) -> None:
        """The server cut the stream for a waiting request: ask again in the server's one turn,
        run-wide (``models.serial``); cut even in its turn with nothing sent beside it, whole
        answers from now on. No retry is used up."""
        if self.serial is not None and (not sending.in_turn or sending.crowded()):
            self.serial.mark()
        else:
            self._learnt(streams=False)

    def _next_request(self, failure: Failure, params: dict[str, Any], state: _CallState, sending: _Attempt,
                      ctx: CallContext) -> dict[str, Any]:
        """After a failed attempt, the request to send next, or raise when the call ends.

        Rate limits are back-pressure, not failures (``_throttle``): they do not use up retries,
        are not cut short by the breaker, and end the call only at the ``rate_limit_wait`` ceiling.
        A request too large for the context is sent once more with the room left (``_fit``). An
        attempt that timed out while the server sent to other calls sat in its queue:
        asked again without using up a retry. Any other failure is a retry (``_give_up_or_wait``),
        with attempts that time out watched for a hung endpoint (``_check_hung``).
        """
        if failure.timed_out and self.slots is not None:
            self.slots.timed_out()
        if failure.timed_out and ctx.expired(margin=0.01):  # the case's time, not the server, ended it
            ctx.failures.abandoned += 1
            busy = not sending.own and self.breaker is not None and self.breaker.heard_during(sending.sent)
            while_ = " while the server was busy with other calls" if busy else ""
            raise ctx.out_of_time(f"{self.name}: {ctx.bound()} spent{while_}; last attempt: "
                                  f"{failure.message}") from None
        if failure.filtered:  # the same request gets the same refusal; the endpoint is not failing
            raise InfraError(ErrorKind.CONTENT_FILTER, f"{self.name} at {self.server}: {failure.message}; "
                             f"{failure.cause}") from None
        if failure.rate_limited:
            state.throttled = self._throttle(failure, state.throttled, state.rate_limited, ctx)
            state.rate_limited += 1
            return params
        ctx.failures.failure(final=False)
        if failure.overflow is not None:
            if state.shrunk:
                raise self._overflow(failure) from None
            params = self._fit(params, failure)
            state.shrunk = True
            return params
        if failure.timed_out and not sending.own and self.breaker is not None \
                and self.breaker.heard_during(sending.sent):  # it sat in the server's queue: asked again
            state.silent = 0  # without a retry used up (the timeout shrank the calls in flight already)
            return params
        state.failed_with(failure)
        self._give_up_or_wait(failure, state, sending.sent, ctx)
        state.failed += 1
        return params

    def _learnt(self, *, answered: bool | None = None, streams: bool | None = None) -> None:
        """What the call learnt of the server, kept on the transport for every later call: it has
        answered (a refused connection now means a server gone, not one still starting), or it
        cannot stream (whole answers from now on)."""
        if answered is not None:
            self.transport.answered = answered
        if streams is not None:
            self.transport.streams = streams

    def _turn(self, ctx: CallContext) -> contextlib.AbstractContextManager[Callable[[], bool]]:
        """The server's one turn when it cannot overlap streams (``models.serial``), else nothing to
        wait for; what it yields says whether a request sent without the turn ran beside this one."""
        if self.serial is None:
            return contextlib.nullcontext(_alone)
        breaker = self.breaker
        return self.serial.turn(ctx, check=breaker.check if breaker is not None else None)

    def _pace(self, ctx: CallContext) -> None:
        """Wait for this request's turn in the run's schedule under the endpoint's rate limit
        (``models.pacing``); the wait is not the case's work, and the run's stop ends it."""
        if self.pacer is None:
            return
        wait = self.pacer.reserve()
        while wait is None:  # the endpoint's first answer of the run is awaited
            ctx.check()
            if ctx.expired():  # the wall-clock limit, which the wait does not move
                raise ctx.out_of_time(f"{self.name}: {ctx.bound()} spent waiting for the endpoint's first answer")
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

    def _alive(self, ctx: CallContext, own: list[bool]) -> None:
        """At each chunk of an answer: the server is alive (the run hears it, ``own`` notes that this
        attempt was being answered, so a stall in it is no queue); a cancelled case or a spent
        budget leaves the stream, which closes it and so stops the server's work for it."""
        own.append(True)
        if self.breaker is not None:
            self.breaker.heard()
        ctx.check()
        if ctx.expired():
            ctx.failures.abandoned += 1  # the server has it, and is cut off mid-answer
            raise ctx.out_of_time(f"{self.name}: {ctx.bound()} spent while the answer streamed")

    def _fit(self, params: dict[str, Any], failure: Failure) -> dict[str, Any]:
        """The request again with ``max_tokens`` = the room the prompt leaves in the server's
        context, when only the completion budget did not fit and the room is enough for an answer."""
        room = failure.overflow.room()
        asked = params.get("max_tokens")
        if room is None or room < MIN_ROOM or (isinstance(asked, int) and asked <= room):
            raise self._overflow(failure)
        return {**params, "max_tokens": room}

    def _overflow(self, failure: Failure) -> InfraError:
        """The case's one error for a request that does not fit the server's context."""
        room = failure.overflow.room()
        why = "the prompt does not fit" if room is None else f"only {room} tokens are left for the answer"
        return InfraError(ErrorKind.CONTEXT_OVERFLOW, f"{self.name} at {self.server}: {why} the server's context "
                          f"window ({failure.overflow.describe()}; the server said: {failure.detail}); "
                          f"{failure.cause}")

    def _give_up_or_wait(self, failure: Failure, state: _CallState, sent: float, ctx: CallContext) -> None:
        """After a failed attempt (``state`` counts it already, but for ``failed``): raise when it
        ends the call, else wait out the back-off. Once the breaker knows that a call failed for
        good with no success since (the endpoint is failing, not blipping), a failed attempt is not
        retried: ten calls each sleeping through a minute of backoff would keep a dead endpoint's
        run going for many minutes. An HTTP error repeated word for word is a deterministic failure."""
        attempt, same = state.failed, state.same + 1
        attempts = attempt + 1
        self._check_hung(state.silent, sent)
        cause = f"; {failure.cause}" if failure.cause else ""
        tries = f"{attempts} attempt{'s' if attempts > 1 else ''}"
        failing = self.breaker is not None and self.breaker.streak() > 0
        if not failure.retryable or attempt >= self.max_retries or failing:
            why = "; not retried: other calls to this endpoint are failing too" if (
                failing and failure.retryable and attempt < self.max_retries) else ""
            raise InfraError("model_api", f"{self.name} at {self.server}: {failure.message} "
                             f"(after {tries}{why}){cause}") from None
        if same >= SAME_FAILURE_ATTEMPTS and failure.retry_after is None:
            raise InfraError("model_api", f"{self.name} at {self.server}: {failure.message} (after {tries}; not "
                             f"retried further: the server failed the same way {same} times in a row){cause}") from None
        if self.policy.asks_too_much(failure.retry_after):
            raise InfraError("model_api", f"{self.name} at {self.server}: {failure.message}; "
                             f"the server asks to wait {failure.retry_after:.0f}s, more than the "
                             f"{self.policy.max_retry_after:.0f}s allowed{cause}") from None
        pause = self.policy.pause(attempt, failure.retry_after)
        left = ctx.left()
        if left is not None and pause >= left:
            raise ctx.out_of_time(f"{self.name}: {ctx.bound()} too short for the next retry (wait {pause:.1f}s); "
                                  f"last error: {failure.message}") from None
        if not retry.wait(pause, self.breaker, while_healthy=True):
            raise InfraError("model_api", f"{self.name} at {self.server}: {failure.message} (after "
                             f"{tries}; not retried: other calls to this endpoint are failing too){cause}") from None

    def _throttle(self, failure: Failure, waited: float, rounds: int, ctx: CallContext) -> float:
        """Wait out one rate-limited answer (``models.pacing.throttle``); the call's back-off so far."""
        return throttle(failure, waited, rounds, ctx, where=f"{self.name} at {self.server}",
                        ceiling=self.rate_limit_wait, policy=self.throttle_policy, slots=self.slots,
                        breaker=self.breaker)

    def _check_hung(self, silent: int, last_sent: float) -> None:
        """Stop the run when this call has timed out ``HANG_ATTEMPTS`` times in a row and the server
        sent nothing to any call of the run while its last attempt waited (``last_sent`` on): the
        endpoint accepts requests and answers none. Hung means silent: a server that streams to
        other calls is busy, not hung (``run.breaker.RunState.answered_since``). Without a breaker
        the call retries."""
        if self.breaker is None or silent < HANG_ATTEMPTS or self.breaker.answered_since(last_sent):
            return
        raise self.breaker.request_stop(
            ENDPOINT_DOWN, f"the model endpoint {self.server} stopped answering: no answer within "
            f"{self.timeout:g}s (--sab-timeout) to {silent} attempts in a row of one call, the last "
            f"{time.time() - last_sent:.0f}s without a byte from the server to any call of the run; "
            f"{CAUSE_SILENT}").error()

    def _slot(self, ctx: CallContext) -> contextlib.AbstractContextManager[float]:
        """One of the process's slots for a call in flight (``slots.CallSlots``); the wait gives up
        when the run stops, or at the case's wall-clock limit (which queueing does not move)."""
        if self.slots is None:
            return contextlib.nullcontext(0.0)

        def check() -> None:
            ctx.check()
            if self.breaker is not None:
                self.breaker.check()
            if ctx.limit is not None and time.monotonic() >= ctx.limit:
                raise InfraError(ErrorKind.TIMEOUT, f"{self.name}: {ctx.limit_name} spent waiting for a call slot")

        return self.slots.slot(check)
