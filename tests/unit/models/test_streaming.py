"""Self-hosted servers: streamed answers, a server that cannot stream, the one-slot fake,
hung meaning silent, context overflow, and the accounting of calls."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from support.models import fast_model
from support.timing import HANG_S, POLL_S

from sab_pytest.errors import Cancelled, ErrorKind, InfraError
from sab_pytest.models import ChatClient, chat_client
from sab_pytest.models.context import CallContext
from sab_pytest.models.overflow import parse_overflow
from sab_pytest.models.wire import CAUSE_GONE
from sab_pytest.run.breaker import RunState
from sab_pytest.testing import FakeOpenAIServer, Reply, fake_openai_server

SECRET = "sk-test-stream-0123456789"
USER = [{"role": "user", "content": "Put the egg in the microwave."}]
LONG = " ".join(f"word{i}" for i in range(40))


def make_model(server: FakeOpenAIServer, **options: Any) -> ChatClient:
    return fast_model(server, SECRET, **options)


def until(condition: Callable[[], bool]) -> bool:
    end = time.monotonic() + HANG_S
    while not condition():
        if time.monotonic() > end:
            return False
        time.sleep(POLL_S)
    return True


@pytest.fixture
def state(tmp_path: Path) -> Iterator[RunState]:
    run = RunState.create(parent=tmp_path)
    yield run
    run.remove()


# -- streaming -----------------------------------------------------------------------------------------

def test_calls_stream_and_take_usage_from_the_last_chunk(server: FakeOpenAIServer) -> None:
    server.enqueue(Reply(content="1. find Egg\n2. pick Egg", prompt_tokens=321, completion_tokens=7))
    call = make_model(server).complete(USER)
    body = server.chat_requests[0].body
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert call.answer == "1. find Egg\n2. pick Egg"
    assert (call.prompt_tokens, call.completion_tokens, call.finish_reason) == (321, 7, "stop")


def test_usage_is_counted_from_the_text_when_the_stream_has_none(server: FakeOpenAIServer) -> None:
    from sab_pytest.models.stream import Assembly

    assembly = Assembly()
    for piece in ("Hello ", "there, ", "robot"):
        assembly.add({"choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}]})
    assembly.add({"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]})
    answer = assembly.answer({"messages": USER, "max_tokens": 5})
    assert answer.text == "Hello there, robot" and answer.finish_reason == "length"
    assert answer.completion_tokens == 5 and answer.prompt_tokens == 8  # 18 and 29 characters, 4 a token


def test_tool_calls_are_assembled_from_deltas(server: FakeOpenAIServer) -> None:
    server.enqueue(Reply.tool("execute", action="find Apple"))
    call = make_model(server).complete(USER, tools=[{"type": "function", "function": {"name": "execute"}}])
    assert call.tool_calls == [{"id": "call_0", "name": "execute", "arguments": '{"action": "find Apple"}'}]
    assert call.finish_reason == "tool_calls"


def test_the_timeout_bounds_each_gap_not_the_whole_answer(server: FakeOpenAIServer) -> None:
    server.token_s = 0.04  # 40 words: about 1.6 s in all, far beyond the 0.6 s timeout, 0.04 s between chunks
    server.enqueue(Reply(content=LONG))
    call = make_model(server, timeout=0.6).complete(USER)
    assert call.answer == LONG and len(server.chat_requests) == 1


def test_a_gap_longer_than_the_timeout_times_out(server: FakeOpenAIServer) -> None:
    server.token_s = HANG_S  # the first chunk comes, the next never within the timeout
    server.enqueue(Reply(content=LONG))
    with pytest.raises(InfraError, match=r"no answer within 0\.3s"):
        make_model(server, timeout=0.3, max_retries=0).complete(USER)


def test_a_cancelled_case_closes_its_stream(server: FakeOpenAIServer) -> None:
    server.token_s = 0.05
    server.enqueue(Reply(content=LONG * 5))
    stop = threading.Event()
    ctx = CallContext(stop=stop)
    threading.Timer(0.3, stop.set).start()
    with pytest.raises(Cancelled):
        make_model(server).complete(USER, context=ctx)
    assert until(lambda: server.streams_closed == 1)


@pytest.mark.parametrize("streaming", [False, "error"])
def test_a_server_that_cannot_stream_is_noticed_once(server: FakeOpenAIServer, streaming: bool | str) -> None:
    server.streaming = streaming
    model = make_model(server)
    assert model.complete(USER).answer.startswith("fake answer to:")
    assert model.complete(USER).answer.startswith("fake answer to:")
    streamed = [bool(r.body.get("stream")) for r in server.chat_requests]
    # a whole body for stream=True is used as it is; an error naming streaming is asked again without it
    assert streamed == ([True, False] if streaming is False else [True, False, False])
    assert model.transport.streams is False


# -- the one-slot fake -------------------------------------------------------------------------------------

def test_one_slot_answers_in_turn_and_an_abandoned_request_keeps_its_turn() -> None:
    with fake_openai_server(slots=1, answer_s=0.3, streaming=False) as server:
        with pytest.raises(InfraError, match="no answer within"):
            make_model(server, timeout=0.1, max_retries=0).complete(USER)  # gave up; the server works on
        assert make_model(server, timeout=HANG_S).complete(USER).answer.startswith("fake answer")
        assert server.one_slot is not None and server.one_slot.turns == 2  # the abandoned answer went first
        assert server.one_slot.skipped == 0


def test_one_slot_drops_a_queued_request_whose_stream_was_closed() -> None:
    with fake_openai_server(slots=1, answer_s=0.6) as server:  # three times the second call's timeout
        slot = server.one_slot
        assert slot is not None
        first = threading.Thread(target=lambda: make_model(server, timeout=HANG_S).complete(USER))
        first.start()
        assert until(lambda: slot.turns == 1)
        with pytest.raises(InfraError, match="no answer within"):  # queued behind the first, closed at its timeout
            make_model(server, timeout=0.2, max_retries=0).complete(USER)
        first.join(HANG_S)
        assert until(lambda: slot.skipped == 1)
        assert slot.turns == 1  # the closed request never took a turn


# -- hung means silent --------------------------------------------------------------------------------------

def test_a_busy_one_slot_server_is_not_hung(state: RunState) -> None:
    """Three calls at once, 0.6 s each, a timeout of 0.5 s: the second and third wait longer than the
    timeout for their first token, while the server streams to the first: all are answered, the run
    is not stopped, no retry is used up."""
    with fake_openai_server(slots=1, answer_s=0.6) as server:
        model = make_model(server, timeout=0.5, max_retries=0, breaker=state)
        results: list[Any] = []

        def one() -> None:
            try:
                results.append(model.complete(USER).answer)
            except Exception as exc:  # the assertion shows it
                results.append(exc)

        threads = [threading.Thread(target=one) for _ in range(3)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(HANG_S * 2)
    assert all(isinstance(r, str) for r in results) and len(results) == 3, results
    assert state.stopped() is None and state.streak() == 0


def test_a_silent_server_still_stops_the_run(server: FakeOpenAIServer, state: RunState) -> None:
    server.default = Reply.slow(HANG_S * 4)
    with pytest.raises(InfraError) as info:
        make_model(server, timeout=0.2, breaker=state).complete(USER)
    assert info.value.kind == ErrorKind.ENDPOINT_DOWN
    assert "without a byte from the server" in str(info.value)


def test_streamed_chunks_count_as_the_server_being_heard(state: RunState) -> None:
    before = time.time() + 5.0  # later than any answer so far (the check allows ANSWERED_EVERY_S of slack)
    assert not state.answered_since(before)
    state.heard()
    assert state.answered_since(time.time())


# -- context overflow ---------------------------------------------------------------------------------------

OPENAI_OVERFLOW = ("This model's maximum context length is 512 tokens. However, you requested 2843 tokens "
                   "(795 in the messages, 2048 in the completion). Please reduce the length of the messages "
                   "or completion.")
VLLM_COMPLETION = ("'max_tokens' is too large: 2048. This model's maximum context length is 512 tokens and your "
                   "request has 100 input tokens (2048 > 512 - 100).")


@pytest.mark.parametrize(("text", "limit", "prompt", "room"), [
    (OPENAI_OVERFLOW, 512, 795, None),
    (VLLM_COMPLETION, 512, 100, 412),
    ("Requested tokens (2843) exceed context window of 512", 512, 2843, None),  # llama-cpp-python
    ("request (2843 tokens) exceeds the available context size (512 tokens), try increasing it", 512, 2843, None),
    ("prompt too long; exceeded max context length by 331 tokens", None, None, None),  # Ollama
])
def test_overflow_spellings(text: str, limit: int | None, prompt: int | None, room: int | None) -> None:
    found = parse_overflow(text)
    assert found is not None and (found.limit, found.prompt, found.room()) == (limit, prompt, room)


def test_other_400s_are_no_overflow() -> None:
    assert parse_overflow("Invalid value for 'temperature': must be <= 2") is None


def test_a_prompt_that_does_not_fit_is_one_clear_error(server: FakeOpenAIServer, state: RunState) -> None:
    server.default = Reply.error(400, OPENAI_OVERFLOW)
    model = make_model(server, breaker=state, max_retries=5)
    for _ in range(3):
        with pytest.raises(InfraError) as info:
            model.complete(USER)
        assert info.value.kind == ErrorKind.CONTEXT_OVERFLOW
        assert "the prompt is 795 tokens, the server's context is 512 tokens" in str(info.value)
    assert len(server.chat_requests) == 3  # no retry
    assert state.streak() == 0 and state.stopped() is None  # never a breaker trip on its own


def test_a_completion_budget_that_does_not_fit_is_asked_again_with_the_room_left(server: FakeOpenAIServer) -> None:
    server.enqueue(Reply.error(400, VLLM_COMPLETION))
    call = make_model(server, max_tokens=2048).complete(USER)
    assert call.answer.startswith("fake answer")
    assert [r.body["max_tokens"] for r in server.chat_requests] == [2048, 412]


# -- accounting -------------------------------------------------------------------------------------------

def test_the_same_http_error_again_and_again_ends_the_call_sooner(server: FakeOpenAIServer) -> None:
    server.default = Reply.error(500, "model backend crashed: CUDA error")
    with pytest.raises(InfraError, match="failed the same way 4 times in a row"):
        make_model(server, max_retries=6).complete(USER)
    assert len(server.chat_requests) == 4


def test_different_errors_are_retried_as_before(server: FakeOpenAIServer) -> None:
    server.enqueue(*(Reply.error(500, f"error {i}") for i in range(5)))
    assert make_model(server, max_retries=6).complete(USER).answer.startswith("fake answer")
    assert len(server.chat_requests) == 6


def test_a_refused_connection_is_judged_run_wide(state: RunState) -> None:
    """The judge's client never had an answer, but the run did: the server went away, the URL is right."""
    state.success()
    with fake_openai_server() as gone:
        url = gone.url
    model = chat_client("judge", base_url=url, api_key=SECRET, timeout=1.0, max_retries=0, breaker=state)
    with pytest.raises(InfraError) as info:
        model.complete(USER)
    assert CAUSE_GONE in str(info.value)


