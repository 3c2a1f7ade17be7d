"""What crosses the wire to an OpenAI-compatible server, read defensively: an answer body parsed
into an ``Answer`` or refused as a ``Failure`` (retry or not, how long the server asked to wait), the
headers that say how long to wait, the server's error text with every secret scrubbed, and the limits
of a model call. The SDK's exceptions are classified in ``transport.classify``, the back-off is
``sab_pytest.retry``'s."""

from __future__ import annotations

import contextlib
import email.utils
import json
import math
import re
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sab_pytest.settings.judging import OPENAI_URL_ENV

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


# Limits of model calls, answers and failures (the back-off itself: ``sab_pytest.retry``)

RETRYABLE_STATUS = frozenset({408, 409, 429})
PREFLIGHT_TIMEOUT_S = 15.0  # per preflight attempt (also bounded by --sab-timeout)
# Most seconds one call waits out rate limits (429, 503 with Retry-After) before its case errs.
RATE_LIMIT_WAIT_S = 600.0
SAMPLING_KEYS = ("top_p", "seed", "stop", "tools", "tool_choice", "response_format", "n",
                 "presence_penalty", "frequency_penalty", "logit_bias")


class Failure(Exception):
    """One failed attempt: whether to retry, how long the server asked us to wait, whether it was
    back-pressure (``rate_limited``: slow down, not a failure) and the likely ``cause``. ``kind``
    says what failed (``status``: an HTTP error, with its ``status`` and the server's ``detail``;
    ``timeout``; ``connection``; ``sdk``: another SDK error; ``answer``: a body that is no answer),
    so that the endpoint check can word its own message from the same classification."""

    def __init__(self, message: str, *, retryable: bool, retry_after: float | None = None,
                 timed_out: bool = False, rate_limited: bool = False, cause: str = "", kind: str = "answer",
                 status: int | None = None, detail: str = "", overflow: Any = None, filtered: bool = False) -> None:
        """Parameters: each keyword is one fact of the failure (see the class), with a default; the
        code that classifies a failure names the few it knows, so no record would group them."""
        super().__init__(message)
        self.filtered = filtered  # the provider's content filter refused the prompt or the answer
        self.overflow = overflow  # an ``overflow.Overflow`` when the request does not fit the server's context
        self.message = message
        self.retryable = retryable
        self.retry_after = retry_after
        self.timed_out = timed_out
        self.rate_limited = rate_limited
        self.cause = cause
        self.kind = kind
        self.status = status
        self.detail = detail or message


# Likely causes, named in the messages of calls that failed for good and of the preflight. Why
# apart: "check --base-url" sends a user hunting for a typo when the URL is right and the server
# is broken; each kind of failure points somewhere else.
#: where a user names the agent's endpoint: the option, else the environment's variable
AGENT_URL_HINT = f"--base-url / {OPENAI_URL_ENV}"
CAUSE_URL = f"likely cause: the URL is wrong or nothing serves it; check {AGENT_URL_HINT}"
CAUSE_SERVER = ("likely cause: the server is failing (it answers, so the URL is right); see the server's "
                "status or logs")
CAUSE_KEY = "likely cause: the key is refused; check the API key variable"
CAUSE_RATE = ("likely cause: the endpoint's rate limit; lower -n / --sab-concurrency or raise the limit "
              "(--sab-rate-limit-wait sets how long a call waits it out)")
CAUSE_SILENT = ("likely cause: the server accepts requests but does not answer them (hung or overloaded), "
                "or --sab-timeout is too short for this model")
CAUSE_GONE = ("likely cause: the server stopped accepting connections (it answered before, so the URL is "
              "right): down or restarting")
CAUSE_QUOTA = "likely cause: the account's quota or credit is used up (HTTP 429 insufficient_quota)"
CAUSE_CONTEXT = ("likely cause: the server's context window is too small for this prompt; start it with a larger "
                 "context (llama.cpp --n_ctx / -c, vLLM --max-model-len, Ollama num_ctx)")
CAUSE_FILTER = ("the provider's content filter refused the request or its answer (Azure: HTTP 400 content_filter "
                "or finish_reason content_filter); an outcome of the case, not a failure of the endpoint")
CAUSE_BODY = "likely cause: the URL serves something that is not an OpenAI-compatible API; check --base-url"


def status_cause(status: int) -> str:
    """The likely cause of an HTTP error status."""
    if status in (401, 403):
        return CAUSE_KEY
    if status == 429:
        return CAUSE_RATE
    if status in (404, 405):
        return CAUSE_URL
    if status >= 500:
        return CAUSE_SERVER
    return ""


_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(text: str | None) -> float | None:
    """Seconds in OpenAI's ``x-ratelimit-reset-*`` spelling (``"20ms"``, ``"1.5s"``, ``"6m0s"``) or a
    bare number of seconds; None when unreadable."""
    if not text:
        return None
    text = text.strip()
    with contextlib.suppress(ValueError):
        seconds = float(text)
        return seconds if math.isfinite(seconds) and seconds >= 0 else None
    parts = _DURATION.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text.replace(" ", ""):
        return None
    return sum(float(n) * _UNIT_S[u] for n, u in parts)


def rate_limit_wait(headers: Mapping[str, str]) -> float | None:
    """How long a rate-limited request should wait: ``retry-after-ms`` / ``Retry-After`` when sent,
    else the ``x-ratelimit-reset-*`` time of the limit that is used up (requests or tokens; either
    reset when the matching ``remaining`` header is absent)."""
    told = parse_retry_after(headers)
    if told is not None:
        return told
    waits = []
    for kind in ("requests", "tokens"):
        remaining = (headers.get(f"x-ratelimit-remaining-{kind}") or "").strip()
        if remaining in ("", "0"):
            reset = parse_duration(headers.get(f"x-ratelimit-reset-{kind}"))
            if reset is not None:
                waits.append(reset)
    return max(waits) if waits else None


