"""Real endpoints: rate limits slow a run down and never fail it (unless one call waits past the
stated ceiling), a hung endpoint stops the run after two timeouts instead of every call's retries,
and messages name the likely cause. Real openai client against the fake server's request-per-minute
limit and hang mode."""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from support.benchmark import RunSetup
from support.calls import case_calls, is_preflight
from support.models import answered_once, fast_model
from support.results import read_summary
from support.timing import HANG_S, POLL_S
from support.tiny_dataset import N_CASES

from sab_pytest.errors import InfraError, UsageError
from sab_pytest.models import CallContext, ChatClient, chat_client
from sab_pytest.models.usage import add_failures
from sab_pytest.models.wire import CAUSE_RATE, CAUSE_SERVER, parse_duration, rate_limit_wait
from sab_pytest.run.breaker import RunState
from sab_pytest.run.slots import CallSlots, Pace
from sab_pytest.testing import FakeOpenAIServer, RecordedRequest, Reply, fake_openai_server

KEY = "sk-test-PLANTED-KEY-0123456789"
USER = [{"role": "user", "content": "Plan: put the mug in the sink."}]


def model(server: FakeOpenAIServer, **options: Any) -> ChatClient:
    return fast_model(server, KEY, **{"max_retries": 1, **options})


# -- the fake server ---------------------------------------------------------------------------------

def _post(url: str) -> tuple[int, Any, dict[str, Any]]:
    """Status, headers and JSON body of one chat request (stdlib only: no SDK in between)."""
    request = urllib.request.Request(f"{url}/chat/completions", data=json.dumps({"messages": USER}).encode(),
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=HANG_S) as answer:
            return answer.status, answer.headers, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, error.headers, json.loads(error.read())


def test_fake_server_limits_requests_per_minute_with_openai_headers() -> None:
    with fake_openai_server(rpm=60, burst=2) as server:
        answers = [_post(server.url) for _ in range(3)]
    assert [status for status, _, _ in answers] == [200, 200, 429]
    assert answers[0][1]["x-ratelimit-limit-requests"] == "60"
    assert answers[0][1]["x-ratelimit-remaining-requests"] == "59"  # of the minute's 60, as OpenAI counts
    assert 0 < (parse_duration(answers[0][1]["x-ratelimit-reset-requests"]) or 0) <= 1.0  # whole again in 1 s
    refused = answers[2][1]
    assert refused["Retry-After"] == "1" and 0 < int(refused["retry-after-ms"]) <= 1000
    # refused on the burst (the limit enforced over a second) while the minute still has requests left
    assert refused["x-ratelimit-remaining-requests"] == "58"
    assert 1.0 < (parse_duration(refused["x-ratelimit-reset-requests"]) or 0) <= 2.0
    assert "Rate limit reached" in answers[2][2]["error"]["message"]


def test_fake_server_hangs_after_n_calls() -> None:
    with fake_openai_server(hang_after=1) as server:
        client = model(server, timeout=0.3, max_retries=0)
        assert client.complete(USER).answer
        with pytest.raises(InfraError, match=r"no answer within 0.3s"):
            client.complete(USER)
        assert server.hang is not None and server.hang.hung_at is not None


def test_wait_read_from_headers() -> None:
    assert parse_duration("6m0s") == 360 and parse_duration("1.5s") == 1.5 and parse_duration("20ms") == 0.02
    assert parse_duration("soon") is None and parse_duration("1s junk") is None
    assert rate_limit_wait({"retry-after": "3", "x-ratelimit-reset-requests": "9s"}) == 3
    assert rate_limit_wait({"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "250ms",
                            "x-ratelimit-remaining-tokens": "900", "x-ratelimit-reset-tokens": "8s"}) == 0.25
    assert rate_limit_wait({"x-ratelimit-remaining-tokens": "0", "x-ratelimit-reset-tokens": "2s"}) == 2
    assert rate_limit_wait({}) is None


# -- back-pressure in the client ----------------------------------------------------------------------

def test_rate_limits_use_up_no_retry_and_are_counted_apart(server: FakeOpenAIServer) -> None:
    server.enqueue(*[Reply.rate_limited(retry_after_ms=20)] * 5)
    ctx = CallContext()
    call = model(server, max_retries=0).for_case(ctx).complete(USER)
    log = ctx.failures
    assert call.answer and len(server.chat_requests) == 6
    assert log.rate_limited == 5 and log.failed_attempts == 0 and log.rate_limit_wait_s >= 5 * 0.02
    usage = add_failures({"api_calls": 1, "failed_calls": 0, "errors": 0}, log)
    assert usage["api_calls"] == 6 and usage["failed_calls"] == 0 and usage["rate_limited"] == 5


def test_reset_header_is_waited_for_without_retry_after(server: FakeOpenAIServer) -> None:
    server.enqueue(Reply.error(429, "slow down", headers={"x-ratelimit-remaining-requests": "0",
                                                          "x-ratelimit-reset-requests": "300ms"}))
    model(server).complete(USER)
    first, second = (r.received_at for r in server.chat_requests)
    assert second - first >= 0.3


