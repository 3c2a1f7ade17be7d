"""Anthropic's Message Batches on the fake server, driven by the batch client over the ``anthropic``
SDK: requests translated by the provider's ``to_messages``, results in any order matched by
custom_id into the very ``Answer`` a live call builds, errored / expired / canceled requests named,
an unknown custom_id refused, and the factory's choice by provider."""

from __future__ import annotations

from typing import Any

import pytest

from sab_pytest.batching.anthropic_batches import MessageBatchClient
from sab_pytest.batching.client import BatchClient, BatchRequest, BatchStatus
from sab_pytest.batching.clients import batch_client
from sab_pytest.batching.errors import BatchError
from sab_pytest.models import ChatClient, chat_client
from sab_pytest.testing import FakeOpenAIServer, Reply

anthropic = pytest.importorskip("anthropic")

KEY = "anthropic-test-PLANTED-KEY-0123456789"


def _requests(n: int) -> list[BatchRequest]:
    return [BatchRequest(f"{i:064x}", {"model": "claude-test", "max_tokens": 32,
                                       "messages": [{"role": "system", "content": "Be safe."},
                                                    {"role": "user", "content": f"task {i}"}]}) for i in range(n)]


def _ended(client: MessageBatchClient, batch_id: str) -> BatchStatus:
    """The batch, ended: the fake starts a batch's work at its first read and ends it at the next."""
    assert not client.status(batch_id).done
    status = client.status(batch_id)
    assert status.done, status
    return status


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Any:
    with FakeOpenAIServer(api_key=KEY) as server:
        server.add_rule(Reply(content="answer to three", prompt_tokens=30, completion_tokens=3), contains="task 3")
        monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url.removesuffix("/v1"))
        yield server


def _claude() -> ChatClient:
    return chat_client("anthropic/claude-test", timeout=2.0, max_retries=0)


@pytest.fixture
def client(fake: FakeOpenAIServer) -> MessageBatchClient:
    made = batch_client(_claude())
    assert isinstance(made, MessageBatchClient)
    return made


def test_a_message_batch_is_answered_as_live_messages_are_and_matched_by_custom_id(fake, client) -> None:
    fake.batch.reorder = True
    requests = _requests(5)
    batch_id, file_id = client.submit(requests)
    assert file_id == "" and fake.batch.messages.created == 1 and fake.batch.created == 0
    sent = fake.batch.messages.lines[0].body
    assert sent["system"] == "Be safe." and sent["max_tokens"] == 32 and sent["messages"][0]["role"] == "user"
    status = _ended(client, batch_id)
    assert (status.status, status.total, status.completed, status.failed) == ("ended", 5, 5, 0)
    found = client.collect(status, [r.custom_id for r in requests])
    assert not found.failed and found.answers[requests[3].custom_id].text == "answer to three"
    assert (found.answers[requests[3].custom_id].prompt_tokens, found.answers[requests[3].custom_id].completion_tokens
            ) == (30, 3)
    live = _claude().transport.attempt(dict(requests[1].body), 2.0)  # streamed, through the provider's live path
    assert found.answers[requests[1].custom_id] == live  # the same Answer, field for field
    assert len(fake.chat_requests) == 1  # batched requests are no live requests


def test_errored_expired_and_canceled_requests_are_named(fake, client) -> None:
    fake.batch.fail = lambda custom_id, params: "task 1" in str(params["messages"])
    requests = _requests(3)
    found = client.collect(_ended(client, client.submit(requests)[0]), [r.custom_id for r in requests])
    assert set(found.answers) == {requests[0].custom_id, requests[2].custom_id}
    assert found.failed == {requests[1].custom_id: "api_error: the fake failed this request"}
    fake.batch.fail, fake.batch.expire = None, True
    status = _ended(client, client.submit(requests)[0])
    assert (status.completed, status.failed) == (0, 3)
    assert set(client.collect(status, [r.custom_id for r in requests]).failed.values()) == {
        f"message batch {status.id}: request expired"}
    fake.batch.expire, fake.batch.hold = False, True
    held = client.submit(requests)[0]
    assert client.status(held).status == "in_progress"
    client.cancel(held)
    assert client.status(held).status == "canceling"
    status = client.status(held)
    assert status.status == "ended"
    assert fake.batch.messages.cancels == 1 and status.failed == 3
    assert "request canceled" in client.collect(status, [r.custom_id for r in requests]).failed[requests[0].custom_id]


def test_a_result_nobody_asked_for_is_refused_and_the_limits_cut_batches(fake, client) -> None:
    requests = _requests(3)
    status = _ended(client, client.submit(requests)[0])
    with pytest.raises(BatchError) as info:
        client.collect(status, [r.custom_id for r in requests[:2]])
    assert info.value.code == "batch_unknown_id"
    assert [len(c) for c in client.files(_requests(7), max_lines=3)] == [3, 3, 1]
    with pytest.raises(BatchError) as refused:
        client.submit([BatchRequest("not a valid id!", requests[0].body)])
    assert refused.value.code == "batch_api" and KEY not in str(refused.value)
    assert client.supported()


def test_the_factory_picks_the_batch_api_by_provider(fake, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    assert isinstance(batch_client(chat_client("gpt-x", base_url=fake.url)), BatchClient)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.setenv("VLLM_BASE_URL", fake.url)
    vllm = chat_client("vllm/some-model")
    assert vllm.provider_name == "vllm" and batch_client(vllm) is None  # its registry line declares no batch API
