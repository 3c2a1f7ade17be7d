"""From the command line's ``--model``/``--sab-strategy``/``--sab-safety-hint`` to an ``Agent``.

One place decides which names are valid, so the plugin can check options once, before any case
runs, and report a bad value as a ``UsageError`` that lists the choices. What the options say
(``AgentSpec``) is apart from the models a case hands the agent (``AgentModels``): the spec is the
run's, fixed, while the models are bound to each case's budget.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sab_pytest.agents.acting import ActingAgent, InteractiveAgent
from sab_pytest.agents.episode import EpisodeLimits, ScriptedEpisodeAgent
from sab_pytest.agents.guarded import GuardedPlanner
from sab_pytest.agents.map_vlm import MapVlmAgent
from sab_pytest.agents.offline import ReferenceAgent, RefuseAgent, scripted_moves
from sab_pytest.agents.text import TextPlanner
from sab_pytest.errors import UsageError
from sab_pytest.settings.strategies import STRATEGIES as LINES
from sab_pytest.settings.strategies import StrategyInfo, strategy_info
from sab_pytest.thor.scenes import SceneSource

if TYPE_CHECKING:
    from sab_pytest.agents import Agent
    from sab_pytest.guard import Guard
    from sab_pytest.models import CallContext, ChatModel
    from sab_pytest.prompts.upstream_map import MapTexts
    from sab_pytest.settings.sampling import PaperCall

#: Model specs that need no model: the strategy does not apply to them.
OFFLINE_AGENTS: dict[str, type[ReferenceAgent] | type[RefuseAgent]] = {
    "reference": ReferenceAgent, "refuse": RefuseAgent,
}


def agent_class(line: StrategyInfo) -> type[Any]:
    """The class a line of the strategies' table names (``module:Class`` in ``sab_pytest.agents``),
    checked against the line: it has the line's ``name``, and it is a ``TextPlanner`` for a text
    strategy, an ``InteractiveAgent`` (or, with ``helpers``, an ``ActingAgent`` built with its
    helper models) for one that acts. A line that names a class it cannot be is an error here, at
    import, not in the middle of a run."""
    module, _, name = line.agent.partition(":")
    cls: type[Any] = getattr(importlib.import_module(f"sab_pytest.agents.{module}"), name)
    base: type[Any] = (ActingAgent if line.helpers else InteractiveAgent) if line.acts else TextPlanner
    if getattr(cls, "name", None) != line.name or not issubclass(cls, base):
        raise TypeError(f"strategy {line.name!r}: {line.agent} must be a {base.__name__} named {line.name!r}")
    return cls


#: strategy name -> text planner class, in documentation order (from ``settings.strategies``)
PLANNERS: dict[str, type[TextPlanner]] = {n: agent_class(line) for n, line in LINES.items() if not line.acts}

#: Strategies that act in the scene move by move (or execute their own plan): they need an engine
#: for every case, goal state or not. (Typed by the agents' own classes, not their base ``ActingAgent``,
#: which has no ``run``: so the checker sees that each is an ``Agent``.)
INTERACTIVE: dict[str, type[InteractiveAgent] | type[MapVlmAgent]] = {
    n: agent_class(line) for n, line in LINES.items() if line.acts
}

#: Valid ``--sab-strategy`` values, in documentation order.
STRATEGIES: tuple[str, ...] = tuple(LINES)

DEFAULT_STRATEGY = "direct"


def check_strategy(strategy: str) -> str:
    """``strategy`` if valid, else a ``UsageError`` naming the option and the valid values."""
    return strategy_info(strategy).name


def is_interactive(strategy: str) -> bool:
    """Whether ``strategy`` acts in the engine itself (and so needs one for every case)."""
    return strategy in INTERACTIVE


@dataclass(frozen=True)
class AgentSpec:
    """What the run's options say the agent is: its model or offline name (``--model``), strategy,
    prompt switches and episode limits. ``limits.paper`` is ``--sab-protocol paper``: a text
    planner's framing, map_vlm's token limits and worked example, the acting agents' prompts.
    ``executes``: the scorer executes plans (``--sab-exec``), so a guarded text plan is screened step
    by step as it runs instead of all at once. ``scenes``: where scene files are read (``--thor-scenes``),
    for a text planner's paper framing; none means the default source. ``map_texts``: MAP's prompts as
    the paper's code words them (map_vlm under the paper's protocol); none: the project's words.
    ``call``: how the paper's code calls the model (``Settings.agent_call``, under ``paper``): a text
    planner's messages then take that function's shape; none: the project's own."""

    model: str
    strategy: str = DEFAULT_STRATEGY
    safety_hint: bool = False
    executes: bool = False
    limits: EpisodeLimits = field(default_factory=EpisodeLimits)
    scenes: SceneSource | None = None
    map_texts: MapTexts | None = None
    call: PaperCall | None = None

    @property
    def offline(self) -> bool:
        """Whether ``model`` names an offline agent, which calls no model."""
        return self.model in OFFLINE_AGENTS


