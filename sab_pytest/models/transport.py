"""The transport of model calls: the openai SDK client of one endpoint, one attempt through it, and
the one classification of the SDK's exceptions into a ``Failure``.

Why apart from the retry loop: an attempt is the part that knows the SDK (its client per process,
its exception types, its raw response); the loop above it knows only ``Answer`` and ``Failure``.
A streamed call (tokens as they come, a timeout per gap between tokens) is another ``attempt`` here,
with the same ``Failure`` out; nothing above changes. The endpoint check (``preflight``) classifies
its failures with the same ``classify``.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping
from typing import Any

from sab_pytest.models.wire import (
    CAUSE_GONE,
    CAUSE_QUOTA,
    CAUSE_RATE,
    CAUSE_SILENT,
    CAUSE_URL,
    RETRYABLE_STATUS,
    Answer,
    Failure,
    Secret,
    connection_reason,
    error_code,
    error_text,
    parse_answer,
    parse_retry_after,
    rate_limit_wait,
    scrub,
    status_cause,
)


def classify(exc: BaseException, *, secret: str | None, timeout: float, answered: bool = False) -> Failure:
    """The openai SDK's exception ``exc`` as a ``Failure``: its message (secrets scrubbed), whether
    retrying may help, how long the server asked to wait, whether it was a rate limit or a timeout,
    and the likely cause. ``answered``: the endpoint answered before (a refused connection is then
    a server going away, not a wrong URL)."""
    import openai

    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        headers = exc.response.headers
        detail = error_text(exc, secret)
        message = f"HTTP {status}: {detail}"
        should = (headers.get("x-should-retry") or "").lower()
        retryable = status in RETRYABLE_STATUS or status >= 500
        if should in ("true", "false"):
            retryable = should == "true"
        if status == 429 and error_code(exc) == "insufficient_quota":  # billing: waiting cannot help
            return Failure(message, retryable=False, cause=CAUSE_QUOTA, kind="status", status=status, detail=detail)
        told = parse_retry_after(headers)
        if status == 429 or (status == 503 and told is not None):
            return Failure(message, retryable=True, retry_after=rate_limit_wait(headers), rate_limited=True,
                           cause=CAUSE_RATE, kind="status", status=status, detail=detail)
        return Failure(message, retryable=retryable, retry_after=told, cause=status_cause(status), kind="status",
                       status=status, detail=detail)
    if isinstance(exc, openai.APITimeoutError):  # before its base class, APIConnectionError
        return Failure(f"no answer within {timeout:.1f}s", retryable=True, timed_out=True, cause=CAUSE_SILENT,
                       kind="timeout")
    if isinstance(exc, openai.APIConnectionError):
        reason = connection_reason(exc, secret)
        return Failure(f"connection failed: {reason}", retryable=True, cause=CAUSE_GONE if answered else CAUSE_URL,
                       kind="connection", detail=reason)
    detail = f"{type(exc).__name__}: {scrub(str(exc), secret)}"
    return Failure(detail, retryable=False, kind="sdk")


class Transport:
    """The SDK client of one endpoint, shared by threads: created lazily once per process under a
    lock (re-created after a fork: connections must not be shared), with the SDK's own retries off
    (the retry loop owns them, see the package docstring)."""

    def __init__(self, base_url: str | None, key: Secret, timeout: float) -> None:
        self.base_url = base_url
        self.key = key
        self.timeout = timeout
        self.answered = False  # some attempt got an answer (a refused connection then is no typo)
        # hears the headers of every answer and HTTP error (the rate-limit pacing, ``models.pacing``)
        self.observe: Callable[[Mapping[str, str]], None] | None = None
        self._client: Any = None
        self._client_pid: int | None = None
        self._lock = threading.Lock()

    def sdk(self) -> Any:
        """The process's ``openai.OpenAI`` client."""
        pid = os.getpid()
        if self._client is None or self._client_pid != pid:
            with self._lock:
                if self._client is None or self._client_pid != pid:
                    import openai

                    kwargs: dict[str, Any] = {"api_key": self.key.reveal(), "max_retries": 0, "timeout": self.timeout}
                    if self.base_url:
                        kwargs["base_url"] = self.base_url
                    self._client = openai.OpenAI(**kwargs)
                    self._client_pid = pid
        return self._client

    def send(self, params: dict[str, Any], timeout: float) -> str:
        """One request; the raw body of the answer. The SDK's exceptions propagate unclassified
        (the endpoint check reads them its own way)."""
        raw = self.sdk().chat.completions.with_raw_response.create(**params, timeout=timeout)
        if self.observe is not None:
            self.observe(raw.headers)
        return str(raw.text)

    def attempt(self, params: dict[str, Any], timeout: float) -> Answer:
        """One attempt within ``timeout`` seconds: the answer, or a ``Failure`` that says whether to
        retry and why it failed."""
        import openai

        try:
            body = self.send(params, timeout)
        except openai.OpenAIError as exc:
            if self.observe is not None and isinstance(exc, openai.APIStatusError):
                self.observe(exc.response.headers)
            raise classify(exc, secret=self.key.reveal(), timeout=timeout, answered=self.answered) from None
        return parse_answer(body, params.get("max_tokens"))
