"""The fake server's Message Batches (Anthropic's batch API, its wire format), so that a batch run on
``anthropic/<model>`` is tested offline through the ``anthropic`` SDK, as the live one is.

Why beside ``fake_batch`` and driven by its knobs: the two APIs differ in shape (no files: the
requests travel in the create call, results come from the batch's ``results_url``; one
``processing_status`` of ``in_progress`` / ``canceling`` / ``ended`` and a result type per request),
not in what a test wants of them. So one set of knobs (``FakeBatchAPI.delay_s``, ``hold`` and
``release()``, ``fail``, ``expire``, ``reorder``) drives both, and a test sets them once whichever
provider it runs on. Each request is answered by the server's script as a live ``POST /v1/messages``
(its ``RecordedRequest`` has that path), so a deterministic fake model answers it the same way live
or batched.

Routes: ``POST /v1/messages/batches`` (``{"requests": [{"custom_id", "params"}]}``), ``GET
/v1/messages/batches`` (the listing), ``GET /v1/messages/batches/{id}``, ``POST
/v1/messages/batches/{id}/cancel``, ``GET /v1/messages/batches/{id}/results`` (JSONL, one
``{"custom_id", "result": {"type": succeeded | errored | canceled | expired, ...}}`` a line; reversed
with ``reorder``). ``created`` counts batch creations, ``lines`` keeps every request answered in a
batch (as the live ``RecordedRequest`` it stands for), ``cancels`` the cancel calls.
"""

from __future__ import annotations

import datetime
import itertools
import json
import re
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from sab_pytest.testing.fake_replies import RecordedRequest

Answered = tuple[int, dict[str, str], bytes]
MESSAGES_PATH = "/v1/messages"
CUSTOM_ID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")  # what Anthropic accepts as a custom_id
REQUIRED = ("model", "messages", "max_tokens")  # params a Messages request cannot do without


@dataclass
class _MessageBatch:
    """One message batch: the result of each request (decided at creation) and its life so far."""

    id: str
    created_at: float
    results: list[dict[str, Any]] = field(default_factory=list)
    read: bool = False
    cancel_at: float | None = None


def _time(seconds: float | None) -> str | None:
    """RFC 3339, as Anthropic writes its times."""
    if seconds is None:
        return None
    return datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc).isoformat().replace("+00:00", "Z")


def error_answer(status: int, message: str, kind: str = "invalid_request_error") -> Answered:
    """An error as Anthropic's API sends it."""
    return status, {}, json.dumps({"type": "error", "error": {"type": kind, "message": message}}).encode()


