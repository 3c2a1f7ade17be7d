"""The run's shared breaker and stop signal (``breaker.RunState``), alone and inside the model
client; plus the small honesty fixes of the reports (redaction, intervals, JUnit, messages)."""

from __future__ import annotations

import multiprocessing
import threading
import time
from pathlib import Path

import pytest
from support.timing import HANG_S, LONG_S, PROCESS_S

from sab_pytest.dataset import load
from sab_pytest.errors import ENDPOINT_DOWN, INTERRUPTED, DatasetError, InfraError
from sab_pytest.models import CallContext, ChatClient, chat_client
from sab_pytest.reports import junit
from sab_pytest.results import files, metrics
from sab_pytest.run.breaker import RunState
from sab_pytest.testing import FakeOpenAIServer, Reply

USER = [{"role": "user", "content": "Put the egg in the microwave."}]


def test_streak_is_shared_and_a_success_resets_it(tmp_path: Path) -> None:
    a, b = RunState(tmp_path, 3), RunState(tmp_path, 3)  # two processes' views of one run directory
    assert a.failure("x") == 1 and b.failure("y") == 2 and a.streak() == 2
    b.success()
    assert a.streak() == 0 and a.stopped() is None
    a.failure("1"), b.failure("2")
    assert a.stopped() is None
    b.failure("HTTP 500 at http://host/v1")
    stop = a.stopped()
    assert stop is not None and stop.reason == ENDPOINT_DOWN and "3 calls in a row" in stop.message
    assert "HTTP 500 at http://host/v1" in stop.message and a.failures() == 5
    with pytest.raises(InfraError) as info:
        a.check()
    assert info.value.kind == ENDPOINT_DOWN


def test_zero_turns_the_breaker_off_but_not_the_stop_signal(tmp_path: Path) -> None:
    state = RunState(tmp_path, 0)
    for n in range(50):
        state.failure(str(n))
    assert state.stopped() is None
    state.request_stop(INTERRUPTED, "Ctrl-C")
    state.request_stop(ENDPOINT_DOWN, "later reasons do not replace the first")
    assert RunState(tmp_path).stopped().reason == INTERRUPTED


def _fail_many(directory: str, count: int) -> None:
    state = RunState(directory, 0)
    for n in range(count):
        state.failure(str(n))


