"""The signal that parks a case until its batch is answered, and the named failures of a batch."""

from __future__ import annotations

from sab_pytest.errors import InfraError


class Deferred(BaseException):
    """A batchable request missed the response cache and waits for the next batch: the case stops
    here, leaves no record, and runs again once the batch has answered (its earlier requests then
    come from the cache). A ``BaseException``, like ``errors.Cancelled``, so that no ``except
    Exception`` on the way (an agent's, a judge's) turns it into a verdict."""


class BatchError(InfraError):
    """A batch failed for a named reason (``code``: ``batch_unsupported``, ``batch_api``,
    ``batch_too_large``, ``batch_unknown_id``, ``batch_failed``, ``batch_expired``, ...); a case
    whose request it leaves without an answer records it as a ``batch`` error."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__("batch", f"{code}: {message}")
        self.code = code
