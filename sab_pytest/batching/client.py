"""One provider's Batch API, as OpenAI defines it: requests written as ``.jsonl`` input files (within
the provider's limits), uploaded with ``purpose=batch``, submitted, polled, and their output and
error files read back and matched to the requests by ``custom_id``.

Why the ``custom_id`` is the request's response-cache key (``cache.request_key``): a batch answer is
then stored in the response cache exactly where a live answer to the same request would be, a
request already answered is never sent again, and a run that resumes can tell, from the journal
alone, which of its requests a pending batch already carries.

The SDK (``client.files.create``, ``client.batches.create/retrieve/cancel``, ``client.files.content``)
is the transport, as for live calls; anything else it raises is a ``BatchError`` with the provider's
message (keys scrubbed).
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from sab_pytest.batching.errors import BatchError
from sab_pytest.models.wire import Answer, Failure, parse_answer, scrub

ENDPOINT = "/v1/chat/completions"
WINDOW = "24h"
MAX_LINES = 50_000  # OpenAI: requests per input file
MAX_BYTES = 200 * 1024 * 1024  # OpenAI: bytes per input file
DONE = frozenset({"completed", "failed", "expired", "cancelled", "ended"})  # "ended": Anthropic's one end


@dataclass(frozen=True)
class BatchRequest:
    """One request to send in a batch: its ``custom_id`` (the cache key) and the chat ``body``."""

    custom_id: str
    body: Mapping[str, Any]

    def line(self) -> bytes:
        """Its line of an input file."""
        entry = {"custom_id": self.custom_id, "method": "POST", "url": ENDPOINT, "body": dict(self.body)}
        return json.dumps(entry, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


@dataclass
class BatchStatus:
    """A batch as the provider describes it."""

    id: str
    status: str
    total: int = 0
    completed: int = 0
    failed: int = 0
    output_file_id: str | None = None
    error_file_id: str | None = None
    errors: list[str] = field(default_factory=list)

    @property
    def done(self) -> bool:
        return self.status in DONE


@dataclass
class Collected:
    """What a finished batch said: answers by custom_id, and the lines that failed (custom_id -> why)."""

    answers: dict[str, Answer] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)

    def claim(self, line: Mapping[str, Any], wanted: set[str], batch_id: str) -> str:
        """The custom_id of a result ``line``; one the batch never carried is a ``BatchError``
        (``batch_unknown_id``): an answer must never land under another request's cache key."""
        custom_id = str(line.get("custom_id"))
        if custom_id not in wanted:
            raise BatchError("batch_unknown_id", f"batch {batch_id} answered a request it never carried "
                             f"(custom_id {custom_id[:40]!r})")
        return custom_id

    def settle(self, wanted: set[str], why: str) -> None:
        """Every request of ``wanted`` with neither an answer nor a reason has none for ``why``."""
        for missing in wanted - set(self.answers) - set(self.failed):
            self.failed[missing] = why


def input_files(requests: Sequence[BatchRequest], *, max_lines: int = MAX_LINES, max_bytes: int = MAX_BYTES,
                size_of: Callable[[BatchRequest], int] = lambda r: len(r.line())) -> Iterator[list[BatchRequest]]:
    """``requests`` cut into input files of at most ``max_lines`` lines and ``max_bytes`` bytes (a
    request's bytes: ``size_of``, its line of OpenAI's file unless the provider sends another shape);
    one request larger than a whole file is a ``BatchError`` (the provider would refuse the file)."""
    chunk: list[BatchRequest] = []
    size = 0
    for request in requests:
        length = size_of(request)
        if length > max_bytes:
            raise BatchError("batch_too_large", f"request {request.custom_id[:12]}: {length} bytes, more than a "
                             f"batch input file may hold ({max_bytes} bytes)")
        if chunk and (len(chunk) >= max_lines or size + length > max_bytes):
            yield chunk
            chunk, size = [], 0
        chunk.append(request)
        size += length
    if chunk:
        yield chunk


class BatchAPI(Protocol):
    """What the batcher needs of one provider's batch API (OpenAI's ``BatchClient``, Anthropic's
    ``anthropic_batches.MessageBatchClient``): the batcher's rounds, the journal and the response
    cache then work the same whichever provider answers."""

    def supported(self) -> bool: ...

    def files(self, requests: Sequence[BatchRequest], *, max_lines: int | None = None) -> Iterator[list[BatchRequest]]:
        """``requests`` cut into batches within the provider's limits (``max_lines``: a lower count)."""
        ...

    def submit(self, requests: Sequence[BatchRequest], *,
               metadata: Mapping[str, str] | None = None) -> tuple[str, str]: ...

    def status(self, batch_id: str) -> BatchStatus: ...

    def cancel(self, batch_id: str) -> None: ...

    def collect(self, status: BatchStatus, expected: Sequence[str]) -> Collected: ...


