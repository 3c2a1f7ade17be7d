"""Calls in flight that follow the server's queueing (``run.capacity.Capacity`` inside
``slots.CallSlots``): a server whose calls take longer the more are in flight gets fewer, one that
answers as fast at N as at one keeps N, a timeout halves, a 429 shrinks the run-wide share; and a
real client against a server that answers one request at a time settles at one or two in flight."""

from __future__ import annotations

import threading
from pathlib import Path

from support.timing import HANG_S

from sab_pytest.models import CallContext, chat_client
from sab_pytest.run.capacity import Capacity
from sab_pytest.run.slots import CallSlots, Pace
from sab_pytest.testing import RecordedRequest, Reply, fake_openai_server

KEY = "sk-test-capacity-0123456789"
USER = [{"role": "user", "content": "Plan: put the mug in the sink."}]


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_time_that_grows_with_the_calls_in_flight_shrinks_the_limit_to_one_or_two() -> None:
    """A one-slot server, one answer a second: the first calls sent at once come back a second
    apart (the first found the server free), then each call's time is (calls in flight) seconds."""
    capacity = Capacity(8)
    capacity.clock = clock = Clock()
    for k in range(1, 9):
        clock.now += 1.0
        capacity.sample("one-slot", k * 1.0, 10, 8)
    seen = []
    for _ in range(200):
        clock.now += 1.0
        in_flight = capacity.allowed()
        capacity.sample("one-slot", in_flight * 1.0, 10, in_flight)
        seen.append(capacity.allowed())
    assert capacity.queued > 0 and capacity.lowest < 2
    assert max(seen[-50:]) <= 2  # settled: one or two, never back to eight


def test_time_that_does_not_grow_keeps_what_was_asked() -> None:
    capacity = Capacity(16)
    for _ in range(200):
        capacity.sample("vllm", 0.5, 10, capacity.allowed())
    assert capacity.allowed() == 16 and capacity.queued == 0


def test_a_long_answer_alone_is_no_queue() -> None:
    """Time is weighed by the answer's length: a plan thirty times longer than a verdict takes
    longer (the prompt's 0.3 s, then 10 ms a token) without any queue."""
    capacity = Capacity(16)
    for _ in range(50):
        capacity.sample("vllm", 0.3 + 0.01 * 10, 10, 16)  # a short verdict
        capacity.sample("vllm", 0.3 + 0.01 * 300, 300, 16)  # a long plan
    assert capacity.allowed() == 16 and capacity.queued == 0


def test_the_limit_grows_back_when_the_queue_is_gone() -> None:
    capacity = Capacity(8)
    capacity.clock = clock = Clock()
    capacity.sample("k", 1.0, 0, 8)
    for _ in range(40):
        clock.now += 8.0
        capacity.sample("k", 8.0, 0, 8)  # queued
    assert capacity.allowed() == 1
    for _ in range(60):
        capacity.sample("k", 1.0, 0, capacity.allowed())
    assert capacity.allowed() == 8


def test_idle_slots_do_not_grow_the_limit() -> None:
    capacity = Capacity(8)
    capacity.timed_out()  # 4
    for _ in range(40):
        capacity.sample("k", 1.0, 0, in_flight=1)  # one call at a time: nothing learnt about 5 or more
    assert capacity.allowed() == 4


def test_a_timeout_halves_the_calls_in_flight() -> None:
    slots = CallSlots(8)
    slots.timed_out()
    assert slots.open_slots() == 4
    slots.timed_out()
    slots.timed_out()
    slots.timed_out()
    assert slots.open_slots() == 1  # never below one


def test_a_429_shrinks_the_share_and_queueing_the_capacity_the_lower_wins(tmp_path: Path) -> None:
    slots = CallSlots(16, Pace(tmp_path / "pace.json"))
    slots.congested()
    assert slots.open_slots() == 8
    slots.timed_out()
    slots.timed_out()
    assert slots.open_slots() == 4  # the server's queue, below the rate limit's share
    for _ in range(100):
        slots.in_flight = slots.open_slots()  # every open slot in use
        slots.measured("k", 1.0)
    slots.in_flight = 0
    assert slots.capacity.allowed() > 8 and slots.open_slots() == 8  # the rate limit's share binds again


class OneSlot:
    """A server that answers one request at a time, ``seconds`` each (llama.cpp with one slot); it
    notes how many requests were in it (queued or answered) when each arrived."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.turn = threading.Lock()
        self.count = threading.Lock()
        self.inside = 0
        self.seen: list[int] = []

    def __call__(self, request: RecordedRequest) -> Reply:
        with self.count:
            self.inside += 1
            self.seen.append(self.inside)
        try:
            with self.turn:
                threading.Event().wait(self.seconds)
        finally:
            with self.count:
                self.inside -= 1
        return Reply(content="1. find Mug\n2. pick Mug", delay=0.0)


def test_a_client_settles_at_one_or_two_calls_on_a_one_slot_server() -> None:
    """A call is seen as queued when it takes more than TOLERANCE times the quickest (the base)
    plus the slack; behind one other it takes up to two answers' time. The server answers in a
    quarter of a second here, so the slack is scaled down with it (to a tenth of an answer), and
    the first call of the process, which pays for the SDK's first use, is made by another client:
    taken for the base, it would hide a queue of one behind it. The client's own time for a call
    (tens of milliseconds on a loaded machine) does not shrink with the answer: it is why the
    answer is not shorter still."""
    answer_s = 0.25  # far beyond the client's own time for a call on loopback
    responder = OneSlot(answer_s)
    slots = CallSlots(6)
    slots.capacity.slack_s = answer_s / 10
    with fake_openai_server(responder=responder) as server:
        warm = chat_client("agent", base_url=server.url, api_key=KEY, timeout=HANG_S, max_retries=0)
        warm.complete(USER, context=CallContext())
        responder.seen.clear()
        client = chat_client("agent", base_url=server.url, api_key=KEY, timeout=HANG_S, max_retries=0,
                                 slots=slots)

        def case(n: int) -> None:
            for i in range(5):
                client.complete([{"role": "user", "content": f"case {n} call {i}"}], context=CallContext())

        threads = [threading.Thread(target=case, args=(n,)) for n in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(HANG_S * 4)
    assert len(responder.seen) == 30
    assert max(responder.seen[:8]) > 2  # it started with what was asked
    late = sorted(responder.seen[-10:])
    assert slots.capacity.lowest <= 2 and late[len(late) // 2] <= 2  # then mostly one or two


def test_a_run_starts_at_one_call_and_doubles_while_the_server_keeps_up() -> None:
    capacity = Capacity(16, start=1)
    assert capacity.allowed() == 1
    for _ in range(16):  # the first answer sets the base
        capacity.sample("vllm", 0.5, 10, capacity.allowed())
    assert capacity.allowed() == 16  # then one more per answer: a round trip doubles it
    queued = Capacity(16, start=1)
    queued.sample("one-slot", 1.0, 10, 1)  # the base
    queued.sample("one-slot", 1.0, 10, 1)  # no queue: two calls
    queued.sample("one-slot", 2.0, 10, 2)  # the second call waited for the first
    assert queued.limit < 2 and not queued.slow_start  # and grows from here one call per round trip
