"""Anthropic's Messages API (``--model anthropic/<model>``) through the ``anthropic`` SDK, an optional
extra (``pip install 'sab-pytest[anthropic]'``); the key in ``ANTHROPIC_API_KEY``, sent as the SDK
sends it (``x-api-key``; recent versions: a Bearer token).

Why natively and not through Anthropic's OpenAI-compatible endpoint: that one is meant for testing,
ignores some parameters and does not report Anthropic's rate limits. This module is also the proof
of the provider interface (``models.provider``): requests cross it in OpenAI's chat shape and are
translated here both ways (system messages to ``system``, ``image_url`` parts to image blocks,
function tools and tool calls to ``tool_use`` / ``tool_result`` blocks); answers come back as the
same ``Answer``; failures are classified by the one ``classify`` (the two SDKs' exceptions share
their names and shapes); the rate-limit headers (``anthropic-ratelimit-*``) are handed to the pacing
under OpenAI's names. ``--sab-batch`` sends to Anthropic's Message Batches
(``batching.anthropic_batches``), which asks the provider for ``to_messages`` and ``to_answer``
(``batch_params``, ``batch_answer``): a batched answer is the very ``Answer`` built for a live one.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
from collections.abc import Callable, Mapping
from typing import Any

from sab_pytest.errors import UsageError
from sab_pytest.models.provider import Capabilities, Endpoint
from sab_pytest.models.providers.openai_compat import as_sdk_error, classify
from sab_pytest.models.stream import StreamCut
from sab_pytest.models.wire import Answer, Failure, Secret, as_int, check_filtered, content_text, served_model

DEFAULT_MAX_TOKENS = 4096  # the Messages API requires max_tokens; a role that sets none gets this
#: Anthropic's stop reasons in OpenAI's words (``refusal``: its safety classifiers stopped the answer)
FINISH = {"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length", "tool_use": "tool_calls",
          "refusal": "content_filter", "pause_turn": "stop"}


def _sdk() -> Any:
    try:
        import anthropic
    except ImportError:
        raise UsageError("anthropic/<model> needs the anthropic SDK: pip install 'sab-pytest[anthropic]'") from None
    return anthropic


# -- requests: OpenAI's chat shape -> a Messages API body ----------------------------------------

def _image(url: str) -> dict[str, Any]:
    head, _, data = url.partition(",")
    if head.startswith("data:") and ";base64" in head:
        media = head[5:].split(";", 1)[0]
        return {"type": "image", "source": {"type": "base64", "media_type": media, "data": data}}
    return {"type": "image", "source": {"type": "url", "url": url}}


def _blocks(content: Any) -> list[dict[str, Any]]:
    """A message's content (a string or typed parts) as Anthropic content blocks."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    blocks = []
    for part in content if isinstance(content, list) else []:
        if isinstance(part, dict) and part.get("type") == "text" and part.get("text"):
            blocks.append({"type": "text", "text": part["text"]})
        elif isinstance(part, dict) and part.get("type") == "image_url":
            blocks.append(_image(str((part.get("image_url") or {}).get("url", ""))))
    return blocks


def _arguments(text: Any) -> Any:
    with contextlib.suppress(TypeError, ValueError):
        return json.loads(text) if isinstance(text, str) else dict(text or {})
    return {"raw": text}  # the model's malformed arguments, handed back as it wrote them


def to_messages(params: Mapping[str, Any]) -> dict[str, Any]:
    """An OpenAI chat request as a Messages API body (consecutive turns of one role merged)."""
    system: list[str] = []
    turns: list[dict[str, Any]] = []
    for message in params.get("messages") or []:
        role = message.get("role")
        if role in ("system", "developer"):
            system.append(content_text(message.get("content")))
            continue
        blocks = _blocks(message.get("content"))
        if role == "tool":
            role, blocks = "user", [{"type": "tool_result", "tool_use_id": str(message.get("tool_call_id")),
                                     "content": content_text(message.get("content"))}]
        for call in message.get("tool_calls") or []:
            function = call.get("function") or {}
            blocks.append({"type": "tool_use", "id": call.get("id"), "name": function.get("name"),
                           "input": _arguments(function.get("arguments"))})
        role = "assistant" if role == "assistant" else "user"
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})
    body: dict[str, Any] = {"model": params["model"], "messages": turns,
                            "max_tokens": int(params.get("max_tokens") or DEFAULT_MAX_TOKENS)}
    if system:
        body["system"] = "\n\n".join(system)
    for key in ("temperature", "top_p"):
        if params.get(key) is not None:
            body[key] = params[key]
    if params.get("stop"):
        body["stop_sequences"] = [params["stop"]] if isinstance(params["stop"], str) else list(params["stop"])
    if params.get("tools"):
        body["tools"] = [{"name": t["function"]["name"], "description": t["function"].get("description", ""),
                          "input_schema": t["function"].get("parameters") or {"type": "object"}}
                         for t in params["tools"] if isinstance(t, dict) and "function" in t]
        choice = params.get("tool_choice")
        if choice in ("auto", "required", "none"):
            body["tool_choice"] = {"type": {"required": "any"}.get(choice, choice)}
        elif isinstance(choice, dict) and choice.get("function"):
            body["tool_choice"] = {"type": "tool", "name": choice["function"].get("name")}
    return body


