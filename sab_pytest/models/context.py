"""The per-case context of model calls, passed explicitly: one ``CallContext`` per case (its time
budget, its failure log, the run's stop signal, its repeat number), made by the runtime and handed
to the models the case uses through ``for_case``.

Why an object and not thread-local state: a reader of the retry loop sees where the deadline comes
from, a test builds one without entering scopes, and a case whose work moved to another thread would
still carry it. The case runner runs several cases at once through the same clients; each case's
models are ``CaseModel`` views of the shared clients, bound to that case's context, with the same
``complete`` as any ``ChatModel``, so agents, judges and the guard need not know about it.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from sab_pytest.errors import Cancelled, ErrorKind, InfraError

if TYPE_CHECKING:
    from sab_pytest.outcome import ModelCall


@dataclass
class FailureLog:
    """Requests of one case that got no usable answer: each failed attempt (retries included)
    and each call that failed for good. A failed request is still a request the API received
    (and may bill), so the usage counts it; answers alone cannot, since a failure has none.
    Rate-limited requests (HTTP 429, 503 with Retry-After) are counted apart, with the seconds
    waited for them: back-pressure, not failures. So are requests ``abandoned`` when the case's time
    ran out while the server had them: not the server's failure, and still received (and maybe
    billed), so that the run's requests add up to what the server got."""

    failed_attempts: int = 0
    failed_calls: int = 0
    rate_limited: int = 0
    rate_limit_wait_s: float = 0.0
    abandoned: int = 0

    def failure(self, *, final: bool) -> None:
        """One failed attempt, or (``final``) one call that failed for good."""
        if final:
            self.failed_calls += 1
        else:
            self.failed_attempts += 1

    def rate_limit(self, waited: float) -> None:
        """One rate-limited request, and the ``waited`` seconds of back-off that followed it."""
        self.rate_limited += 1
        self.rate_limit_wait_s += waited


@dataclass
class CallContext:
    """What the model calls of one case share: ``deadline`` (a ``time.monotonic()`` instant, None:
    no budget), ``failures`` (counted on the case's verdict), ``stop`` (set when the run stops: no
    new call or retry starts) and ``repeat`` (``--sab-repeat``: the client sends ``seed=repeat``,
    so each repeat is a sample of its own and is cached apart; 0: no seed)."""

    deadline: float | None = None
    failures: FailureLog = field(default_factory=FailureLog)
    #: a wall-clock end of the case (a ``time.monotonic()`` instant) that, unlike ``deadline``, time
    #: queued or backing off never moves: pytest-timeout's ``--timeout`` counts wall time, and a case
    #: must end on its own, as a recorded error, before pytest-timeout ends its test
    limit: float | None = None
    limit_name: str = "wall-time limit"
    stop: threading.Event | None = None
    repeat: int = 0
    # every call answered for this case: a case the run's stop cuts short has no record, and its
    # usage would be lost with it (``run.runtime`` hands it to the run's state)
    made: list[ModelCall] = field(default_factory=list)

    @classmethod
    def start(cls, budget_s: float | None = None, *, stop: threading.Event | None = None,
              repeat: int = 0, limit_s: float | None = None, limit_name: str = "wall-time limit") -> CallContext:
        """A case's context whose budget of ``budget_s`` seconds (None: unbounded) starts now, as
        does its wall-clock ``limit_s`` (None: none), named ``limit_name`` in errors."""
        now = time.monotonic()
        deadline = now + max(0.0, budget_s) if budget_s is not None else None
        limit = now + max(0.0, limit_s) if limit_s is not None else None
        return cls(deadline=deadline, stop=stop, repeat=repeat, limit=limit, limit_name=limit_name)

    @property
    def ends_at(self) -> float | None:
        """The earlier of the budget's deadline and the wall-clock limit (None: neither)."""
        ends = [t for t in (self.deadline, self.limit) if t is not None]
        return min(ends) if ends else None

    def bound(self) -> str:
        """The name of the bound that ends the case first, for its error message."""
        if self.limited():
            return self.limit_name
        return "case time budget"

    def limited(self) -> bool:
        """Whether the wall-clock limit, not the case budget, is the bound that ends the case first."""
        return self.limit is not None and (self.deadline is None or self.limit <= self.deadline)

    def out_of_time(self, message: str) -> InfraError:
        """The case's error when its time ran out (``message`` names ``bound()``): ``timeout`` when
        the wall-clock limit (pytest-timeout's) ended it, else ``model_timeout`` (the case budget)."""
        return InfraError(ErrorKind.TIMEOUT if self.limited() else ErrorKind.MODEL_TIMEOUT, message)

    def check(self) -> None:
        """Raise ``Cancelled`` once the run was stopped."""
        if self.stop is not None and self.stop.is_set():
            raise Cancelled("the run was stopped")

    def left(self) -> float | None:
        """Seconds until the deadline or the limit (never below 0), None without either."""
        ends = self.ends_at
        return None if ends is None else max(0.0, ends - time.monotonic())

    def expired(self, margin: float = 0.0) -> bool:
        """Whether the budget (or the limit) is spent (``margin`` seconds before its end count as spent)."""
        ends = self.ends_at
        return ends is not None and time.monotonic() >= ends - margin

    def extend(self, seconds: float) -> None:
        """Move the deadline ``seconds`` later: time the case spent queued or backing off before a
        rate limit, which is not the case's work."""
        if self.deadline is not None:
            self.deadline += seconds

    @contextlib.contextmanager
    def share(self, fraction: float) -> Iterator[CallContext]:
        """Within this block the case's deadline is ``fraction`` of what is left of it (an episode
        keeps the rest for the judges). Every model bound to this context sees the shorter budget,
        the guard's included; at the end the case's own deadline is back, moved by any extension
        made meanwhile (queued time is not the case's work, in or out of the block)."""
        if self.deadline is None:
            yield self
            return
        end = self.deadline
        cut = time.monotonic() + max(0.0, end - time.monotonic()) * fraction
        self.deadline = cut
        try:
            yield self
        finally:
            extended = (self.deadline or cut) - cut
            self.deadline = end + extended


class _Contextual(Protocol):
    """A client whose ``complete`` takes the case's context (``client.ChatClient``)."""

    name: str

    def complete(self, messages: list[dict[str, Any]], *, role: str = "agent", max_tokens: int | None = None,
                 tools: list[dict[str, Any]] | None = None, context: CallContext | None = None) -> ModelCall: ...


class CaseModel:
    """A shared client seen by one case: ``complete`` is the client's, within ``context``."""

    def __init__(self, model: _Contextual, context: CallContext) -> None:
        self.model = model
        self.context = context
        self.name = model.name

    def __repr__(self) -> str:
        return f"CaseModel({self.model!r})"

    def complete(self, messages: list[dict[str, Any]], *, role: str = "agent",
                 max_tokens: int | None = None, tools: list[dict[str, Any]] | None = None) -> ModelCall:
        return self.model.complete(messages, role=role, max_tokens=max_tokens, tools=tools, context=self.context)


M = TypeVar("M")


def for_case(model: M, context: CallContext) -> M:
    """``model`` bound to ``context`` when it takes one (``for_case``); a model that keeps no
    budget (offline and test models) as it is."""
    bind = getattr(model, "for_case", None)
    return bind(context) if callable(bind) else model