class _QueuedSlots:
    """Slots that report a long wait for a free slot without waiting."""

    @contextlib.contextmanager
    def slot(self, check: Callable[[], None] | None = None) -> Iterator[float]:
        yield 1000.0

    def congested(self) -> None: ...

    def relieved(self) -> None: ...

    def measured(self, key: str, seconds: float, tokens: int = 0) -> None: ...

    def timed_out(self) -> None: ...


def test_latency_does_not_count_the_wait_for_a_call_slot(server: FakeOpenAIServer) -> None:
    call = make_model(server, slots=_QueuedSlots()).complete(USER)
    assert call.latency_s == 0.0  # the 1000 s reported queued are taken off, never below zero


def test_an_error_event_in_a_stream_is_read_for_overflow_too() -> None:
    """llama.cpp may send its refusal as an error event inside the stream (the SDK raises APIError)."""
    import httpx2
    import openai

    from sab_pytest.models.providers.openai_compat import classify

    error = openai.APIError("Requested tokens (2843) exceed context window of 512",
                            httpx2.Request("POST", "http://127.0.0.1/v1/chat/completions"), body=None)
    failure = classify(error, secret=None, timeout=1.0)
    assert failure.overflow is not None and failure.overflow.prompt == 2843 and not failure.retryable


def test_an_error_event_inside_a_stream_fails_the_call_with_the_servers_words(server: FakeOpenAIServer) -> None:
    """A refusal that comes after a stream's headers arrives as an error event among the chunks
    (llama.cpp's, for a prompt past its context): the call fails as the server said, here as an
    overflow that is not retried, and never as an empty answer."""
    event = {"error": {"message": "Requested tokens (2843) exceed context window of 512",
                       "type": "exceed_context_size_error"}}
    server.default = Reply(body=f"data: {json.dumps(event)}\n\ndata: [DONE]\n\n",
                           headers={"Content-Type": "text/event-stream"})
    with pytest.raises(InfraError) as info:
        make_model(server, max_retries=5).complete(USER)
    assert info.value.kind == ErrorKind.CONTEXT_OVERFLOW and "2843" in str(info.value)
    assert len(server.chat_requests) == 1


