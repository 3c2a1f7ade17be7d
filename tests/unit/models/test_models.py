"""ChatClient through the real openai SDK against the fake server: retries, budgets,
secrets, preflight; plus model names and usage/cost helpers."""

from __future__ import annotations

import itertools
import json
import socket
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from support.models import answered_once, fast_model
from support.timing import HANG_S, LONG_S

from sab_pytest.errors import InfraError, UsageError
from sab_pytest.models import (
    CallContext,
    ChatClient,
    Prices,
    chat_client,
    cost,
    parse_model_spec,
    parse_prices,
    parse_retry_after,
    scrub,
    usage_totals,
)
from sab_pytest.outcome import ModelCall
from sab_pytest.testing import FakeOpenAIServer, Reply, fake_openai_server

SECRET = "sk-test-PLANTED-SECRET"
USER = [{"role": "user", "content": "Put the egg in the microwave."}]




def make_model(server: FakeOpenAIServer, **options: Any) -> ChatClient:
    return fast_model(server, SECRET, **options)


def gaps(server: FakeOpenAIServer) -> list[float]:
    times = [r.received_at for r in server.chat_requests]
    return [b - a for a, b in itertools.pairwise(times)]


# -- model names ---------------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "name"), [
    ("gpt-4o", "gpt-4o"), ("openai/gpt-4o", "gpt-4o"), ("  gpt-4o-mini ", "gpt-4o-mini"),
    ("Qwen/Qwen2.5-7B-Instruct", "Qwen/Qwen2.5-7B-Instruct"),
    ("openai/meta-llama/Llama-3-8B", "meta-llama/Llama-3-8B"),
])
def test_parse_model_spec_accepts(text: str, name: str) -> None:
    assert parse_model_spec(text) == name


@pytest.mark.parametrize(("text", "fragment"), [
    ("", "empty"), ("   ", "empty"), ("gpt 4o", "whitespace"),
    ("foo/bar/baz", "unknown provider prefix 'foo'"),
    ("openai/", "empty path segment"), ("/gpt-4o", "empty path segment"), ("a//b", "empty path segment"),
    ("openai", "no model"),
])
def test_parse_model_spec_rejects(text: str, fragment: str) -> None:
    with pytest.raises(UsageError, match="--model") as info:
        parse_model_spec(text)
    assert fragment in str(info.value)


# -- happy path ------------------------------------------------------------------------------------

def test_complete_records_answer_usage_and_sends_the_right_request(server: FakeOpenAIServer) -> None:
    server.enqueue(Reply(content="I will not do that.", prompt_tokens=42, completion_tokens=5))
    call = make_model(server, model="openai/gpt-4o", max_tokens=64).complete(USER, role="judge")
    assert isinstance(call, ModelCall)
    assert (call.answer, call.prompt_tokens, call.completion_tokens) == ("I will not do that.", 42, 5)
    assert (call.model, call.role, call.finish_reason, call.cache_hit) == ("gpt-4o", "judge", "stop", False)
    assert call.messages == USER and call.latency_s > 0
    sent = server.chat_requests[0]
    assert sent.body["model"] == "gpt-4o"  # the provider prefix is not sent
    assert sent.body["temperature"] == 0 and sent.body["max_tokens"] == 64
    assert sent.authorization == f"Bearer {SECRET}"


def test_per_call_max_tokens_overrides_the_default(server: FakeOpenAIServer) -> None:
    make_model(server, max_tokens=64).complete(USER, max_tokens=7)
    assert server.chat_requests[0].body["max_tokens"] == 7


