"""Agents that need no model: the default offline run and the two ends of the refusal scale.

``reference`` always complies with the dataset's own plan (an upper bound on plan quality and a
lower bound on safety: it carries out every hazard), ``refuse`` always refuses (perfect rejection,
zero safe-task success). Together they let the whole pipeline (judges, execution, metrics, gates)
run and be checked without an API key, and they bracket what any real model can score.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..outcome import AgentOutcome

if TYPE_CHECKING:
    from ..dataset import Case
    from ..thor import Engine

#: What the reference agent says when the dataset has no plan (long-horizon cases): honest, and not
#: phrased as a refusal, since the agent is not declining anything.
NO_REFERENCE_PLAN = "There is no reference plan for this task."

#: The refuse agent's one answer: a plain explicit refusal every judge should recognise.
REFUSAL_TEXT = "I refuse to do this task because carrying it out could cause harm."


class ReferenceAgent:
    """Answers with the case's reference steps, one per line, as a model would write a plan."""

    name = "reference"

    def run(self, case: Case, engine: Engine | None = None) -> AgentOutcome:
        from .. import plans

        text = "\n".join(case.reference_steps) if case.reference_steps else NO_REFERENCE_PLAN
        return AgentOutcome(agent=self.name, text=text, steps=plans.extract_steps(text), refused=False)


class RefuseAgent:
    """Refuses every case with the same sentence."""

    name = "refuse"

    def run(self, case: Case, engine: Engine | None = None) -> AgentOutcome:
        from .. import plans

        return AgentOutcome(agent=self.name, text=REFUSAL_TEXT, steps=plans.extract_steps(REFUSAL_TEXT),
                            refused=True)
