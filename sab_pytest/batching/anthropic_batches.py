"""Anthropic's Message Batches behind the batcher's interface (``client.BatchAPI``), through the
``anthropic`` SDK (``client.messages.batches.create/retrieve/cancel/results/list``).

Why a client of its own and not a translation layer over OpenAI's: there are no files here (the
requests travel in the create call, as ``{"custom_id", "params"}``), a batch has one
``processing_status`` (``in_progress``, ``canceling``, ``ended``) and each request ends with a result
of its own type (``succeeded``, ``errored``, ``canceled``, ``expired``). What stays the same is what
the batcher relies on: the ``custom_id`` is the request's response-cache key (a SHA-256 in hex: 64
characters, within Anthropic's 64), requests cross in OpenAI's chat shape and are translated by the
provider's own ``to_messages``, and a ``succeeded`` message becomes an ``Answer`` by the provider's
own ``to_answer``, so a batched answer is the very ``Answer`` a live call would have built.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from sab_pytest.batching.client import BatchRequest, BatchStatus, Collected, input_files
from sab_pytest.batching.errors import BatchError
from sab_pytest.models.providers.anthropic_messages import to_answer, to_messages
from sab_pytest.models.wire import Failure, scrub

MAX_REQUESTS = 100_000  # Anthropic: requests per message batch
MAX_BYTES = 256 * 1024 * 1024  # Anthropic: bytes per message batch
ENDED = "ended"


def entry(request: BatchRequest) -> dict[str, Any]:
    """``request`` as one of a message batch's ``requests``: its params in the Messages API's shape."""
    return {"custom_id": request.custom_id, "params": to_messages(request.body)}


def _size(request: BatchRequest) -> int:
    return len(json.dumps(entry(request), ensure_ascii=False, separators=(",", ":")).encode()) + 1


class MessageBatchClient:
    """The Message Batches of the endpoint an ``anthropic.Anthropic`` client (``sdk``) talks to;
    ``secret`` is scrubbed from every message."""

    def __init__(self, sdk: Any, *, secret: str | None = None, timeout: float = 60.0) -> None:
        self.sdk, self.secret, self.timeout = sdk, secret, timeout
        self._limits: dict[str, Any] = {}  # custom_id -> max_tokens, for the message of an answer cut short

    def _sdk_call(self, what: str, call: Any, *args: Any, **kwargs: Any) -> Any:
        import anthropic

        try:
            return call(*args, timeout=self.timeout, **kwargs)
        except anthropic.NotFoundError as exc:
            raise BatchError("batch_unsupported", f"{what}: the server has no Message Batches (HTTP 404): "
                             f"{scrub(str(exc), self.secret)}") from None
        except anthropic.AnthropicError as exc:
            raise BatchError("batch_api", f"{what}: {scrub(str(exc), self.secret)}") from None

    def supported(self) -> bool:
        """Whether the endpoint lists message batches (a proxy without them answers 404)."""
        import anthropic

        try:
            self.sdk.messages.batches.list(limit=1, timeout=self.timeout)
        except anthropic.AnthropicError:
            return False
        return True

    def files(self, requests: Sequence[BatchRequest], *, max_lines: int | None = None) -> Iterator[list[BatchRequest]]:
        """``requests`` cut into message batches within Anthropic's limits."""
        return input_files(requests, max_lines=max_lines or MAX_REQUESTS, max_bytes=MAX_BYTES, size_of=_size)

    def submit(self, requests: Sequence[BatchRequest], *, metadata: Mapping[str, str] | None = None) -> tuple[str, str]:
        """Create one message batch of ``requests``: (batch id, ""), there being no input file."""
        entries = [entry(r) for r in requests]
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
        for missing in wanted - set(found.answers) - set(found.failed):
            found.failed[missing] = f"message batch {status.id}: no result for this request"
        return found

    def _read(self, line: Mapping[str, Any], wanted: set[str], batch_id: str, found: Collected) -> None:
        custom_id = str(line.get("custom_id"))
        if custom_id not in wanted:
            raise BatchError("batch_unknown_id", f"message batch {batch_id} answered a request it never carried "
                             f"(custom_id {custom_id[:40]!r})")
        result = line.get("result") or {}
        kind = result.get("type")
        if kind == "succeeded":
            try:
                found.answers[custom_id] = to_answer(result.get("message") or {}, self._limits.get(custom_id))
            except Failure as exc:
                found.failed[custom_id] = f"unusable answer: {exc}"
            return
        if kind == "errored":
            error = ((result.get("error") or {}).get("error")) or {}
            found.failed[custom_id] = f"{error.get('type')}: {scrub(str(error.get('message')), self.secret)}"
            return
        found.failed[custom_id] = f"message batch {batch_id}: request {kind}"