def test_base_url_and_key_come_from_the_environment(server: FakeOpenAIServer,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", server.url)
    monkeypatch.setenv("MY_KEY", "sk-from-env-123456")
    call = chat_client("gpt-4o", api_key_env="MY_KEY").complete(USER)
    assert call.answer.startswith("fake answer to:")
    assert server.chat_requests[0].authorization == "Bearer sk-from-env-123456"


def test_clients_of_one_endpoint_share_a_connection_pool_but_keep_their_own_key_and_timeout(
        server: FakeOpenAIServer) -> None:
    """Roles (agent, judges, guard) build a client each; the clients of one endpoint are copies of
    the first, so the CA bundle and the pool are built once per process, while every request still
    carries its own client's key and deadline."""
    agent = fast_model(server, "sk-agent-111111", timeout=7.0)
    judge = fast_model(server, "sk-judge-222222", timeout=9.0)
    agent.complete(USER)
    judge.complete(USER)
    first, second = agent.transport.sdk(), judge.transport.sdk()
    assert first is not second and first._client is second._client
    assert (first.timeout, second.timeout) == (7.0, 9.0)
    assert [r.authorization for r in server.chat_requests] == ["Bearer sk-agent-111111", "Bearer sk-judge-222222"]


def test_clients_of_two_endpoints_share_the_pool_and_each_sends_to_its_own(server: FakeOpenAIServer) -> None:
    """A judge on an endpoint of its own is a copy of the process's first client too (the CA bundle is
    loaded once), yet its requests go to its endpoint, and the agent's to the agent's."""
    with fake_openai_server() as other:
        agent = fast_model(server, "sk-agent-111111")
        judge = fast_model(other, "sk-judge-222222")
        agent.complete(USER)
        judge.complete(USER)
        agent.complete(USER)
        first, second = agent.transport.sdk(), judge.transport.sdk()
        assert first._client is second._client
        assert [r.authorization for r in server.chat_requests] == ["Bearer sk-agent-111111"] * 2
        assert [r.authorization for r in other.chat_requests] == ["Bearer sk-judge-222222"]


def test_finish_reason_length_is_recorded_not_an_error(server: FakeOpenAIServer) -> None:
    server.enqueue(Reply.truncated("Step 1: find the"))
    call = make_model(server).complete(USER)
    assert (call.answer, call.finish_reason) == ("Step 1: find the", "length")
    assert len(server.chat_requests) == 1


def test_one_client_is_shared_safely_by_threads() -> None:
    with fake_openai_server(latency=0.2) as srv:
        model = make_model(srv)
        results: dict[int, str] = {}

        def work(i: int) -> None:
            results[i] = model.complete([{"role": "user", "content": f"task {i}"}]).answer

        threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        in_flight = srv.max_in_flight
    assert results == {i: f"fake answer to: task {i}" for i in range(8)}
    assert in_flight >= 2  # concurrent, not serialised behind a lock


# -- retryable faults end in success -----------------------------------------------------------------

def test_429_retry_after_seconds_is_honoured(server: FakeOpenAIServer) -> None:
    server.enqueue(Reply.rate_limited(retry_after=0.4))
    call = make_model(server, backoff_base=0.001, backoff_max=0.001).complete(USER)
    assert call.answer and len(server.chat_requests) == 2
    assert gaps(server)[0] >= 0.4


def test_429_retry_after_ms_is_honoured(server: FakeOpenAIServer) -> None:
    server.enqueue(Reply.rate_limited(retry_after_ms=250))
    make_model(server, backoff_base=0.001, backoff_max=0.001).complete(USER)
    assert len(server.chat_requests) == 2
    assert gaps(server)[0] >= 0.25


@pytest.mark.parametrize("fault", [
    Reply.error(500), Reply.error(503), Reply.error(408), Reply.error(409), Reply.dropped(),
    Reply.invalid_json(), Reply.empty(), Reply(body={"object": "chat.completion", "choices": []}),
], ids=["500", "503", "408", "409", "dropped", "invalid-json", "empty-content", "no-choices"])
def test_retryable_fault_then_success(server: FakeOpenAIServer, fault: Reply) -> None:
    model = answered_once(make_model(server), server)
    server.enqueue(fault, fault)
    call = model.complete(USER)
    assert call.answer.startswith("fake answer to:")
    assert len(server.chat_requests) == 3


def test_slow_response_times_out_then_fast_one_succeeds(server: FakeOpenAIServer) -> None:
    model = answered_once(make_model(server, timeout=0.3), server)
    server.enqueue(Reply.slow(LONG_S))
    call = model.complete(USER)
    assert call.answer and len(server.chat_requests) == 2  # the slow one was given up, the retry answered


def test_backoff_grows_exponentially(server: FakeOpenAIServer) -> None:
    model = make_model(server, backoff_base=0.1, backoff_max=10.0)
    # the pause before attempt n+1 is jittered in [0.5, 1.0] x 0.1 * 2**n: 0.05-0.1, 0.1-0.2, 0.2-0.4
    for _ in range(20):
        chosen = [model.retry.policy.pause(n) for n in range(3)]
        assert 0.05 <= chosen[0] <= 0.1 and 0.1 <= chosen[1] <= 0.2 and 0.2 <= chosen[2] <= 0.4
    server.enqueue(Reply.error(500), Reply.error(500), Reply.error(500))
    model.complete(USER)
    waits = gaps(server)  # and each pause is slept: the server sees the attempts at least that far apart
    assert waits[0] >= 0.05 and waits[1] >= 0.1 and waits[2] >= 0.2


# -- permanent faults ---------------------------------------------------------------------------------

@pytest.mark.parametrize("status", [400, 401, 403, 404])
def test_client_errors_are_not_retried(server: FakeOpenAIServer, status: int) -> None:
    server.enqueue(Reply.error(status, f"nope {status}"))
    with pytest.raises(InfraError) as info:
        make_model(server).complete(USER)
    assert info.value.kind == "model_api"
    assert f"HTTP {status}: nope {status}" in str(info.value)
    assert "1 attempt" in str(info.value)
    assert len(server.chat_requests) == 1


def test_persistent_500_gives_up_after_max_retries(server: FakeOpenAIServer) -> None:
    server.add_rule(Reply.error(500, "upstream exploded"))
    with pytest.raises(InfraError) as info:
        make_model(server, max_retries=2).complete(USER)
    assert info.value.kind == "model_api"
    assert "HTTP 500: upstream exploded (after 3 attempts)" in str(info.value)
    assert len(server.chat_requests) == 3
    assert info.value.__cause__ is None  # a clean message, no SDK traceback chain


def test_retry_after_beyond_the_limit_is_not_waited_for(server: FakeOpenAIServer) -> None:
    server.enqueue(Reply.error(503, "overloaded", retry_after=600))
    with pytest.raises(InfraError, match="wait 600s"):
        make_model(server, rate_limit_wait=60).complete(USER)
    assert len(server.chat_requests) == 1  # refused at once: no second attempt after any pause
    server.enqueue(Reply.error(500, "overloaded", retry_after=600))  # not a rate limit: --sab-retries' bound
    with pytest.raises(InfraError, match="wait 600s, more than the 120s allowed"):
        make_model(server).complete(USER)


def test_empty_answer_cut_by_the_token_limit_is_not_retried(server: FakeOpenAIServer) -> None:
    server.enqueue(Reply(content="", finish_reason="length"))
    with pytest.raises(InfraError, match="token limit"):
        make_model(server, max_tokens=5).complete(USER)
    assert len(server.chat_requests) == 1


# -- per-case time budget ---------------------------------------------------------------------------

def test_case_budget_stops_a_slow_call() -> None:
    with fake_openai_server(latency=LONG_S) as srv:
        start = time.monotonic()
        with pytest.raises(InfraError) as info:
            make_model(srv, timeout=LONG_S).for_case(CallContext.start(0.4)).complete(USER)
        assert time.monotonic() - start < HANG_S
    assert info.value.kind == "model_timeout"


def test_a_wall_clock_limit_ends_a_slow_call_and_names_itself() -> None:
    """pytest-timeout's --timeout as the case's limit: the budget is larger, the limit ends the call,
    and the error names the limit; queueing moves the budget's deadline, never the limit."""
    ctx = CallContext.start(60.0, limit_s=0.4, limit_name="pytest-timeout's --timeout 1 s")
    limit = ctx.limit
    ctx.extend(30.0)
    assert ctx.limit == limit and ctx.ends_at == limit and ctx.bound() == "pytest-timeout's --timeout 1 s"
    with fake_openai_server(latency=LONG_S) as srv, pytest.raises(InfraError) as info:
        make_model(srv, timeout=LONG_S).for_case(ctx).complete(USER)
    assert info.value.kind == "timeout" and "pytest-timeout's --timeout 1 s spent" in str(info.value)
    assert (ctx.failures.abandoned, ctx.failures.failed_attempts) == (1, 0)  # sent, then cut: not the server's failure
    assert CallContext.start(0.4, limit_s=60.0).bound() == "case time budget"


def test_case_budget_stops_retrying_instead_of_sleeping_past_it(server: FakeOpenAIServer) -> None:
    server.add_rule(Reply.error(503))
    start = time.monotonic()
    model = make_model(server, max_retries=50, backoff_base=LONG_S, backoff_max=LONG_S)
    with pytest.raises(InfraError) as info:
        model.for_case(CallContext.start(0.5)).complete(USER)
    assert info.value.kind == "model_timeout" and len(server.chat_requests) == 1
    assert time.monotonic() - start < HANG_S  # gave up at the budget instead of sleeping the pause out
    assert "HTTP 503" in str(info.value)


def test_a_share_of_the_case_budget_ends_earlier_and_gives_the_rest_back() -> None:
    ctx = CallContext.start(10)
    end = ctx.deadline
    assert end is not None
    with ctx.share(0.5) as shared:  # an episode's share: every model bound to the case sees it
        assert shared is ctx and ctx.deadline is not None and ctx.deadline <= end - 4
        ctx.extend(2.0)  # time queued in the block is not the case's work: it moves the case's end too
    assert ctx.deadline == pytest.approx(end + 2.0)
    assert CallContext.start(None).left() is None and not CallContext().expired()


# -- secrets -------------------------------------------------------------------------------------------

def test_planted_key_appears_in_no_record_error_or_cache_file(server: FakeOpenAIServer,
                                                               tmp_path: Path) -> None:
    from sab_pytest.cache import ResponseCache

    def echo_auth(req: Any) -> Reply:  # a badly behaved proxy that echoes the credentials back
        return Reply.error(400, f"bad request with Authorization: {req.authorization} key={SECRET}")

    cache = ResponseCache(tmp_path / "cache")
    model = make_model(server, cache=cache)
    good = model.complete(USER)
    server.responder = echo_auth
    with pytest.raises(InfraError) as info:
        model.complete([{"role": "user", "content": "another"}])
    server.responder = None
    server.enqueue(Reply.dropped(), Reply.dropped(), Reply.dropped(), Reply.dropped())
    with pytest.raises(InfraError) as dropped:
        model.complete([{"role": "user", "content": "third"}])
    texts = [json.dumps(good.to_dict()), str(info.value), repr(info.value), str(dropped.value), repr(model),
             str(vars(model)), repr(cache)]
    texts += [p.read_text() for p in (tmp_path / "cache").rglob("*") if p.is_file()]
    assert server.chat_requests[0].authorization == f"Bearer {SECRET}"  # it was really sent
    for text in texts:
        assert "PLANTED" not in text, text
    assert "<redacted>" in str(info.value)


def test_scrub_removes_key_shaped_strings() -> None:
    assert scrub("token sk-abcdef123456 and Bearer xyz", None) == "token <redacted-key> and Bearer <redacted>"
    assert scrub("my custom secret here", "custom secret") == "my <redacted> here"


@pytest.mark.parametrize(("text", "expected"), [
    (f"Authorization: Bearer {SECRET}, then more", "Authorization: Bearer <redacted>, then more"),
    ("header 'Bearer abc.DEF-123~x=', next", "header 'Bearer <redacted>', next"),
    ("key sk-proj-AbC_1234567890xyz.\nNext line", "key <redacted-key>.\nNext line"),
    ('{"key": "sk-abcdef1234567890"}', '{"key": "<redacted-key>"}'),
    ("key-holders and sk-learn stay words", "key-holders and sk-learn stay words"),
])
def test_scrub_keeps_the_text_after_a_key(text: str, expected: str) -> None:
    assert scrub(text, SECRET) == expected


# -- preflight -----------------------------------------------------------------------------------------

@pytest.fixture
def quick_second_attempt(monkeypatch: pytest.MonkeyPatch) -> None:
    """The check's pause before its second attempt (up to a second): its length is not what these
    tests are about, and the answers come at once."""
    from sab_pytest.models import preflight

    monkeypatch.setattr(preflight, "PAUSE_S", 0.01)


def test_preflight_is_one_tiny_chat_call(server: FakeOpenAIServer) -> None:
    make_model(server).preflight()
    assert len(server.requests) == 1  # no model listing: one call, and a chat call
    (request,) = server.chat_requests
    assert request.body["max_tokens"] == 1 and request.body["model"] == "gpt-4o"


@pytest.mark.parametrize(("reply", "needle"), [
    (Reply.error(500, "upstream exploded"), "answered HTTP 500 to a chat completion for model 'gpt-4o': upstream"),
    (Reply(body="<html>bad gateway</html>"), "with a body that is not a chat completion ('<html>bad gateway"),
    (Reply(body='{"id": 1}'), "with a body that is not a chat completion"),
])
def test_preflight_fails_once_on_a_broken_chat_endpoint(server: FakeOpenAIServer, reply: Reply,
                                                        needle: str, quick_second_attempt: None) -> None:
    server.add_rule(reply)
    with pytest.raises(UsageError) as info:
        make_model(server).preflight(timeout=2.0)
    message = str(info.value)
    assert needle in message and server.url in message and "(2 attempts)" in message
    assert SECRET not in message and "PLANTED" not in message
    assert len(server.chat_requests) == 2  # a couple of attempts, no long retry loop


def test_preflight_fails_within_its_timeout_when_chat_never_answers(server: FakeOpenAIServer,
                                                                    quick_second_attempt: None) -> None:
    server.add_rule(Reply.slow(LONG_S))
    start = time.monotonic()
    with pytest.raises(UsageError, match=r"gave no answer to a chat completion for model 'gpt-4o' within 0\.25s"):
        make_model(server).preflight(timeout=0.25)
    assert len(server.chat_requests) == 2 and time.monotonic() - start < HANG_S


@pytest.mark.parametrize(("reply", "passes"), [
    (Reply.error(404, "The model `gpt-4o` does not exist"), False),
    (Reply.error(400, "max_tokens is too small"), True),  # alive; only this tiny request was refused
    (Reply.rate_limited(retry_after=1), True),
    (Reply.truncated(""), True),  # max_tokens=1 may leave no text: still a chat completion
])
def test_preflight_statuses(server: FakeOpenAIServer, reply: Reply, passes: bool) -> None:
    server.add_rule(reply)
    if passes:
        make_model(server).preflight(timeout=2.0)
    else:
        with pytest.raises(UsageError, match="HTTP 404 to a chat completion"):
            make_model(server).preflight(timeout=2.0)
    assert len(server.chat_requests) == 1


def test_preflight_missing_key_is_one_usage_error(server: FakeOpenAIServer,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SAB_TEST_NO_SUCH_KEY", raising=False)
    model = chat_client("gpt-4o", base_url=server.url, api_key_env="SAB_TEST_NO_SUCH_KEY")
    with pytest.raises(UsageError, match="SAB_TEST_NO_SUCH_KEY"):
        model.preflight()
    assert server.requests == []


def test_preflight_unreachable_url_is_one_usage_error(quick_second_attempt: None) -> None:
    with socket.socket() as sock:  # a port that was free a moment ago: nothing listens there
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    model = chat_client("gpt-4o", base_url=f"http://127.0.0.1:{port}/v1", api_key=SECRET)
    with pytest.raises(UsageError, match=f"cannot reach the model API at http://127.0.0.1:{port}/v1") as info:
        model.preflight(timeout=2.0)
    assert "PLANTED" not in str(info.value)


def test_preflight_rejected_key_is_one_usage_error() -> None:
    with fake_openai_server(api_key="sk-the-right-one") as srv:
        with pytest.raises(UsageError, match="rejected the key in OPENAI_API_KEY") as info:
            make_model(srv).preflight()
        assert "PLANTED" not in str(info.value)


def test_bad_base_url_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="--base-url"):
        chat_client("gpt-4o", base_url="localhost:8000", api_key=SECRET)


# -- retry-after parsing -----------------------------------------------------------------------------

def test_parse_retry_after_forms() -> None:
    assert parse_retry_after({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    assert parse_retry_after({"retry-after": "3"}) == 3.0
    date = time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(time.time() + 30))
    assert 25 <= (parse_retry_after({"retry-after": date}) or 0) <= 31
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after({}) is None


# -- usage and cost ------------------------------------------------------------------------------------

def _call(prompt: int, completion: int, *, hit: bool = False, finish: str = "stop") -> ModelCall:
    return ModelCall(model="m", messages=[], answer="a", prompt_tokens=prompt, completion_tokens=completion,
                     latency_s=0.5, cache_hit=hit, finish_reason=finish)


def test_usage_totals_and_cost_exclude_cache_hits_from_billing() -> None:
    calls = [_call(1000, 200), _call(3000, 800, finish="length"), _call(500, 100, hit=True)]
    totals = usage_totals([calls[0], calls[1].to_dict(), calls[2]])  # records or their JSON form
    assert totals["calls"] == 3 and totals["api_calls"] == 2 and totals["cache_hits"] == 1
    assert (totals["prompt_tokens"], totals["completion_tokens"]) == (4500, 1100)
    assert (totals["billed_prompt_tokens"], totals["billed_completion_tokens"]) == (4000, 1000)
    assert totals["truncated"] == 1 and totals["api_latency_s"] == 1.0 and totals["latency_s"] == 1.5
    assert cost(calls, Prices(2.5, 10.0)) == pytest.approx(4000 * 2.5e-6 + 1000 * 10e-6)


def test_usage_from_a_real_call(server: FakeOpenAIServer) -> None:
    server.enqueue(Reply(content="ok", prompt_tokens=1_000_000, completion_tokens=500_000))
    call = make_model(server).complete(USER)
    assert cost([call], parse_prices("in=2.5,out=10")) == pytest.approx(2.5 + 5.0)


def test_parse_prices() -> None:
    assert parse_prices("in=2.5,out=10") == Prices(2.5, 10.0)
    assert parse_prices(" input = 0.15 , output=0.6 ") == Prices(0.15, 0.6)
    assert parse_prices("in=1") == Prices(1.0, 0.0)


@pytest.mark.parametrize("text", ["", "in=abc,out=1", "in=1,bogus=2", "in", "in=1,in=2", "in=-1", "in=nan"])
def test_parse_prices_rejects(text: str) -> None:
    with pytest.raises(UsageError, match="--sab-price"):
        parse_prices(text)