def test_a_stream_event_that_is_not_json_fails_the_call_as_garbage(server: FakeOpenAIServer) -> None:
    """A server whose event data is not JSON answered garbage, like a body that is not JSON: the
    call is retried, then fails naming what came, never with the JSON parser's own exception."""
    server.default = Reply(body="data: not json at all\n\ndata: [DONE]\n\n",
                           headers={"Content-Type": "text/event-stream"})
    with pytest.raises(InfraError, match=r"invalid JSON in a streamed chunk: 'not json at all' \(after 2 attempts\)"):
        make_model(server, max_retries=1).complete(USER)
    assert len(server.chat_requests) == 2


def test_usage_of_cases_the_stop_cut_short_is_kept_run_wide(state: RunState) -> None:
    """A stopped case leaves no record; its calls were still made (the summary adds these in)."""
    state.unrecorded({"calls": 2, "api_calls": 3, "prompt_tokens": 100, "latency_s": 1.5, "note": "x"})
    RunState(state.directory).unrecorded({"calls": 1, "api_calls": 1, "prompt_tokens": 20})  # another process
    assert state.unrecorded_usage() == {"calls": 3, "api_calls": 4, "prompt_tokens": 120, "latency_s": 1.5}


def test_a_stopped_case_hands_its_usage_to_the_run(server: FakeOpenAIServer, state: RunState) -> None:
    from types import SimpleNamespace

    from sab_pytest.run.runtime import Runtime

    ctx = CallContext()
    make_model(server).complete(USER, context=ctx)
    holder = SimpleNamespace(breaker=state)
    Runtime._keep_usage(holder, None, ctx)  # type: ignore[arg-type]  # cancelled: no verdict
    assert state.unrecorded_usage()["api_calls"] == 1


