"""The fake server's Batch API (OpenAI's wire format), so that batch runs, their waits and their
failures are tested and shown offline.

Why beside the chat fake and not in it: a batch is a small state machine over stored files (upload,
create, poll, download, cancel) with its own knobs, and the chat server is already a full module.
The fake answers each line of a batch with the same script (queue, rules, responder, default) as a
live chat request, so a deterministic fake model answers a request the same way live or batched.

Routes (also without the ``/v1`` prefix): ``POST /v1/files`` (multipart, ``purpose=batch``),
``GET /v1/files/{id}``, ``GET /v1/files/{id}/content``, ``GET /v1/batches``, ``POST /v1/batches`` (``input_file_id``,
``endpoint``, ``completion_window="24h"``), ``GET /v1/batches/{id}``, ``POST /v1/batches/{id}/cancel``.
A batch is ``validating`` until first read, then ``in_progress`` until done, then ``completed``
(or ``failed`` when its file does not validate, ``expired``, ``cancelled``). Output lines are
``{"id", "custom_id", "response": {"status_code", "request_id", "body"}, "error": null}``; failed
lines go to the error file (``response`` with a non-200 status, or ``error`` with a code).

Knobs (attributes of ``FakeBatchAPI``, the server's ``batch``): ``delay_s`` (seconds from creation to
completion), ``hold`` (stay ``in_progress`` until ``release()``: "until told"), ``fail`` (a predicate
on the line's custom_id and body: that line goes to the error file), ``expire`` (batches end
``expired``, every line in the error file as ``batch_expired``), ``reorder`` (output lines reversed),
``unknown_line`` (one extra output line with a custom_id nobody sent); a script sets them with its
``"batch"`` object (``configure``). ``created`` counts batch creations, ``lines`` keeps every request
answered in a batch (as ``RecordedRequest``). Anthropic's Message Batches (``/v1/messages/batches``) are
``messages``, a ``fake_anthropic_batch.FakeMessageBatches`` under the same knobs.
"""

from __future__ import annotations

import email.parser
import email.policy
import itertools
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sab_pytest.testing.fake_anthropic_batch import FakeMessageBatches
from sab_pytest.testing.fake_replies import CHAT_PATHS, RecordedRequest, Reply

Answered = tuple[int, dict[str, str], bytes]
WINDOW = "24h"
ENDPOINTS = ("/v1/chat/completions",)


@dataclass
class _Batch:
    """One batch: its request and what the fake decided for its lines (answered at creation)."""

    id: str
    input_file_id: str
    endpoint: str
    created_at: float
    total: int
    outputs: list[dict[str, Any]] = field(default_factory=list)
    errors: list[dict[str, Any]] = field(default_factory=list)
    validation: list[dict[str, Any]] = field(default_factory=list)
    read: bool = False
    cancelled: bool = False
    output_file_id: str | None = None
    error_file_id: str | None = None


