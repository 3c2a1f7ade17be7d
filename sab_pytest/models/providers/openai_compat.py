"""The OpenAI-compatible provider (``models.provider.Provider``): the openai SDK client of one
endpoint, one attempt through it, and the one classification of the SDK's exceptions into a
``Failure``. Every provider of the registry that serves the chat-completions API (OpenAI, vLLM,
Ollama, llama.cpp, Gemini's and Anthropic's compatible endpoints, OpenRouter, Together, Groq,
DeepSeek) is this module with its own base URL, key and ``Capabilities``; Azure's is a subclass
(``providers.azure``) that builds another SDK client.

Why apart from the retry loop: an attempt is the part that knows the SDK (its client per process,
its exception types, its raw response); the loop above it knows only ``Answer`` and ``Failure``.
Calls stream (``stream.read_stream``): the timeout bounds the first token and each gap between
chunks, and a stream that is left (timeout, cancelled case, spent budget) is closed, which tells the
server to stop generating. A server that cannot stream (an error that names streaming, or a whole
JSON body for ``stream=True``) is noticed once per client and called without streaming from then on.
The endpoint check (``preflight``) classifies its failures with the same ``classify``.
"""

from __future__ import annotations

import atexit
import gc
import json
import os
import threading
from collections.abc import Callable, Mapping
from typing import Any

from sab_pytest.models.overflow import parse_overflow
from sab_pytest.models.provider import Capabilities, Endpoint
from sab_pytest.models.stream import read_stream
from sab_pytest.models.wire import (
    CAUSE_CONTEXT,
    CAUSE_FILTER,
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
    is_completion,
    parse_answer,
    parse_retry_after,
    rate_limit_wait,
    scrub,
    shorten,
    status_cause,
)


def classify(exc: BaseException, *, secret: str | None, timeout: float, answered: bool = False,
             sdk: Any = None) -> Failure:
    """The openai SDK's exception ``exc`` as a ``Failure``: its message (secrets scrubbed), whether
    retrying may help, how long the server asked to wait, whether it was a rate limit or a timeout,
    and the likely cause. ``answered``: the endpoint answered before (a refused connection is then
    a server going away, not a wrong URL). ``sdk``: the SDK module whose exceptions ``exc`` is one of
    (default ``openai``; the ``anthropic`` SDK's have the same names and shapes)."""
    import openai

    errors: Any = sdk or openai
    if isinstance(exc, errors.APIStatusError):
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
        if status == 400 and error_code(exc) == "content_filter":  # Azure's filter refused the prompt
            return Failure(message, retryable=False, cause=CAUSE_FILTER, kind="status", status=status, detail=detail,
                           filtered=True)
        overflow = parse_overflow(detail) if status in (400, 413, 422) else None
        if overflow is not None:  # the same request cannot fit: only a smaller one may (``RetryLoop``)
            return Failure(message, retryable=False, cause=CAUSE_CONTEXT, kind="status", status=status,
                           detail=detail, overflow=overflow)
        told = parse_retry_after(headers)
        if status == 429 or (status == 503 and told is not None):
            return Failure(message, retryable=True, retry_after=rate_limit_wait(headers), rate_limited=True,
                           cause=CAUSE_RATE, kind="status", status=status, detail=detail)
        return Failure(message, retryable=retryable, retry_after=told, cause=status_cause(status), kind="status",
                       status=status, detail=detail)
    if isinstance(exc, errors.APITimeoutError):  # before its base class, APIConnectionError
        return Failure(f"no answer within {timeout:.1f}s", retryable=True, timed_out=True, cause=CAUSE_SILENT,
                       kind="timeout")
    if isinstance(exc, errors.APIConnectionError):
        reason = connection_reason(exc, secret)
        return Failure(f"connection failed: {reason}", retryable=True, cause=CAUSE_GONE if answered else CAUSE_URL,
                       kind="connection", detail=reason)
    detail = f"{type(exc).__name__}: {scrub(str(exc), secret)}"
    overflow = parse_overflow(detail) if isinstance(exc, errors.APIError) else None  # an error event in a stream
    if overflow is not None:
        return Failure(detail, retryable=False, cause=CAUSE_CONTEXT, kind="sdk", overflow=overflow)
    return Failure(detail, retryable=False, kind="sdk")


