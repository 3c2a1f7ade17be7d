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
from sab_pytest.errors import STOP_KINDS, InfraError, UsageError
from sab_pytest.models.budget import (
    check_not_cancelled,
    count_failure,
    current_deadline,
    current_repeat,
    extend_deadline,
)
from sab_pytest.models.protocols import Breaker, Slots
from sab_pytest.models.spec import parse_model_spec
from sab_pytest.models.wire import (
    BACKOFF_MAX_S,
    MAX_RETRY_AFTER_S,
    PREFLIGHT_TIMEOUT_S,
    RETRYABLE_STATUS,
    SAMPLING_KEYS,
    Answer,
    Failure,
    Secret,
    as_int,
    connection_reason,
    elide_images,
    error_text,
    is_completion,
    parse_answer,
    parse_retry_after,
    scrub,
    shorten,
)
from sab_pytest.outcome import ModelCall


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
        """One tiny chat completion at session start (``max_tokens=1``, a few tokens in all).

        Turns what would otherwise fail every case one by one into one ``UsageError`` naming the
        URL and what happened: no key, a URL that does not answer or never answers a chat call,
        a rejected key, a model the server does not serve, HTTP 5xx to chat calls, a body that is
        not a chat completion. ``timeout`` bounds each attempt; a failure that may be passing is
        tried ``attempts`` times in all. Answers that prove the endpoint works although this tiny
        request was not to its taste (400/422, 429) pass: the cases report any real problem.
        """
        import openai

        if not self._key.reveal():
            raise UsageError(
                f"no API key for model {self.name!r}: set {self.api_key_env} "
                f"(servers without auth accept any non-empty value, e.g. {self.api_key_env}=EMPTY)"
            )
        where = f"the model API at {self.server}"
        chat = f"a chat completion for model {self.name!r}"
        params = {"model": self.name, "messages": [{"role": "user", "content": "Say OK."}], "max_tokens": 1}
        problem = ""
        for attempt in range(max(1, attempts)):
            if attempt:
                time.sleep(min(1.0, timeout / 4))
            try:
                raw = self._sdk_client().chat.completions.with_raw_response.create(**params, timeout=float(timeout))
                body = raw.text
            except openai.APIStatusError as exc:
                status = exc.status_code
                if status in (401, 403):
                    raise UsageError(f"{where} rejected the key in {self.api_key_env} "
                                     f"(HTTP {status}): {error_text(exc, self._key.reveal())}") from None
                if status == 404:
                    detail = error_text(exc, self._key.reveal())
                    raise UsageError(f"{where} answered HTTP 404 to {chat} ({detail}); check "
                                     "the model name and that --base-url ends where /chat/completions "
                                     "is served (usually .../v1)") from None
                if status < 500 and status != 408:
                    return  # alive, only picky
                problem = f"{where} answered HTTP {status} to {chat}: {error_text(exc, self._key.reveal())}"
                continue
            except openai.APITimeoutError:
                problem = f"{where} gave no answer to {chat} within {timeout:g}s"
                continue
            except openai.APIConnectionError as exc:
                problem = f"cannot reach the model API at {self.server}: {connection_reason(exc, self._key.reveal())}"
                continue
            except openai.OpenAIError as exc:
                problem = f"{where} failed {chat}: {type(exc).__name__}: {scrub(str(exc), self._key.reveal())}"
                continue
            if is_completion(body):
                return
            problem = f"{where} answered {chat} with a body that is not a chat completion ({shorten(body)})"
        tries = f" ({attempts} attempts)" if attempts > 1 else ""
        raise UsageError(f"{problem}{tries}; no case was run: check --base-url / OPENAI_BASE_URL and that the "
                         "server is up")

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
            if self.breaker is not None:
                self.breaker.success()
        return answer

    def _retry_loop(self, params: dict[str, Any]) -> Answer:
        """Attempts until an answer, a permanent failure, the case budget's end or the run's stop.

        Once the breaker knows that a call failed for good with no success since (the endpoint is
        failing, not blipping), a failed attempt is not retried: ten calls each sleeping through
        a minute of backoff would keep a dead endpoint's run going for many minutes.
        """
        deadline = current_deadline()
        attempt = 0
        while True:
            if attempt:
                check_not_cancelled()  # a stopped run does not keep retrying
            if self.breaker is not None:
                self.breaker.check()  # a stopped run makes no new request
            if deadline is not None and time.monotonic() >= deadline:
                raise InfraError("model_timeout", f"{self.name}: case time budget spent before an answer")
            per_try = self.timeout
            if deadline is not None:
                per_try = max(0.01, min(self.timeout, deadline - time.monotonic()))
            try:
                return self._attempt(params, per_try)
            except Failure as failure:
                count_failure(final=False)
                attempts = attempt + 1
                if deadline is not None and failure.timed_out and time.monotonic() >= deadline - 0.01:
                    raise InfraError("model_timeout", f"{self.name}: case time budget spent; last attempt: "
                                     f"{failure.message}") from None
                failing = self.breaker is not None and self.breaker.streak() > 0
                if not failure.retryable or attempt >= self.max_retries or failing:
                    why = "; not retried: other calls to this endpoint are failing too" if (
                        failing and failure.retryable and attempt < self.max_retries) else ""
                    raise InfraError("model_api", f"{self.name} at {self.server}: {failure.message} "
                                     f"(after {attempts} attempt{'s' if attempts > 1 else ''}{why})") from None
                if failure.retry_after is not None and failure.retry_after > self.max_retry_after:
                    raise InfraError("model_api", f"{self.name} at {self.server}: {failure.message}; "
                                     f"the server asks to wait {failure.retry_after:.0f}s, more than the "
                                     f"{self.max_retry_after:.0f}s allowed") from None
                pause = self._pause(attempt, failure.retry_after)
                if deadline is not None and time.monotonic() + pause >= deadline:
                    raise InfraError("model_timeout", f"{self.name}: case time budget too short for the next "
                                     f"retry (wait {pause:.1f}s); last error: {failure.message}") from None
                if self.breaker is None:
                    time.sleep(pause)
                elif not self.breaker.wait(pause, while_healthy=True):
                    raise InfraError("model_api", f"{self.name} at {self.server}: {failure.message} (after "
                                     f"{attempts} attempt{'s' if attempts > 1 else ''}; not retried: other calls "
                                     "to this endpoint are failing too)") from None
                attempt += 1

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
            raise Failure(f"HTTP {status}: {error_text(exc, self._key.reveal())}", retryable=retryable,
                           retry_after=parse_retry_after(headers)) from None
        except openai.APITimeoutError:
            raise Failure(f"no answer within {timeout:.1f}s", retryable=True, timed_out=True) from None
        except openai.APIConnectionError as exc:
            raise Failure(f"connection failed: {connection_reason(exc, self._key.reveal())}", retryable=True) from None
        except openai.OpenAIError as exc:
            detail = scrub(str(exc), self._key.reveal())
            raise Failure(f"{type(exc).__name__}: {detail}", retryable=False) from None
        return parse_answer(body, params.get("max_tokens"))
