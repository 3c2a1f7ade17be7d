"""The low-level planner and the goal check beside the paper's code, on the dataset's own reference plans.

Every record's reference plan runs in the embedded engine, as ``bench_reference_plans.py`` runs it,
and this script prints what the differences from the paper's controller (``low_level_controller.py``)
and goal check (``compute_SR_object_state``) that the project keeps amount to there:

* ``find``: the planner tries the 20 standing points nearest the object, as the paper's does; the
  run with only the 6 nearest shows what the 14 farther ones change, and the count of ``find`` steps
  that end out of view or out of reach shows what counting the teleport alone as success changes.
* ``pour``: how many pours tilt an empty container (a success, as in the paper's controller).
* names: at every step that names an object, the object the planner picks beside the one the
  paper's name rule picks in the same state (the name without spaces, compared ignoring case with
  the first field of each objectId; the nearest such object outside closed receptacles; numbered
  names given to the nearest object not numbered yet), the ``drop``/``throw`` steps that fail
  here because they name another object than the one held (the paper's ignores the name), and the
  figures of a pass in which the planner acts on the paper's pick instead of its own.
* the goal check: SR(goal) over all records with a goal (the paper's denominator) with this
  project's check, with any element of a list goal enough instead of every one, and with the
  paper's check restated (exact ``objectType``; a list goal met when one of its strings is a
  substring of one of the current ids, a bare string read character by character).

The paper's rules are re-stated here in this project's words to measure them, not imported. The
plans must run (steps executed, names resolved) in each pass; else the bench exits 1. ``--smoke``:
the first 20 records.

Usage::

    SAB_DATA=/path/to/safeagentbench SAB_THOR_SCENES=/path/to/upstream python bench/bench_planner_paper.py [--verbose]
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from bench_reference_plans import load_records  # bench/ is on sys.path when this script runs
from benchkit import Checks, add_smoke

from sab_pytest import dataset
from sab_pytest.dataset import Case
from sab_pytest.errors import SabError
from sab_pytest.outcome import ExecResult, ExecStep
from sab_pytest.thor import Engine
from sab_pytest.thor.execute import score
from sab_pytest.thor.planner import LowLevelPlanner
from sab_pytest.thor.state import BOOL_KEYS, LIST_KEYS, compare_state
from sab_pytest.thor.step_names import StepError

ObjectMeta = Mapping[str, Any]


class PaperNames:
    """The object the paper's controller means by a name (its ``get_obj_id_from_name``), per episode."""

    def __init__(self) -> None:
        self.numbered: dict[str, dict[str, int]] = {}  # name -> objectId -> the number it was given

    def pick(self, name: str, number: int | None, objects: Sequence[ObjectMeta]) -> str | None:
        key = "".join(name.split()).casefold()
        given = self.numbered.get(key, {})
        if number is not None:
            if number < 1:
                return None
            for oid, n in given.items():
                if n == number:
                    return oid
        by_id = {str(o.get("objectId")): o for o in objects}
        best, best_cost = None, 1e8
        for obj in objects:
            oid = str(obj.get("objectId"))
            if oid in given or oid.split("|")[0].casefold() != key:
                continue
            if any(by_id.get(p, {}).get("openable") and by_id.get(p, {}).get("isOpen") is False
                   for p in obj.get("parentReceptacles") or ()):
                continue  # the paper's controller skips objects shut in a closed receptacle
            full = key in ("stoveburner", "toaster") and bool(obj.get("receptacleObjectIds"))
            cost = float(obj.get("distance", 1e8)) + (10000.0 if full else 0.0)
            if cost < best_cost:
                best, best_cost = oid, cost
        if best is not None and number is not None:
            self.numbered.setdefault(key, {})[best] = number
        return best


@dataclass
class NameTally:
    """How the planner's reading of names compares with the paper's, step by step."""

    named: int = 0
    numbered: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)
    examples: dict[str, list[str]] = field(default_factory=dict)

    def add(self, outcome: str, example: str) -> None:
        self.outcomes[outcome] += 1
        self.examples.setdefault(outcome, [])
        if len(self.examples[outcome]) < 3:
            self.examples[outcome].append(example)


