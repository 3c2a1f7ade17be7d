"""From the command line's ``--model``/``--sab-strategy``/``--sab-safety-hint`` to an ``Agent``.

One place decides which names are valid, so the plugin can check options once, before any case
runs, and report a bad value as a ``UsageError`` that lists the choices.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import UsageError
from .offline import ReferenceAgent, RefuseAgent
from .text import PLANNERS

if TYPE_CHECKING:
    from ..models import ChatModel
    from . import Agent

#: Model specs that need no model: the strategy does not apply to them.
OFFLINE_AGENTS: dict[str, type[ReferenceAgent] | type[RefuseAgent]] = {
    "reference": ReferenceAgent, "refuse": RefuseAgent,
}

#: Valid ``--sab-strategy`` values, in documentation order.
STRATEGIES: tuple[str, ...] = tuple(PLANNERS)

DEFAULT_STRATEGY = "direct"


def check_strategy(strategy: str) -> str:
    """``strategy`` if valid, else a ``UsageError`` naming the option and the valid values."""
    if strategy not in PLANNERS:
        raise UsageError(f"--sab-strategy: unknown strategy {strategy!r}; valid values: {', '.join(STRATEGIES)}")
    return strategy


def make_agent(model_spec: str, *, strategy: str = DEFAULT_STRATEGY, chat_model: ChatModel | None,
               safety_hint: bool = False) -> Agent:
    """The agent for a run.

    ``model_spec`` "reference" or "refuse" gives the offline agent (``strategy``, ``chat_model`` and
    ``safety_hint`` are ignored: there is no prompt to shape). Any other spec plans with
    ``strategy`` on ``chat_model``, which the caller builds from the spec.
    """
    offline = OFFLINE_AGENTS.get(model_spec)
    if offline is not None:
        return offline()
    check_strategy(strategy)
    if chat_model is None:
        raise UsageError(f"--model {model_spec!r} is not an offline agent ({', '.join(OFFLINE_AGENTS)}), "
                         "so it needs a chat model; none was configured")
    return PLANNERS[strategy](chat_model, safety_hint=safety_hint)
