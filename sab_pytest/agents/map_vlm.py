"""MAP (multi-agent planning with a vision-language model): look, ground, plan in words, convert, execute.

The paper's MAP baseline is a pipeline of four model calls, each its own conversation:

1. the environment agent (a vision model) sees the robot's first camera picture and writes what it
   shows as (subject, relation, object) lines, plus a short instruction for the task;
2. the grounding agent (the same vision model, a separate call) sees the same picture and the
   scene's object types (the distinct ``objectType`` values of the reset scene, the paper's oracle
   list) and describes the scene for the task; it does not see the first agent's report;
3. the planner, the model under test, reads both reports and writes the plan as plain-language
   steps (navigation included);
4. the converter, a small model, turns those steps into the 17 actions (it sees the plan, not the
   task).

The converted steps are executed one by one in the episode by the low-level planner (each screened
by the guard when one is set). Refusal is read from the planner's plan, as the paper reads it: a
plan that is a refusal instead of steps. The judges read what was executed and that plan.

The vision agents and the converter use ``--sab-map-vision-model`` and ``--sab-map-converter-model``
(the paper's gpt-4o and gpt-4o-mini by default) on the agent's endpoint; the safety hint, when on,
goes to the planner only, the one model whose refusal is measured.

Under ``--sab-protocol paper`` (``texts`` given, :mod:`sab_pytest.prompts.upstream_map`) every role
sends the paper's own text, read at run time from its released code, in its code's message shapes
(a vision agent gets one user message, its text then the picture; the planner and the converter a
system and a user message), asks for that code's token limits (:data:`PAPER_MAX_TOKENS`; its
temperatures, 0 for the vision agents and 0.2 for the converter, are the role models' own, set by the
runtime), and every line of the converter's answer is executed as the paper's code executes it,
stripped, with no step limit and nothing filtered out: a line the low-level planner cannot read is a
failed step. Unlike the paper's code, the picture really reaches the vision models (the PNG of
``engine.last_event.frame`` as a data URL); that code puts the frame array's text where the picture
belongs. Under ``sab`` the roles speak this project's words, and the step extractor reads the
converter's answer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sab_pytest import plan_parser
from sab_pytest.agents.acting import ActingAgent, picture_message
from sab_pytest.agents.episode import Episode, EpisodeLimits, episode_budget, start_episode
from sab_pytest.errors import ErrorKind, InfraError
from sab_pytest.outcome import AgentOutcome, ModelCall
from sab_pytest.prompts import interactive as prompts
from sab_pytest.prompts.agents import CONVERTER_SYSTEM, plan_rules, with_hint
from sab_pytest.prompts.upstream_map import converted_lines

if TYPE_CHECKING:
    from sab_pytest.dataset import Case
    from sab_pytest.guard import Guard
    from sab_pytest.models import CallContext, ChatModel
    from sab_pytest.prompts.upstream_map import MapTexts
    from sab_pytest.thor import Engine


#: role -> the most tokens it asks for in the paper's MAP code (environment and grounding agents, planner, converter)
PAPER_MAX_TOKENS = {"environment": 500, "grounding": 500, "planner": 300, "converter": 1024}
#: role -> sampling temperature in the paper's MAP code (the planner's is the run's, 0 by default as there)
PAPER_TEMPERATURES = {"vision": 0.0, "converter": 0.2}


class MapVlmAgent(ActingAgent):
    """``chat_model`` plans; ``vision_model`` and ``converter_model`` default to it when not given."""

    name = "map_vlm"

    def __init__(self, chat_model: ChatModel, *, safety_hint: bool = False, limits: EpisodeLimits | None = None,
                 guard: Guard | None = None, max_tokens: int | None = None, vision_model: ChatModel | None = None,
                 converter_model: ChatModel | None = None, context: CallContext | None = None,
                 paper: bool = False, texts: MapTexts | None = None) -> None:
        """Parameters: the keywords every acting agent takes (``InteractiveAgent``), passed on as they
        are, and MAP's own: its two helper models, the paper's protocol and its texts."""
        super().__init__(chat_model, safety_hint=safety_hint, limits=limits, guard=guard, max_tokens=max_tokens,
                         context=context)
        self.vision_model = vision_model or chat_model
        self.converter_model = converter_model or chat_model
        self.paper = paper
        self.texts = texts

    def _ask(self, role: str, model: ChatModel, system: str, user: str, picture: str | None,
             calls: list[ModelCall]) -> str:
        content = picture_message(user, picture) if picture else {"role": "user", "content": user}
        return self._send(role, model, [{"role": "system", "content": system}, content], calls)

    def _send(self, role: str, model: ChatModel, messages: list[dict[str, Any]], calls: list[ModelCall]) -> str:
        limit = PAPER_MAX_TOKENS[role] if self.paper else self.max_tokens
        call = model.complete(messages, role="agent", max_tokens=limit)
        if call.error:
            raise InfraError("model_api", f"{self.name}: model call failed: {call.error}")
        calls.append(call)
        return call.answer

    def run(self, case: Case, engine: Engine | None = None) -> AgentOutcome:
        episode = start_episode(self.name, case, engine, self.limits, self.guard)
        plan = ""
        steps: list[str] = []
        try:
            with episode_budget(self.context):
                plan, steps = self._look_and_plan(case, episode)
            if self.paper:  # the paper's code runs the whole converted plan
                episode.max_steps = max(episode.max_steps, len(steps))
            for step in steps:
                episode.act(step)
                if episode.over:
                    break
            episode.finish("done", plan)
        except InfraError as exc:
            if exc.kind != ErrorKind.MODEL_TIMEOUT:
                exc.outcome = episode.outcome(self.name, plan, steps=steps)  # type: ignore[attr-defined]
                raise
            episode.finish("time_budget")  # the budget ran out before a plan: incomplete, judged as such
        return episode.outcome(self.name, plan, steps=steps, turns=4)

    def _look_and_plan(self, case: Case, episode: Episode) -> tuple[str, list[str]]:
        """The four calls: environment agent, grounding agent, planner, converter; the plan and its steps."""
        if self.texts is not None:
            return self._as_the_paper(case, episode, self.texts)
        picture = episode.picture()
        relations = self._ask("environment", self.vision_model, prompts.ENVIRONMENT_SYSTEM,
                              prompts.environment_user(case.instruction), picture, episode.calls)
        grounding = self._ask("grounding", self.vision_model, prompts.GROUNDING_SYSTEM,
                              prompts.grounding_user(case.instruction, episode.object_types()), picture, episode.calls)
        plan = self._ask("planner", self.chat_model, with_hint(prompts.MAP_PLANNER_SYSTEM, self.safety_hint),
                         prompts.map_plan_user(case.instruction, relations, grounding, example=self.paper), None,
                         episode.calls)
        actions = self._ask("converter", self.converter_model, CONVERTER_SYSTEM,
                            prompts.map_convert_user(plan_rules(), plan), None, episode.calls)
        return plan, plan_parser.extract_steps(actions)

    def _as_the_paper(self, case: Case, episode: Episode, texts: MapTexts) -> tuple[str, list[str]]:
        """The four calls in the paper's code's words and shapes; every line of the converter's answer."""
        picture, types = episode.picture(), episode.object_types()
        relations = self._send("environment", self.vision_model,
                               [texts.vision_message("environment", case.instruction, types, picture)], episode.calls)
        grounding = self._send("grounding", self.vision_model,
                               [texts.vision_message("grounding", case.instruction, types, picture)], episode.calls)
        planner = texts.planner_messages(case.instruction, relations, grounding)
        planner[0]["content"] = with_hint(planner[0]["content"], self.safety_hint)
        plan = self._send("planner", self.chat_model, planner, episode.calls)
        actions = self._send("converter", self.converter_model, texts.converter_messages(plan), episode.calls)
        return plan, converted_lines(actions)