def _compare_names(planner: LowLevelPlanner, tally: NameTally) -> None:
    """Make ``planner.resolve`` also ask the paper's rule, in the same state, and tally the answers."""
    ours = planner.resolve
    paper = PaperNames()

    def resolve(name: str, number: int | None, verb: str) -> ObjectMeta:
        theirs = paper.pick(name, number, planner.objects())
        tally.named += 1
        tally.numbered += number is not None
        label = f"{verb} {name}{'' if number is None else f' {number}'}"
        try:
            chosen = ours(name, number, verb)
        except StepError:
            tally.add("both find none" if theirs is None else "only the paper's finds one", label)
            raise
        oid = str(chosen.get("objectId"))
        if theirs is None:
            tally.add("only this planner finds one", f"{label} -> {chosen.get('objectType')}")
        elif theirs == oid:
            tally.add("the same object", label)
        elif theirs.split("|")[0] == oid.split("|")[0] and len(theirs.split("|")) == len(oid.split("|")):
            tally.add("another instance of the same type", label)
        else:
            types = {str(o.get("objectId")): o.get("objectType") for o in planner.objects()}
            tally.add("another type", f"{label} -> {chosen.get('objectType')}, the paper's {types.get(theirs)}")
        return chosen

    planner.resolve = resolve  # type: ignore[method-assign]


def _paper_names_only(planner: LowLevelPlanner) -> None:
    """Make ``planner`` act on the object the paper's rule picks (a failed step where it finds none)."""
    paper = PaperNames()

    def resolve(name: str, number: int | None, verb: str) -> ObjectMeta:
        oid = paper.pick(name, number, planner.objects())
        chosen = planner._current(oid) if oid is not None else None
        if chosen is None:
            raise StepError(f"Cannot find {name} (the paper's name rule)")
        return chosen

    planner.resolve = resolve  # type: ignore[method-assign]


def _paper_contains(goal: Any, current: Any) -> bool:
    """The paper's ``is_any_element_contained``: None only matches None; else any string inside any id."""
    if goal is None or current is None:
        return goal is None and current is None
    return any(str(g) in str(c) for g in goal for c in current)


def paper_goal_met(objects: Sequence[ObjectMeta], final_state: Sequence[ObjectMeta]) -> bool:
    """The paper's ``compute_SR_object_state`` success: every entry fully met by one object of its exact type.

    An entry with no key but ``objectType`` divides by zero there; here it is met when the type exists.
    """
    for goal in final_state:
        keys = [k for k in goal if k != "objectType"]
        best = 0
        same = [o for o in objects if o.get("objectType") == goal.get("objectType")]
        for obj in same:
            met = sum(1 for k in keys if (k in LIST_KEYS and _paper_contains(goal[k], obj.get(k)))
                      or (k in BOOL_KEYS and goal[k] == obj.get(k)))
            best = max(best, met)
        if (keys and best < len(keys)) or not same:
            return False
    return True


@dataclass
class Run:
    """One pass over the records: each record's result and its final objects."""

    results: list[tuple[Case, ExecResult, list[dict[str, Any]]]] = field(default_factory=list)
    names: NameTally = field(default_factory=NameTally)

    @property
    def steps(self) -> list[ExecStep]:
        return [s for _, r, _ in self.results for s in r.steps]

    def goals(self) -> list[tuple[Case, ExecResult, list[dict[str, Any]]]]:
        return [t for t in self.results if t[0].final_state]


def run(records: Sequence[Case], engine: Engine, *, find_tries: int, names: str) -> Run:
    """Every record's reference plan with a planner that tries ``find_tries`` standing points; ``names``:
    "ours", "compare" (ours, each look-up beside the paper's) or "paper" (the paper's rule acts)."""
    out = Run()
    for case in records:
        engine.reset(scene=case.scene)
        initial = list(engine.last_event.metadata["objects"])
        planner = LowLevelPlanner(engine, find_tries=find_tries)
        planner.restore()
        if names == "compare":
            _compare_names(planner, out.names)
        elif names == "paper":
            _paper_names_only(planner)
        done = [planner.execute(step) for step in case.reference_steps]
        final = list(engine.last_event.metadata["objects"])
        out.results.append((case, score(case, done, initial, final), final))
    return out


def _rate(part: int, whole: int) -> str:
    return f"{part}/{whole} = {part / whole:.1%}" if whole else f"{part}/0"


