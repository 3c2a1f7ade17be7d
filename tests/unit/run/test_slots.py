"""Calls in flight (``slots.CallSlots``): the bound, who is served first, giving up, and that time
spent queued is not charged to a case's budget."""

from __future__ import annotations

import threading
import time

import pytest
from support.timing import HANG_S, POLL_S, SETTLE_S

from sab_pytest.errors import InfraError
from sab_pytest.models import CallContext, chat_client
from sab_pytest.run.slots import CallSlots
from sab_pytest.testing import fake_openai_server


def _hold(slots: CallSlots, release: threading.Event, holding: threading.Event) -> threading.Thread:
    def hold() -> None:
        with slots.slot():
            holding.set()
            release.wait(HANG_S)

    thread = threading.Thread(target=hold)
    thread.start()
    assert holding.wait(HANG_S)
    return thread


def _queue(slots: CallSlots, order: list[str], name: str, made: int) -> threading.Thread:
    """A thread whose case already made ``made`` calls queues for its next one (and, once served,
    appends ``name`` to ``order``); returns once it waits in the queue."""
    queued = threading.Event()

    def call() -> None:
        with slots.case():
            slots._made.count = made  # what ``made`` earlier calls through ``slot`` leave behind
            queued.set()
            with slots.slot():
                order.append(name)

    waiting = len(slots._waiting)
    thread = threading.Thread(target=call)
    thread.start()
    assert queued.wait(HANG_S)
    deadline = time.monotonic() + HANG_S
    while len(slots._waiting) == waiting and time.monotonic() < deadline:
        time.sleep(POLL_S)
    return thread


def test_never_more_than_the_bound_in_flight() -> None:
    slots = CallSlots(3)
    now = [0]
    seen: list[int] = []
    lock = threading.Lock()

    def call() -> None:
        with slots.slot():
            with lock:
                now[0] += 1
                seen.append(now[0])
            time.sleep(0.02)
            with lock:
                now[0] -= 1

    threads = [threading.Thread(target=call) for _ in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(HANG_S)
    assert max(seen) == 3 == slots.max_in_flight and slots.in_flight == 0 and len(seen) == 12


def test_the_case_with_the_fewest_calls_made_goes_first_then_first_come() -> None:
    slots = CallSlots(1)
    release, holding = threading.Event(), threading.Event()
    threads = [_hold(slots, release, holding)]
    order: list[str] = []
    for name, made in (("judge of an old case", 2), ("agent of a new case", 0), ("agent of another new case", 0),
                       ("second call of a case", 1)):
        threads.append(_queue(slots, order, name, made))
    release.set()
    for thread in threads:
        thread.join(HANG_S)
    assert order == ["agent of a new case", "agent of another new case", "second call of a case",
                     "judge of an old case"]


def test_a_case_counts_its_own_calls() -> None:
    slots = CallSlots(2)
    with slots.case():
        for _ in range(3):
            with slots.slot():
                pass
        assert slots._made.count == 3
        with slots.case():  # a nested case starts from zero and gives the outer count back
            assert slots._made.count == 0
        assert slots._made.count == 3


def test_a_waiter_that_gives_up_leaves_the_queue_and_passes_on_a_slot() -> None:
    slots = CallSlots(1)
    release, holding = threading.Event(), threading.Event()
    holder = _hold(slots, release, holding)
    stop = threading.Event()

    def check() -> None:
        if stop.is_set():
            raise InfraError("interrupted", "stopped")

    failed: list[BaseException] = []

    def waiter() -> None:
        try:
            with slots.slot(check):
                pass
        except InfraError as exc:
            failed.append(exc)

    thread = threading.Thread(target=waiter)
    thread.start()
    time.sleep(SETTLE_S)
    stop.set()
    thread.join(HANG_S)
    assert failed and not slots._waiting
    release.set()
    holder.join(HANG_S)
    assert slots._held == 0 and not slots._waiting  # the slot is free again: nobody queued holds it
    with slots.slot():
        assert slots.in_flight == 1
    assert slots.in_flight == 0 and slots._held == 0


def test_time_queued_for_a_slot_is_not_charged_to_the_case_budget() -> None:
    slots = CallSlots(1)
    release, holding = threading.Event(), threading.Event()
    with fake_openai_server(latency=0.05) as server:
        model = chat_client("agent", base_url=server.url, api_key="sk-x", timeout=5, max_retries=0, slots=slots)
        model.complete([{"role": "user", "content": "warm up"}])  # the client's start-up, outside the budgets
        holder = _hold(slots, release, holding)
        threading.Timer(0.6, release.set).start()  # another case's call holds the only slot for 0.6 s
        call = model.for_case(CallContext.start(0.4)).complete([{"role": "user", "content": "plan"}])
        holder.join(HANG_S)
        assert call.answer  # answered after 0.6 s in the queue, past the case's 0.4 s (the wait is not its own)
        assert slots.max_in_flight == 1
        case = model.for_case(CallContext.start(0.4))  # the case's own time still counts: a slow answer ends it
        server.add_rule("late", contains="slow", times=1)
        server.latency = 1.0
        with pytest.raises(InfraError) as info:
            case.complete([{"role": "user", "content": "slow"}])
        assert info.value.kind == "model_timeout"
