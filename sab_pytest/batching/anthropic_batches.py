"""Anthropic's Message Batches behind the batcher's interface (``client.BatchAPI``), through the
``anthropic`` SDK (``client.messages.batches.create/retrieve/cancel/results/list``).

Why a client of its own and not a translation layer over OpenAI's: there are no files here (the
requests travel in the create call, as ``{"custom_id", "params"}``), a batch has one
``processing_status`` (``in_progress``, ``canceling``, ``ended``) and each request ends with a result
of its own type (``succeeded``, ``errored``, ``canceled``, ``expired``). What stays the same is what
the batcher relies on: the ``custom_id`` is the request's response-cache key (a SHA-256 in hex: 64
characters, within Anthropic's 64), requests cross in OpenAI's chat shape and are translated by the
anthropic provider itself (``MessagesWire``: its ``to_messages``), and a ``succeeded`` message
becomes an ``Answer`` by the same conversion as a live one (its ``to_answer``), so a batched answer
is the very ``Answer`` a live call would have built.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Protocol

from sab_pytest.batching.client import BatchRequest, BatchStatus, Collected, SdkBatches, input_files
from sab_pytest.batching.errors import BatchError
from sab_pytest.models.wire import Answer, Failure, scrub

MAX_REQUESTS = 100_000  # Anthropic: requests per message batch
MAX_BYTES = 256 * 1024 * 1024  # Anthropic: bytes per message batch
ENDED = "ended"


class MessagesWire(Protocol):
    """The Messages API's translation both ways, as the anthropic provider does it for a live call
    (``AnthropicProvider.batch_params`` / ``batch_answer``): asked of the provider object, not
    imported from its module, since a provider's wire format stays inside its own module."""

    def batch_params(self, params: Mapping[str, Any]) -> dict[str, Any]: ...

    def batch_answer(self, message: Mapping[str, Any], max_tokens: Any = None) -> Answer: ...


class MessageBatchClient(SdkBatches):
    """The Message Batches of the endpoint an ``anthropic.Anthropic`` client (``sdk``) talks to;
    ``secret`` is scrubbed from every message."""

    sdk_module = "anthropic"
    base_error = "AnthropicError"

    def __init__(self, sdk: Any, wire: MessagesWire, *, secret: str | None = None, timeout: float = 60.0) -> None:
        super().__init__(sdk, secret=secret, timeout=timeout)
        self.wire = wire
        self._limits: dict[str, Any] = {}  # custom_id -> max_tokens, for the message of an answer cut short

    def supported(self) -> bool:
        """Whether the endpoint lists message batches (a proxy without them answers 404)."""
        return self._lists(self.sdk.messages.batches.list)

    def files(self, requests: Sequence[BatchRequest], *, max_lines: int | None = None) -> Iterator[list[BatchRequest]]:
        """``requests`` cut into message batches within Anthropic's limits."""
        return input_files(requests, max_lines=max_lines or MAX_REQUESTS, max_bytes=MAX_BYTES, size_of=self._size)

    def _entry(self, request: BatchRequest) -> dict[str, Any]:
        """``request`` as one of a message batch's ``requests``: its params in the Messages API's shape."""
        return {"custom_id": request.custom_id, "params": self.wire.batch_params(request.body)}

    def _size(self, request: BatchRequest) -> int:
        return len(json.dumps(self._entry(request), ensure_ascii=False, separators=(",", ":")).encode()) + 1

    def submit(self, requests: Sequence[BatchRequest], *, metadata: Mapping[str, str] | None = None) -> tuple[str, str]:
        """Create one message batch of ``requests``: (batch id, ""), there being no input file."""
        entries = [self._entry(r) for r in requests]
        batch = self._sdk_call("creating a message batch", self.sdk.messages.batches.create, requests=entries)
        for request in requests:
            self._limits[request.custom_id] = request.body.get("max_tokens")
        return str(batch.id), ""

    def status(self, batch_id: str) -> BatchStatus:
        """The batch's state now: ``ended`` is done; its errored, canceled and expired requests are
        the failed ones (Anthropic counts them only once the batch has ended)."""
        batch = self._sdk_call(f"reading message batch {batch_id}", self.sdk.messages.batches.retrieve, batch_id)
        counts = batch.request_counts
        tally = {name: int(getattr(counts, name, 0) or 0)
                 for name in ("processing", "succeeded", "errored", "canceled", "expired")}
        return BatchStatus(id=batch_id, status=str(batch.processing_status), total=sum(tally.values()),
                           completed=tally["succeeded"], failed=tally["errored"] + tally["canceled"] + tally["expired"])

    def cancel(self, batch_id: str) -> None:
        self._sdk_call(f"cancelling message batch {batch_id}", self.sdk.messages.batches.cancel, batch_id)

    def collect(self, status: BatchStatus, expected: Sequence[str]) -> Collected:
        """The answers of an ended batch, matched by custom_id (its results come in any order), and
        why each other request of ``expected`` has none. A result for a custom_id the batch never
        carried is a ``BatchError`` (``batch_unknown_id``)."""
        found = Collected()
        wanted = set(expected)
        if status.status != ENDED:
            raise BatchError("batch_failed", f"message batch {status.id} is {status.status}, not ended")
        lines = self._sdk_call(f"reading the results of message batch {status.id}",
                               self.sdk.messages.batches.results, status.id)
        try:
            for line in lines:
                self._read(line.model_dump() if hasattr(line, "model_dump") else dict(line), wanted, status.id, found)
        except BatchError:
            raise
        except Exception as exc:  # the SDK's or the HTTP library's error while the results stream in
            raise BatchError("batch_api", f"reading the results of message batch {status.id}: "
                             f"{scrub(str(exc), self.secret)}") from None
        found.settle(wanted, f"message batch {status.id}: no result for this request")
        return found

    def _read(self, line: Mapping[str, Any], wanted: set[str], batch_id: str, found: Collected) -> None:
        custom_id = found.claim(line, wanted, batch_id)
        result = line.get("result") or {}
        kind = result.get("type")
        if kind == "succeeded":
            try:
                found.answers[custom_id] = self.wire.batch_answer(result.get("message") or {},
                                                                self._limits.get(custom_id))
            except Failure as exc:
                found.failed[custom_id] = f"unusable answer: {exc}"
            return
        if kind == "errored":
            error = ((result.get("error") or {}).get("error")) or {}
            found.failed[custom_id] = f"{error.get('type')}: {scrub(str(error.get('message')), self.secret)}"
            return
        found.failed[custom_id] = f"message batch {batch_id}: request {kind}"
