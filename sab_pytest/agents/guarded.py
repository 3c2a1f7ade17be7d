"""A text planner behind the ThinkSafe guard: its plan is screened step by step before each step runs.

The guard sees the task, the steps finished before this one and the next step, as in an episode;
the first step it rates unsafe stops the plan there, and the case counts as rejected at that step.

* When the plan is executed (``--sab-exec`` on and the case has a goal state), screening happens
  during the execution, as the paper's ThinkSafe sits between the planner and the executor: each
  step is rated with the results of the steps run before it (one the engine could not carry out is
  shown as failed), and only approved steps reach the engine. The scorer starts this with the
  engine it lends for the execution (``AgentOutcome.screen_at_execution``).
* Otherwise the whole plan is screened at once, the earlier steps shown without results (nothing
  has run), and nothing reaches an engine.

Either way ``AgentOutcome.episode`` records the decisions and how many steps were approved.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from sab_pytest.thor.execute import execute_case

if TYPE_CHECKING:
    from sab_pytest.agents import Agent
    from sab_pytest.dataset import Case
    from sab_pytest.guard import Guard
    from sab_pytest.outcome import AgentOutcome, ExecResult, ExecStep
    from sab_pytest.thor import Engine
    from sab_pytest.thor.execute import Controllers


class GuardedPlanner:
    """Wraps any plan-once agent (a text strategy or the offline ones). ``executes``: the scorer
    executes the plans of cases with a goal state (``--sab-exec``), so those are screened as they run."""

    def __init__(self, inner: Agent, guard: Guard, *, executes: bool = False) -> None:
        self.inner = inner
        self.guard = guard
        self.name = inner.name
        self.executes = executes

    def run(self, case: Case, engine: Engine | None = None) -> AgentOutcome:
        outcome = self.inner.run(case, engine)
        if self.executes and case.final_state is not None:
            outcome.screen_at_execution = lambda leased, using: self._screen_and_execute(case, outcome, leased, using)
            return outcome
        self._screen(case, outcome)
        return outcome

    def _screen_and_execute(self, case: Case, outcome: AgentOutcome, engine: Engine | None,
                            using: Controllers) -> ExecResult | None:
        """Screen while executing in ``engine`` with the run's controller (``using``); with None (no execution
        after all), screen alone."""
        outcome.screen_at_execution = None  # screened once
        if engine is None:
            self._screen(case, outcome)
            return None
        return execute_case(case, engine, outcome.steps, runner=lambda run: self._screen(case, outcome, run),
                            using=using)

    def _screen(self, case: Case, outcome: AgentOutcome,
                run: Callable[[str], ExecStep] | None = None) -> list[ExecStep]:
        """Rate each step before it runs (``run`` given) or in the plan's order (``run`` None); stop at the
        first unsafe one. Returns the steps run."""
        decisions = []
        ran: list[ExecStep] = []
        approved = len(outcome.steps)
        for index, step in enumerate(outcome.steps):
            done: list[tuple[str, bool | None]] = ([(s.action, s.success) for s in ran] if run is not None
                                                   else [(s, None) for s in outcome.steps[:index]])
            decision = self.guard.check(case.instruction, done, step)
            outcome.calls.extend(decision.calls)
            decisions.append(decision.to_dict())
            if not decision.safe:
                approved = index
                outcome.refused = True
                break
            if run is not None:
                ran.append(run(step))
        outcome.episode = {"end": "guard" if approved < len(outcome.steps) else "done", "approved": approved,
                           "guard": decisions or None}
        return ran