def test_a_503_with_retry_after_is_back_pressure_too(server: FakeOpenAIServer) -> None:
    server.enqueue(*[Reply.error(503, "busy", retry_after_ms=10)] * 3)
    ctx = CallContext()
    assert model(server, max_retries=0).for_case(ctx).complete(USER).answer
    log = ctx.failures
    assert log.rate_limited == 3 and log.failed_attempts == 0


def test_the_breaker_neither_hears_429s_nor_cuts_their_waits_short(server: FakeOpenAIServer, tmp_path: Path) -> None:
    state = RunState(tmp_path / "run", max_failures=2)
    state.failure("an earlier call failed for good")  # the endpoint looks failing: retries are cut short
    server.enqueue(*[Reply.rate_limited(retry_after_ms=20)] * 4)
    call = model(server, breaker=state).complete(USER)
    assert call.answer and len(server.chat_requests) == 5
    assert state.failures() == 1 and state.stopped() is None and state.streak() == 0


def test_a_call_errs_after_the_stated_ceiling_of_back_off(server: FakeOpenAIServer, tmp_path: Path) -> None:
    server.add_rule(Reply.rate_limited(retry_after_ms=100))
    state = RunState(tmp_path / "run", max_failures=5)
    ctx = CallContext()
    log = ctx.failures
    with pytest.raises(InfraError) as info:
        model(server, rate_limit_wait=0.5, breaker=state).for_case(ctx).complete(USER)
    message = str(info.value)
    assert info.value.kind == "model_api"
    assert "still rate limited after" in message and "0.5s one call may wait (--sab-rate-limit-wait)" in message
    assert CAUSE_RATE in message and "check --base-url" not in message
    assert 0.4 <= log.rate_limit_wait_s <= 0.5 + 1e-6 and log.failed_calls == 1
    assert state.failures() == 1  # a call that gave up counts like any call that failed for good


def test_calls_in_flight_shrink_on_429_and_grow_back_across_processes(tmp_path: Path) -> None:
    path = tmp_path / "pace.json"
    one, two = CallSlots(16, Pace(path)), CallSlots(16, Pace(path))
    assert one.open_slots() == two.open_slots() == 16
    one.congested()
    one.congested()  # the same congestion event: one cut
    two.pace._read_at = 0.0  # read the shared file now, not at the next half second
    assert one.open_slots() == two.open_slots() == 8
    for _ in range(8 * 4):
        two.relieved()
    assert 8 < two.open_slots() <= 16
    path.write_text("{not json")
    one.pace._read_at = 0.0
    assert one.open_slots() == 16  # a garbled file reads as "no limit seen"
    path.unlink()
    one.pace._read_at = 0.0
    assert one.open_slots() == 16


def test_a_shrunk_limit_holds_back_new_calls(tmp_path: Path) -> None:
    slots = CallSlots(4, Pace(tmp_path / "pace.json"))
    slots.congested()  # 2 open
    entered = threading.Semaphore(0)
    release = threading.Event()

    def call() -> None:
        with slots.slot():
            entered.release()
            release.wait(HANG_S)

    threads = [threading.Thread(target=call) for _ in range(3)]
    for thread in threads:
        thread.start()
    assert entered.acquire(timeout=HANG_S) and entered.acquire(timeout=HANG_S)
    assert not entered.acquire(timeout=0.3) and slots.in_flight == 2
    release.set()
    for thread in threads:
        thread.join(HANG_S)
    assert slots.max_in_flight == 2


# -- a hung endpoint ------------------------------------------------------------------------------------

def test_a_hung_endpoint_stops_the_run_after_two_timeouts(tmp_path: Path) -> None:
    state = RunState(tmp_path / "run", max_failures=10)
    with fake_openai_server(hang_after=0) as server:
        with pytest.raises(InfraError) as info:
            model(server, timeout=0.3, max_retries=6, breaker=state).complete(USER)
        asked = len(server.chat_requests)
    assert info.value.kind == "endpoint_down" and asked == 2  # not the 7 attempts of --sab-retries 6
    stop = state.stopped()
    assert stop is not None and stop.reason == "endpoint_down" and "stopped answering" in stop.message
    assert "does not answer them" in stop.message and "check --base-url" not in stop.message


def test_timeouts_while_other_calls_are_answered_are_only_slow(tmp_path: Path) -> None:
    state = RunState(tmp_path / "run", max_failures=10)
    with fake_openai_server() as server:
        client = answered_once(model(server, timeout=0.3, max_retries=6, breaker=state), server)
        server.enqueue(Reply.slow(1.0), Reply.slow(1.0), Reply.slow(1.0))
        answered = threading.Event()

        def others() -> None:  # the rest of the run is answered meanwhile
            while not answered.wait(POLL_S):
                state.success()

        thread = threading.Thread(target=others)
        thread.start()
        try:
            call = client.complete(USER)
        finally:
            answered.set()
            thread.join(HANG_S)
    assert call.answer and len(server.chat_requests) == 4 and state.stopped() is None


