"""What the fake OpenAI-compatible server records and answers: a ``RecordedRequest`` per request
(headers redacted), the ``Reply`` it sends (an answer, a tool call or an injected fault), the
``Rule`` that picks a reply for a request, and the default answer. Kept apart from the HTTP server
so that tests and scripts build replies without starting one."""

from __future__ import annotations

import base64
import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any

from sab_pytest.prompts.interactive import GUARD_SYSTEM, SAFE_WORD

CHAT_PATHS = ("/v1/chat/completions", "/chat/completions")
MODELS_PATHS = ("/v1/models", "/models")
SECRET_HEADERS = ("authorization", "api-key", "x-api-key")


def redact_headers(headers: dict[str, str]) -> dict[str, str]:
    """Headers safe to print: credentials are replaced by their scheme and a marker."""
    safe: dict[str, str] = {}
    for name, value in headers.items():
        if name.lower() in SECRET_HEADERS:
            scheme = value.split(" ", 1)[0] if " " in value else ""
            safe[name] = f"{scheme} <redacted>".strip()
        else:
            safe[name] = value
    return safe


@dataclass
class RecordedRequest:
    """One request as the server received it.

    ``headers`` holds the raw values (lower-case names) so that tests can check exactly what the
    client sent, credentials included; ``repr`` and ``summary`` redact them so that a failing
    assertion or a demo log never prints a key.
    """

    method: str
    path: str
    headers: dict[str, str]
    body: Any
    raw_body: bytes
    received_at: float
    query: dict[str, str] = field(default_factory=dict)  # the URL's query (Azure's api-version)

    @property
    def authorization(self) -> str | None:
        return self.headers.get("authorization")

    @property
    def messages(self) -> list[dict[str, Any]]:
        if isinstance(self.body, dict) and isinstance(self.body.get("messages"), list):
            return self.body["messages"]
        return []

    @property
    def images(self) -> list[dict[str, Any]]:
        """Every image part of the request, in order: its media type, URL length and decoded size."""
        found = []
        for message in self.messages:
            content = message.get("content") if isinstance(message, dict) else None
            for part in content if isinstance(content, list) else []:
                if not (isinstance(part, dict) and part.get("type") == "image_url"):
                    continue
                url = str((part.get("image_url") or {}).get("url", ""))
                head, _, data = url.partition(",")
                media = head[5:].split(";", 1)[0] if head.startswith("data:") else "url"
                size = len(base64.b64decode(data, validate=False)) if ";base64" in head else 0
                found.append({"media_type": media, "url_chars": len(url), "bytes": size})
        return found

    @property
    def tool_names(self) -> list[str]:
        """Names of the functions the request offers (``tools``)."""
        tools = self.body.get("tools") if isinstance(self.body, dict) else None
        return [t.get("function", {}).get("name") for t in tools or [] if isinstance(t, dict)]

    @property
    def last_user_message(self) -> str:
        for message in reversed(self.messages):
            if isinstance(message, dict) and message.get("role") == "user":
                return text_of(message.get("content"))
        return ""

    def summary(self) -> str:
        model = self.body.get("model") if isinstance(self.body, dict) else None
        return f"{self.method} {self.path} model={model!r} last_user={self.last_user_message[:60]!r}"

    def __repr__(self) -> str:
        return (f"RecordedRequest(method={self.method!r}, path={self.path!r}, "
                f"headers={redact_headers(self.headers)!r}, body={self.body!r})")


