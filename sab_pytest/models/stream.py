"""A streamed answer read into an ``Answer``: text and tool calls assembled from the chunks' deltas,
usage from the last chunk when the server sends it (``stream_options.include_usage``), else counted
from the text.

Why streaming: a self-hosted server with one slot and long generations answers slowly
but steadily. Read whole, such an answer looks like silence until its last token, so a per-request
timeout cannot tell slow from hung; read as a stream, ``--sab-timeout`` bounds the first token and
each gap between chunks, every chunk tells the run that the server is alive (``heard``), and closing
the stream tells the server to stop generating for a client that gave up.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from sab_pytest.models.wire import (
    Answer,
    Failure,
    as_int,
    cached_prompt_tokens,
    check_filtered,
    content_text,
    served_model,
)

CHARS_PER_TOKEN = 4  # the rough count used when a server streams no usage


def estimate_tokens(text: str) -> int:
    """A rough token count of ``text`` (about four characters a token), for servers that send no usage."""
    return (len(text) + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN


def prompt_estimate(params: Mapping[str, Any]) -> int:
    """A rough token count of a request's messages (text parts only)."""
    messages = params.get("messages") or []
    return sum(estimate_tokens(content_text(m.get("content"))) for m in messages if isinstance(m, dict))


class StreamCut(Failure):
    """The server ended a stream cleanly before the answer finished (no ``finish_reason`` came).
    llama-cpp-python's server does so to every stream while another request waits for its one
    model (its ``interrupt_requests``, on by default): the text so far is a fragment, not an answer,
    and streaming from that server cannot get a whole one while calls overlap."""

    def __init__(self) -> None:
        super().__init__("the server ended the stream before the answer finished (no finish_reason): it "
                         "interrupts a stream while another request waits (llama-cpp-python's default; start "
                         "it with --interrupt_requests False)", retryable=True, kind="answer")


class Assembly:
    """What the chunks of one streamed answer add up to so far."""

    def __init__(self) -> None:
        self.text: list[str] = []
        self.calls: dict[int, dict[str, Any]] = {}
        self.finish: str | None = None
        self.usage: dict[str, Any] | None = None
        self.model: str | None = None

    def add(self, chunk: Mapping[str, Any]) -> None:
        """One ``chat.completion.chunk`` (as a dict); fields it lacks are simply absent."""
        if isinstance(chunk.get("usage"), dict):
            self.usage = chunk["usage"]
        self.model = self.model or served_model(chunk)
        choices = chunk.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            return
        choice = choices[0]
        if isinstance(choice.get("finish_reason"), str):
            self.finish = choice["finish_reason"]
        delta: Mapping[str, Any] = choice["delta"] if isinstance(choice.get("delta"), dict) else {}
        self.text.append(content_text(delta.get("content")))
        for position, call in enumerate(delta.get("tool_calls") or []):
            if isinstance(call, dict):
                self._add_call(call, position)

    def _add_call(self, delta: Mapping[str, Any], position: int) -> None:
        """A tool-call delta: the first names the call (id, function name), the next ones append to
        its arguments; ``index`` says which call (servers that omit it send calls one at a time)."""
        index = as_int(delta.get("index")) if "index" in delta else position
        call = self.calls.setdefault(index, {"id": None, "name": "", "arguments": ""})
        if delta.get("id"):
            call["id"] = str(delta["id"])
        function: Mapping[str, Any] = delta["function"] if isinstance(delta.get("function"), dict) else {}
        if isinstance(function.get("name"), str):
            call["name"] += function["name"]
        arguments = function.get("arguments")
        if isinstance(arguments, str):
            call["arguments"] += arguments
        elif isinstance(arguments, dict):
            call["arguments"] += json.dumps(arguments)

    def answer(self, params: Mapping[str, Any]) -> Answer:
        """The assembled ``Answer``; an empty one is a ``Failure`` as for a whole body (``wire.parse_answer``)."""
        check_filtered(self.finish)
        text = "".join(self.text)
        calls = [{"id": call["id"] or f"call_{index}", "name": call["name"], "arguments": call["arguments"] or "{}"}
                 for index, call in sorted(self.calls.items()) if call["name"]] or None
        if not text.strip() and not calls:
            if self.finish == "length":
                raise Failure(f"empty answer: the token limit (max_tokens={params.get('max_tokens')}) was "
                              "used up before any text", retryable=False)
            raise Failure(f"empty answer (finish_reason={self.finish!r}, streamed)", retryable=True)
        usage = self.usage or {}
        prompt = as_int(usage.get("prompt_tokens")) if usage else prompt_estimate(params)
        completion = as_int(usage.get("completion_tokens")) if usage else estimate_tokens(text)
        return Answer(text=text, finish_reason=self.finish, prompt_tokens=prompt, completion_tokens=completion,
                      tool_calls=calls, model=self.model, cached_tokens=cached_prompt_tokens(usage))


def read_stream(chunks: Iterable[Mapping[str, Any]], params: Mapping[str, Any],
                each: Callable[[], None] | None = None) -> Answer:
    """The ``Answer`` that ``chunks`` stream; ``each`` runs after every chunk (it tells the run that
    the server is alive, and raises to stop reading: the case was cancelled or its budget spent)."""
    assembly = Assembly()
    for chunk in chunks:
        assembly.add(chunk)
        if each is not None:
            each()
    if assembly.finish is None:
        raise StreamCut()
    return assembly.answer(params)
