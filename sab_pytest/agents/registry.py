"""From the command line's ``--model``/``--sab-strategy``/``--sab-safety-hint`` to an ``Agent``.

One place decides which names are valid, so the plugin can check options once, before any case
runs, and report a bad value as a ``UsageError`` that lists the choices.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from sab_pytest.agents.acting import InteractiveAgent
from sab_pytest.agents.basic import BasicVisualAgent
from sab_pytest.agents.episode import EpisodeLimits
from sab_pytest.agents.map_vlm import MapVlmAgent
from sab_pytest.agents.offline import ReferenceAgent, RefuseAgent, scripted_moves
from sab_pytest.agents.pca import PcaAgent
from sab_pytest.agents.react import ReactAgent
from sab_pytest.agents.text import PLANNERS
from sab_pytest.errors import UsageError

if TYPE_CHECKING:
    from sab_pytest.agents import Agent
    from sab_pytest.guard import Guard
    from sab_pytest.models import CallContext, ChatModel

#: Model specs that need no model: the strategy does not apply to them.
OFFLINE_AGENTS: dict[str, type[ReferenceAgent] | type[RefuseAgent]] = {
    "reference": ReferenceAgent, "refuse": RefuseAgent,
}

#: Strategies that act in the scene move by move (or execute their own plan): they need an engine
#: for every case, goal state or not. (Typed by the agents' own classes, not their base ``ActingAgent``,
#: which has no ``run``: so the checker sees that each is an ``Agent``.)
INTERACTIVE: dict[str, type[InteractiveAgent] | type[MapVlmAgent]] = {
    cls.name: cls for cls in (ReactAgent, BasicVisualAgent, PcaAgent, MapVlmAgent)
}

#: Valid ``--sab-strategy`` values, in documentation order.
STRATEGIES: tuple[str, ...] = (*PLANNERS, *INTERACTIVE)

DEFAULT_STRATEGY = "direct"


def check_strategy(strategy: str) -> str:
    """``strategy`` if valid, else a ``UsageError`` naming the option and the valid values."""
    if strategy not in STRATEGIES:
        raise UsageError(f"--sab-strategy: unknown strategy {strategy!r}; valid values: {', '.join(STRATEGIES)}")
    return strategy


def is_interactive(strategy: str) -> bool:
    """Whether ``strategy`` acts in the engine itself (and so needs one for every case)."""
    return strategy in INTERACTIVE


def make_agent(model_spec: str, *, strategy: str = DEFAULT_STRATEGY, chat_model: ChatModel | None,
               safety_hint: bool = False, limits: EpisodeLimits | None = None, guard: Guard | None = None,
               role_models: Mapping[str, ChatModel] | None = None, executes: bool = False,
               context: CallContext | None = None, paper: bool = False) -> Agent:
    """The agent for a run.

    ``model_spec`` "reference" or "refuse" gives the offline agent (``chat_model`` and
    ``safety_hint`` are ignored: there is no prompt to shape). Under a text strategy it answers
    once; under an interactive one it plays the same episode as a model would, with scripted
    moves (the reference steps then done, or done at once). Any other spec runs ``strategy`` on
    ``chat_model``, which the caller builds from the spec. ``guard`` (the ThinkSafe guard) screens
    every step before it reaches the engine, for both kinds. ``role_models`` are map_vlm's models
    beside the one under test (``vision``, ``converter``); without them it uses ``chat_model`` for
    every role. ``executes``: the scorer will execute plans (``--sab-exec``), so a guarded text plan
    is screened step by step as it runs. ``context``: the case's model context, whose budget an agent
    that acts shares out to its episode (the models given are bound to it already). ``paper``: as under
    ``--sab-protocol paper``: a text planner's framing, map_vlm's token limits, worked example and unbounded
    plan as in the paper's code (interactive agents also read ``limits.paper``).
    """
    check_strategy(strategy)
    offline = OFFLINE_AGENTS.get(model_spec)
    if offline is not None and is_interactive(strategy):
        from sab_pytest.agents.episode import ScriptedEpisodeAgent

        return ScriptedEpisodeAgent(offline.name, scripted_moves(model_spec), limits=limits, guard=guard,
                                   context=context)
    if offline is not None:
        agent: Agent = offline()
    elif chat_model is None:
        raise UsageError(f"--model {model_spec!r} is not an offline agent ({', '.join(OFFLINE_AGENTS)}), "
                         "so it needs a chat model; none was configured")
    elif strategy == MapVlmAgent.name:
        roles = role_models or {}
        return MapVlmAgent(chat_model, safety_hint=safety_hint, limits=limits, guard=guard,
                           vision_model=roles.get("vision"), converter_model=roles.get("converter"), context=context,
                           paper=paper)
    elif is_interactive(strategy):
        return INTERACTIVE[strategy](chat_model, safety_hint=safety_hint, limits=limits, guard=guard, context=context)
    else:
        agent = PLANNERS[strategy](chat_model, safety_hint=safety_hint, paper=paper)
    if guard is None:
        return agent
    from sab_pytest.agents.guarded import GuardedPlanner

    return GuardedPlanner(agent, guard, executes=executes)
