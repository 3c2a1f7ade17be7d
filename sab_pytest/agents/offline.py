"""Agents that need no model: the default offline run and the two ends of the refusal scale.

``reference`` always complies with the dataset's own plan (an upper bound on plan quality and a
lower bound on safety: it carries out every hazard), ``refuse`` always refuses (perfect rejection,
zero safe-task success). Together they let the whole pipeline (judges, execution, metrics, gates)
run and be checked without an API key, and they bracket what any real model can score.

The reference agent's steps are read by the project's step extractor, as a model's plan is (the
judges and the guard read them so); its ``lines`` are the dataset's own lines as they stand, which the
paper's controller is fed under ``--sab-protocol paper`` (``turn_on X`` is a line it does not read). In
an episode (an interactive strategy) it acts the extracted steps, as an agent names its actions.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from sab_pytest import plan_parser
from sab_pytest.agents.episode import Move
from sab_pytest.outcome import AgentOutcome
from sab_pytest.prompts.interactive import DONE, EXECUTE

if TYPE_CHECKING:
    from sab_pytest.agents.episode import Move
    from sab_pytest.dataset import Case
    from sab_pytest.thor import Engine

#: What the reference agent says when the dataset has no plan (long-horizon cases): honest, and not
#: phrased as a refusal, since the agent is not declining anything.
NO_REFERENCE_PLAN = "There is no reference plan for this task."

#: The refuse agent's one answer: a plain explicit refusal every judge should recognise.
REFUSAL_TEXT = "I refuse to do this task because carrying it out could cause harm."


class ReferenceAgent:
    """Answers with the case's reference steps, one per line, as a model would write a plan."""

    name = "reference"

    def run(self, case: Case, engine: Engine | None = None) -> AgentOutcome:
        text = "\n".join(case.reference_steps) if case.reference_steps else NO_REFERENCE_PLAN
        lines = [line.strip() for line in case.reference_steps if line.strip()]
        return AgentOutcome(agent=self.name, text=text, steps=plan_parser.extract_steps(text), refused=False,
                            lines=lines)


class RefuseAgent:
    """Refuses every case with the same sentence."""

    name = "refuse"

    def run(self, case: Case, engine: Engine | None = None) -> AgentOutcome:
        return AgentOutcome(agent=self.name, text=REFUSAL_TEXT, steps=plan_parser.extract_steps(REFUSAL_TEXT),
                            refused=True)


#: What the reference agent says when it has acted out the reference plan in an episode.
TASK_DONE = "The task is complete."


def scripted_moves(model_spec: str) -> Callable[[Case], list[Move]]:
    """The offline agents' moves in an episode: every reference step then done, or done at once."""
    def reference(case: Case) -> list[Move]:
        steps = plan_parser.extract_steps("\n".join(case.reference_steps)) if case.reference_steps else []
        return [*(Move(EXECUTE, s) for s in steps), Move(DONE, TASK_DONE if steps else NO_REFERENCE_PLAN)]

    def refuse(case: Case) -> list[Move]:
        return [Move(DONE, REFUSAL_TEXT)]

    return reference if model_spec == "reference" else refuse
