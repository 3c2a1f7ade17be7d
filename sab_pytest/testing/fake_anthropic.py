"""Anthropic's Messages API wire format, as the fake server speaks it: ``POST /v1/messages`` (key in
``x-api-key`` or, from recent SDKs, as a Bearer token; checked by ``fake_azure.refusal`` with the
other auth shapes) answered with a Message,
or, for ``stream: true``, with its named server-sent events (``message_start``, ``content_block_*``,
``message_delta``, ``message_stop``).

Why a translation of the same ``Reply``: a test scripts its answers once (text, tool calls, usage,
finish reason, errors, delays) and meets them through either provider's SDK, so the native provider
is tested offline against the wire format its SDK reads, not against a mock of the SDK.
"""

from __future__ import annotations

import json
from typing import Any

from sab_pytest.testing import fake_azure
from sab_pytest.testing.fake_replies import RecordedRequest, Reply, completion_of
from sab_pytest.testing.fake_stream import MAX_PIECES, UNPACED_PIECES, _pieces, stream_chunks

MESSAGES_PATH = "/v1/messages"
STOP = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use", "content_filter": "refusal"}


def is_chat(path: str) -> bool:
    """Whether ``path`` asks for an answer: OpenAI's chat path, Azure's, or Anthropic's Messages."""
    return fake_azure.is_chat(path) or path == MESSAGES_PATH


def is_messages(request: RecordedRequest | None) -> bool:
    return request is not None and request.path == MESSAGES_PATH


def message_of(reply: Reply) -> dict[str, Any]:
    """The Message ``reply`` answers (the same text, tool calls and usage as its chat completion)."""
    completion = completion_of(reply)
    choice = completion["choices"][0]
    content: list[dict[str, Any]] = [{"type": "text", "text": choice["message"]["content"]}] \
        if choice["message"].get("content") else []
    for call in choice["message"].get("tool_calls") or []:
        content.append({"type": "tool_use", "id": call["id"].replace("call_", "toolu_"),
                        "name": call["function"]["name"], "input": json.loads(call["function"]["arguments"] or "{}")})
    usage = completion["usage"]
    return {"id": completion["id"].replace("chatcmpl", "msg"), "type": "message", "role": "assistant",
            "model": completion["model"], "content": content,
            "stop_reason": STOP.get(choice["finish_reason"], choice["finish_reason"]), "stop_sequence": None,
            "usage": {"input_tokens": usage["prompt_tokens"], "output_tokens": usage["completion_tokens"]}}


def answer_of(reply: Reply) -> dict[str, Any]:
    """The body that answers ``reply``'s request: a Message or a chat completion."""
    return message_of(reply) if is_messages(reply.request) else completion_of(reply)


def _event(data: dict[str, Any]) -> bytes:
    return f"event: {data['type']}\ndata: {json.dumps(data)}\n\n".encode()


def chunks(reply: Reply, include_usage: bool, *, paced: bool) -> list[Any]:
    """The streamed answer: chat-completion chunks, or a Message's events (as encoded bytes)."""
    if not is_messages(reply.request):
        return stream_chunks(completion_of(reply), include_usage, paced=paced)
    message = message_of(reply)
    start = {**message, "content": [], "stop_reason": None,
             "usage": {"input_tokens": message["usage"]["input_tokens"], "output_tokens": 1}}
    events: list[dict[str, Any]] = [{"type": "message_start", "message": start}]
    for index, block in enumerate(message["content"]):
        if block["type"] == "text":
            events.append({"type": "content_block_start", "index": index,
                           "content_block": {"type": "text", "text": ""}})
            events += [{"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": piece}}
                       for piece in _pieces(block["text"], MAX_PIECES if paced else UNPACED_PIECES)]
        else:
            arguments = json.dumps(block["input"])
            events.append({"type": "content_block_start", "index": index,
                           "content_block": {**block, "input": {}}})
            events += [{"type": "content_block_delta", "index": index,
                        "delta": {"type": "input_json_delta", "partial_json": part}}
                       for part in (arguments[:len(arguments) // 2], arguments[len(arguments) // 2:])]
        events.append({"type": "content_block_stop", "index": index})
    events.append({"type": "message_delta", "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                   "usage": {"output_tokens": message["usage"]["output_tokens"]}})
    events.append({"type": "message_stop"})
    return [_event(e) for e in events]