# -- answers: a Message (whole or streamed) -> ``Answer`` -----------------------------------------

def to_answer(message: Mapping[str, Any], max_tokens: Any = None) -> Answer:
    """A Messages API answer as an ``Answer``; a refusal or an empty answer is a ``Failure``."""
    blocks = [b for b in message.get("content") or [] if isinstance(b, dict)]
    text = "".join(str(b.get("text") or "") for b in blocks if b.get("type") == "text")
    calls = [{"id": str(b.get("id") or f"call_{i}"), "name": str(b.get("name")),
              "arguments": b["input"] if isinstance(b.get("input"), str) else json.dumps(b.get("input") or {})}
             for i, b in enumerate(blocks) if b.get("type") == "tool_use"] or None
    stop = message.get("stop_reason")
    finish = FINISH.get(stop, stop) if isinstance(stop, str) else None
    check_filtered(finish)
    if not text.strip() and not calls:
        if finish == "length":
            raise Failure(f"empty answer: the token limit (max_tokens={max_tokens}) was used up before any text",
                          retryable=False)
        raise Failure(f"empty answer (stop_reason={stop!r})", retryable=True)
    usage: Mapping[str, Any] = message["usage"] if isinstance(message.get("usage"), dict) else {}
    prompt: int = sum(as_int(usage.get(k)) for k in ("input_tokens", "cache_read_input_tokens",
                                                 "cache_creation_input_tokens"))
    return Answer(text=text, finish_reason=finish, prompt_tokens=prompt,
                  completion_tokens=as_int(usage.get("output_tokens")), tool_calls=calls, model=served_model(message),
                  cached_tokens=as_int(usage.get("cache_read_input_tokens")))


def to_completion(message: Mapping[str, Any]) -> str:
    """A Messages API answer as an OpenAI chat completion body (what the endpoint check reads; an
    empty text is still an answer there: ``max_tokens=1`` allows it)."""
    text = "".join(str(b.get("text") or "") for b in message.get("content") or [] if isinstance(b, dict))
    return json.dumps({"object": "chat.completion", "model": message.get("model"), "choices": [
        {"index": 0, "finish_reason": message.get("stop_reason"), "message": {"role": "assistant", "content": text}}]})


class Events:
    """What the events of one streamed Message add up to: the message of ``message_start``, its
    blocks as they start and grow (text deltas, tool input as JSON fragments), the stop reason and
    usage of ``message_delta``; ``done`` once ``message_stop`` came."""

    def __init__(self) -> None:
        self.message: dict[str, Any] = {"content": [], "usage": {}}
        self.json: dict[int, str] = {}
        self.done = False

    def add(self, event: Mapping[str, Any]) -> None:
        kind = event.get("type")
        if kind == "message_start":
            self.message = {**event.get("message", {}), "content": []}
        elif kind == "content_block_start":
            self.message["content"].append(dict(event.get("content_block") or {}))
        elif kind == "content_block_delta":
            delta, block = event.get("delta") or {}, self.message["content"][-1]
            if delta.get("type") == "text_delta":
                block["text"] = block.get("text", "") + delta.get("text", "")
            elif delta.get("type") == "input_json_delta":
                index = as_int(event.get("index"))
                self.json[index] = self.json.get(index, "") + delta.get("partial_json", "")
                block["input"] = self.json[index]
        elif kind == "message_delta":
            self.message.update({k: v for k, v in (event.get("delta") or {}).items() if v is not None})
            usage = {k: v for k, v in (event.get("usage") or {}).items() if v is not None}  # absent: None
            self.message["usage"] = {**(self.message.get("usage") or {}), **usage}
        elif kind == "message_stop":
            self.done = True


def pacing_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """Anthropic's rate-limit headers under OpenAI's names (``x-ratelimit-*``: what the pacing reads),
    the reset's RFC 3339 time as the seconds left; the original headers kept."""
    out = dict(headers.items())
    now = datetime.datetime.now(datetime.timezone.utc)
    for kind in ("requests", "tokens"):
        for field in ("limit", "remaining"):
            value = headers.get(f"anthropic-ratelimit-{kind}-{field}")
            if value is not None:
                out[f"x-ratelimit-{field}-{kind}"] = value
        with contextlib.suppress(TypeError, ValueError):
            reset = datetime.datetime.fromisoformat(str(headers.get(f"anthropic-ratelimit-{kind}-reset")))
            out[f"x-ratelimit-reset-{kind}"] = f"{max(0.0, (reset - now).total_seconds()):.3f}s"
    return out


