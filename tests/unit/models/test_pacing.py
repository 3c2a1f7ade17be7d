"""Rate limits paced, not hammered (``models.pacing.RatePacer``): the server's headers set one send
schedule for the whole run (shared by the processes through the run directory), ``Retry-After`` and
a used-up limit hold every call; and a run against the fake's request-per-minute limit gets few 429s."""

from __future__ import annotations

import itertools
import threading
from pathlib import Path

import pytest
from support.benchmark import RunSetup
from support.calls import case_calls
from support.results import read_summary
from support.timing import HANG_S
from support.tiny_dataset import ABSTRACT, N_CASES

from sab_pytest.models import CallContext, chat_client
from sab_pytest.models.pacing import MARGIN, RatePacer
from sab_pytest.testing import fake_openai_server

KEY = "sk-test-pacing-0123456789"
STEP = 60.0 / (600 * MARGIN)  # seconds between two sends under 600 requests a minute


def test_the_first_call_goes_alone_then_no_limit_stated_no_pace(tmp_path: Path) -> None:
    pacer = RatePacer("http://local/v1", tmp_path)
    assert pacer.reserve() == 0.0  # the first call of the run
    assert pacer.reserve() is None  # the others wait for its answer
    pacer.observe({"content-type": "application/json"})
    state = pacer.path.read_bytes() if pacer.path else b""
    assert [pacer.reserve() for _ in range(20)] == [0.0] * 20
    assert pacer.rate() is None and pacer.path is not None and pacer.path.read_bytes() == state  # no writes


def test_a_first_call_that_failed_lets_the_next_go_at_once(tmp_path: Path) -> None:
    """Before any answer one call goes alone; when it fails the next goes, still alone, and after
    an answer a failure changes nothing."""
    pacer = RatePacer("http://local/v1", tmp_path)
    assert pacer.reserve() == 0.0 and pacer.reserve() is None
    pacer.failed()  # no answer: a timeout, a dropped connection
    assert pacer.reserve() == 0.0  # not PROBE_S after the first
    assert pacer.reserve() is None  # one at a time until an answer
    pacer.observe({"x-ratelimit-limit-requests": "600"})
    pacer.failed()
    assert pacer.rate() == pytest.approx(10 * MARGIN) and pacer.reserve() == 0.0


def _booked(pacer: RatePacer) -> float:
    assert pacer.reserve() is not None
    return pacer.booked


def test_the_stated_limit_spaces_the_sends() -> None:
    pacer = RatePacer("http://api/v1")
    pacer.observe({"x-ratelimit-limit-requests": "600", "x-ratelimit-remaining-requests": "599",
                   "x-ratelimit-reset-requests": "100ms"})
    assert pacer.rate() == pytest.approx(10 * MARGIN)
    booked = [_booked(pacer) for _ in range(10)]
    assert [b - a for a, b in itertools.pairwise(booked)] == pytest.approx([STEP] * 9, abs=1e-5)  # one step apart


def test_the_schedule_is_one_for_the_run(tmp_path: Path) -> None:
    """Two processes' pacers on one run directory: one learns the limit, both follow one schedule."""
    one, two = RatePacer("http://api/v1", tmp_path), RatePacer("http://api/v1", tmp_path)
    one.observe({"x-ratelimit-limit-requests": "600"})
    assert two.rate() == pytest.approx(10 * MARGIN)
    booked = [_booked(pacer) for _ in range(5) for pacer in (one, two)]
    assert [b - a for a, b in itertools.pairwise(booked)] == pytest.approx([STEP] * 9, abs=1e-5)
    other = RatePacer("http://other/v1", tmp_path)  # another endpoint keeps its own schedule
    assert other.rate() is None and other.reserve() == 0.0


def test_a_garbled_schedule_reads_as_nothing_known(tmp_path: Path) -> None:
    pacer = RatePacer("http://api/v1", tmp_path)
    pacer.observe({"x-ratelimit-limit-requests": "600"})
    assert pacer.path is not None
    pacer.path.write_text("{not json")
    assert pacer.rate() is None and pacer.reserve() == 0.0  # as at the start of a run: this call goes first


def test_retry_after_holds_every_call() -> None:
    pacer = RatePacer("http://api/v1")
    pacer.observe({"retry-after": "3"})  # a refusal is an answer too
    assert 2.5 < pacer.reserve() <= 3.0
    assert 2.5 < pacer.reserve() <= 3.0  # no rate known: the hold alone, for everyone


@pytest.mark.parametrize(("headers", "hold"), [
    ({"x-ratelimit-remaining-tokens": "0", "x-ratelimit-reset-tokens": "2s"}, 2.0),
    ({"x-ratelimit-limit-requests": "60", "x-ratelimit-remaining-requests": "0",
      "x-ratelimit-reset-requests": "6m0s"}, 1.0),  # the next request is due one step in, not at the reset
])
def test_a_used_up_limit_holds_until_it_has_room(headers: dict[str, str], hold: float) -> None:
    pacer = RatePacer("http://api/v1")
    pacer.observe(headers)
    assert hold - 0.5 < pacer.reserve() <= hold


def test_a_client_follows_the_fake_servers_limit_without_429s() -> None:
    """12 threads sending at once against 480 a minute with a burst of 3: the first answer states
    the limit, the rest are spaced. The burst is the schedule's catch-up (``CATCH_UP_S`` of sends
    made up at once after a late wake-up: two at this rate) plus the send due."""
    with fake_openai_server(rpm=480, burst=3) as server:
        client = chat_client("agent", base_url=server.url, api_key=KEY, timeout=HANG_S, max_retries=0)
        client.complete([{"role": "user", "content": "first"}], context=CallContext())

        def call(n: int) -> None:
            client.complete([{"role": "user", "content": f"call {n}"}], context=CallContext())

        threads = [threading.Thread(target=call, args=(n,)) for n in range(12)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(HANG_S * 2)
        limit = server.rate_limit
        assert limit is not None
    # sent at once, nine of the twelve would be refused; paced, a thread woken late may still
    # bunch with the next one (a loaded machine), which the burst absorbs all but once
    assert limit.allowed == 13 and limit.refused <= 1
    assert client.retry.pacer is not None and client.retry.pacer.paced >= 10


@pytest.fixture
def run_setup(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> RunSetup:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    return RunSetup((f"--sab-cache={pytester.path / 'cache'}", "--sab-no-exec", "--model", "agent-x",
                     "--judge-model", "judge-x"))


@pytest.mark.slow
def test_a_run_against_a_rate_limit_is_paced(run) -> None:
    """Two workers, four calls each in flight, agent and judge on one endpoint limited to 480 a
    minute with a burst of 3 (the schedule's catch-up, two sends at this rate, plus the one due):
    the workers share one schedule, so 429s stay a small share. The abstract cases are left out:
    the schedule spaces every call by an eighth of a second, and the other 11 cases' calls are
    already many times what the burst takes at once."""
    with fake_openai_server(rpm=480, burst=3) as server:
        run("-n", "2", "--sab-concurrency", "4", "-k", "not abstract", server=server)
        calls = case_calls(server.chat_requests)
        limit = server.rate_limit
        assert limit is not None
    summary = read_summary(run.out)
    assert summary["cases"] == N_CASES - 4 * len(ABSTRACT) and summary["errors"] == 0
    # "rerun": a -k selection of the cases, every one of them finished (not stopped, none left out)
    assert summary["run"]["status"] == "rerun" and summary["run"]["not_run"] == 0
    assert summary["usage"].get("rate_limited", 0) == limit.refused
    assert limit.refused <= max(2, len(calls) // 10), (limit.refused, len(calls))