class FakeMessageBatches:
    """The Message Batches of one fake server; ``knobs`` is its ``FakeBatchAPI`` (its ``answer`` and
    ``payload`` answer one request, its knobs shape every batch)."""

    def __init__(self, knobs: Any) -> None:
        self.knobs = knobs
        self.created = 0
        self.cancels = 0
        self.lines: list[RecordedRequest] = []
        self.batches: dict[str, _MessageBatch] = {}
        self._ids = itertools.count(1)
        self._lock = threading.Lock()

    def route(self, request: RecordedRequest, rest: list[str]) -> Answered:
        """The answer to a request under ``/v1/messages/batches`` (``rest``: the path after it)."""
        if not rest and request.method == "POST":
            return self._create(request.body if isinstance(request.body, dict) else {})
        if not rest:
            with self._lock:
                listed = [self._object(b, request) for b in reversed(list(self.batches.values()))][:20]
            return 200, {}, json.dumps({"data": listed, "has_more": False, "first_id": None,
                                        "last_id": None}).encode()
        with self._lock:
            batch = self.batches.get(rest[0])
            if batch is None:
                return error_answer(404, f"no message batch {rest[0]}", "not_found_error")
            if len(rest) == 1 and request.method == "GET":
                answer = self._object(batch, request)
                batch.read = True
                return 200, {}, json.dumps(answer).encode()
            if rest[1:] == ["cancel"] and request.method == "POST":
                self.cancels += 1
                if self._status(batch) == "in_progress":
                    batch.cancel_at, batch.read = time.time(), False
                return 200, {}, json.dumps(self._object(batch, request)).encode()
            if rest[1:] == ["results"] and request.method == "GET":
                return self._results(batch)
        return error_answer(404, f"no route for {request.method} {request.path}", "not_found_error")

    def _create(self, body: dict[str, Any]) -> Answered:
        requests = body.get("requests")
        if not isinstance(requests, list) or not requests:
            return error_answer(400, "requests: a non-empty list is required")
        ids = [str(r.get("custom_id", "")) if isinstance(r, dict) else "" for r in requests]
        if not all(CUSTOM_ID.match(i) for i in ids) or len(set(ids)) != len(ids):
            return error_answer(400, "each request needs a unique custom_id of 1-64 letters, digits, - or _")
        with self._lock:
            self.created += 1
            batch = _MessageBatch(id=f"msgbatch_fake{next(self._ids):06d}", created_at=time.time())
            self.batches[batch.id] = batch
        for custom_id, entry in zip(ids, requests, strict=True):
            batch.results.append({"custom_id": custom_id, "result": self._answer(custom_id, entry.get("params"))})
        return 200, {}, json.dumps(self._object(batch, None)).encode()

    def _answer(self, custom_id: str, params: Any) -> dict[str, Any]:
        """One request's result, as the server's script answers it live."""
        if not isinstance(params, dict) or any(key not in params for key in REQUIRED):
            return _errored("invalid_request_error", f"params: {', '.join(REQUIRED)} are required")
        request = RecordedRequest(method="POST", path=MESSAGES_PATH, headers={}, body=params,
                                  raw_body=json.dumps(params).encode(), received_at=time.monotonic())
        with self._lock:
            self.lines.append(request)
        if self.knobs.fail is not None and self.knobs.fail(custom_id, params):
            return _errored("api_error", "the fake failed this request")
        reply = self.knobs.answer(request)
        answer = json.loads(self.knobs.payload(reply))
        if reply.status != 200:
            message = str((answer.get("error") or {}).get("message", "fake error")) if isinstance(answer, dict) else ""
            return _errored("api_error", f"HTTP {reply.status}: {message}")
        return {"type": "succeeded", "message": answer}

    def _status(self, batch: _MessageBatch) -> str:
        """``in_progress`` until the knobs let it end (``delay_s``, ``hold``); after a cancel,
        ``canceling`` until it is read once more, then ``ended``."""
        if batch.cancel_at is not None:
            return "ended" if batch.read else "canceling"
        if not batch.read or (self.knobs.hold and not self.knobs.released()):
            return "in_progress"
        return "in_progress" if time.time() - batch.created_at < self.knobs.delay_s else "ended"

    def _ended_results(self, batch: _MessageBatch) -> list[dict[str, Any]]:
        """The results of an ended batch: each as answered, or all canceled / expired."""
        if batch.cancel_at is not None:
            return [{**r, "result": {"type": "canceled"}} for r in batch.results]
        if self.knobs.expire:
            return [{**r, "result": {"type": "expired"}} for r in batch.results]
        return list(reversed(batch.results)) if self.knobs.reorder else list(batch.results)

    def _object(self, batch: _MessageBatch, request: RecordedRequest | None) -> dict[str, Any]:
        """The batch as Anthropic describes it; its results URL (on this server) once it has ended."""
        status = self._status(batch)
        counts = {"processing": len(batch.results), "succeeded": 0, "errored": 0, "canceled": 0, "expired": 0}
        if status == "ended":
            counts["processing"] = 0
            for line in self._ended_results(batch):
                counts[line["result"]["type"]] += 1
        host = (request.headers.get("host") if request is not None else None) or "127.0.0.1"
        return {"id": batch.id, "type": "message_batch", "processing_status": status, "request_counts": counts,
                "created_at": _time(batch.created_at), "expires_at": _time(batch.created_at + 86_400),
                "ended_at": _time(time.time()) if status == "ended" else None, "archived_at": None,
                "cancel_initiated_at": _time(batch.cancel_at),
                "results_url": f"http://{host}/v1/messages/batches/{batch.id}/results" if status == "ended" else None}

    def _results(self, batch: _MessageBatch) -> Answered:
        if self._status(batch) != "ended":
            return error_answer(400, f"message batch {batch.id} is still processing")
        content = b"".join(json.dumps(line).encode() + b"\n" for line in self._ended_results(batch))
        return 200, {"Content-Type": "application/binary"}, content


def _errored(kind: str, message: str) -> dict[str, Any]:
    return {"type": "errored", "error": {"type": "error", "error": {"type": kind, "message": message}}}
