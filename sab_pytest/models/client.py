"""The OpenAI-compatible client: one ``complete`` call per answer, served from the response cache
when it can be, else sent with retries within the case's budget, reported to the run's breaker,
and recorded as a ``ModelCall`` (usage, latency, cache hit). See the package docstring for why
the client retries by itself."""

from __future__ import annotations

import contextlib
import os
import random
import re
import threading
import time
from collections.abc import Mapping
from dataclasses import asdict
from typing import Any

from sab_pytest.cache import Claim, ResponseCache, normalise_base_url, request_key
from sab_pytest.errors import ENDPOINT_DOWN, STOP_KINDS, InfraError, UsageError
from sab_pytest.models.budget import (
    check_not_cancelled,
    count_failure,
    count_rate_limit,
    current_deadline,
    current_repeat,
    extend_deadline,
)
from sab_pytest.models.protocols import Breaker, Slots
from sab_pytest.models.spec import parse_model_spec
from sab_pytest.models.wire import (
    BACKOFF_MAX_S,
    CAUSE_GONE,
    CAUSE_QUOTA,
    CAUSE_RATE,
    CAUSE_SILENT,
    CAUSE_URL,
    MAX_RETRY_AFTER_S,
    PREFLIGHT_TIMEOUT_S,
    RATE_LIMIT_WAIT_S,
    RETRYABLE_STATUS,
    SAMPLING_KEYS,
    Answer,
    Failure,
    Secret,
    as_int,
    connection_reason,
    elide_images,
    error_code,
    error_text,
    parse_answer,
    parse_retry_after,
    rate_limit_wait,
    scrub,
    status_cause,
)
from sab_pytest.outcome import ModelCall

HANG_ATTEMPTS = 2  # timed-out attempts in a row of one call, with no answer in the run, that stop it


