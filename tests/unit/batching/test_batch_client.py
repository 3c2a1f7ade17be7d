"""The fake server's Batch API (OpenAI's wire format) driven by the batch client over the openai SDK:
files, batches, the error file, expiry, cancel, reordered output, an unknown custom_id, the limits."""

from __future__ import annotations

import json
import time

import openai
import pytest

from sab_pytest.batching.client import BatchClient, BatchRequest, input_files
from sab_pytest.batching.errors import BatchError
from sab_pytest.testing import fake_openai_server

KEY = "fake-key-0123456"


def _requests(n: int) -> list[BatchRequest]:
    return [BatchRequest(f"id{i:03d}", {"model": "m", "messages": [{"role": "user", "content": f"task {i}"}]})
            for i in range(n)]


def _finished(client: BatchClient, batch_id: str, limit_s: float = 5.0):
    ends = time.monotonic() + limit_s
    while time.monotonic() < ends:
        status = client.status(batch_id)
        if status.done:
            return status
        time.sleep(0.02)
    raise AssertionError(f"batch {batch_id} did not finish")


@pytest.fixture
def fake():
    with fake_openai_server(api_key=KEY) as server:
        server.add_rule("answer to three", contains="task 3")
        yield server


@pytest.fixture
def client(fake) -> BatchClient:
    return BatchClient(openai.OpenAI(api_key=KEY, base_url=fake.url, max_retries=0), secret=KEY)


def test_a_batch_is_answered_as_live_requests_are_and_matched_by_custom_id(fake, client) -> None:
    fake.batch.reorder = True
    batch_id, file_id = client.submit(_requests(5))
    assert fake.batch.files[file_id][0] == "batch" and fake.batch.created == 1
    first = json.loads(fake.batch.files[file_id][1].splitlines()[0])
    assert first == {"custom_id": "id000", "method": "POST", "url": "/v1/chat/completions",
                     "body": {"model": "m", "messages": [{"role": "user", "content": "task 0"}]}}
    status = _finished(client, batch_id)
    assert (status.status, status.total, status.completed, status.failed) == ("completed", 5, 5, 0)
    found = client.collect(status, [r.custom_id for r in _requests(5)])
    assert found.answers["id003"].text == "answer to three" and not found.failed
    live = openai.OpenAI(api_key=KEY, base_url=fake.url).chat.completions.create(
        model="m", messages=[{"role": "user", "content": "task 1"}])
    assert found.answers["id001"].text == live.choices[0].message.content  # the same script answers both
    assert len(fake.batch.lines) == 5 and len(fake.chat_requests) == 1  # batch lines are no live requests


def test_failed_lines_go_to_the_error_file_with_their_reason(fake, client) -> None:
    fake.batch.fail = lambda custom_id, body: custom_id == "id002"
    batch_id, _ = client.submit(_requests(4))
    status = _finished(client, batch_id)
    assert (status.completed, status.failed) == (3, 1) and status.error_file_id
    found = client.collect(status, [r.custom_id for r in _requests(4)])
    assert set(found.answers) == {"id000", "id001", "id003"}
    assert found.failed == {"id002": "HTTP 500: the fake failed this line"}


def test_an_expired_batch_names_every_request_it_leaves_unanswered(fake, client) -> None:
    fake.batch.expire = True
    batch_id, _ = client.submit(_requests(2))
    status = _finished(client, batch_id)
    found = client.collect(status, ["id000", "id001"])
    assert status.status == "expired" and not found.answers
    assert all(reason.startswith("batch_expired") for reason in found.failed.values()) and len(found.failed) == 2


def test_held_batches_wait_until_told_and_can_be_cancelled(fake, client) -> None:
    fake.batch.hold = True
    held, _ = client.submit(_requests(1))
    cancelled, _ = client.submit(_requests(2))
    for _ in range(3):
        assert client.status(held).status in ("validating", "in_progress")
    client.cancel(cancelled)
    status = _finished(client, cancelled)
    assert status.status == "cancelled"
    assert client.collect(status, ["id000"]).failed["id000"].startswith(f"batch {cancelled} cancelled")
    fake.batch.release()
    assert _finished(client, held).status == "completed"


def test_an_answer_for_a_request_never_sent_is_a_named_error(fake, client) -> None:
    fake.batch.unknown_line = True
    status = _finished(client, client.submit(_requests(2))[0])
    with pytest.raises(BatchError, match=r"batch_unknown_id: .* answered a request it never carried"):
        client.collect(status, ["id000", "id001"])


def test_a_server_without_a_batch_api_is_told_apart(client) -> None:
    assert client.supported()
    with fake_openai_server(api_key=KEY, batch=False) as bare:
        plain = BatchClient(openai.OpenAI(api_key=KEY, base_url=bare.url, max_retries=0), secret=KEY)
        assert not plain.supported()
        with pytest.raises(BatchError, match=r"batch_unsupported: .*no Batch API"):
            plain.submit(_requests(1))


def test_an_invalid_input_file_fails_the_batch_with_line_numbers(fake, client) -> None:
    twice = [_requests(1)[0], _requests(1)[0]]
    status = _finished(client, client.submit(twice)[0])
    assert status.status == "failed" and status.errors and status.errors[0].startswith("line 2:")


def test_requests_are_cut_into_files_by_the_provider_limits() -> None:
    requests = _requests(7)
    assert [len(f) for f in input_files(requests, max_lines=3)] == [3, 3, 1]
    size = len(requests[0].line())
    assert [len(f) for f in input_files(requests, max_bytes=2 * size + 1)] == [2, 2, 2, 1]
    with pytest.raises(BatchError, match="batch_too_large"):
        list(input_files(requests, max_bytes=size - 1))


def test_a_script_sets_the_batch_knobs() -> None:
    from sab_pytest.testing.fake_openai import FakeOpenAIServer, load_script

    server = FakeOpenAIServer()
    load_script(server, {"batch": {"delay_s": 2, "reorder": True, "fail_contains": "task 1"}})
    assert server.batch is not None and server.batch.delay_s == 2.0 and server.batch.reorder
    fail = server.batch.fail
    assert fail is not None and fail("x", {"messages": [{"role": "user", "content": "task 1"}]})
    assert not fail("y", {"messages": [{"role": "user", "content": "task 2"}]})
