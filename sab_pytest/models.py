"""Model clients.

``ChatModel`` is the one interface agents and LLM judges talk to: a list of OpenAI-format chat
messages in, one ``ModelCall`` out. The OpenAI-compatible client (retries, cache, usage) lives
here too.

Why the client retries by itself (the SDK runs with ``max_retries=0``): a case has a time budget
(``case_budget``), and only a loop we own can stop retrying when the budget is spent, classify
failures the SDK cannot see (an invalid JSON body or an empty answer with status 200) and keep
credentials out of every message. The SDK is used only for transport and auth; we pass plain float
timeouts and build no httpx/httpx2 objects, so openai 1.x, 2.x (httpx) and 3.x (httpx2) all work.
"""

from __future__ import annotations

import contextlib
import email.utils
import json
import math
import os
import random
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import AbstractContextManager
from dataclasses import asdict, dataclass
from typing import Any, Protocol

from sab_pytest.cache import Claim, ResponseCache, normalise_base_url, request_key
from sab_pytest.errors import STOP_KINDS, Cancelled, InfraError, UsageError
from sab_pytest.outcome import ModelCall


class Breaker(Protocol):
    """What a client needs of the run's circuit breaker (``run.breaker.RunState`` is one): declared
    here so that the model layer does not depend on the run machinery above it."""

    def check(self) -> None: ...

    def wait(self, seconds: float, *, while_healthy: bool = False) -> bool: ...

    def streak(self) -> int: ...

    def success(self) -> None: ...

    def failure(self, message: str) -> int: ...


class Slots(Protocol):
    """What a client needs of the process's call slots (``run.slots.CallSlots`` is one)."""

    def slot(self, check: Callable[[], None] | None = None) -> AbstractContextManager[float]: ...


class ChatModel(Protocol):
    """A chat model: messages in, one answer out (recorded as a ``ModelCall``).

    Implementations raise ``InfraError("model_api", ...)`` when no answer can be had after their
    retries; they never return an empty answer silently.
    """

    name: str

    def complete(self, messages: list[dict[str, Any]], *, role: str = "agent",
                 max_tokens: int | None = None, tools: list[dict[str, Any]] | None = None) -> ModelCall: ...


# --------------------------------------------------------------------------------------------------
# Model names

KNOWN_PROVIDERS = ("openai",)
_WHITESPACE = re.compile(r"\s")


def parse_model_spec(text: str) -> str:
    """The model name to send, from what the user typed after ``--model``.

    ``openai/gpt-4o`` and ``gpt-4o`` both mean ``gpt-4o``; a two-part name (``Qwen/Qwen2.5-7B``) is
    kept whole, because OpenAI-compatible servers (vLLM, OpenRouter) name models that way. Three
    or more parts need a known provider prefix: ``foo/bar/baz`` is rejected instead of guessed.
    """
    spec = (text or "").strip()
    if not spec:
        raise UsageError("--model: the model name is empty")
    if _WHITESPACE.search(spec):
        raise UsageError(f"--model: {text!r} contains whitespace; give the model name as the API knows it")
    parts = spec.split("/")
    if any(not p for p in parts):
        raise UsageError(f"--model: {text!r} has an empty path segment (leading, trailing or double '/')")
    if parts[0].lower() in KNOWN_PROVIDERS:
        if len(parts) == 1:
            raise UsageError(f"--model: {text!r} names a provider but no model (e.g. openai/gpt-4o)")
        return "/".join(parts[1:])
    if len(parts) >= 3:
        raise UsageError(
            f"--model: {text!r}: unknown provider prefix {parts[0]!r}; supported: "
            + ", ".join(f"'{p}/'" for p in KNOWN_PROVIDERS)
            + " (any OpenAI-compatible server works through --base-url with the model's served name)"
        )
    return spec