class OpenAICompatProvider:
    """The SDK client of one endpoint, shared by threads: created lazily once per process under a
    lock (re-created after a fork: connections must not be shared), with the SDK's own retries off
    (the retry loop owns them, see the package docstring)."""

    kind = "openai"
    needs_key = True

    def __init__(self, base_url: str | None, key: Secret, timeout: float,
                 capabilities: Capabilities | None = None) -> None:
        self.capabilities = capabilities or Capabilities()
        self.base_url = base_url
        self.key = key
        self.timeout = timeout
        self.answered = False  # some attempt got an answer (a refused connection then is no typo)
        self.streams: bool | None = None  # whether the server streams (None: not known yet)
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
                    self._client = self._new_client()
                    self._client_pid = pid
        return self._client

    def _new_client(self) -> Any:
        """A new SDK client for this endpoint (a subclass builds its own kind)."""
        return _sdk_client(self.base_url, self.key.reveal(), self.timeout)

    def probe(self, params: dict[str, Any], timeout: float) -> str:
        """One request without streaming, its failure classified (the endpoint check)."""
        import openai

        try:
            return self.send(params, timeout)
        except openai.OpenAIError as exc:
            raise classify(exc, secret=self.key.reveal(), timeout=timeout) from None

    def list_models(self, timeout: float) -> list[str] | None:
        """The ids ``GET /models`` lists; None when the endpoint lists none or does not answer it (not
        every OpenAI-compatible server does): no list, nothing to hold a model to."""
        import openai

        try:
            listing = self.sdk().models.list(timeout=timeout)
            return [str(model.id) for model in listing.data] or None
        except (openai.OpenAIError, AttributeError, TypeError, ValueError):
            return None

    def send(self, params: dict[str, Any], timeout: float) -> str:
        """One request; the raw body of the answer. The SDK's exceptions propagate unclassified
        (the endpoint check reads them its own way)."""
        raw = self.sdk().chat.completions.with_raw_response.create(**params, timeout=timeout)
        if self.observe is not None:
            self.observe(raw.headers)
        return str(raw.text)

    def attempt(self, params: dict[str, Any], timeout: float, each: Callable[[], None] | None = None) -> Answer:
        """One attempt, ``timeout`` seconds at most for the first token and between two chunks: the
        answer, or a ``Failure`` that says whether to retry and why it failed. ``each`` runs at every
        sign of life from the server (see ``stream.read_stream``); it may raise to leave the stream."""
        import openai

        try:
            if self.streams is not False:
                answer = self._streamed(params, timeout, each)
                if answer is not None:
                    return answer
            body = self.send(params, timeout)
        except openai.OpenAIError as exc:
            if self.observe is not None and isinstance(exc, openai.APIStatusError):
                self.observe(exc.response.headers)
            raise classify(exc, secret=self.key.reveal(), timeout=timeout, answered=self.answered) from None
        except Exception as exc:  # the HTTP library's own error while a stream's body is read
            sdk_error = as_sdk_error(exc)
            if sdk_error is None:
                raise
            raise classify(sdk_error, secret=self.key.reveal(), timeout=timeout, answered=self.answered) from None
        if each is not None:
            each()
        return parse_answer(body, params.get("max_tokens"))

    def _streamed(self, params: dict[str, Any], timeout: float, each: Callable[[], None] | None) -> Answer | None:
        """The streamed answer; None when the server turned out not to stream (``streams`` is then
        False and the caller asks again without streaming)."""
        import openai

        body = {**params, "stream": True, "stream_options": {"include_usage": True}}
        try:
            # The SDK's own request (URL, headers, timeout, errors, the events' decoding, an error
            # event raised), its chunks left as the JSON objects they are: parsing each into the SDK's
            # typed chunk only to turn it back into a dict cost more CPU than the rest of a call. The
            # key goes as the bearer token alone, as the SDK's chat resource sends it.
            stream = self.sdk().post("/chat/completions", body=body, cast_to=object, stream=True,
                                     stream_cls=openai.Stream[object],
                                     options={"timeout": timeout, "security": {"bearer_auth": True}})
        except openai.APIStatusError as exc:
            if self.streams is None and exc.status_code in (400, 404, 415, 422, 501) \
                    and "stream" in error_text(exc, None).lower():
                self.streams = False
                return None
            raise
        if self.observe is not None:
            self.observe(stream.response.headers)
        # closed however the reading ends: the server stops generating for us. Headers alone are no
        # sign of life (a server may send them for a request it has only queued); a chunk is
        with stream:
            if "event-stream" not in str(stream.response.headers.get("content-type", "")):
                body = stream.response.read().decode("utf-8", "replace")
                if each is not None:
                    each()
                if is_completion(body):  # the server ignored stream=True: fine, just not streamed
                    self.streams = False
                return parse_answer(body, params.get("max_tokens"))
            try:
                answer = read_stream(stream, params, each)  # may raise StreamCut
            except json.JSONDecodeError as exc:  # an event whose data is not JSON: garbage, as a whole body can be
                raise Failure(f"invalid JSON in a streamed chunk: {shorten(exc.doc)}", retryable=True) from None
            if self.streams is None:  # not over a False another thread set after a cut stream
                self.streams = True
            return answer