# -- likely causes ----------------------------------------------------------------------------------

def test_a_server_failing_is_not_called_a_wrong_url(server: FakeOpenAIServer) -> None:
    server.add_rule(Reply.error(500, "backend down"))
    with pytest.raises(UsageError) as info:
        model(server).preflight(timeout=1.0)
    assert "server is failing" in str(info.value) and "--base-url" not in str(info.value)
    with pytest.raises(InfraError) as failed:
        model(server).complete(USER)
    assert CAUSE_SERVER in str(failed.value)


def test_causes_named_by_the_preflight(server: FakeOpenAIServer) -> None:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(UsageError, match=r"URL is wrong or nothing serves it; check --base-url"):
        chat_client("gpt-4o", base_url=f"http://127.0.0.1:{port}/v1", api_key=KEY).preflight(timeout=1.0)
    server.add_rule(Reply.slow(5))
    with pytest.raises(UsageError, match=r"accepts requests but does not answer them"):
        model(server).preflight(timeout=0.3)


def test_quota_used_up_is_not_waited_out(server: FakeOpenAIServer) -> None:
    server.add_rule(Reply(status=429, body={"error": {"message": "You exceeded your current quota",
                                                      "code": "insufficient_quota"}}))
    with pytest.raises(InfraError, match="quota or credit is used up"):
        model(server).complete(USER)
    assert len(server.chat_requests) == 1


# -- whole runs --------------------------------------------------------------------------------------

class TwoInThree:
    """Answers 429 (Retry-After 0.1 s) to two case calls in three, like a busy API."""

    def __init__(self) -> None:
        self.seen = 0
        self._lock = threading.Lock()

    def __call__(self, request: RecordedRequest) -> Reply | None:
        if is_preflight(request):
            return None
        with self._lock:
            self.seen += 1
            refuse = self.seen % 3 != 0
        return Reply.rate_limited(retry_after="0.1") if refuse else None


@pytest.fixture
def run_setup(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> RunSetup:
    """``run(*args, server=server)``: agent ``agent-x`` at ``server``, rule judge, a cache of its own."""
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    return RunSetup((f"--sab-cache={pytester.path / 'cache'}", "--sab-no-exec", "--model", "agent-x",
                     "--judge-model", "rules"))


def test_a_run_against_a_two_in_three_429_server_has_no_error(run) -> None:
    """Eight calls in flight, in one process: a 429 is waited out, not counted as a failure. (Runs
    under xdist, whose workers share one schedule and add up their 429s, are test_pacing's.)"""
    with fake_openai_server(responder=TwoInThree()) as server:
        result = run("--sab-concurrency", "8", "--sab-retries", "1", "--sab-max-failures", "2", server=server)
        calls = case_calls(server.chat_requests)
    summary = read_summary(run.out)
    assert summary["errors"] == 0 and summary["cases"] == N_CASES and summary["run"]["status"] == "complete"
    assert summary["usage"]["rate_limited"] >= N_CASES and summary["usage"]["rate_limit_wait_s"] > 0
    assert summary["usage"]["api_calls"] == len(calls)
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # the fake agent's verdicts, not errors
    result.stdout.fnmatch_lines(["*rate limits: * requests answered HTTP 429*slowed down, not failed*"])


def test_an_endpoint_that_hangs_mid_run_stops_it_and_resume_does_the_rest(run) -> None:
    """Two calls in flight, in one process. (A stop across xdist workers, of an endpoint that
    answers errors, is test_dead_endpoint's.)"""
    with fake_openai_server(hang_after=4) as server:
        started = time.monotonic()
        result = run("--sab-concurrency", "2", "--sab-timeout", "1", server=server)
        took = time.monotonic() - started
        summary = read_summary(run.out)
        assert result.ret == pytest.ExitCode.INTERRUPTED, took
        assert summary["run"]["status"] == "stopped" and summary["run"]["stop_reason"] == "endpoint_down"
        assert "stopped answering" in summary["run"]["stop_message"] and summary["run"]["not_run"] > 0
        result.stdout.fnmatch_lines(["*run STOPPED: the model endpoint * stopped answering*"])
        server.hang = None  # the endpoint answers again
        again = run("--sab-resume", server=server)
    assert again.ret == pytest.ExitCode.TESTS_FAILED
    final = read_summary(run.out)
    assert final["cases"] == N_CASES and final["errors"] == 0


def test_back_off_is_not_charged_to_the_case_budget(server: FakeOpenAIServer) -> None:
    client = model(server)
    client.complete(USER)  # the SDK client is made and connected outside the budget
    server.reset()
    server.enqueue(*[Reply.rate_limited(retry_after_ms=220)] * 5)
    case = client.for_case(CallContext.start(1.0))
    assert case.complete([{"role": "user", "content": "again"}]).answer  # >= 1.1 s of back-off
    assert len(server.chat_requests) == 6