def test_a_stream_the_server_ends_before_a_finish_reason_is_no_answer() -> None:
    """llama-cpp-python ends a stream with [DONE] and no finish_reason when another request waits
    (its interrupt_requests): the text so far ("Refuse or") is a fragment, never read as the answer."""
    from sab_pytest.models.stream import StreamCut, read_stream

    def chunk(content: str, finish: str | None = None) -> dict[str, Any]:
        return {"choices": [{"index": 0, "delta": {"content": content}, "finish_reason": finish}]}

    params = {"messages": [{"role": "user", "content": "plan"}], "max_tokens": 50}
    with pytest.raises(StreamCut, match="interrupt"):
        read_stream([chunk("Refuse"), chunk(" or")], params)
    assert read_stream([chunk("Refuse"), chunk("d.", "stop")], params).text == "Refused."


def test_a_server_that_cuts_streams_is_asked_for_whole_answers(monkeypatch: pytest.MonkeyPatch,
                                                               server: FakeOpenAIServer) -> None:
    """A cut stream is asked again in the server's one run-wide turn (``models.serial``); cut even
    then, whole answers from that server on: no retry is spent (max_retries=0), no fragment kept."""
    from sab_pytest.models import stream as stream_module

    cut = {"n": 0}
    real = stream_module.Assembly.add

    def drop_finish(self: Any, chunk: Any) -> None:  # the server's cut: the finish_reason never comes
        cut["n"] += 1
        choices = chunk.get("choices") or []
        real(self, {**chunk, "choices": [{**c, "finish_reason": None} for c in choices]})

    monkeypatch.setattr(stream_module.Assembly, "add", drop_finish)
    model = make_model(server, max_retries=0)
    first = model.complete(USER)
    second = model.complete(USER)
    assert first.answer == second.answer and first.answer.startswith("fake answer")
    assert model.retry.serial is not None and model.retry.serial.needed
    assert cut["n"] > 0 and len(server.requests) == 4  # cut alone and cut in its turn, then two whole answers


