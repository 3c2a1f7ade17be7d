"""The two low-level controllers side by side on the dataset's reference plans: where and why they part.

Every record's reference plan runs twice on the embedded engine, step by step in lockstep: through the
paper's own controller and goal check (what ``--sab-protocol paper`` runs, ``thor/execute.py``)
and through the project's planner and check (``--sab-protocol sab``). A record whose verdict differs
(steps succeeded, or SR(goal)) is put down to the first place the two part, by rule:

* ``verb``: the first step one controller runs and the other fails is a line the paper's controller
  does not read (``turn_on X``, a capitalised verb ...: its dispatch ends in ``assert False``);
* ``names``: the paper's controller finds no object by that name (``Cannot find``) where the planner does;
* ``false success``: the paper's controller reports a pick, drop, throw or pour as done that did not
  happen (its retry loop runs out without setting a message);
* ``drop name``: a drop or throw naming another object than the one held, which the paper's ignores;
* ``find``: a ``find`` one controller carries out and the other does not;
* ``retries``: a pick, put or open the planner carries out and the paper's does not, or the reverse
  (they retry differently);
* ``standing point``: another action one carries out and the other does not (from where each ``find``
  stood the agent, the object is in reach or view for one only), or every step gives the same result
  but the scene ends in another state (a put landed elsewhere, an object broke differently);
* ``goal check``: steps and the state the checks read agree, the two checks do not.

``goal_checks_apart`` is the goal checks alone: both read the same final state (the paper's run's), and
the goals on which their verdicts differ are counted.

``protocol.MEASURED`` holds the figures this prints; ``tests/unit/thor/test_controllers_apart.py``
recomputes them and fails when a difference appears that the catalogue does not account for.
"""

from __future__ import annotations

import importlib.util
import types
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sab_pytest.dataset import Case
from sab_pytest.outcome import ExecStep
from sab_pytest.thor.execute import SAB, Controllers, score

PAPER = Controllers(paper=True)
#: the causes, in the order the catalogue names them
CAUSES = ("verb", "names", "false success", "drop name", "find", "retries", "standing point", "goal check")


@dataclass
class Side:
    """One controller's run of one plan."""

    steps: list[ExecStep] = field(default_factory=list)
    success: bool | None = None  # SR(goal): None when the record has no goal

    @property
    def done(self) -> int:
        return sum(s.success for s in self.steps)


@dataclass
class Apart:
    """One record under both controllers, and what their verdicts owe to which cause."""

    case: Case
    paper: Side
    sab: Side
    cause: str | None  # None: the same verdict
    check_alone: bool  # the goal checks disagree on the paper's run's final state

    @property
    def same(self) -> bool:
        return self.cause is None


def import_file(path: Path, name: str) -> types.ModuleType:
    """One of the paper's files imported on its own, as its own code imports it (the bench and the tests
    compare with it): nothing contained, nothing left out."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _verb(step: str) -> str:
    return step.strip().split(" ", 1)[0].lower() if step.strip() else ""


def _cause_of_step(step: str, paper: ExecStep, sab: ExecStep) -> str:
    verb = _verb(step)
    if paper.message.startswith("AssertionError"):
        return "verb"
    if "Cannot find" in paper.message and sab.success:
        return "names"
    if paper.success and not sab.success and verb in ("drop", "throw") and "hold" in sab.message:
        return "drop name"
    if paper.success and not sab.success and verb in ("pick", "drop", "throw", "pour"):
        return "false success"
    if verb == "find":
        return "find"
    return "retries" if verb in ("pick", "put", "open") else "standing point"


def _goal(case: Case, steps: list[ExecStep], initial: list[dict[str, Any]], final: list[dict[str, Any]],
          using: Controllers) -> bool | None:
    if not case.final_state:
        return None
    return bool(score(case, steps, initial, final, using=using).success)


def compare(case: Case, paper_engine: Any, sab_engine: Any) -> Apart:
    """Run ``case``'s reference plan through both controllers in lockstep and find where they part."""
    runs = []
    for engine, using in ((paper_engine, PAPER), (sab_engine, SAB)):
        engine.reset(scene=case.scene)
        runs.append((using.start(engine), list(engine.last_event.metadata["objects"])))
    (paper_runner, paper_initial), (sab_runner, sab_initial) = runs
    paper, sab = Side(), Side()
    first: str | None = None
    for step in case.reference_steps:
        a, b = paper_runner.execute(step), sab_runner.execute(step)
        paper.steps.append(a)
        sab.steps.append(b)
        if first is None and a.success != b.success:
            first = _cause_of_step(step, a, b)
    paper_final = list(paper_engine.last_event.metadata["objects"])
    sab_final = list(sab_engine.last_event.metadata["objects"])
    paper.success = _goal(case, paper.steps, paper_initial, paper_final, PAPER)
    sab.success = _goal(case, sab.steps, sab_initial, sab_final, SAB)
    check_alone = case.final_state is not None and paper.success != _goal(case, paper.steps, paper_initial,
                                                                          paper_final, SAB)
    cause = None
    if paper.done != sab.done or paper.success != sab.success:
        cause = first if first is not None else "goal check" if check_alone else "standing point"
    return Apart(case, paper, sab, cause, check_alone)


def compare_all(records: Sequence[Case]) -> list[Apart]:
    """Every record through both controllers, each on an embedded engine of its own."""
    from sab_pytest.thor.sim import Controller

    paper_engine, sab_engine = Controller(), Controller()
    return [compare(case, paper_engine, sab_engine) for case in records]


def measured(results: Sequence[Apart]) -> dict[str, tuple[int, int, int]]:
    """cause -> (records, steps succeeded under sab minus under paper, SR(goal) successes under sab minus
    under paper) over ``results``; ``totals`` adds them up, ``goal_checks_apart`` counts goals on which the
    two checks disagree reading the same final state."""
    table: dict[str, list[int]] = {c: [0, 0, 0] for c in CAUSES}
    for r in results:
        if r.cause is None:
            continue
        row = table[r.cause]
        row[0] += 1
        row[1] += r.sab.done - r.paper.done
        row[2] += int(bool(r.sab.success)) - int(bool(r.paper.success))
    out = {c: (v[0], v[1], v[2]) for c, v in table.items()}
    out["totals"] = tuple(sum(v[i] for v in out.values()) for i in range(3))  # type: ignore[assignment]
    apart = [r for r in results if r.check_alone]  # the project's check says the opposite of the paper's
    out["goal_checks_apart"] = (len(apart), 0, sum(-1 if r.paper.success else 1 for r in apart))
    return out


def figures(results: Sequence[Apart]) -> dict[str, int]:
    """Both controllers' totals: steps, steps succeeded, goals, SR(goal) successes."""
    goals = [r for r in results if r.case.final_state]
    return {"steps": sum(len(r.paper.steps) for r in results),
            "paper_steps": sum(r.paper.done for r in results), "sab_steps": sum(r.sab.done for r in results),
            "goals": len(goals), "paper_goals": sum(bool(r.paper.success) for r in goals),
            "sab_goals": sum(bool(r.sab.success) for r in goals),
            "records": len(results), "same": sum(r.same for r in results)}


def causes(results: Sequence[Apart]) -> Counter[str]:
    return Counter(r.cause for r in results if r.cause is not None)
