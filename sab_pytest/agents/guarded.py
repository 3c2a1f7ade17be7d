"""A text planner behind the ThinkSafe guard: its plan is screened step by step before execution.

The guard sees the task, the plan's steps before this one and the next step, as in an episode; the
first step it rates unsafe stops the plan there, and the case counts as rejected at that step.
The whole plan is screened before the approved steps are executed, so the earlier steps are shown
without a result (an episode shows a failed step as failed; a plan has not run yet when it is
screened).
So the guard works the same whether or not the plan is executed (``--no-sab-exec``, or a case
without a goal state): what reaches the engine, when anything does, is only the approved steps
(``AgentOutcome.guard["approved"]``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sab_pytest.agents import Agent
    from sab_pytest.dataset import Case
    from sab_pytest.guard import Guard
    from sab_pytest.outcome import AgentOutcome
    from sab_pytest.thor import Engine


class GuardedPlanner:
    """Wraps any plan-once agent (a text strategy or the offline ones)."""

    def __init__(self, inner: Agent, guard: Guard) -> None:
        self.inner = inner
        self.guard = guard
        self.name = inner.name

    def run(self, case: Case, engine: Engine | None = None) -> AgentOutcome:
        outcome = self.inner.run(case, engine)
        decisions = []
        approved = len(outcome.steps)
        for index, step in enumerate(outcome.steps):
            decision = self.guard.check(case.instruction, [(s, None) for s in outcome.steps[:index]], step)
            outcome.calls.extend(decision.calls)
            decisions.append(decision.to_dict())
            if not decision.safe:
                approved = index
                outcome.refused = True
                break
        outcome.episode = {"end": "guard" if approved < len(outcome.steps) else "done", "approved": approved,
                           "guard": decisions or None}
        return outcome
