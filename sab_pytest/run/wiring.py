"""A case's agent, judge and guard from the run's settings: the one place that wires them.

The run builds them from API clients bound to each case; ``--sab-estimate`` builds them from dry
models that only count. Both call the same functions here, so the estimate prices the prompts the
run sends: which roles have a model, which judge reads which prompts under which protocol, what
the agent is told and how far its episode may go.

How a model of a role is made is the caller's (a ``ModelMaker``); which roles there are, under
which names and temperatures, is decided here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Protocol

from sab_pytest.agents.episode import EpisodeLimits
from sab_pytest.agents.map_vlm import PAPER_TEMPERATURES
from sab_pytest.agents.registry import AgentModels, AgentSpec, make_agent
from sab_pytest.guard import make_guard
from sab_pytest.judge import LLMJudge, RuleJudge
from sab_pytest.prompts import upstream_map
from sab_pytest.prompts.upstream import UpstreamPrompts
from sab_pytest.prompts.upstream import load as load_upstream_prompts
from sab_pytest.thor.execute import Controllers
from sab_pytest.thor.scenes import SceneSource

if TYPE_CHECKING:
    from sab_pytest.agents import Agent
    from sab_pytest.guard import Guard
    from sab_pytest.judge import Judge
    from sab_pytest.models import CallContext, ChatModel
    from sab_pytest.prompts.upstream_map import MapTexts
    from sab_pytest.settings import Settings


class ModelMaker(Protocol):
    """Makes the model of one role: ``role`` is agent, judge or guard; ``name`` its model spec;
    ``judge`` which judge (for a judge's temperature); ``temperature`` a role model's own (map_vlm's)."""

    def __call__(self, role: str, name: str, *, judge: str = "rejection",
                 temperature: float | None = None) -> ChatModel: ...


@dataclass(frozen=True)
class RoleModels:
    """The models of a run, by role: the agent's (none for an offline agent), each judge's (none with
    the rule judge; judges of one model and temperature share one), the guard's (none for the offline
    guard) and map_vlm's models beside the agent's."""

    agent: ChatModel | None = None
    judges: Mapping[str, ChatModel] = field(default_factory=dict)
    guard: ChatModel | None = None
    vision: ChatModel | None = None
    converter: ChatModel | None = None
    panels: Mapping[str, tuple[ChatModel, ...]] = field(default_factory=dict)  # judge -> its panel's models

    def bound(self, bind: Callable[[ChatModel], ChatModel]) -> RoleModels:
        """Every model through ``bind`` (to a case's context), shared ones staying shared."""
        seen: dict[int, ChatModel] = {}

        def one(model: ChatModel) -> ChatModel:
            if id(model) not in seen:
                seen[id(model)] = bind(model)
            return seen[id(model)]

        def some(model: ChatModel | None) -> ChatModel | None:
            return None if model is None else one(model)

        return RoleModels(some(self.agent), {judge: one(m) for judge, m in self.judges.items()},
                          some(self.guard), some(self.vision), some(self.converter),
                          {judge: tuple(map(one, models)) for judge, models in self.panels.items()})

    @property
    def called_judges(self) -> dict[str, ChatModel]:
        """judge -> its own model, for the judges no panel replaces: a judge with a panel asks the panel's
        models only (``judge.LLMJudge``), so its default model is never called, checked or listed."""
        return {judge: model for judge, model in self.judges.items() if judge not in self.panels}

    @property
    def api(self) -> list[ChatModel]:
        """Every distinct model called over an API (agent, judges without a panel, the panels, guard)."""
        panelled = [m for models in self.panels.values() for m in models]
        found = [m for m in (self.agent, *self.called_judges.values(), *panelled, self.guard) if m is not None]
        return list({id(m): m for m in found}.values())


def role_models(settings: Settings, make: ModelMaker) -> RoleModels:
    """The run's models, each made by ``make``: the roles ``settings`` call a model for."""
    s = settings
    shared: dict[tuple[str, float], ChatModel] = {}

    def judge_model(judge: str, name: str) -> ChatModel:  # judges of one model and temperature share one
        key = (name, s.judge_temperatures[judge])
        if key not in shared:
            shared[key] = make("judge", name, judge=judge)
        return shared[key]

    # under ``paper`` no rejection judge: the paper has none
    judges = {judge: judge_model(judge, name) for judge, name in s.asked_judges.items()}
    panels = {judge: tuple(judge_model(judge, name) for name in names) for judge, names in s.judge_panels.items()}
    vision = converter = None
    if s.helpers and not s.offline_agent:  # map_vlm's, under the paper's protocol at its code's temperatures
        own = PAPER_TEMPERATURES if s.protocol == "paper" else {}
        vision = make("agent", s.map_vision_model, temperature=own.get("vision"))
        converter = make("agent", s.map_converter_model, temperature=own.get("converter"))
    return RoleModels(agent=None if s.offline_agent else make("agent", s.model), judges=judges,
                      guard=make("guard", s.guard_model_name) if s.guard_uses_api else None,
                      vision=vision, converter=converter, panels=panels)


def agent_spec(settings: Settings) -> AgentSpec:
    """The agent the run's options name, with its episode limits."""
    s = settings
    limits = EpisodeLimits(max_steps=s.max_steps, max_images=s.max_images, protocol=s.action_format,
                           schematic=s.pictures == "schematic", paper=s.protocol == "paper",
                           controllers=Controllers(paper=s.protocol == "paper", upstream_dir=s.upstream_dir))
    return AgentSpec(s.model, strategy=s.strategy, safety_hint=s.safety_hint, executes=s.execute, limits=limits,
                     scenes=SceneSource(s.thor_scenes), map_texts=map_texts(s),
                     call=None if s.interactive else s.agent_call)


def map_texts(settings: Settings) -> MapTexts | None:
    """MAP's prompts from the paper's released code, for map_vlm under the paper's protocol (read from the
    pinned files, ``SAB_UPSTREAM_METHODS``); None for every other run."""
    s = settings
    if s.strategy != "map_vlm" or s.offline_agent or s.protocol != "paper":
        return None
    return upstream_map.load()


class Wiring:
    """Builds a case's guard, agent and judge from ``settings``; the paper's judge prompts
    (``--sab-judge-prompts upstream``) are read once, on first use."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.spec = agent_spec(settings)

    @cached_property
    def upstream(self) -> UpstreamPrompts | None:
        if self.settings.judge_prompts != "upstream":
            return None
        return UpstreamPrompts(load_upstream_prompts(self.settings.upstream_dir))

    def guard(self, models: RoleModels) -> Guard | None:
        """The ThinkSafe guard (``--sab-guard thinksafe``) on the guard's model, or the keyword rule offline."""
        return make_guard(self.settings.guard, models.guard)

    def agent(self, models: RoleModels, context: CallContext | None = None) -> Agent:
        return make_agent(self.spec, AgentModels(chat=models.agent, vision=models.vision, converter=models.converter,
                                                 guard=self.guard(models), context=context))

    def judge(self, models: RoleModels) -> Judge:
        """The rule judge without judge models, else the model judges under the run's protocol (under
        ``paper`` without a rejection judge: ``scoring`` then reads refusals by the paper's rule)."""
        if not models.judges:
            return RuleJudge()
        first = models.judges.get("rejection") or next(iter(models.judges.values()))
        return LLMJudge(first, by_judge=models.judges, upstream=self.upstream, protocol=self.settings.protocol,
                        panels=models.panels)

    def case(self, models: RoleModels, context: CallContext | None = None) -> tuple[Agent, Judge]:
        """The agent and the judge of one case, on ``models`` (bound to the case's ``context``)."""
        return self.agent(models, context), self.judge(models)