# --------------------------------------------------------------------------------------------------
# Per-case time budget (thread-local, shared by every model the case uses: agent and judges)

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
    (and may bill), so the usage counts it; answers alone cannot, since a failure has none."""

    failed_attempts: int = 0
    failed_calls: int = 0


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


def _count_failure(*, final: bool) -> None:
    log: FailureLog | None = getattr(_failures, "log", None)
    if log is not None:
        if final:
            log.failed_calls += 1
        else:
            log.failed_attempts += 1


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


# --------------------------------------------------------------------------------------------------
# Secrets

# Key-shaped tokens: a provider prefix (sk-, sk-proj-, pk-, rk-) and at least 10 token characters,
# with at least one digit, so ordinary words ("key-holders", "sk-learn") stay. A bearer token is
# the RFC 6750 character set only: the punctuation after it ("...,", "...'") is kept.
_KEY_PATTERN = re.compile(r"\b(?:sk|pk|rk)-(?=[A-Za-z_\-]*\d)[A-Za-z0-9_\-]{10,}")
_BEARER_PATTERN = re.compile(r"(Bearer\s+)(?!<redacted)[A-Za-z0-9\-._~+/]+=*", re.IGNORECASE)


def scrub(text: str, *secrets: str | None) -> str:
    """``text`` with the given secrets and anything shaped like an API key replaced; the text
    around them is kept as it was."""
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, "<redacted>")
    text = _BEARER_PATTERN.sub(r"\1<redacted>", text)
    return _KEY_PATTERN.sub("<redacted-key>", text)


# --------------------------------------------------------------------------------------------------
# The OpenAI-compatible client

RETRYABLE_STATUS = frozenset({408, 409, 429})
MAX_RETRY_AFTER_S = 120.0  # a server asking for a longer pause is treated as a permanent refusal
PREFLIGHT_TIMEOUT_S = 15.0  # per preflight attempt (also bounded by --sab-timeout)
# Longest pause between two attempts. With the default 6 retries, a call rides out an outage of
# 25-51 s (jittered) before it fails for good; that first failure is also how long a run against
# an endpoint that died takes to stop (the breaker's other calls then fail fast).
BACKOFF_MAX_S = 20.0
SAMPLING_KEYS = ("top_p", "seed", "stop", "tools", "tool_choice", "response_format", "n",
                 "presence_penalty", "frequency_penalty", "logit_bias")


class _Failure(Exception):
    """One failed attempt: whether to retry, and how long the server asked us to wait."""

    def __init__(self, message: str, *, retryable: bool, retry_after: float | None = None,
                 timed_out: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.retryable = retryable
        self.retry_after = retry_after
        self.timed_out = timed_out


@dataclass(frozen=True)
class _Answer:
    text: str
    finish_reason: str | None
    prompt_tokens: int
    completion_tokens: int
    tool_calls: list[dict[str, Any]] | None = None  # [{"id", "name", "arguments"}] when the model called tools


def parse_retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``Retry-After`` (seconds or an HTTP date)."""
    value = headers.get("retry-after-ms")
    if value:
        with contextlib.suppress(ValueError):
            ms = float(value)
            if math.isfinite(ms) and ms >= 0:
                return ms / 1000.0
    value = headers.get("retry-after")
    if not value:
        return None
    with contextlib.suppress(ValueError):
        seconds = float(value)
        return seconds if math.isfinite(seconds) and seconds >= 0 else None
    with contextlib.suppress(TypeError, ValueError, IndexError):
        when = email.utils.parsedate_to_datetime(value)
        return max(0.0, when.timestamp() - time.time())
    return None