def test_counts_are_exact_across_processes(tmp_path: Path) -> None:
    context = multiprocessing.get_context("fork")
    procs = [context.Process(target=_fail_many, args=(str(tmp_path), 40)) for _ in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(PROCESS_S)
    assert RunState(tmp_path).failures() == 160 and RunState(tmp_path).streak() == 160


def test_wait_wakes_when_the_run_stops_or_the_endpoint_fails(tmp_path: Path) -> None:
    state = RunState(tmp_path)
    threading.Timer(0.2, lambda: RunState(tmp_path).request_stop(INTERRUPTED, "Ctrl-C")).start()
    start = time.monotonic()
    with pytest.raises(InfraError, match="Ctrl-C"):
        state.wait(LONG_S)
    assert time.monotonic() - start < HANG_S  # woken by the stop, not at the end of the wait
    other = RunState(tmp_path / "other")
    other.failure("x")
    assert other.wait(30, while_healthy=True) is False
    assert RunState(tmp_path / "third").wait(0.05, while_healthy=True) is True


# -- inside the model client ----------------------------------------------------------------------------

def _model(server: FakeOpenAIServer, state: RunState, **options) -> ChatClient:
    settings = {"base_url": server.url, "api_key": "sk-test-0123456789", "timeout": 2.0, "max_retries": 3,
                "backoff_base": 0.01, "backoff_max": 0.05, "breaker": state}
    settings.update(options)
    return chat_client("gpt-4o", **settings)


def test_a_stopped_run_makes_no_request(server: FakeOpenAIServer, tmp_path: Path) -> None:
    state = RunState(tmp_path)
    state.request_stop(ENDPOINT_DOWN, "the endpoint is down")
    with pytest.raises(InfraError) as info:
        _model(server, state).complete(USER)
    assert info.value.kind == ENDPOINT_DOWN and server.requests == []


def test_each_failed_attempt_is_counted_and_the_final_failure_reported(server: FakeOpenAIServer,
                                                                        tmp_path: Path) -> None:
    server.add_rule(Reply.error(500))
    state = RunState(tmp_path)
    ctx = CallContext()
    log = ctx.failures
    with pytest.raises(InfraError, match="after 4 attempts"):
        _model(server, state).for_case(ctx).complete(USER)
    assert (log.failed_attempts, log.failed_calls) == (4, 1) and len(server.chat_requests) == 4
    assert state.streak() == 1
    # the endpoint is known to be failing: the next call's failure is not retried
    ctx = CallContext()
    log = ctx.failures
    with pytest.raises(InfraError, match="not retried: other calls"):
        _model(server, state).for_case(ctx).complete(USER)
    assert (log.failed_attempts, log.failed_calls) == (1, 1) and len(server.chat_requests) == 5
    server.reset()
    _model(server, state).complete(USER)  # an answer: the streak is over
    assert state.streak() == 0


def test_a_stop_during_a_retry_pause_ends_the_call(server: FakeOpenAIServer, tmp_path: Path) -> None:
    server.add_rule(Reply.error(503, retry_after=100))  # a pause the stop must cut short
    state = RunState(tmp_path)
    threading.Timer(0.3, lambda: state.request_stop(INTERRUPTED, "Ctrl-C")).start()
    start = time.monotonic()
    with pytest.raises(InfraError) as info:
        _model(server, state).complete(USER)
    assert info.value.kind == INTERRUPTED and time.monotonic() - start < HANG_S
    assert len(server.chat_requests) == 1 and state.streak() == 0  # a stop is no endpoint failure


# -- small honesty fixes --------------------------------------------------------------------------------

def test_redactor_replaces_the_key_and_keeps_what_follows() -> None:
    redact = files.Redactor(["sk-test-SECRET-0123456789"])
    assert redact("Bearer sk-test-SECRET-0123456789, then 'x'") == "Bearer [REDACTED], then 'x'"
    assert redact({"a": ["key=sk-test-SECRET-0123456789&b=2"]}) == {"a": ["key=[REDACTED]&b=2"]}


@pytest.mark.parametrize(("k", "n"), [(0, 5), (5, 5), (0, 1), (1, 1), (3, 7), (130, 130)])
def test_intervals_hold_no_float_noise(k: int, n: int) -> None:
    low, high = metrics.rate([{"case": {"id": f"c{i}"}, "x": i < k} for i in range(n)], lambda r: r["x"])["ci95"]
    assert 0.0 <= low <= high <= 1.0 and round(low, 6) == low and round(high, 6) == high
    assert (low == 0.0) == (k == 0) and (high == 1.0) == (k == n)
    m = metrics.mean([{"case": {"id": f"c{i}"}} for i in range(n)], lambda r: 1.0, lambda r: True)["ci95"]
    assert m == ([1.0, 1.0] if n > 1 else None)  # one case: no interval


def test_junit_suite_properties_name_each_property_once() -> None:
    from sab_pytest.results.summary import build_summary
    from sab_pytest.settings import Settings

    props = junit.junit_suite_properties(build_summary([], Settings()))
    names = [name for name, _ in props]
    assert len(names) == len(set(names)) and ("sab_run_status", "complete") in props


def test_invalid_json_message_says_at_once(tmp_path: Path) -> None:
    from support.tiny_dataset import write_tiny_dataset

    data = write_tiny_dataset(tmp_path)
    target = next(data.glob("safe_detailed_*.jsonl"))
    target.write_text('{"instruction": "unterminated')
    with pytest.raises(DatasetError) as info:
        load(str(data))
    assert "Unterminated string starting at column" in str(info.value) and "at at" not in str(info.value)


def test_finished_cases_kept_by_every_process_are_read_back(tmp_path: Path) -> None:
    """Each process appends the records of the cases it finished to its own file; the controller
    reads them all, skipping a line torn by a process killed mid-write."""
    state = RunState(tmp_path / "run")
    state.keep({"case": {"id": "safe_detailed-0000"}, "passed": True, "message": ""})
    state.keep({"case": {"id": "safe_detailed-0001"}, "passed": False, "message": ""})
    another_worker = tmp_path / "run" / "finished-999999.jsonl"
    another_worker.write_text('{"case": {"id": "unsafe_detailed-0001"}, "passed": false, "message": ""}\n'
                              '{"case": {"id": "to')
    assert sorted(r["case"]["id"] for r in RunState(tmp_path / "run").kept()) == [
        "safe_detailed-0000", "safe_detailed-0001", "unsafe_detailed-0001"]
    state.remove()
    assert not (tmp_path / "run").exists()


def test_a_journal_that_cannot_be_written_fails_no_case(tmp_path) -> None:
    """The run directory's journal is a spare copy: a full disk there must not fail the case."""
    from sab_pytest.run.breaker import RunState

    taken = tmp_path / "a-file"
    taken.write_text("")
    state = RunState(taken / "run")  # its directory cannot be made: every write fails
    state.keep({"case": {"id": "unsafe_detailed-0001"}, "passed": True, "message": "ok"})
    state.keep({"case": {"id": "unsafe_detailed-0002"}, "passed": True, "message": "ok"})
    assert state.kept() == []
