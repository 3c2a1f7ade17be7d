"""A process's batch rounds without pytest: the runner parks deferred cases and runs them again after
each round; the batcher sends each request once, collects a journaled batch instead of sending it
again, and stops waiting when told."""

from __future__ import annotations

import threading

import openai
import pytest
from support.timing import HANG_S

from sab_pytest.batching.batcher import Batcher, ModelHook
from sab_pytest.batching.client import BatchClient
from sab_pytest.batching.errors import Deferred
from sab_pytest.batching.journal import Journal, pending_note
from sab_pytest.cache import ResponseCache
from sab_pytest.models import ChatClient, chat_client
from sab_pytest.run.case_runner import CaseRunner, RunnerStopped
from sab_pytest.testing import fake_openai_server

KEY = "fake-key-0123456"


def test_the_runner_parks_deferred_cases_and_runs_them_again_after_each_round() -> None:
    answered: set[int] = set()
    rounds: list[int] = []
    lock = threading.Lock()

    def fn(item: int) -> int:
        with lock:
            if item not in answered:
                raise Deferred(str(item))
        return item * 10

    def between() -> bool:
        with lock:
            rounds.append(len(answered))
            answered.update(range(6))
        return True

    runner = CaseRunner(fn, lambda: list(range(6)), concurrency=2, key=lambda x: x, between_rounds=between).start()
    assert [runner.result(i) for i in range(6)] == [0, 10, 20, 30, 40, 50]
    assert rounds == [0] and runner.rounds == 1  # all six gathered into one round, not two by two


def test_a_round_that_stops_waiting_ends_its_parked_cases_as_stopped() -> None:
    def fn(item: int) -> int:
        raise Deferred(str(item))

    runner = CaseRunner(fn, lambda: [1, 2], concurrency=2, key=lambda x: x, between_rounds=lambda: False).start()
    for item in (1, 2):
        with pytest.raises(RunnerStopped):
            runner.result(item)
    assert runner.stopped


def _model(server, cache: ResponseCache, batcher: Batcher) -> ChatClient:
    model = chat_client("m", base_url=server.url, api_key=KEY, cache=cache, max_retries=0)
    client = BatchClient(openai.OpenAI(api_key=KEY, base_url=server.url, max_retries=0), secret=KEY)
    model.batching = ModelHook(batcher, client, cache)
    return model


def test_a_journaled_batch_is_collected_not_sent_again_and_answers_land_in_the_cache(tmp_path) -> None:
    messages = [{"role": "user", "content": "judge this"}]
    with fake_openai_server(api_key=KEY) as server:
        server.batch.hold = True
        journal = Journal(tmp_path / "sab-batches.jsonl")
        stop = threading.Event()
        first = Batcher(journal, wait_s=HANG_S, stopped=stop.is_set)
        model = _model(server, ResponseCache(tmp_path / "cache"), first)
        with pytest.raises(Deferred):
            model.complete(messages, role="judge")
        stop.set()  # Ctrl-C while waiting
        assert first.flush() is False and server.batch.created == 1
        assert "submitted, not finished: 1 batch(es) (1 requests)" in (pending_note(tmp_path) or "")
        server.batch.release()
        again = Batcher(journal, wait_s=HANG_S)  # the resumed run: a new process, the same journal
        model = _model(server, ResponseCache(tmp_path / "cache"), again)
        with pytest.raises(Deferred):
            model.complete(messages, role="judge")
        assert again.flush() is True
        call = model.complete(messages, role="judge")
        assert call.answer == "fake answer to: judge this" and not call.cache_hit  # the batch's answer, its own call
        assert server.batch.created == 1 and server.chat_requests == []  # collected, never sent again, never live
        assert pending_note(tmp_path) is None and again.counts["batched"] == 1