def test_a_server_that_cuts_overlapping_streams_gets_one_call_at_a_time_run_wide(tmp_path: Path) -> None:
    """llama-cpp-python's way, acted by a fake: a stream is cut (no finish_reason) when it overlaps
    another request. After the first cut, every process of the run (two clients on one run
    directory here) sends one request at a time, and every call gets its whole streamed answer."""
    from sab_pytest.models import stream as stream_module

    with fake_openai_server(latency=0.1) as server:
        in_flight, overlapped = [0], [0]
        lock = threading.Lock()
        real_read = stream_module.read_stream

        def reading(chunks: Any, params: Any, each: Any = None) -> Any:  # a stream that overlaps is cut
            with lock:
                in_flight[0] += 1
                crowded = in_flight[0] > 1
            try:
                time.sleep(0.1)  # the answer streams for a while (the fake's chunks come at once otherwise)
                answer = real_read(chunks, params, each)
                if crowded:
                    overlapped[0] += 1
                    raise stream_module.StreamCut()
                return answer
            finally:
                with lock:
                    in_flight[0] -= 1

        with pytest.MonkeyPatch.context() as patch:
            patch.setattr("sab_pytest.models.providers.openai_compat.read_stream", reading)
            models = [chat_client("gpt-4o", base_url=server.url, api_key=SECRET, timeout=5, max_retries=0,
                                      pace_dir=tmp_path) for _ in range(2)]
            results: list[Any] = []
            together = threading.Barrier(6)  # sent at once: the calls overlap even on a loaded machine

            def one(model: ChatClient) -> None:
                try:
                    together.wait(HANG_S)
                    results.append(model.complete(USER).answer)
                except Exception as exc:  # the assertion shows it
                    results.append(exc)

            threads = [threading.Thread(target=one, args=(models[i % 2],)) for i in range(6)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(HANG_S * 2)
    assert len(results) == 6 and all(isinstance(r, str) and r.startswith("fake answer") for r in results), results
    assert all(m.retry.serial is not None and m.retry.serial.needed for m in models)
    assert all(m.transport.streams for m in models)  # still streaming: one at a time, nothing is cut
