"""A process's batches, round after round: gather the requests its parked cases wait for, send them
as batch files (or find them in the journal, already sent), wait for the provider, and keep each
answer in the response cache, where the case, run again, reads it as it would a live answer.

Why rounds: a case's batchable request (a judge's, a one-shot planner's) does not call the API in
batch mode: the client's hook (``hook``) registers it here and raises ``Deferred``, and the case
runner parks the case. When every running case of the process is parked or done, the runner calls
``flush``: one round. A case that needs two rounds (the planner's answer, then the judges') is
parked twice. A request is sent at most once: its ``custom_id`` is its cache key, and a key the
journal already lists is collected from its batch, never sent again.

A request its batch leaves without an answer (a line of the error file, an expired, cancelled or
failed batch, a file the provider refused) is asked live when ``retry`` is ``"live"``, or ends its
case as a named ``batch`` error (``"error"``); the counts say how many of each.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from sab_pytest.batching.client import BatchAPI, BatchRequest, BatchStatus
from sab_pytest.batching.errors import BatchError, Deferred
from sab_pytest.batching.journal import Journal, Submitted
from sab_pytest.cache import ResponseCache, request_key
from sab_pytest.models.cached import store
from sab_pytest.models.wire import Answer

POLL_FIRST_S = 0.05  # the first look at a new batch; each next one waits longer, up to POLL_MAX_S
POLL_MAX_S = 30.0
SAY_EVERY_S = 30.0  # a progress line at least this often while the counts do not change


@dataclass
class _Pending:
    """A request a parked case waits for."""

    key: str
    material: dict[str, Any]
    body: dict[str, Any]
    model: str
    server: str
    client: BatchAPI
    cache: ResponseCache


class Batcher:
    """The batches of one process. ``retry``: ``"live"`` or ``"error"`` (see the module docstring);
    ``wait_s``: how long a round waits for its batches at most; ``stopped()``: whether the run was
    stopped (Ctrl-C, a breaker), checked while waiting; ``say``: where the progress lines go."""

    def __init__(self, journal: Journal, *, retry: str = "live", wait_s: float = 86_400.0,
                 stopped: Callable[[], bool] = lambda: False, say: Callable[[str], None] = lambda _: None,
                 max_lines: int | None = None) -> None:
        self.journal, self.retry, self.wait_s = journal, retry, wait_s
        self.stopped, self.say, self.max_lines = stopped, say, max_lines
        self.pending: dict[str, _Pending] = {}
        self.fresh: set[str] = set()  # answered by a batch of this run: its case's own calls (not cache hits)
        self.live: set[str] = set()  # its batch left it unanswered: asked live (retry "live")
        self.failed: dict[str, str] = {}  # its batch left it unanswered: why (retry "error")
        self.counts = {"batches": 0, "batched": 0, "retried_live": 0, "failed": 0,
                       "batched_prompt_tokens": 0, "batched_completion_tokens": 0}
        self.process = uuid.uuid4().hex[:12]  # this batcher's counts in the journal (``Journal.totals``)
        self._lock = threading.Lock()

    def count(self) -> None:
        """Journal the counts so far (after each round and each live retry), for the summary."""
        with self._lock:
            counts = dict(self.counts)
        self.journal.counted(self.process, counts)

    # -- the client's hook ------------------------------------------------------------------------
    def hook(self, client: BatchAPI, cache: ResponseCache, material: Mapping[str, Any], params: Mapping[str, Any],
             live: Callable[[], Answer], made: list[Any]) -> Callable[[], Answer]:
        """What the model client calls instead of the API when the request missed the cache: the
        live call for a request its batch failed (retry "live"), a named error (retry "error"), else
        the request joins the next round and the case is parked (``Deferred``). ``made``: the case's
        calls so far, dropped when it parks (it runs again, and they will be made again)."""
        key = request_key(material)

        def deferred() -> Answer:
            with self._lock:
                if key in self.live:
                    self.counts["retried_live"] += 1
                    self.live.discard(key)
                    retry_live = True
                elif key in self.failed:
                    raise BatchError("batch_failed", self.failed[key])
                else:
                    retry_live = False
                    self.pending.setdefault(key, _Pending(key, dict(material), dict(params), str(params.get("model")),
                                                          str(material.get("base_url")), client, cache))
            if retry_live:
                self.count()
                return live()
            made.clear()
            raise Deferred(key)

        return deferred

    def first_read(self, material: Mapping[str, Any]) -> bool:
        """Whether the cached answer to ``material`` is one a batch of this run answered: then it is
        the case's own call (billed, as a live answer is), not a cache hit, each time the case (run
        again in a later round) reads it."""
        key = request_key(material)
        with self._lock:
            return key in self.fresh

    # -- a round ----------------------------------------------------------------------------------
    def flush(self) -> bool:
        """One round: every gathered request answered (into the cache), asked live next, or failed.
        False when the round stopped waiting (the run was stopped, or ``wait_s`` passed): its
        batches stay with the provider, listed in the journal."""
        with self._lock:
            taken, self.pending = self.pending, {}
        if not taken:
            return True
        known = self.journal.batches()
        carried: dict[str, Submitted] = {}
        for batch in known.values():  # a request some batch already carries is collected, never sent again
            for custom_id in batch.custom_ids:
                if custom_id in taken:
                    carried[custom_id] = batch
        waiting: dict[str, tuple[BatchAPI, list[str]]] = {}
        for batch in {b.batch: b for b in carried.values()}.values():
            client = next(taken[c].client for c in batch.custom_ids if c in taken)
            waiting[batch.batch] = (client, batch.custom_ids)
        waiting.update(self._submit([p for k, p in taken.items() if k not in carried]))
        return self._wait(waiting, taken)

    def _submit(self, requests: list[_Pending]) -> dict[str, tuple[BatchAPI, list[str]]]:
        """Send ``requests`` in files by server and model; a file the provider refuses fails its requests."""
        groups: dict[tuple[str, str], list[_Pending]] = {}
        for request in requests:
            groups.setdefault((request.server, request.model), []).append(request)
        sent: dict[str, tuple[BatchAPI, list[str]]] = {}
        for (server, model), group in groups.items():
            client = group[0].client
            lines = [BatchRequest(p.key, p.body) for p in group]
            try:
                files = list(client.files(lines, max_lines=self.max_lines))
            except BatchError as exc:
                self._unanswered({p.key: str(exc) for p in group})
                continue
            for chunk in files:
                ids = [r.custom_id for r in chunk]
                try:
                    batch_id, file_id = client.submit(chunk)
                except BatchError as exc:
                    self._unanswered(dict.fromkeys(ids, str(exc)))
                    continue
                self.journal.submitted(batch_id, file_id, server, model, ids)
                self.counts["batches"] += 1
                sent[batch_id] = (client, ids)
        return sent

    def _wait(self, waiting: dict[str, tuple[BatchAPI, list[str]]], taken: Mapping[str, _Pending]) -> bool:
        began = last_said = time.monotonic()
        pause, said = POLL_FIRST_S, ""
        statuses: dict[str, BatchStatus] = {}
        while True:
            for batch_id, (client, ids) in waiting.items():
                if batch_id in statuses and statuses[batch_id].done:
                    continue
                try:
                    statuses[batch_id] = client.status(batch_id)
                except BatchError as exc:
                    statuses[batch_id] = BatchStatus(batch_id, "failed", total=len(ids), errors=[str(exc)])
                if statuses[batch_id].done:
                    self._collect(client, statuses[batch_id], ids, taken)
            waited = time.monotonic() - began
            line = progress(statuses.values(), waited)
            if line != said or time.monotonic() - last_said >= SAY_EVERY_S:
                self.say(line)
                said, last_said = line, time.monotonic()
            if all(s.done for s in statuses.values()):
                return True
            if self.stopped() or waited >= self.wait_s:
                return False
            deadline = time.monotonic() + min(pause, max(0.0, self.wait_s - waited))
            while time.monotonic() < deadline and not self.stopped():
                time.sleep(min(0.05, max(0.0, deadline - time.monotonic())))
            pause = min(POLL_MAX_S, pause * 1.6)

    def _collect(self, client: BatchAPI, status: BatchStatus, ids: list[str], taken: Mapping[str, _Pending]) -> None:
        """Keep a finished batch's answers in the response cache; its other requests are unanswered."""
        wanted = [c for c in ids if c in taken]
        try:
            found = client.collect(status, ids)
        except BatchError as exc:
            self._unanswered(dict.fromkeys(wanted, str(exc)))
            self.journal.collected(status.id, f"{status.status} ({exc.code})")
            return
        for custom_id in wanted:
            answer = found.answers.get(custom_id)
            if answer is None:
                self._unanswered({custom_id: found.failed.get(custom_id, f"batch {status.id}: no answer")})
                continue
            pending = taken[custom_id]
            try:
                store(pending.cache, custom_id, pending.material, answer)
            except OSError as exc:
                self._unanswered({custom_id: f"the response cache could not keep its answer: {exc}"})
                continue
            with self._lock:
                self.fresh.add(custom_id)
                self.counts["batched"] += 1
                self.counts["batched_prompt_tokens"] += answer.prompt_tokens
                self.counts["batched_completion_tokens"] += answer.completion_tokens
        self.journal.collected(status.id, status.status)

    def _unanswered(self, why: Mapping[str, str]) -> None:
        with self._lock:
            for key, reason in why.items():
                if self.retry == "live":
                    self.live.add(key)
                else:
                    self.failed[key] = reason
                    self.counts["failed"] += 1


def progress(statuses: Any, waited: float) -> str:
    """The progress line of a round: per batch submitted / completed / failed, and the time waited."""
    parts = [f"{s.id} {s.status} {s.completed + s.failed}/{s.total}"
             + (f" ({s.failed} failed)" if s.failed else "") for s in statuses]
    return f"sab: batch: {'; '.join(parts) or 'nothing submitted'}; waited {waited:.0f} s"


@dataclass
class ModelHook:
    """What one model client holds in batch mode (``ChatClient.batching``): the process's
    batcher, the Batch API of the client's endpoint and its response cache."""

    batcher: Batcher
    client: BatchAPI
    cache: ResponseCache

    def hook(self, material: Mapping[str, Any], params: Mapping[str, Any], live: Callable[[], Answer],
             made: list[Any]) -> Callable[[], Answer]:
        return self.batcher.hook(self.client, self.cache, material, params, live, made)

    def first_read(self, material: Mapping[str, Any]) -> bool:
        return self.batcher.first_read(material)