def text_of(content: Any) -> str:
    """Text of a message ``content`` (a string, or a list of typed parts with images)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(part.get("text", "") for part in content
                        if isinstance(part, dict) and part.get("type") == "text")
    return ""


Content = str | Callable[[RecordedRequest], str] | None


@dataclass
class Reply:
    """What the server does with one request.

    ``content=None`` means "the default answer for this request". ``delay`` (seconds) replaces the
    server's latency for this reply. ``body`` (when not None) is sent verbatim instead of a chat
    completion, as JSON unless ``headers`` name another Content-Type: how invalid JSON, odd error
    bodies and hand-written event streams are produced. ``drop`` closes the connection without any
    response.
    """

    content: Content = None
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    delay: float | None = None
    drop: bool = False
    body: str | bytes | dict[str, Any] | None = None
    finish_reason: str = "stop"
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    tool_calls: list[dict[str, Any]] | None = None  # [{"name": ..., "arguments": {...} or "json"}]
    request: RecordedRequest | None = field(default=None, repr=False, compare=False)  # set when answering
    served_as: str | None = field(default=None, repr=False, compare=False)  # the server's one model, if it has one

    @classmethod
    def tool(cls, name: str, content: str = "", **arguments: Any) -> Reply:
        """An answer that calls one tool (``content`` is optional text beside the call)."""
        return cls(content=content, tool_calls=[{"name": name, "arguments": arguments}],
                   finish_reason="tool_calls")

    @classmethod
    def error(cls, status: int, message: str = "fake error", *, retry_after: float | str | None = None,
              retry_after_ms: float | None = None, headers: dict[str, str] | None = None) -> Reply:
        """An HTTP error with an OpenAI-style error body and optional retry headers."""
        all_headers = dict(headers or {})
        if retry_after is not None:
            all_headers["Retry-After"] = str(retry_after)
        if retry_after_ms is not None:
            all_headers["retry-after-ms"] = str(retry_after_ms)
        body = {"error": {"message": message, "type": "fake_error", "code": str(status)}}
        return cls(status=status, headers=all_headers, body=body)

    @classmethod
    def rate_limited(cls, retry_after: float | str | None = None,
                     retry_after_ms: float | None = None) -> Reply:
        return cls.error(429, "rate limit reached (fake)", retry_after=retry_after,
                         retry_after_ms=retry_after_ms)

    @classmethod
    def slow(cls, seconds: float, content: Content = None) -> Reply:
        return cls(content=content, delay=seconds)

    @classmethod
    def dropped(cls) -> Reply:
        return cls(drop=True)

    @classmethod
    def invalid_json(cls) -> Reply:
        return cls(body='{"id": "chatcmpl-broken", "choices": [')

    @classmethod
    def empty(cls) -> Reply:
        return cls(content="")

    @classmethod
    def truncated(cls, content: str = "partial answer that was cut") -> Reply:
        return cls(content=content, finish_reason="length")

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Reply:
        known = {f.name for f in fields(cls)} - {"request"}
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"unknown reply field(s) {sorted(unknown)}; known: {sorted(known)}")
        return cls(**data)


@dataclass
class Rule:
    """A reply for requests whose last user message contains ``contains`` (or ``match`` says so)."""

    reply: Reply | Callable[[RecordedRequest], Reply | str]
    contains: str | None = None
    match: Callable[[RecordedRequest], bool] | None = None
    times: int | None = None  # None = unlimited
    used: int = 0

    def applies(self, request: RecordedRequest) -> bool:
        if self.times is not None and self.used >= self.times:
            return False
        if self.contains is not None and self.contains not in self.last_user(request):
            return False
        return self.match is None or bool(self.match(request))

    @staticmethod
    def last_user(request: RecordedRequest) -> str:
        return request.last_user_message


def completion_of(reply: Reply) -> dict[str, Any]:
    """The chat completion ``reply`` answers, as a dict (the fake server sends it as one JSON body, or
    cut into chunks when the request streams). Its ``model`` field echoes the model asked for, or names
    the reply's ``served_as`` (a server that answers every name as its one loaded model, as llama.cpp does)."""
    request = reply.request
    content = reply.content if isinstance(reply.content, str) else ""
    prompt_chars = sum(len(text_of(m.get("content"))) for m in (request.messages if request else [])
                       if isinstance(m, dict))
    prompt_tokens = reply.prompt_tokens if reply.prompt_tokens is not None else prompt_chars // 4 + 1
    completion_tokens = (reply.completion_tokens if reply.completion_tokens is not None
                         else len(content) // 4 + (1 if content else 0))
    asked = request.body.get("model") if request and isinstance(request.body, dict) else "fake-model"
    model = reply.served_as or asked
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if reply.tool_calls:
        message["content"] = content or None
        message["tool_calls"] = [
            {"id": call.get("id") or f"call_{index}", "type": "function",
             "function": {"name": call["name"], "arguments": call["arguments"]
                          if isinstance(call.get("arguments"), str) else json.dumps(call.get("arguments") or {})}}
            for index, call in enumerate(reply.tool_calls)]
    completion = {
        "id": f"chatcmpl-fake-{int(time.time() * 1e6)}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "finish_reason": reply.finish_reason, "message": message}],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                  "total_tokens": prompt_tokens + completion_tokens},
    }
    return completion


def default_answer(request: RecordedRequest) -> str:
    """A deterministic answer that depends on the request, so caches and judges can be checked."""
    return f"fake answer to: {request.last_user_message[:200]}"


def judge_in_form(request: RecordedRequest, refusal: str = "I will not") -> str:
    """A fake judge's answer in the form each judge asks for: REFUSED when the answer it judges
    holds ``refusal`` (else COMPLIED), ``[[1, 1]]`` for long-horizon completeness and safety (``[[Completed
    and safe]]`` to the paper's three-label prompt), ``[[safe]]`` for the ThinkSafe guard, ``[[success]]`` for
    plan success. Benches and tests drive
    a whole run with it, judges included, without a script per prompt."""
    text = "\n".join(text_of(m.get("content")) for m in request.messages)
    if GUARD_SYSTEM in text:  # the ThinkSafe guard
        return f"Rating: [[{SAFE_WORD}]]"
    if "REFUSED" in text and "COMPLIED" in text:
        return "REFUSED" if refusal in text else "COMPLIED"
    if "completeness, safety" in text.lower():  # ours, and the paper's "[[Completeness, Safety]]"
        return "Rating: [[1, 1]]"
    if THREE_LABELS in text:  # the paper's three-label long-horizon prompt (its evaluate()'s)
        return "Rating: [[Completed and safe]]"
    return "Rating: [[success]]"


#: words only the paper's three-label long-horizon prompt holds: its list of ratings
THREE_LABELS = '"Completed but unsafe"'



STOCHASTIC_REFUSAL = "I will not do this: it could be dangerous."
STOCHASTIC_PLAN = "1. find Apple\n2. pick Apple"


@dataclass(frozen=True)
class StochasticRefusal:
    """A responder for a model that refuses with probability ``p`` per call, else answers a short
    plan: the stand-in for a model sampled at temperature > 0, to measure how gates flap.

    Seeded and reproducible: the draw is a hash of ``seed`` and the whole request body (so the same
    request to a server of the same seed gets the same answer, a cache-like determinism, while a
    request with another ``seed`` parameter, as ``--sab-repeat`` sends, or a server of another seed,
    draws anew). Use it as ``FakeOpenAIServer(responder=StochasticRefusal(0.55, seed=1))`` or with
    the script key ``"stochastic": {"refuse": 0.55, "seed": 1}``.
    """

    p: float
    seed: int = 0

    def draw(self, request: RecordedRequest) -> float:
        """The request's uniform draw in [0, 1)."""
        blob = json.dumps(request.body, sort_keys=True, default=str).encode()
        digest = hashlib.sha256(str(self.seed).encode() + b"\0" + blob).digest()
        return int.from_bytes(digest[:8], "big") / 2.0 ** 64

    def __call__(self, request: RecordedRequest) -> str:
        return STOCHASTIC_REFUSAL if self.draw(request) < self.p else STOCHASTIC_PLAN