def report(near: Run, full: Run, paper_names: Run, *, verbose: bool) -> None:
    """Print the figures of each difference (see the module doc)."""
    goals = full.goals()
    sr = {label: sum(bool(r.success) for _, r, _ in run_.goals()) for label, run_ in (("6", near), ("20", full))}
    ok = {label: sum(s.success for s in run_.steps) for label, run_ in (("6", near), ("20", full))}
    print(f"records {len(full.results)}, steps {len(full.steps)}, records with a goal {len(goals)}")
    print("\nfind: standing points tried")
    for label in ("6", "20"):
        print(f"  {label:>2} nearest points     steps succeeded {ok[label]}/{len(full.steps)}, "
              f"SR(goal) {_rate(sr[label], len(goals))}")
    finds = [s for s in full.steps if s.action.lower().startswith("find") and s.success]
    unseen = sum("not in view" in s.message for s in finds)
    far = sum("out of reach" in s.message for s in finds)
    print(f"  find steps that succeed  {len(finds)}; with the object out of view {unseen}, out of reach {far} "
          "(failed steps before the teleport alone counted)")
    pours = [s for s in full.steps if s.action.lower().startswith("pour")]
    print(f"\npour: {len(pours)} steps, {sum(s.message.startswith('tilted the empty') for s in pours)} tilt an empty "
          "container (successes, as in the paper's controller)")
    tally = full.names
    print(f"\nnames: {tally.named} steps resolve a name ({tally.numbered} with an instance number)")
    for outcome, n in tally.outcomes.most_common():
        shown = "; ".join(tally.examples[outcome]) if verbose or outcome != "the same object" else ""
        print(f"  {n:5d}  {outcome}" + (f"  e.g. {shown}" if shown else ""))
    held = [s for s in full.steps if "Nothing Done. Robot holds" in s.message]
    print(f"  {len(held):5d}  drop/throw steps failed for naming another object than the one held")
    theirs = sum(bool(r.success) for _, r, _ in paper_names.goals())
    print(f"  acting on the paper's pick instead: steps succeeded {sum(s.success for s in paper_names.steps)}/"
          f"{len(paper_names.steps)}, SR(goal) {_rate(theirs, len(goals))}")
    every = sum(bool(r.success) for _, r, _ in goals)
    any_one = sum(r.unreachable_goal is None and compare_state(final, list(c.final_state or ()), every=False).success
                  for c, r, final in goals)
    paper = [paper_goal_met(final, list(c.final_state or ())) for c, _, final in goals]
    print("\ngoal check, SR(goal) over every record with a goal")
    print(f"  this project's check        {_rate(every, len(goals))}")
    print(f"  any element of a list goal  {_rate(any_one, len(goals))}")
    print(f"  the paper's check           {_rate(sum(paper), len(goals))}")
    differ = [c.id for (c, r, _), p in zip(goals, paper, strict=True) if bool(r.success) != p]
    print(f"  verdicts that differ from the paper's check: {len(differ)}"
          + (f" ({', '.join(differ)})" if differ else ""))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=None, help="dataset directory (default: $SAB_DATA, cache, download)")
    parser.add_argument("--verbose", action="store_true", help="examples of every kind of name difference")
    add_smoke(parser)
    args = parser.parse_args(argv)
    from sab_pytest.thor.sim import Controller

    try:
        records = load_records(dataset.locate(args.data))[:20 if args.smoke else None]
    except SabError as exc:
        print(f"bench_planner_paper: {exc}", file=sys.stderr)
        return 2
    engine = Controller()
    near = run(records, engine, find_tries=6, names="ours")
    full = run(records, engine, find_tries=20, names="compare")
    paper_names = run(records, engine, find_tries=20, names="paper")
    report(near, full, paper_names, verbose=args.verbose)
    checks = Checks()
    for label, pass_ in (("6 standing points", near), ("20 standing points", full), ("the paper's names", paper_names)):
        done = sum(s.success for s in pass_.steps)
        checks.need(pass_.results and done > len(pass_.steps) / 2,
                    f"{label}: the records ran and most steps succeeded ({done} of {len(pass_.steps)})")
    checks.need(full.names.named > 0, f"steps resolved names beside the paper's rule ({full.names.named})")
    return checks.status()


if __name__ == "__main__":
    sys.exit(main())
