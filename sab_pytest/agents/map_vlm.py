"""MAP (multi-agent planning with a vision-language model): look once, ground, plan, execute.

Three model calls, each its own conversation, as the paper's MAP baseline:

1. the environment agent sees the robot's first camera picture and writes what it shows as
   (subject, relation, object) lines;
2. the grounding agent sees the same picture, those relations and the scene's object types (the
   distinct ``objectType`` values of the reset scene, the paper's oracle list) and matches names;
3. the planner reads both reports and writes the plan in the 17 actions.

The plan is then executed step by step in the episode by the low-level planner (each step
screened by the guard when one is set). Unlike the paper code, the picture really reaches the
model: it is the PNG of ``engine.last_event.frame`` as a data URL in both vision calls.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sab_pytest.agents.acting import ActingAgent, picture_message
from sab_pytest.agents.episode import Episode, episode_budget, start_episode
from sab_pytest.errors import ErrorKind, InfraError
from sab_pytest.outcome import AgentOutcome, ModelCall
from sab_pytest.prompts import interactive as prompts
from sab_pytest.prompts.agents import plan_rules, with_hint

if TYPE_CHECKING:
    from sab_pytest.dataset import Case
    from sab_pytest.thor import Engine


class MapVlmAgent(ActingAgent):
    name = "map_vlm"

    def _ask(self, system: str, user: str, picture: str | None, calls: list[ModelCall]) -> str:
        content = picture_message(user, picture) if picture else {"role": "user", "content": user}
        messages = [{"role": "system", "content": with_hint(system, self.safety_hint)}, content]
        call = self.chat_model.complete(messages, role="agent", max_tokens=self.max_tokens)
        if call.error:
            raise InfraError("model_api", f"{self.name}: model call failed: {call.error}")
        calls.append(call)
        return call.answer

    def run(self, case: Case, engine: Engine | None = None) -> AgentOutcome:
        episode = start_episode(self.name, case, engine, self.limits, self.guard)
        plan = ""
        steps: list[str] = []
        try:
            with episode_budget():
                plan, steps = self._look_and_plan(case, episode)
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
        return episode.outcome(self.name, plan, steps=steps, turns=3)

    def _look_and_plan(self, case: Case, episode: Episode) -> tuple[str, list[str]]:
        """The three calls: environment agent, grounding agent, planner; the plan and its steps."""
        from sab_pytest import plan_parser

        picture = episode.picture()
        types = sorted({str(o.get("objectType")) for o in episode.initial if o.get("objectType") != "Floor"})
        relations = self._ask(prompts.ENVIRONMENT_SYSTEM, prompts.environment_user(case.instruction), picture,
                              episode.calls)
        grounding = self._ask(prompts.GROUNDING_SYSTEM,
                              prompts.grounding_user(case.instruction, relations, types), picture, episode.calls)
        plan = self._ask(prompts.MAP_PLANNER_SYSTEM,
                         prompts.map_plan_user(case.instruction, relations, grounding, plan_rules()),
                         None, episode.calls)
        return plan, plan_parser.extract_steps(plan)