class OpenAIChatModel:
    """A ``ChatModel`` on any OpenAI-compatible chat-completions API, via the openai SDK.

    One instance per process is meant to be shared by threads (the case runner's pool): the SDK
    client is created lazily, once per process, under a lock. The API key is read at construction
    from ``api_key`` or the environment variable ``api_key_env`` and kept out of ``repr``,
    messages, records and the cache.
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        api_key_env: str = "OPENAI_API_KEY",
        temperature: float | None = 0.0,
        max_tokens: int | None = None,
        timeout: float = 60.0,
        max_retries: int = 5,
        backoff_base: float = 1.0,
        backoff_max: float = BACKOFF_MAX_S,
        max_retry_after: float = MAX_RETRY_AFTER_S,
        rate_limit_wait: float = RATE_LIMIT_WAIT_S,
        cache: ResponseCache | None = None,
        cache_salt: str | None = None,
        extra: Mapping[str, Any] | None = None,
        breaker: Breaker | None = None,
        slots: Slots | None = None,
    ) -> None:
        self.name = parse_model_spec(model)
        url = base_url if base_url is not None else os.environ.get("OPENAI_BASE_URL")
        if url is not None and not re.match(r"^https?://[^/\s]+", url.strip()):
            raise UsageError(f"--base-url: {url!r} is not an http(s) URL (e.g. http://localhost:8000/v1)")
        self.base_url = url.strip() if url else None
        self.api_key_env = api_key_env
        self._key = Secret(api_key if api_key is not None else os.environ.get(api_key_env))
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.timeout = float(timeout)
        self.max_retries = int(max_retries)
        self.backoff_base = float(backoff_base)
        self.backoff_max = float(backoff_max)
        self.max_retry_after = float(max_retry_after)
        self.rate_limit_wait = float(rate_limit_wait)  # back-off one call may spend on rate limits
        self.cache = cache
        self.cache_salt = cache_salt
        unknown = set(extra or {}) - set(SAMPLING_KEYS)
        if unknown:
            raise UsageError(f"model options: unsupported parameter(s) {sorted(unknown)}; "
                             f"supported: {', '.join(SAMPLING_KEYS)}")
        self.extra = dict(extra or {})
        self.breaker = breaker  # the run's shared breaker and stop signal (None: this client alone)
        self.slots = slots  # the process's calls in flight, shared with its other clients (None: no bound)
        self._client: Any = None
        self._client_pid: int | None = None
        self._client_lock = threading.Lock()
        self._answered = False  # some call of this client got an answer (a refused connection then is no typo)

    def __repr__(self) -> str:
        return (f"OpenAIChatModel(name={self.name!r}, base_url={self.server!r}, "
                f"temperature={self.temperature!r}, cache={self.cache!r})")

    @property
    def server(self) -> str:
        """The base URL without credentials, for messages and cache keys."""
        return normalise_base_url(self.base_url)

    @property
    def has_api_key(self) -> bool:
        return bool(self._key)

    def secret(self) -> str | None:
        """The API key, for the transport and for scrubbing messages; never for printing."""
        return self._key.reveal()

    # -- public API ------------------------------------------------------------------------------
    def complete(self, messages: list[dict[str, Any]], *, role: str = "agent",
                 max_tokens: int | None = None, tools: list[dict[str, Any]] | None = None) -> ModelCall:
        """One answer for ``messages``: from the cache, from a concurrent owner, or from the API.

        ``tools`` (OpenAI function definitions) go into the request, and so into the cache key; the
        answer's tool calls come back in ``ModelCall.tool_calls``. Without tools the request is
        byte-for-byte what it always was.
        """
        started = time.perf_counter()
        params = self._request_params(messages, max_tokens)
        if tools:
            params["tools"] = tools
        check_not_cancelled()
        if self.cache is None:
            return self._record(params, self._call_with_retries(params), role, started, cache_hit=False)
        key = request_key(self._key_material(params))
        try:
            found = self._cached_or_claimed(key)
        except OSError:  # an unusable cache directory must not fail the case: call without it
            return self._record(params, self._call_with_retries(params), role, started, cache_hit=False)
        if isinstance(found, Claim):
            try:
                answer = self._call_with_retries(params)
                with contextlib.suppress(OSError):  # a full disk costs a later re-call, not this answer
                    self.cache.put(key, {"request": self._key_material(params), **asdict(answer)})
            finally:
                found.release()
            return self._record(params, answer, role, started, cache_hit=False)
        answer = Answer(text=str(found.get("text", "")), finish_reason=found.get("finish_reason"),
                         prompt_tokens=as_int(found.get("prompt_tokens")),
                         completion_tokens=as_int(found.get("completion_tokens")),
                         tool_calls=found.get("tool_calls") or None)
        return self._record(params, answer, role, started, cache_hit=True)

    def _cached_or_claimed(self, key: str) -> dict[str, Any] | Claim:
        """The stored answer for ``key`` (perhaps after waiting for another owner's call), or the
        claim that makes this thread the one to call the API."""
        assert self.cache is not None
        rounds = 0
        while True:
            entry = self.cache.get(key)
            if entry is not None:
                return entry
            check_not_cancelled()
            claim = self.cache.try_claim(key, self._lock_budget())
            if claim is not None:
                entry = self.cache.get(key)  # finished by someone between our look and our claim
                if entry is None:
                    return claim
                claim.release()
                return entry
            try:
                entry = self.cache.wait_for(key, current_deadline())
            except TimeoutError:
                raise InfraError("model_timeout", f"{self.name}: case time budget spent waiting for the "
                                 "same request made by another worker") from None
            if entry is not None:
                return entry
            deadline = current_deadline()
            if deadline is not None and time.monotonic() >= deadline:
                raise InfraError("model_timeout", f"{self.name}: case time budget spent before an answer")
            rounds += 1  # the owner gave up or went stale: claim again, gently if this keeps happening
            time.sleep(min(0.05, 0.001 * rounds))

    def preflight(self, timeout: float = PREFLIGHT_TIMEOUT_S, attempts: int = 2) -> None:
        """One tiny chat completion at session start (see ``models.preflight.check_endpoint``)."""
        from sab_pytest.models.preflight import check_endpoint

        check_endpoint(self, timeout, attempts)

    # -- request building ---------------------------------------------------------------------
    def _request_params(self, messages: list[dict[str, Any]], max_tokens: int | None) -> dict[str, Any]:
        params: dict[str, Any] = {"model": self.name, "messages": messages}
        if self.temperature is not None:
            params["temperature"] = self.temperature
        limit = max_tokens if max_tokens is not None else self.max_tokens
        if limit is not None:
            params["max_tokens"] = int(limit)
        params.update(self.extra)
        repeat = current_repeat()
        if repeat:  # --sab-repeat: a distinct seed per repeat, so each is a sample of its own (and cached apart)
            params["seed"] = repeat
        return params

    def _key_material(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """What decides the answer: the request body plus the server; never timeouts or keys."""
        material = {"base_url": self.server, **params}
        if self.cache_salt is not None:
            material["salt"] = self.cache_salt
        return material

    def _lock_budget(self) -> float:
        deadline = current_deadline()
        if deadline is not None:
            return max(0.0, deadline - time.monotonic()) + 1.0
        worst_wait = min(self.backoff_max, self.max_retry_after) * self.max_retries
        return self.timeout * (self.max_retries + 1) + worst_wait + 5.0

    def _record(self, params: Mapping[str, Any], answer: Answer, role: str, started: float, *,
                cache_hit: bool) -> ModelCall:
        return ModelCall(model=self.name, messages=elide_images(params["messages"]), answer=answer.text,
                         prompt_tokens=answer.prompt_tokens, completion_tokens=answer.completion_tokens,
                         latency_s=round(time.perf_counter() - started, 6), cache_hit=cache_hit,
                         finish_reason=answer.finish_reason, role=role, tool_calls=answer.tool_calls)

    # -- transport ------------------------------------------------------------------------------
    def _sdk_client(self) -> Any:
        """The process's SDK client (re-created after a fork: connections must not be shared)."""
        pid = os.getpid()
        if self._client is None or self._client_pid != pid:
            with self._client_lock:
                if self._client is None or self._client_pid != pid:
                    import openai

                    kwargs: dict[str, Any] = {"api_key": self._key.reveal(), "max_retries": 0,
                                              "timeout": self.timeout}
                    if self.base_url:
                        kwargs["base_url"] = self.base_url
                    self._client = openai.OpenAI(**kwargs)
                    self._client_pid = pid
        return self._client

    def _call_with_retries(self, params: dict[str, Any]) -> Answer:
        """One answer, retrying what can be retried; the run's breaker hears the final outcome.

        The call holds one of the process's slots (``slots.CallSlots``) until the breaker has heard
        its outcome, retries included: a call waiting to retry is still a call in flight, and the
        next queued call must see a breaker that this failure has tripped. Time spent queued for a
        slot is not charged to the case's budget.
        """
        if not self._key.reveal():
            raise UsageError(f"no API key for model {self.name!r}: set {self.api_key_env}")
        with self._slot() as waited:
            if waited:
                extend_deadline(waited)
            try:
                answer = self._retry_loop(params)
            except InfraError as exc:
                if exc.kind not in STOP_KINDS:
                    count_failure(final=True)
                    if self.breaker is not None:
                        self.breaker.failure(exc.args[0])
                raise
            self._answered = True
            if self.breaker is not None:
                self.breaker.success()
            if self.slots is not None:
                self.slots.relieved()
        return answer

    def _retry_loop(self, params: dict[str, Any]) -> Answer:
        """Attempts until an answer, a permanent failure, the case budget's end or the run's stop.

        Once the breaker knows that a call failed for good with no success since (the endpoint is
        failing, not blipping), a failed attempt is not retried: ten calls each sleeping through
        a minute of backoff would keep a dead endpoint's run going for many minutes.

        Rate limits are back-pressure, not failures (``_throttle``): they do not use up retries,
        are not cut short by the breaker, and end the call only at the ``rate_limit_wait`` ceiling.
        Attempts that time out are watched for a hung endpoint (``_check_hung``).
        """
        deadline = current_deadline()
        attempt = 0  # failed attempts so far (rate limits not counted)
        throttled = 0.0  # seconds this call has waited out rate limits
        rounds = 0  # rate-limited answers so far
        silent = 0  # timed-out attempts in a row
        while True:
            if attempt or rounds:
                check_not_cancelled()  # a stopped run does not keep retrying
            if self.breaker is not None:
                self.breaker.check()  # a stopped run makes no new request
            if deadline is not None and time.monotonic() >= deadline:
                raise InfraError("model_timeout", f"{self.name}: case time budget spent before an answer")
            per_try = self.timeout
            if deadline is not None:
                per_try = max(0.01, min(self.timeout, deadline - time.monotonic()))
            sent = time.time()
            try:
                return self._attempt(params, per_try)
            except Failure as failure:
                if failure.rate_limited:
                    throttled = self._throttle(failure, throttled, rounds)
                    deadline, rounds = current_deadline(), rounds + 1  # the wait moved the budget's end
                    continue
                count_failure(final=False)
                attempts = attempt + 1
                if deadline is not None and failure.timed_out and time.monotonic() >= deadline - 0.01:
                    raise InfraError("model_timeout", f"{self.name}: case time budget spent; last attempt: "
                                     f"{failure.message}") from None
                silent = silent + 1 if failure.timed_out else 0
                self._check_hung(silent, sent)
                cause = f"; {failure.cause}" if failure.cause else ""
                failing = self.breaker is not None and self.breaker.streak() > 0
                if not failure.retryable or attempt >= self.max_retries or failing:
                    why = "; not retried: other calls to this endpoint are failing too" if (
                        failing and failure.retryable and attempt < self.max_retries) else ""
                    raise InfraError("model_api", f"{self.name} at {self.server}: {failure.message} "
                                     f"(after {attempts} attempt{'s' if attempts > 1 else ''}{why}){cause}") from None
                if failure.retry_after is not None and failure.retry_after > self.max_retry_after:
                    raise InfraError("model_api", f"{self.name} at {self.server}: {failure.message}; "
                                     f"the server asks to wait {failure.retry_after:.0f}s, more than the "
                                     f"{self.max_retry_after:.0f}s allowed{cause}") from None
                pause = self._pause(attempt, failure.retry_after)
                if deadline is not None and time.monotonic() + pause >= deadline:
                    raise InfraError("model_timeout", f"{self.name}: case time budget too short for the next "
                                     f"retry (wait {pause:.1f}s); last error: {failure.message}") from None
                if self.breaker is None:
                    time.sleep(pause)
                elif not self.breaker.wait(pause, while_healthy=True):
                    raise InfraError("model_api", f"{self.name} at {self.server}: {failure.message} (after "
                                     f"{attempts} attempt{'s' if attempts > 1 else ''}; not retried: other calls "
                                     f"to this endpoint are failing too){cause}") from None
                attempt += 1

    def _throttle(self, failure: Failure, waited: float, rounds: int) -> float:
        """Wait out one rate-limited answer (HTTP 429, or 503 with Retry-After); returns the call's
        back-off so far.

        Why apart from retries: a 429 says "slow down", not "broken". So the wait is what the server
        asked (``Retry-After``, else the ``x-ratelimit-reset-*`` of the used-up limit, else
        exponential backoff), with a spread so that calls told the same instant do not all come
        back at it; the process's calls in flight shrink (``slots.congested``); the case's budget
        is not charged; the breaker neither hears of it nor cuts it short. The one bound is the
        ceiling ``rate_limit_wait`` of back-off per call, after which the call fails for good,
        saying so (and counts for the breaker like any call that failed for good: an endpoint that
        serves nobody for that long is not serving the run).
        """
        if self.slots is not None:
            self.slots.congested()
        told = failure.retry_after
        base = told if told is not None else min(self.backoff_max, self.backoff_base * 2 ** min(rounds, 16))
        left = self.rate_limit_wait - waited
        if base > left:
            count_rate_limit(0.0)
            asks = f"the server asks to wait {told:.0f}s, more than" if told is not None else "no time left of"
            raise InfraError("model_api", f"{self.name} at {self.server}: still rate limited after {waited:.0f}s "
                             f"of back-off for this call ({failure.message}); {asks} the {left:.0f}s left of the "
                             f"{self.rate_limit_wait:g}s one call may wait (--sab-rate-limit-wait); "
                             f"{CAUSE_RATE}") from None
        pause = min(left, base * random.uniform(1.0, 1.25) if told is not None else base * random.uniform(0.5, 1.0))
        count_rate_limit(pause)
        extend_deadline(pause)  # back-pressure is not the case's work
        if self.breaker is None:
            time.sleep(pause)
        else:
            self.breaker.wait(pause)  # wakes (raises) when the run stops, whatever other calls do
        return waited + pause

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

    def _slot(self) -> contextlib.AbstractContextManager[float]:
        """One of the process's slots for a call in flight (``slots.CallSlots``); the wait gives up
        when the run stops."""
        if self.slots is None:
            return contextlib.nullcontext(0.0)

        def check() -> None:
            check_not_cancelled()
            if self.breaker is not None:
                self.breaker.check()

        return self.slots.slot(check)

    def _pause(self, attempt: int, retry_after: float | None) -> float:
        """Seconds before the next attempt: what the server asked (plus a little spread so that
        workers do not come back in lock-step), else exponential backoff with jitter."""
        if retry_after is not None:
            return retry_after * random.uniform(1.0, 1.1)
        ceiling = min(self.backoff_max, self.backoff_base * (2 ** attempt))
        return ceiling * random.uniform(0.5, 1.0)

    def _attempt(self, params: dict[str, Any], timeout: float) -> Answer:
        import openai

        try:
            raw = self._sdk_client().chat.completions.with_raw_response.create(**params, timeout=timeout)
            body = raw.text
        except openai.APIStatusError as exc:
            status = exc.status_code
            headers = exc.response.headers
            should = (headers.get("x-should-retry") or "").lower()
            retryable = status in RETRYABLE_STATUS or status >= 500
            if should in ("true", "false"):
                retryable = should == "true"
            message = f"HTTP {status}: {error_text(exc, self._key.reveal())}"
            if status == 429 and error_code(exc) == "insufficient_quota":  # billing: waiting cannot help
                raise Failure(message, retryable=False, cause=CAUSE_QUOTA) from None
            told = parse_retry_after(headers)
            if status == 429 or (status == 503 and told is not None):
                raise Failure(message, retryable=True, retry_after=rate_limit_wait(headers), rate_limited=True,
                              cause=CAUSE_RATE) from None
            raise Failure(message, retryable=retryable, retry_after=told, cause=status_cause(status)) from None
        except openai.APITimeoutError:
            raise Failure(f"no answer within {timeout:.1f}s", retryable=True, timed_out=True,
                          cause=CAUSE_SILENT) from None
        except openai.APIConnectionError as exc:
            raise Failure(f"connection failed: {connection_reason(exc, self._key.reveal())}", retryable=True,
                          cause=CAUSE_GONE if self._answered else CAUSE_URL) from None
        except openai.OpenAIError as exc:
            detail = scrub(str(exc), self._key.reveal())
            raise Failure(f"{type(exc).__name__}: {detail}", retryable=False) from None
        return parse_answer(body, params.get("max_tokens"))