@dataclass(frozen=True)
class Answer:
    text: str
    finish_reason: str | None
    prompt_tokens: int
    completion_tokens: int
    tool_calls: list[dict[str, Any]] | None = None  # [{"id", "name", "arguments"}] when the model called tools
    model: str | None = None  # the model the answer says answered it (its ``model`` field), where it says
    cached_tokens: int = 0  # of ``prompt_tokens``, those the provider read from its prompt cache (billed less)
    queued_s: float = field(default=0.0, compare=False)  # seconds the call waited for a free call slot (not cached)


def cached_prompt_tokens(usage: Mapping[str, Any]) -> int:
    """The prompt tokens an OpenAI-format usage says came from the provider's prompt cache
    (``prompt_tokens_details.cached_tokens``; 0 where it does not say)."""
    details = usage.get("prompt_tokens_details")
    return as_int(details.get("cached_tokens")) if isinstance(details, Mapping) else 0


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


class Secret:
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


def content_text(content: Any) -> str:
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


def is_completion(body: str) -> bool:
    """Whether ``body`` is a chat completion (its content may be empty: max_tokens=1 allows that)."""
    try:
        data = json.loads(body)
    except ValueError:
        return False
    choices = data.get("choices") if isinstance(data, dict) else None
    return isinstance(choices, list) and bool(choices) and isinstance(choices[0], dict)


def shorten(body: str, limit: int = 80) -> str:
    text = " ".join(body.split())
    if not text:
        return "empty body"
    return repr(text[:limit] + ("..." if len(text) > limit else ""))
def parse_tool_calls(raw: Any) -> list[dict[str, Any]] | None:
    """The answer's function calls as plain ``{"id", "name", "arguments"}`` dicts (arguments stay the
    JSON text the model wrote: the agent parses it, so a malformed one is the model's mistake)."""
    if not isinstance(raw, list):
        return None
    calls: list[dict[str, Any]] = []
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


def as_int(value: Any) -> int:
    return int(value) if isinstance(value, (int, float)) and math.isfinite(value) else 0


def parse_answer(body: str, max_tokens: int | None = None) -> Answer:
    """A chat completion's body as an ``Answer``; a body that cannot be one is a ``Failure`` saying
    whether the same request could get a better answer (retry) or not."""
    try:
        data = json.loads(body)
    except ValueError:
        raise Failure(f"invalid JSON in the answer body ({len(body)} bytes)", retryable=True) from None
    choices = data.get("choices") if isinstance(data, dict) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise Failure("answer body has no choices", retryable=True)
    choice = choices[0]
    message = choice.get("message")
    if not isinstance(message, dict):
        message = {}
    text = content_text(message.get("content"))
    finish = choice.get("finish_reason")
    check_filtered(finish)
    tool_calls = parse_tool_calls(message.get("tool_calls"))
    if not text.strip() and not tool_calls:
        if finish == "length":  # the same request would be cut again: retrying cannot help
            raise Failure(f"empty answer: the token limit (max_tokens={max_tokens}) was "
                           "used up before any text", retryable=False)
        raise Failure(f"empty answer (finish_reason={finish!r})", retryable=True)
    usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
    return Answer(text=text, finish_reason=finish if isinstance(finish, str) else None,
                   prompt_tokens=as_int(usage.get("prompt_tokens")),
                   completion_tokens=as_int(usage.get("completion_tokens")), tool_calls=tool_calls,
                   model=served_model(data), cached_tokens=cached_prompt_tokens(usage))


def served_model(body: Mapping[str, Any]) -> str | None:
    """The ``model`` field of an answer (or a streamed chunk): the model that says it answered, which a
    server may fill with another name than the one asked for (llama.cpp answers any name as its own)."""
    model = body.get("model")
    return (model.strip() or None) if isinstance(model, str) else None


def check_filtered(finish: Any) -> None:
    """A ``finish_reason`` of ``content_filter`` (Azure, and OpenAI's own moderation) ends the call:
    asking again gets the same refusal, and a cut or empty text is no answer of the model's."""
    if finish == "content_filter":
        raise Failure("the answer was withheld by the provider's content filter (finish_reason=content_filter)",
                      retryable=False, cause=CAUSE_FILTER, filtered=True)


def error_text(exc: Any, secret: str | None) -> str:
    """The server's error message (never the SDK's repr, which may echo request details)."""
    body = getattr(exc, "body", None)
    message = None
    if isinstance(body, dict):
        inner = body.get("error", body)
        message = inner.get("message") if isinstance(inner, dict) else None
    if not isinstance(message, str) or not message:
        message = getattr(exc, "message", None) or type(exc).__name__
    return scrub(message[:500], secret)


def error_code(exc: Any) -> str:
    """The ``code`` of an OpenAI-style error body (``"insufficient_quota"``, ...), or ``""``."""
    body = getattr(exc, "body", None)
    inner = body.get("error", body) if isinstance(body, dict) else None
    code = inner.get("code") if isinstance(inner, dict) else None
    return code if isinstance(code, str) else ""


def connection_reason(exc: BaseException, secret: str | None) -> str:
    """Why a connection failed, from the exception's cause, with the key scrubbed."""
    cause = exc.__cause__ or exc.__context__
    text = f"{type(cause).__name__}: {cause}" if cause is not None else str(exc)
    return scrub(text[:300], secret)