class _Secret:
    """Holds the API key so that ``repr``, ``vars()`` and tracebacks show a placeholder."""

    __slots__ = ("_value",)

    def __init__(self, value: str | None) -> None:
        self._value = value or None

    def __repr__(self) -> str:
        return "<secret>" if self._value else "<no key>"

    def __bool__(self) -> bool:
        return self._value is not None

    def reveal(self) -> str | None:
        return self._value


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # some servers return typed parts
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def preload_sdk() -> None:
    """Import the openai SDK on a background thread. Why: the import costs a third of a second of
    CPU; an xdist worker that pays it at its first case pays it after the run's start-up, while
    one that starts it at configure time pays it while it collects and waits to be scheduled."""

    def load() -> None:
        with contextlib.suppress(Exception):  # the first real call reports a broken install properly
            import openai  # noqa: F401

    threading.Thread(target=load, name="sab-preload-sdk", daemon=True).start()


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
        self._key = _Secret(api_key if api_key is not None else os.environ.get(api_key_env))
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
        answer = _Answer(text=str(found.get("text", "")), finish_reason=found.get("finish_reason"),
                         prompt_tokens=_int(found.get("prompt_tokens")),
                         completion_tokens=_int(found.get("completion_tokens")),
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
                                     f"(HTTP {status}): {self._error_text(exc)}") from None
                if status == 404:
                    raise UsageError(f"{where} answered HTTP 404 to {chat} ({self._error_text(exc)}); check "
                                     "the model name and that --base-url ends where /chat/completions "
                                     "is served (usually .../v1)") from None
                if status < 500 and status != 408:
                    return  # alive, only picky
                problem = f"{where} answered HTTP {status} to {chat}: {self._error_text(exc)}"
                continue
            except openai.APITimeoutError:
                problem = f"{where} gave no answer to {chat} within {timeout:g}s"
                continue
            except openai.APIConnectionError as exc:
                problem = f"cannot reach the model API at {self.server}: {self._connection_reason(exc)}"
                continue
            except openai.OpenAIError as exc:
                problem = f"{where} failed {chat}: {type(exc).__name__}: {scrub(str(exc), self._key.reveal())}"
                continue
            if _is_completion(body):
                return
            problem = f"{where} answered {chat} with a body that is not a chat completion ({_shorten(body)})"
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

    def _record(self, params: Mapping[str, Any], answer: _Answer, role: str, started: float, *,
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

    def _call_with_retries(self, params: dict[str, Any]) -> _Answer:
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
                    _count_failure(final=True)
                    if self.breaker is not None:
                        self.breaker.failure(exc.args[0])
                raise
            if self.breaker is not None:
                self.breaker.success()
        return answer

    def _retry_loop(self, params: dict[str, Any]) -> _Answer:
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
            except _Failure as failure:
                _count_failure(final=False)
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

    def _attempt(self, params: dict[str, Any], timeout: float) -> _Answer:
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
            raise _Failure(f"HTTP {status}: {self._error_text(exc)}", retryable=retryable,
                           retry_after=parse_retry_after(headers)) from None
        except openai.APITimeoutError:
            raise _Failure(f"no answer within {timeout:.1f}s", retryable=True, timed_out=True) from None
        except openai.APIConnectionError as exc:
            raise _Failure(f"connection failed: {self._connection_reason(exc)}", retryable=True) from None
        except openai.OpenAIError as exc:
            detail = scrub(str(exc), self._key.reveal())
            raise _Failure(f"{type(exc).__name__}: {detail}", retryable=False) from None
        return self._parse(body, params)

    def _parse(self, body: str, params: Mapping[str, Any]) -> _Answer:
        try:
            data = json.loads(body)
        except ValueError:
            raise _Failure(f"invalid JSON in the answer body ({len(body)} bytes)", retryable=True) from None
        choices = data.get("choices") if isinstance(data, dict) else None
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise _Failure("answer body has no choices", retryable=True)
        choice = choices[0]
        message = choice.get("message") if isinstance(choice.get("message"), dict) else {}
        text = _content_text(message.get("content"))
        finish = choice.get("finish_reason")
        tool_calls = _tool_calls(message.get("tool_calls"))
        if not text.strip() and not tool_calls:
            if finish == "length":  # the same request would be cut again: retrying cannot help
                raise _Failure(f"empty answer: the token limit (max_tokens={params.get('max_tokens')}) was "
                               "used up before any text", retryable=False)
            raise _Failure(f"empty answer (finish_reason={finish!r})", retryable=True)
        usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
        return _Answer(text=text, finish_reason=finish if isinstance(finish, str) else None,
                       prompt_tokens=_int(usage.get("prompt_tokens")),
                       completion_tokens=_int(usage.get("completion_tokens")), tool_calls=tool_calls)

    def _error_text(self, exc: Any) -> str:
        """The server's error message (never the SDK's repr, which may echo request details)."""
        body = getattr(exc, "body", None)
        message = None
        if isinstance(body, dict):
            inner = body.get("error", body)
            message = inner.get("message") if isinstance(inner, dict) else None
        if not isinstance(message, str) or not message:
            message = getattr(exc, "message", None) or type(exc).__name__
        return scrub(message[:500], self._key.reveal())

    def _connection_reason(self, exc: BaseException) -> str:
        cause = exc.__cause__ or exc.__context__
        text = f"{type(cause).__name__}: {cause}" if cause is not None else str(exc)
        return scrub(text[:300], self._key.reveal())


def _is_completion(body: str) -> bool:
    """Whether ``body`` is a chat completion (its content may be empty: max_tokens=1 allows that)."""
    try:
        data = json.loads(body)
    except ValueError:
        return False
    choices = data.get("choices") if isinstance(data, dict) else None
    return isinstance(choices, list) and bool(choices) and isinstance(choices[0], dict)


def _shorten(body: str, limit: int = 80) -> str:
    text = " ".join(body.split())
    if not text:
        return "empty body"
    return repr(text[:limit] + ("..." if len(text) > limit else ""))
def _tool_calls(raw: Any) -> list[dict[str, Any]] | None:
    """The answer's function calls as plain ``{"id", "name", "arguments"}`` dicts (arguments stay the
    JSON text the model wrote: the agent parses it, so a malformed one is the model's mistake)."""
    if not isinstance(raw, list):
        return None
    calls = []
    for item in raw:
        function = item.get("function") if isinstance(item, dict) else None
        if isinstance(function, dict) and isinstance(function.get("name"), str):
            calls.append({"id": str(item.get("id") or f"call_{len(calls)}"), "name": function["name"],
                          "arguments": function.get("arguments") if isinstance(function.get("arguments"), str)
                          else json.dumps(function.get("arguments") or {})})
    return calls or None


def elide_images(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``messages`` with every inline image replaced by a short note of its size, for records.

    The request sent keeps the pictures; a case's record (results file, worker -> controller
    report) must not carry tens of kilobytes of base64 per call.
    """
    out = []
    for message in messages:
        content = message.get("content")
        if isinstance(content, list) and any(isinstance(p, dict) and p.get("type") == "image_url" for p in content):
            parts = []
            for part in content:
                url = str((part.get("image_url") or {}).get("url", "")) if isinstance(part, dict) else ""
                if isinstance(part, dict) and part.get("type") == "image_url" and url.startswith("data:"):
                    part = {"type": "image_url", "image_url": {"url": f"{url.split(',', 1)[0]},<{len(url)} chars>"}}
                parts.append(part)
            message = {**message, "content": parts}
        out.append(message)
    return out


def _int(value: Any) -> int:
    return int(value) if isinstance(value, (int, float)) and math.isfinite(value) else 0


# --------------------------------------------------------------------------------------------------
# Usage and cost

@dataclass(frozen=True)
class Prices:
    """USD per one million tokens."""

    input_per_m: float = 0.0
    output_per_m: float = 0.0

    def usd(self, prompt_tokens: int, completion_tokens: int) -> float:
        return (prompt_tokens * self.input_per_m + completion_tokens * self.output_per_m) / 1_000_000


_PRICE_KEYS = {"in": "input_per_m", "input": "input_per_m", "prompt": "input_per_m",
               "out": "output_per_m", "output": "output_per_m", "completion": "output_per_m"}


def parse_prices(text: str) -> Prices:
    """``"in=2.5,out=10"`` (USD per 1M input / output tokens) -> ``Prices``."""
    option = "--sab-price"
    if not text or not text.strip():
        raise UsageError(f"{option}: empty; expected e.g. in=2.5,out=10 (USD per 1M tokens)")
    values: dict[str, float] = {}
    for item in text.split(","):
        name, sep, raw = item.partition("=")
        name = name.strip().lower()
        if not sep or name not in _PRICE_KEYS:
            raise UsageError(f"{option}: {item.strip()!r} is not in=<USD> or out=<USD> "
                             "(USD per 1M tokens, e.g. in=2.5,out=10)")
        field_name = _PRICE_KEYS[name]
        if field_name in values:
            raise UsageError(f"{option}: the {name!r} price is given twice")
        try:
            value = float(raw.strip())
        except ValueError:
            raise UsageError(f"{option}: {raw.strip()!r} (for {name!r}) is not a number") from None
        if not math.isfinite(value) or value < 0:
            raise UsageError(f"{option}: {raw.strip()!r} (for {name!r}) must be a non-negative number")
        values[field_name] = value
    return Prices(**values)


def _field(call: ModelCall | Mapping[str, Any], name: str) -> Any:
    return call.get(name) if isinstance(call, Mapping) else getattr(call, name, None)


def usage_totals(calls: Iterable[ModelCall | Mapping[str, Any]]) -> dict[str, Any]:
    """Token and call counts over ``calls`` (``ModelCall`` objects or their ``to_dict`` form).

    ``prompt_tokens``/``completion_tokens`` count every answer used; the ``billed_*`` figures only
    the answers that came from the API in this run (cache hits cost nothing again). ``latency_s``
    sums the time callers waited; ``api_latency_s`` only that of calls that went to the API.
    Requests that got no answer are not calls here; ``add_failures`` counts them in.
    """
    totals: dict[str, Any] = {"calls": 0, "api_calls": 0, "cache_hits": 0, "errors": 0, "failed_calls": 0,
                              "truncated": 0,
                              "prompt_tokens": 0, "completion_tokens": 0, "billed_prompt_tokens": 0,
                              "billed_completion_tokens": 0, "latency_s": 0.0, "api_latency_s": 0.0}
    for call in calls:
        totals["calls"] += 1
        prompt = _int(_field(call, "prompt_tokens"))
        completion = _int(_field(call, "completion_tokens"))
        totals["latency_s"] += float(_field(call, "latency_s") or 0.0)
        totals["prompt_tokens"] += prompt
        totals["completion_tokens"] += completion
        if _field(call, "error"):
            totals["errors"] += 1
        if _field(call, "finish_reason") == "length":
            totals["truncated"] += 1
        if _field(call, "cache_hit"):
            totals["cache_hits"] += 1
        else:
            totals["api_calls"] += 1
            totals["billed_prompt_tokens"] += prompt
            totals["billed_completion_tokens"] += completion
            totals["api_latency_s"] += float(_field(call, "latency_s") or 0.0)
    totals["latency_s"] = round(totals["latency_s"], 6)
    totals["api_latency_s"] = round(totals["api_latency_s"], 6)
    return totals


def add_failures(totals: dict[str, Any], log: FailureLog | None) -> dict[str, Any]:
    """``totals`` with the failed requests of ``log`` counted: each failed attempt is a request the
    API received (``api_calls``, ``failed_calls``), each call that failed for good an ``errors``."""
    if log is not None:
        totals["api_calls"] = totals.get("api_calls", 0) + log.failed_attempts
        totals["failed_calls"] = totals.get("failed_calls", 0) + log.failed_attempts
        totals["errors"] = totals.get("errors", 0) + log.failed_calls
    return totals


def cost(calls: Iterable[ModelCall | Mapping[str, Any]], prices: Prices) -> float:
    """USD paid for ``calls`` in this run (cache hits excluded)."""
    totals = usage_totals(calls)
    return prices.usd(totals["billed_prompt_tokens"], totals["billed_completion_tokens"])