class SdkBatches:
    """A batch API reached through a provider's SDK client (``sdk``), whose errors become
    ``BatchError``s with ``secret`` scrubbed. Why shared: the ``openai`` and ``anthropic`` SDKs name
    their errors alike (``NotFoundError``, one base error), so the two clients differ only in which
    SDK they import (``sdk_module``, ``base_error``)."""

    sdk_module = "openai"
    base_error = "OpenAIError"

    def __init__(self, sdk: Any, *, secret: str | None = None, timeout: float = 60.0) -> None:
        self.sdk, self.secret, self.timeout = sdk, secret, timeout

    def _errors(self) -> tuple[type[Exception], type[Exception]]:
        module = importlib.import_module(self.sdk_module)
        return module.NotFoundError, getattr(module, self.base_error)

    def _sdk_call(self, what: str, call: Any, *args: Any, **kwargs: Any) -> Any:
        missing, failed = self._errors()
        try:
            return call(*args, timeout=self.timeout, **kwargs)
        except missing as exc:
            raise BatchError("batch_unsupported", f"{what}: the server has no Batch API (HTTP 404): "
                             f"{scrub(str(exc), self.secret)}") from None
        except failed as exc:
            raise BatchError("batch_api", f"{what}: {scrub(str(exc), self.secret)}") from None

    def _lists(self, listing: Any) -> bool:
        """Whether ``listing`` (the SDK's list of batches) answers: a server without batches says 404."""
        try:
            listing(limit=1, timeout=self.timeout)
        except self._errors()[1]:
            return False
        return True


class BatchClient(SdkBatches):
    """The Batch API of the endpoint an ``openai.OpenAI`` client (``sdk``) talks to; ``secret`` is
    scrubbed from every message."""

    def supported(self) -> bool:
        """Whether the endpoint has a Batch API at all (``GET /batches`` lists them; a server without
        one answers 404): asked once before the first case, so that a run does not find out later."""
        return self._lists(self.sdk.batches.list)

    def files(self, requests: Sequence[BatchRequest], *, max_lines: int | None = None) -> Iterator[list[BatchRequest]]:
        """``requests`` cut into input files within OpenAI's limits."""
        return input_files(requests, max_lines=max_lines or MAX_LINES)

    def submit(self, requests: Sequence[BatchRequest], *, metadata: Mapping[str, str] | None = None) -> tuple[str, str]:
        """Upload one input file of ``requests`` and create its batch: (batch id, input file id)."""
        content = b"".join(r.line() for r in requests)
        uploaded = self._sdk_call("uploading a batch input file", self.sdk.files.create,
                                  file=("sab-batch.jsonl", content, "application/jsonl"), purpose="batch")
        batch = self._sdk_call("creating a batch", self.sdk.batches.create, input_file_id=uploaded.id,
                               endpoint=ENDPOINT, completion_window=WINDOW, metadata=dict(metadata or {}) or None)
        return str(batch.id), str(uploaded.id)

    def status(self, batch_id: str) -> BatchStatus:
        """The batch's state now."""
        batch = self._sdk_call(f"reading batch {batch_id}", self.sdk.batches.retrieve, batch_id)
        counts = getattr(batch, "request_counts", None)
        errors = getattr(getattr(batch, "errors", None), "data", None) or []
        return BatchStatus(id=batch_id, status=str(batch.status), total=int(getattr(counts, "total", 0) or 0),
                           completed=int(getattr(counts, "completed", 0) or 0),
                           failed=int(getattr(counts, "failed", 0) or 0),
                           output_file_id=batch.output_file_id, error_file_id=batch.error_file_id,
                           errors=[f"line {getattr(e, 'line', '?')}: {getattr(e, 'message', e)}" for e in errors])

    def cancel(self, batch_id: str) -> None:
        self._sdk_call(f"cancelling batch {batch_id}", self.sdk.batches.cancel, batch_id)

    def collect(self, status: BatchStatus, expected: Sequence[str]) -> Collected:
        """The answers of a finished batch, matched by custom_id, and why each other line of
        ``expected`` has none (the error file's reason, or the batch's end). An output line for a
        custom_id the batch never carried is a ``BatchError`` (``batch_unknown_id``)."""
        found = Collected()
        wanted = set(expected)
        for file_id in (status.output_file_id, status.error_file_id):
            if not file_id:
                continue
            raw = self._sdk_call(f"reading file {file_id} of batch {status.id}", self.sdk.files.content, file_id)
            for text in raw.content.decode("utf-8").splitlines():
                if text.strip():
                    self._read_line(json.loads(text), wanted, status.id, found)
        ended = "; ".join(status.errors) or "no line in its output or error file"
        found.settle(wanted, f"batch {status.id} {status.status}: {ended}")
        return found

    def _read_line(self, line: Mapping[str, Any], wanted: set[str], batch_id: str, found: Collected) -> None:
        custom_id = found.claim(line, wanted, batch_id)
        response, error = line.get("response") or {}, line.get("error")
        if error:
            found.failed[custom_id] = f"{error.get('code')}: {error.get('message')}"
            return
        if response.get("status_code") != 200:
            message = ((response.get("body") or {}).get("error") or {}).get("message", "no message")
            found.failed[custom_id] = f"HTTP {response.get('status_code')}: {message}"
            return
        body = response.get("body") or {}
        try:
            found.answers[custom_id] = parse_answer(json.dumps(body))
        except Failure as exc:
            found.failed[custom_id] = f"unusable answer: {exc}"
