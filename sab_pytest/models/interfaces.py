"""What the rest of the code needs of a model and of the run around it, as protocols: agents and
judges talk to any ``ChatModel``; a client reports to any ``Breaker`` and takes any ``Slots``, so the
model layer does not depend on the run machinery above it."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from typing import Any, Protocol

from sab_pytest.errors import InfraError
from sab_pytest.outcome import ModelCall


class Stop(Protocol):
    """A run's stop, as a breaker reports it: ``error()`` is what a stopped call raises."""

    def error(self) -> InfraError: ...


class Breaker(Protocol):
    """What a client needs of the run's circuit breaker (``run.breaker.RunState`` is one): declared
    here so that the model layer does not depend on the run machinery above it."""

    def check(self) -> None: ...

    def wait(self, seconds: float, *, while_healthy: bool = False) -> bool: ...

    def streak(self) -> int: ...

    def success(self) -> None: ...

    def failure(self, message: str) -> int: ...

    def answered_since(self, when: float) -> bool: ...

    def heard(self) -> None: ...

    def heard_during(self, when: float) -> bool: ...

    def request_stop(self, reason: str, message: str) -> Stop: ...


class Slots(Protocol):
    """What a client needs of the process's call slots (``run.slots.CallSlots`` is one)."""

    def slot(self, check: Callable[[], None] | None = None) -> AbstractContextManager[float]: ...

    def congested(self) -> None: ...

    def relieved(self) -> None: ...

    def measured(self, key: str, seconds: float, tokens: int = 0) -> None: ...

    def timed_out(self) -> None: ...


class ChatModel(Protocol):
    """A chat model: messages in, one answer out (recorded as a ``ModelCall``).

    Implementations raise ``InfraError("model_api", ...)`` when no answer can be had after their
    retries; they never return an empty answer silently.
    """

    name: str

    def complete(self, messages: list[dict[str, Any]], *, role: str = "agent",
                 max_tokens: int | None = None, tools: list[dict[str, Any]] | None = None) -> ModelCall: ...


# --------------------------------------------------------------------------------------------------


class BatchHook(Protocol):
    """What a client in batch mode (``--sab-batch``) is given (``batching.batcher.ModelHook``): a request
    that missed the cache goes to the batch instead of the API (``hook``), and an answer read back from
    the cache is told apart as the batch's (``first_read``)."""

    def hook(self, material: Mapping[str, Any], params: Mapping[str, Any], live: Callable[[], Any],
             made: list[Any]) -> Callable[[], Any]: ...

    def first_read(self, material: Mapping[str, Any]) -> bool: ...


class Spending(Protocol):
    """``--sab-budget``'s gate (``models.pricing.BudgetGate``): a live request that would pass the budget
    is not sent (``before`` stops the run), an answered one adds its cost (``after``)."""

    def before(self, model: Any, params: dict[str, Any], role: str) -> None: ...

    def failed(self, params: dict[str, Any]) -> None: ...

    def after(self, model: Any, params: dict[str, Any], prompt_tokens: int, completion_tokens: int,
              cached_tokens: int) -> None: ...
