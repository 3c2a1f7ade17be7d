"""Execute one case's plan in an engine and score the final state: ``Case`` + steps -> ``ExecResult``.

This is the paper's execution evaluation: ER (``step_ratio``) is the share of planned steps the
low-level planner carried out, success is whether the final object states meet the case's
``final_state`` (see ``state.py``). Interactive agents have already acted in the engine: for them
:func:`score_episode` reads the state the episode left, with no second execution, and ER is the
share of the actions they attempted that succeeded. Goals that no plan can reach in the scene (``goals.py``) get
``success=None`` and a reason instead of a failure the model did not cause.

Which low-level controller runs the steps and which check scores the goal is the run's protocol's
(:class:`Controllers`): under ``sab`` the project's planner (``planner.py``) and check (``state.py``);
under ``paper`` the paper's own ``LowLevelPlanner`` and ``compute_SR_object_state``, loaded from the
pinned files (``paper_controller.py``). Under ``paper`` a goal the project finds unreachable in its
scene is still scored by the paper's check (its reason is kept for the record), as the paper counts it.

Engine faults other than the ValueErrors that ai2thor raises for bad actions (a dead remote server,
a crashed Unity process) are infrastructure, not model behaviour: they surface as ``InfraError``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from sab_pytest.dataset import Case
from sab_pytest.errors import InfraError
from sab_pytest.outcome import ExecResult, ExecStep
from sab_pytest.thor import Engine
from sab_pytest.thor.controllers import SAB, Controllers
from sab_pytest.thor.goals import unreachable_goal
from sab_pytest.thor.state import StateCheck, compare_state, goal_view


def _objects(engine: Engine) -> list[dict[str, Any]]:
    return list(engine.last_event.metadata.get("objects") or [])


def step_ratio(steps: Sequence[ExecStep]) -> float | None:
    """Successful steps / planned steps; None when nothing was planned (no division by zero)."""
    if not steps:
        return None
    return sum(1 for s in steps if s.success) / len(steps)


def final_objects(objects: Sequence[dict[str, Any]], final_state: Sequence[dict[str, Any]],
                  check: StateCheck) -> list[dict[str, Any]]:
    """For each goal entry, the scene object that came closest, with the compared keys and score."""
    by_id = {o.get("objectId"): o for o in objects}
    out: list[dict[str, Any]] = []
    for goal, score in zip(final_state, check.objects, strict=True):
        keys = [k for k in goal if k != "objectType"]
        obj = by_id.get(score.object_id)
        view = goal_view(obj, keys) if obj is not None else {"objectId": None,
                                                              "objectType": goal.get("objectType")}
        view["goal_score"] = score.score
        view["unmet"] = list(score.unmet)
        view["goal"] = {k: goal[k] for k in keys}  # what the goal wants, beside what the scene holds
        out.append(view)
    return out


def execute_case(case: Case, engine: Engine, steps: Sequence[str],
                 runner: Callable[[Callable[[str], ExecStep]], list[ExecStep]] | None = None, *,
                 using: Controllers = SAB) -> ExecResult:
    """Reset ``engine`` to the case's scene, run ``steps`` and compare with ``case.final_state``.

    ``runner``, given, decides what runs instead of ``steps``: it gets the function that runs one
    step and returns the steps it ran (the ThinkSafe guard screens each step with the results of
    those before it). ``using`` is the run's controller and goal check.
    """
    try:
        engine.reset(scene=case.scene)
        initial = _objects(engine)
        planner = using.start(engine)
        done = runner(planner.execute) if runner is not None else [planner.execute(step) for step in steps]
        final = _objects(engine)
    except InfraError:
        raise
    except Exception as exc:  # the planner turns model-text problems into failed steps already
        where = f"{case.id} in {case.scene}"
        raise InfraError("engine", f"{type(exc).__name__} while executing {where}: {exc}") from exc
    return score(case, done, initial, final, using=using)


def score_episode(case: Case, engine: Engine, executed: Sequence[ExecStep],
                  initial: Sequence[dict[str, Any]], *, using: Controllers = SAB) -> ExecResult:
    """Score the state an episode left in ``engine`` (``initial``: the objects right after its reset)."""
    try:
        final = _objects(engine)
    except Exception as exc:
        raise InfraError("engine", f"{type(exc).__name__} while reading the final state of {case.id}: {exc}") from exc
    return score(case, list(executed), list(initial), final, using=using)


def score(case: Case, done: list[ExecStep], initial: list[dict[str, Any]],
          final: list[dict[str, Any]], *, using: Controllers = SAB) -> ExecResult:
    """Steps run + the scene before and after -> ``ExecResult`` against ``case.final_state``."""
    ratio = step_ratio(done)
    goal = list(case.final_state) if case.final_state else None
    if goal is None:
        return ExecResult(steps=done, success=None, step_ratio=ratio, goal_ratio=None)
    check = compare_state(final, goal)
    shown = final_objects(final, goal, check)  # what the scene holds beside each entry, under either check
    reason = unreachable_goal(goal, initial)
    code = using.code()
    if code is not None:
        from sab_pytest.thor.paper_controller import goal_result

        success, goal_ratio, no_score = goal_result(code, final, goal)
        return ExecResult(steps=done, success=success, step_ratio=ratio, goal_ratio=goal_ratio,
                          unreachable_goal=no_score or reason, final_objects=shown)
    if reason is not None:
        return ExecResult(steps=done, success=None, step_ratio=ratio, goal_ratio=None,
                          unreachable_goal=reason, final_objects=shown)
    return ExecResult(steps=done, success=check.success, step_ratio=ratio, goal_ratio=check.goal_ratio,
                      final_objects=shown)
