"""A judge panel: the same question to several judge models at once, the verdict by majority.

Why: one judge's error is in no interval, and a panel of models from different families agrees with
people better than one large judge (Verga et al. 2024). Each model's own verdict is kept beside the
majority (``votes``), so that agreement between the models, and later each model's agreement with
people (``sab audit``), can be measured. A split panel decides nothing: an even split is a named
error (``judge_tie``), never broken silently. A model whose answer cannot be read (after the judge's
one follow-up) sits the case out, and its error is kept among the votes; the others decide. Any
other failure of a model is the case's error, as for one judge.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from sab_pytest.errors import ErrorKind, InfraError

if TYPE_CHECKING:
    from sab_pytest.models import ChatModel
    from sab_pytest.outcome import ModelCall

T = TypeVar("T")


@dataclass
class Vote:
    """One model's verdict on a panel (``value`` None with ``error`` when its answer could not be read)."""

    model: str
    value: Any
    error: str | None = None
    calls: list[ModelCall] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        value = list(self.value) if isinstance(self.value, tuple) else self.value
        return {"model": self.model, "value": value, "error": self.error}


def majority(values: Sequence[Any]) -> Any:
    """The majority of ``values``: of booleans, the more frequent; of tuples (completeness, safety), the
    majority of each part. None when a split is even (or there is no value)."""
    if not values:
        return None
    if isinstance(values[0], tuple):
        parts = [majority([bool(v[i]) for v in values]) for i in range(len(values[0]))]
        return None if any(p is None for p in parts) else tuple(int(p) for p in parts)
    yes = sum(1 for v in values if v)
    no = len(values) - yes
    return None if yes == no else yes > no


def ask_panel(models: Sequence[ChatModel], ask: Callable[[ChatModel], tuple[T, list[ModelCall]]],
              what: str) -> tuple[T, list[ModelCall], list[Vote]]:
    """Every model of the panel asked at once (``ask(model)`` is one judge's question with its follow-up);
    the majority verdict, every call made, and each model's vote. An even split raises ``judge_tie``."""
    with ThreadPoolExecutor(max_workers=len(models), thread_name_prefix="sab-panel") as pool:
        futures = [pool.submit(ask, model) for model in models]
        votes: list[Vote] = []
        failure: BaseException | None = None
        for model, future in zip(models, futures, strict=True):
            try:
                value, calls = future.result()
                votes.append(Vote(model.name, value, calls=calls))
            except InfraError as exc:
                calls = list(getattr(exc, "calls", None) or [])
                if exc.kind != ErrorKind.JUDGE_PARSE:
                    failure = failure or exc
                votes.append(Vote(model.name, None, error=str(exc.args[0]), calls=calls))
    calls = [c for v in votes for c in v.calls]
    if failure is not None:
        failure.calls = calls  # type: ignore[attr-defined]
        raise failure
    decided = majority([v.value for v in votes if v.error is None])
    if decided is None:
        shown = ", ".join(f"{v.model}: {v.value if v.error is None else 'unreadable'}" for v in votes)
        err = InfraError(ErrorKind.JUDGE_TIE.value, f"the {what} judge panel split evenly ({shown})")
        err.calls = calls  # type: ignore[attr-defined]
        err.votes = votes  # type: ignore[attr-defined]
        raise err
    return decided, calls, votes