#: (process id, whether the SDK's default endpoint) -> the first SDK client built in that process;
#: every later client is its copy (``with_options``) for its own endpoint, key and timeout, sharing
#: its HTTP connection pool (which keeps connections per host). A new client loads the CA bundle and
#: builds a connection pool, about 0.15 s each, and a run builds one per role (agent, judges, guard,
#: vision) in every worker, on one endpoint or several. The default endpoint (no base URL: the SDK
#: reads its environment) has a first client of its own, so that no copy inherits another's URL.
#: Emptied at exit, while the HTTP library is still whole: a client freed once the interpreter has
#: begun tearing modules down fails in its ``__del__`` and says so on standard error.
_FIRST_CLIENTS: dict[tuple[int, bool], Any] = {}
_FIRST_CLIENTS_LOCK = threading.Lock()
atexit.register(_FIRST_CLIENTS.clear)


def _sdk_client(base_url: str | None, api_key: str | None, timeout: float) -> Any:
    """An ``openai.OpenAI`` client for ``base_url`` (None: the SDK's default) with its own key and
    timeout; the SDK's retries are off (the retry loop owns them)."""
    import openai

    options: dict[str, Any] = {"api_key": api_key, "max_retries": 0, "timeout": timeout}
    endpoint: dict[str, Any] = {"base_url": base_url} if base_url else {}
    key = (os.getpid(), not base_url)
    with _FIRST_CLIENTS_LOCK:
        first = _FIRST_CLIENTS.get(key)
        if first is None:
            first = _FIRST_CLIENTS[key] = openai.OpenAI(**options, **endpoint)
            # The SDK's types (some 100,000 objects) live as long as the process: frozen out of the
            # cyclic garbage collector's sight, no later full collection walks them again (0.1 s
            # each; pytest makes two as it exits). Refcounting still frees what they let go.
            gc.freeze()
            return first
    return first.with_options(**options, **endpoint)


def as_sdk_error(exc: Exception, sdk: Any = None) -> Exception | None:
    """The SDK's error for an error of its HTTP library (``httpx`` or ``httpx2``) raised outside the
    SDK's own handling (reading a stream's body): a timeout or a broken connection, so that it is
    retried and classified like any other; None for anything else (a bug: it propagates). ``sdk``:
    as ``classify``'s. Public: every provider on an SDK of this family (Anthropic's is built the same
    way) reads its streams over the same HTTP libraries and meets the same errors."""
    import openai

    errors: Any = sdk or openai
    if type(exc).__module__.split(".")[0] not in ("httpx", "httpx2"):
        return None
    try:
        request = exc.request  # type: ignore[attr-defined]
    except (AttributeError, RuntimeError):  # an error raised before any request was made
        return None
    if "Timeout" in type(exc).__name__:
        return errors.APITimeoutError(request=request)
    return errors.APIConnectionError(message=f"connection lost while reading the answer: {exc}", request=request)


def make(endpoint: Endpoint, capabilities: Capabilities) -> OpenAICompatProvider:
    """The provider of the registry's OpenAI-compatible lines."""
    return OpenAICompatProvider(endpoint.base_url, endpoint.key, endpoint.timeout, capabilities)