@dataclass(frozen=True)
class AgentModels:
    """What a case hands its agent: the model under test (``chat``), map_vlm's models beside it
    (``vision``, ``converter``: the model under test when not given), the ThinkSafe ``guard`` that
    screens every step, and the case's model ``context``, whose budget an acting agent shares out
    to its episode (the models are bound to it already)."""

    chat: ChatModel | None = None
    vision: ChatModel | None = None
    converter: ChatModel | None = None
    guard: Guard | None = None
    context: CallContext | None = None


def make_agent(spec: AgentSpec, models: AgentModels | None = None) -> Agent:
    """The agent ``spec`` names, on ``models`` (none for an offline agent without a guard); a text
    planner behind the guard when there is one."""
    check_strategy(spec.strategy)
    models = models or AgentModels()
    if spec.offline:
        return _offline_agent(spec, models)
    if models.chat is None:
        raise UsageError(f"--model {spec.model!r} is not an offline agent ({', '.join(OFFLINE_AGENTS)}), "
                         "so it needs a chat model; none was configured")
    if is_interactive(spec.strategy):
        return _acting_agent(spec, models.chat, models)
    planner = PLANNERS[spec.strategy](models.chat, safety_hint=spec.safety_hint, paper=spec.limits.paper,
                                         scenes=spec.scenes, call=spec.call)
    return _guarded(planner, spec, models.guard)


def _offline_agent(spec: AgentSpec, models: AgentModels) -> Agent:
    """``reference`` or ``refuse``: under a text strategy one answer; under an acting one the same
    episode a model plays, with scripted moves (the reference steps then done, or done at once)."""
    if is_interactive(spec.strategy):
        return ScriptedEpisodeAgent(spec.model, scripted_moves(spec.model), limits=spec.limits, guard=models.guard,
                                    context=models.context)
    return _guarded(OFFLINE_AGENTS[spec.model](), spec, models.guard)


def _acting_agent(spec: AgentSpec, chat: ChatModel, models: AgentModels) -> Agent:
    """An agent that acts in the scene; its episode screens each step with the guard itself."""
    if strategy_info(spec.strategy).helpers:  # built with its helper models, as map_vlm is
        helped: type[Any] = INTERACTIVE[spec.strategy]
        agent: Agent = helped(chat, safety_hint=spec.safety_hint, limits=spec.limits, guard=models.guard,
                              vision_model=models.vision, converter_model=models.converter, context=models.context,
                              paper=spec.limits.paper, texts=spec.map_texts)
        return agent
    return INTERACTIVE[spec.strategy](chat, safety_hint=spec.safety_hint, limits=spec.limits, guard=models.guard,
                                      context=models.context)


def _guarded(agent: Agent, spec: AgentSpec, guard: Guard | None) -> Agent:
    """A text agent whose plan the guard screens (``agent`` as it is without a guard)."""
    if guard is None:
        return agent

    return GuardedPlanner(agent, guard, executes=spec.executes)
