"""Anthropic's Messages API through the ``anthropic`` SDK against the fake server speaking its wire
format (offline): text, tools, pictures, streaming and whole answers, usage, rate-limit headers,
errors classified as any provider's, the endpoint check and the model listing."""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from sab_pytest.errors import ErrorKind, InfraError
from sab_pytest.models import CallContext, ChatClient, chat_client
from sab_pytest.models.providers.anthropic_messages import pacing_headers, to_messages
from sab_pytest.testing import FakeOpenAIServer, Reply

pytest.importorskip("anthropic")

KEY = "anthropic-test-PLANTED-KEY-0123456789"
ACTION = {"type": "object", "properties": {"action": {"type": "string"}}}
TOOL = {"type": "function", "function": {"name": "execute", "description": "act", "parameters": ACTION}}
PICTURE = "data:image/png;base64,iVBORw0KGgo="


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Any:
    with FakeOpenAIServer(api_key=KEY, models=["claude-test"]) as server:
        monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url.removesuffix("/v1"))
        yield server


def claude(**options: Any) -> ChatClient:
    settings: dict[str, Any] = {"timeout": 2.0, "max_retries": 2, "backoff_base": 0.01, "backoff_max": 0.05}
    settings.update(options)
    return chat_client("anthropic/claude-test", **settings)


def test_text_tools_and_pictures_through_the_messages_api(fake: FakeOpenAIServer) -> None:
    fake.enqueue(Reply(content="I will not.", prompt_tokens=40, completion_tokens=4),
                 Reply.tool("execute", action="find Egg"), Reply(content="a kitchen"))
    model = claude(max_tokens=64)
    call = model.complete([{"role": "system", "content": "Be safe."}, {"role": "user", "content": "Burn it."}])
    assert (call.answer, call.prompt_tokens, call.completion_tokens, call.finish_reason) == ("I will not.", 40, 4,
                                                                                             "stop")
    acted = model.complete([{"role": "user", "content": "Find the egg."}], tools=[TOOL])
    assert acted.tool_calls and acted.tool_calls[0]["name"] == "execute"
    assert '"find Egg"' in acted.tool_calls[0]["arguments"] and acted.finish_reason == "tool_calls"
    seen = model.complete([{"role": "user", "content": [{"type": "text", "text": "What is this?"},
                                                        {"type": "image_url", "image_url": {"url": PICTURE}}]}])
    assert seen.answer == "a kitchen"
    first, second, third = fake.chat_requests
    assert {r.path for r in fake.chat_requests} == {"/v1/messages"}
    assert all(KEY in (r.headers.get("x-api-key"), r.authorization.removeprefix("Bearer ") if r.authorization else None)
               and "anthropic-version" in r.headers for r in fake.chat_requests)
    assert first.body["system"] == "Be safe." and first.body["max_tokens"] == 64 and first.body["stream"] is True
    assert "seed" not in first.body and second.body["tools"][0]["input_schema"]["type"] == "object"
    assert third.body["messages"][0]["content"][1]["source"] == {"type": "base64", "media_type": "image/png",
                                                                 "data": "iVBORw0KGgo="}
    assert KEY not in repr(model)


def test_whole_answers_when_streams_are_off_and_the_endpoint_check(fake: FakeOpenAIServer) -> None:
    model = claude()
    fake.served_as = "claude-served"  # the Message's model field is what the call records as having answered
    assert model.complete([{"role": "user", "content": "streamed"}]).served_model == "claude-served"
    model.transport.streams = False
    whole = model.complete([{"role": "user", "content": "hi"}])
    assert whole.answer.startswith("fake answer to: hi") and whole.served_model == "claude-served"
    assert "stream" not in fake.chat_requests[1].body
    model.preflight(timeout=2.0)
    assert model.list_models(2.0) is not None


def test_errors_are_classified_like_any_providers(fake: FakeOpenAIServer) -> None:
    fake.enqueue(Reply.error(529, "Overloaded"), Reply(content="after the overload"))
    assert claude().complete([{"role": "user", "content": "x"}]).answer == "after the overload"
    fake.reset()
    fake.enqueue(Reply(content="", finish_reason="content_filter"))
    with pytest.raises(InfraError) as info:
        claude().complete([{"role": "user", "content": "y"}], context=CallContext())
    assert info.value.kind is ErrorKind.CONTENT_FILTER and len(fake.chat_requests) == 1
    fake.reset()
    with pytest.raises(InfraError, match="HTTP 401") as info:
        claude(api_key="wrong-key-000").complete([{"role": "user", "content": "z"}])
    assert "wrong-key-000" not in str(info.value)


def test_rate_limit_headers_reach_the_pacing_under_openais_names() -> None:
    reset = (datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=30)).isoformat()
    headers = pacing_headers({"anthropic-ratelimit-requests-limit": "50", "anthropic-ratelimit-requests-remaining": "0",
                              "anthropic-ratelimit-requests-reset": reset, "retry-after": "30"})
    assert headers["x-ratelimit-limit-requests"] == "50" and headers["x-ratelimit-remaining-requests"] == "0"
    assert 28.0 < float(headers["x-ratelimit-reset-requests"].rstrip("s")) <= 30.0 and headers["retry-after"] == "30"


def test_a_conversation_with_tool_results_translates_to_alternating_turns() -> None:
    body = to_messages({"model": "m", "messages": [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "t1", "type": "function", "function": {"name": "execute", "arguments": '{"action": "find Egg"}'}}]},
        {"role": "tool", "tool_call_id": "t1", "content": "done"},
        {"role": "user", "content": "next"}], "tool_choice": "required", "tools": [TOOL], "stop": "END"})
    assert [t["role"] for t in body["messages"]] == ["user", "assistant", "user"]
    assert body["messages"][1]["content"][0] == {"type": "tool_use", "id": "t1", "name": "execute",
                                                 "input": {"action": "find Egg"}}
    assert body["messages"][2]["content"][0]["type"] == "tool_result"
    assert body["tool_choice"] == {"type": "any"} and body["stop_sequences"] == ["END"]