class FakeBatchAPI:
    """The Batch API of one ``FakeOpenAIServer`` (``answer`` is the server's script for one chat
    request, ``payload`` the JSON body it would send)."""

    def __init__(self, answer: Callable[[RecordedRequest], Reply], payload: Callable[[Reply], bytes]) -> None:
        self.answer, self.payload = answer, payload
        self.delay_s: float = 0.0
        self.hold = False
        self.fail: Callable[[str, dict[str, Any]], bool] | None = None
        self.expire = False
        self.reorder = False
        self.unknown_line = False
        self.created = 0  # batch creations (POST /v1/batches), for "nothing resubmitted"
        self.cancels = 0
        self.uploads = 0
        self.lines: list[RecordedRequest] = []
        self.files: dict[str, tuple[str, bytes]] = {}  # id -> (purpose, content)
        self.batches: dict[str, _Batch] = {}
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._released = threading.Event()
        self.messages = FakeMessageBatches(self)  # Anthropic's Message Batches, driven by the same knobs

    def configure(self, spec: dict[str, Any]) -> None:
        """A script's ``"batch"`` object: ``delay_s``, ``hold``, ``expire``, ``reorder``, ``unknown_line``, and
        ``fail_contains`` (a line whose last message holds that text goes to the error file)."""
        self.delay_s = float(spec.get("delay_s", self.delay_s))
        self.hold, self.expire = bool(spec.get("hold", self.hold)), bool(spec.get("expire", self.expire))
        self.reorder, self.unknown_line = bool(spec.get("reorder", self.reorder)), bool(spec.get("unknown_line", False))
        if spec.get("fail_contains"):
            text = str(spec["fail_contains"])
            self.fail = lambda _id, body: text in json.dumps((body.get("messages") or [{}])[-1].get("content"))

    def release(self) -> None:
        """End ``hold``: held batches complete at their next read."""
        self._released.set()

    def released(self) -> bool:
        return self._released.is_set()

    # -- routing ----------------------------------------------------------------------------------
    def route(self, request: RecordedRequest) -> Answered | None:
        """The answer to a Batch API request, None when ``request`` is none (the chat server's)."""
        path = request.path[3:] if request.path.startswith("/v1/") else request.path
        parts = [p for p in path.split("/") if p]
        if parts[:2] == ["messages", "batches"]:
            return self.messages.route(request, parts[2:])
        if not parts or parts[0] not in ("files", "batches"):
            return None
        if parts == ["files"] and request.method == "POST":
            return self._upload(request)
        if parts[0] == "files" and len(parts) in (2, 3) and request.method == "GET":
            return self._file(parts[1], content=len(parts) == 3 and parts[2] == "content")
        if parts == ["batches"] and request.method == "POST":
            return self._create(request.body if isinstance(request.body, dict) else {})
        if parts == ["batches"]:
            with self._lock:
                listed = [self._object(b) for b in self.batches.values()][-20:]
            return 200, {}, json.dumps({"object": "list", "data": listed, "has_more": False}).encode()
        if parts[0] == "batches" and len(parts) == 2 and request.method == "GET":
            return self._retrieve(parts[1])
        if parts[0] == "batches" and len(parts) == 3 and parts[2] == "cancel" and request.method == "POST":
            return self._cancel(parts[1])
        return error_answer(404, f"no route for {request.method} {request.path}", "not_found")

    # -- files ------------------------------------------------------------------------------------
    def _upload(self, request: RecordedRequest) -> Answered:
        kind = request.headers.get("content-type", "")
        if not kind.startswith("multipart/form-data"):
            return error_answer(400, "files must be uploaded as multipart/form-data", "invalid_request")
        head = f"Content-Type: {kind}\r\n\r\n".encode()
        message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(head + request.raw_body)
        form: dict[str, bytes] = {}
        for part in message.iter_parts():
            name = part.get_param("name", header="content-disposition")
            payload = part.get_payload(decode=True)
            form[str(name)] = payload if isinstance(payload, bytes) else b""
        purpose = form.get("purpose", b"").decode()
        if purpose != "batch" or "file" not in form:
            return error_answer(400, "a batch input needs purpose=batch and a file", "invalid_request")
        with self._lock:
            self.uploads += 1
            file_id = self._store("batch", form["file"])
        return 200, {}, json.dumps(self._file_object(file_id)).encode()

    def _store(self, purpose: str, content: bytes) -> str:
        file_id = f"file-fake{next(self._ids):06d}"
        self.files[file_id] = (purpose, content)
        return file_id

    def _file_object(self, file_id: str) -> dict[str, Any]:
        purpose, content = self.files[file_id]
        return {"id": file_id, "object": "file", "bytes": len(content), "created_at": int(time.time()),
                "filename": f"{file_id}.jsonl", "purpose": purpose, "status": "processed"}

    def _file(self, file_id: str, *, content: bool) -> Answered:
        with self._lock:
            if file_id not in self.files:
                return error_answer(404, f"no file {file_id}", "not_found")
            if content:
                return 200, {"Content-Type": "application/octet-stream"}, self.files[file_id][1]
            return 200, {}, json.dumps(self._file_object(file_id)).encode()

    # -- batches ----------------------------------------------------------------------------------
    def _create(self, body: dict[str, Any]) -> Answered:
        file_id, endpoint = str(body.get("input_file_id", "")), str(body.get("endpoint", ""))
        if body.get("completion_window") != WINDOW:
            return error_answer(400, f"completion_window must be {WINDOW!r}", "invalid_request")
        if endpoint not in ENDPOINTS:
            return error_answer(400, f"endpoint {endpoint!r} is not supported here", "invalid_request")
        with self._lock:
            if file_id not in self.files:
                return error_answer(404, f"no file {file_id}", "not_found")
            content = self.files[file_id][1]
            self.created += 1
            batch = _Batch(id=f"batch_fake{next(self._ids):06d}", input_file_id=file_id, endpoint=endpoint,
                           created_at=time.time(), total=0)
            self.batches[batch.id] = batch
        self._answer_lines(batch, content)
        return 200, {}, json.dumps(self._object(batch)).encode()

    def _answer_lines(self, batch: _Batch, content: bytes) -> None:
        """Validate the input file and answer each line with the server's script."""
        seen: set[str] = set()
        parsed: list[tuple[str, dict[str, Any]]] = []
        for number, raw in enumerate(content.splitlines(), start=1):
            try:
                line = json.loads(raw)
                custom_id, body = str(line["custom_id"]), line["body"]
                ok = line.get("method") == "POST" and line.get("url") == batch.endpoint and isinstance(body, dict)
            except (ValueError, KeyError, TypeError):
                ok, custom_id, body = False, "", {}
            if not ok or custom_id in seen:
                batch.validation.append({"code": "invalid_request", "line": number, "param": None,
                                         "message": "a line must be {custom_id (unique), method POST, url, body}"})
            seen.add(custom_id)
            parsed.append((custom_id, body))
        batch.total = len(parsed)
        if batch.validation:
            return
        for custom_id, body in parsed:
            request = RecordedRequest(method="POST", path=CHAT_PATHS[0], headers={}, body=body,
                                      raw_body=json.dumps(body).encode(), received_at=time.monotonic())
            with self._lock:
                self.lines.append(request)
            line_id = f"batch_req_{next(self._ids):06d}"
            if self.fail is not None and self.fail(custom_id, body):
                failure = {"error": {"message": "the fake failed this line", "type": "server_error", "code": None}}
                batch.errors.append({"id": line_id, "custom_id": custom_id, "error": None,
                                     "response": {"status_code": 500, "request_id": line_id, "body": failure}})
                continue
            reply = self.answer(request)
            answer = json.loads(self.payload(reply))
            target = batch.outputs if reply.status == 200 else batch.errors
            target.append({"id": line_id, "custom_id": custom_id, "error": None,
                           "response": {"status_code": reply.status, "request_id": line_id, "body": answer}})
        if self.reorder:
            batch.outputs.reverse()
        if self.unknown_line:
            batch.outputs.append({**batch.outputs[0], "custom_id": "sab-unknown"} if batch.outputs else
                                 {"id": "batch_req_x", "custom_id": "sab-unknown", "response": None, "error": None})

    def _status(self, batch: _Batch) -> str:
        if batch.validation:
            return "failed"
        if batch.cancelled:
            return "cancelled"
        if not batch.read:
            return "validating"
        if self.hold and not self._released.is_set():
            return "in_progress"
        if time.time() - batch.created_at < self.delay_s:
            return "in_progress"
        return "expired" if self.expire else "completed"

    def _retrieve(self, batch_id: str) -> Answered:
        with self._lock:
            batch = self.batches.get(batch_id)
            if batch is None:
                return error_answer(404, f"no batch {batch_id}", "not_found")
            answer = self._object(batch)
            batch.read = True
        return 200, {}, json.dumps(answer).encode()

    def _cancel(self, batch_id: str) -> Answered:
        with self._lock:
            batch = self.batches.get(batch_id)
            if batch is None:
                return error_answer(404, f"no batch {batch_id}", "not_found")
            self.cancels += 1
            if self._status(batch) in ("validating", "in_progress"):
                batch.cancelled = True
            return 200, {}, json.dumps(self._object(batch)).encode()

    def _object(self, batch: _Batch) -> dict[str, Any]:
        """The batch as OpenAI describes it; its output and error files exist once it has ended."""
        status = self._status(batch)
        done = failed = 0
        if status == "completed":
            done, failed = len(batch.outputs), len(batch.errors)
            if batch.output_file_id is None and batch.outputs:
                batch.output_file_id = self._store("batch_output", _jsonl(batch.outputs))
            if batch.error_file_id is None and batch.errors:
                batch.error_file_id = self._store("batch_output", _jsonl(batch.errors))
        elif status == "expired" and batch.error_file_id is None:
            failed = batch.total
            expired = [{"id": f"batch_req_e{n}", "custom_id": line.get("custom_id"), "response": None,
                        "error": {"code": "batch_expired", "message": "This request could not be executed before "
                                  "the completion window expired."}} for n, line in
                       enumerate(batch.outputs + batch.errors)]
            batch.error_file_id = self._store("batch_output", _jsonl(expired)) if expired else None
        ended = int(time.time())
        return {
            "id": batch.id, "object": "batch", "endpoint": batch.endpoint, "input_file_id": batch.input_file_id,
            "completion_window": WINDOW, "status": status, "created_at": int(batch.created_at),
            "errors": {"object": "list", "data": batch.validation} if batch.validation else None,
            "output_file_id": batch.output_file_id if status == "completed" else None,
            "error_file_id": batch.error_file_id if status in ("completed", "expired") else None,
            "in_progress_at": int(batch.created_at) if batch.read else None,
            "expires_at": int(batch.created_at) + 86400,
            "completed_at": ended if status == "completed" else None,
            "failed_at": ended if status == "failed" else None,
            "expired_at": ended if status == "expired" else None,
            "cancelled_at": ended if status == "cancelled" else None,
            "request_counts": {"total": batch.total, "completed": done, "failed": failed},
            "metadata": None,
        }


def _jsonl(lines: list[dict[str, Any]]) -> bytes:
    return b"".join(json.dumps(line).encode() + b"\n" for line in lines)


def error_answer(status: int, message: str, code: str) -> Answered:
    """An error as OpenAI's API sends it."""
    body = {"error": {"message": message, "type": "invalid_request_error", "code": code}}
    return status, {}, json.dumps(body).encode()