class AnthropicProvider:
    """The provider on Anthropic's Messages API (see the module docstring)."""

    kind = "anthropic"
    needs_key = True

    def __init__(self, endpoint: Endpoint, capabilities: Capabilities) -> None:
        self.sdk = _sdk()
        self.capabilities = capabilities
        self.base_url = endpoint.base_url
        self.key: Secret = endpoint.key
        self.timeout = endpoint.timeout
        self.answered = False
        self.streams: bool | None = None
        self.observe: Callable[[Mapping[str, str]], None] | None = None
        self._client: Any = None
        self._pid: int | None = None

    def client(self) -> Any:
        """The process's SDK client (thread-safe; a race builds one too many, harmlessly), built anew
        after a fork: connections must not be shared between processes."""
        if self._client is None or self._pid != os.getpid():
            endpoint = {"base_url": self.base_url} if self.base_url else {}
            self._client = self.sdk.Anthropic(api_key=self.key.reveal(), max_retries=0, timeout=self.timeout,
                                              **endpoint)
            self._pid = os.getpid()
        return self._client

    def _heard(self, headers: Mapping[str, str]) -> None:
        if self.observe is not None:
            self.observe(pacing_headers(headers))

    def _failure(self, exc: Exception, timeout: float, answered: bool) -> Failure:
        if isinstance(exc, self.sdk.APIStatusError):
            self._heard(exc.response.headers)
        return classify(exc, secret=self.key.reveal(), timeout=timeout, answered=answered, sdk=self.sdk)

    def _arguments(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """The SDK's keyword arguments for ``params``: a body key its ``create`` does not name (SDK
        versions differ: ``temperature`` and ``top_p`` left the signature of recent ones) goes in
        ``extra_body``, so the request is the same whichever version is installed."""
        import inspect

        named = set(inspect.signature(self.client().messages.create).parameters)
        body = to_messages(params)
        extra = {key: body.pop(key) for key in list(body) if key not in named}
        return {**body, "extra_body": extra} if extra else body

    def _message(self, params: dict[str, Any], timeout: float) -> dict[str, Any]:
        """One request without streaming: the Message, as a dict."""
        raw = self.client().messages.with_raw_response.create(**self._arguments(params), timeout=timeout)
        self._heard(raw.headers)
        message: dict[str, Any] = raw.parse().model_dump()
        return message

    def attempt(self, params: dict[str, Any], timeout: float, each: Callable[[], None] | None = None) -> Answer:
        try:
            if self.streams is False:
                message = self._message(params, timeout)
                if each is not None:
                    each()
                return to_answer(message, params.get("max_tokens"))
            stream = self.client().messages.create(**self._arguments(params), stream=True, timeout=timeout)
            self._heard(stream.response.headers)
            events = Events()
            with stream:
                for event in stream:
                    events.add(event.model_dump())
                    if each is not None:
                        each()
        except self.sdk.AnthropicError as exc:
            raise self._failure(exc, timeout, self.answered) from None
        except Exception as exc:  # the HTTP library's own error while the stream is read
            sdk_error = as_sdk_error(exc, self.sdk)
            if sdk_error is None:
                raise
            raise self._failure(sdk_error, timeout, self.answered) from None
        if not events.done:
            raise StreamCut()
        if self.streams is None:
            self.streams = True
        return to_answer(events.message, params.get("max_tokens"))

    def probe(self, params: dict[str, Any], timeout: float) -> str:
        try:
            return to_completion(self._message(params, timeout))
        except self.sdk.AnthropicError as exc:
            raise self._failure(exc, timeout, False) from None

    def list_models(self, timeout: float) -> list[str] | None:
        try:
            return [str(model.id) for model in self.client().models.list(timeout=timeout).data]
        except (self.sdk.AnthropicError, AttributeError, TypeError):
            return None

    # -- Message Batches (``batching.anthropic_batches``): the live call's translation, both ways ----
    def batch_params(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """A batched request's ``params``: the body a live call sends, without streaming."""
        return to_messages(params)

    def batch_answer(self, message: Mapping[str, Any], max_tokens: Any = None) -> Answer:
        """A batched ``succeeded`` message as the ``Answer`` a live call builds of the same message."""
        return to_answer(message, max_tokens)


def make(endpoint: Endpoint, capabilities: Capabilities) -> AnthropicProvider:
    """The provider of the registry's ``anthropic`` line."""
    return AnthropicProvider(endpoint, capabilities)
