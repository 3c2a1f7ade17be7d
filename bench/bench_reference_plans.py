"""Validate planner + engine + state check: run every dataset record's reference plan and score it.

A reference ``step`` list is what the dataset authors consider a correct execution of the task, so
on a reachable goal it should end in success. Every miss is listed with its cause, classified as

* ``dataset``  — the goal contradicts the task or its own plan (the steps ran, the state is what
  the instruction asks for, the goal text says otherwise), or the plan itself is wrong (it names an
  object the scene does not have, or leaves out a step);
* ``engine``   — a step that should work in AI2-THOR failed in the engine, or the engine's state
  after a successful step is not what AI2-THOR would report.

The classification is by rule (see ``classify``) and is a starting point for a human reading the
list, not a verdict.

Usage::

    SAB_THOR_SCENES=/path/to/upstream python bench/bench_reference_plans.py [--data DIR] [--verbose]

``--data`` (else ``$SAB_DATA``, the cache or the pinned download) is the directory of the four
``*_1009.jsonl`` files. Missing data or scenes end in a one-line message and exit status 2. The
plans must run (most steps succeed, goals reached); else the bench exits 1. ``--smoke``: 30 records.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

from benchkit import Checks, add_smoke

from sab_pytest import dataset
from sab_pytest.dataset import Case
from sab_pytest.errors import SabError, UsageError
from sab_pytest.outcome import ExecResult

FILES = ("unsafe_detailed", "safe_detailed", "abstract", "long_horizon")


def load_records(data_dir: Path) -> list[Case]:
    """One case per record (abstract records once, at level 0: the steps are the same for all levels).

    Uses the project loader; falls back to reading the JSON lines directly when it is unavailable.
    """
    try:
        cases = dataset.load(data_dir).cases
        seen: dict[tuple[str, int], Case] = {}
        for c in cases:
            seen.setdefault((c.kind, c.row), c)
        return list(seen.values())
    except UsageError as exc:  # e.g. files that differ from the pinned ones: read them as they are
        print(f"dataset loader refused ({exc}); reading the JSON lines directly", file=sys.stderr)
    records: list[Case] = []
    for kind in FILES:
        lines = (data_dir / f"{kind}_1009.jsonl").read_text(encoding="utf-8").splitlines()
        rows = [json.loads(line) for line in lines if line.strip()]
        for row, rec in enumerate(rows):
            fs = rec.get("final_state")
            records.append(Case(id=f"{kind}-{row:04d}", kind=kind, safety="", instruction="",
                                reference_steps=tuple(rec.get("step") or ()), scene=rec["scene_name"],
                                final_state=tuple(fs) if fs else None, risk_category=None,
                                risk_label_raw=None, abstraction_level=None, row=row))
    return records


#: step-failure message fragment -> why the reference plan itself is at fault (THOR rules it breaks)
PLAN_DEFECTS: dict[str, str] = {
    "no such object in the scene": "plan names an object the scene lacks",
    "is not a valid Object Type to be placed in": "plan puts an object where THOR only takes specific types",
    "Receptacle is CLOSED": "plan puts into a closed receptacle without opening it",
    "is inside the closed": "plan uses an object shut inside a closed receptacle without opening it",
    "Target must be closed to Toggle On": "plan turns on an open microwave",
    "must have the property CanPickup": "plan picks up an object that is not pickupable in THOR",
}
#: goal key that THOR's own rules undo after the plan's steps -> explanation
GOAL_DEFECTS: dict[tuple[str, str], str] = {
    ("Television", "isToggled"): "THOR switches a screen off when it breaks; the goal wants it on and broken",
    ("Laptop", "isToggled"): "THOR switches a screen off when it breaks; the goal wants it on and broken",
    ("Apple", "parentReceptacles"): "the sliced source stays where it was sliced; the slices moved",
}


#: records whose goal contradicts their own instruction, checked by reading instruction, steps and goal
KNOWN_GOAL_DEFECTS: dict[str, str] = {
    "safe_detailed-0051": "goal parentReceptacles null after a drop, but a dropped object rests on something "
                          "(THOR lists Floor/Sofa...)",
    "safe_detailed-0224": "goal parentReceptacles null after dropping on the floor; THOR lists the Floor",
    "safe_detailed-0070": "instruction says dining table, goal says CounterTop",
    "safe_detailed-0121": "instruction opens then closes the cabinet, goal wants it open",
    "safe_detailed-0153": "goal is the scene's initial state (fridge closed, apple inside); "
                          "the task changes it",
    "abstract-0054": "goal (BreadSliced/Fork in Toaster, Toaster on) belongs to another task "
                     "than 'Throw a Pan'",
}
#: records whose outcome hangs on a physics value no public source gives -> explanation
UNVERIFIED_PHYSICS: dict[str, str] = {
    "unsafe_detailed-0023": "goal wants a dropped Plate broken; at Break.cs's default threshold (3.6 N s) a "
                            "0.62 kg plate dropped from the hand lands with less (the Plate prefab's own "
                            "threshold is not public)",
}
UNVERIFIED_PHYSICS["abstract-0029"] = UNVERIFIED_PHYSICS["unsafe_detailed-0023"]  # the same task


def classify(case_id: str, result: ExecResult) -> tuple[str, str]:
    """(cause, explanation) for a reachable goal the reference plan did not reach.

    ``dataset`` is certain by rule (the plan breaks a documented THOR rule, or the goal contradicts
    its own instruction in a way THOR's rules decide); ``physics?`` depends on a value no public
    source gives; ``dataset?``/``engine?`` need a human look.
    """
    record = case_id.rsplit("-L", 1)[0]
    if record in KNOWN_GOAL_DEFECTS:
        return "dataset", KNOWN_GOAL_DEFECTS[record]
    if record in UNVERIFIED_PHYSICS:
        return "physics?", UNVERIFIED_PHYSICS[record]
    failed = [s for s in result.steps if not s.success]
    if failed:
        first = failed[0]
        for fragment, why in PLAN_DEFECTS.items():
            if fragment in first.message:
                return "dataset", f"{why}: {first.action!r} -> {first.message}"
        return "engine?", f"step {first.action!r} failed: {first.message}"
    unmet = [(o["objectType"], k, o.get(k)) for o in result.final_objects for k in o.get("unmet", [])]
    text = ", ".join(f"{t}.{k}={v!r}" for t, k, v in unmet)
    for t, k, _ in unmet:
        if (t, k) in GOAL_DEFECTS:
            return "dataset", f"{GOAL_DEFECTS[t, k]} ({text})"
    return "dataset?", "all steps succeeded but goal unmet: " + text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=None, help="dataset directory (default: $SAB_DATA, cache, download)")
    parser.add_argument("--verbose", action="store_true", help="print every failed step of every record")
    add_smoke(parser)
    args = parser.parse_args(argv)
    try:
        return report(*run(args.data, 30 if args.smoke else None), verbose=args.verbose)
    except SabError as exc:  # missing data offline, a bad override: one line, not a traceback
        print(f"bench_reference_plans: {exc}", file=sys.stderr)
        return 2


def run(data: str | None, limit: int | None = None) -> tuple[list[tuple[Case, ExecResult]], tuple[float, float]]:
    """Every record's reference plan (the first ``limit``) executed in one embedded engine, and the wall
    and CPU time it took."""
    from sab_pytest.thor.execute import execute_case
    from sab_pytest.thor.sim import Controller

    records = load_records(dataset.locate(data))[:limit]
    engine = Controller()
    t0, c0 = time.perf_counter(), time.process_time()
    results: list[tuple[Case, ExecResult]] = []
    for rec in records:
        results.append((rec, execute_case(rec, engine, list(rec.reference_steps))))
    return results, (time.perf_counter() - t0, time.process_time() - c0)


def report(results: list[tuple[Case, ExecResult]], times: tuple[float, float], *, verbose: bool) -> int:

    steps = [s for _, r in results for s in r.steps]
    with_goal = [(rec, r) for rec, r in results if rec.final_state]
    unreachable = [(rec, r) for rec, r in with_goal if r.unreachable_goal]
    reachable = [(rec, r) for rec, r in with_goal if not r.unreachable_goal]
    ok = [(rec, r) for rec, r in reachable if r.success]
    elapsed, cpu = times
    print(f"records executed           {len(results)} ({len(steps)} steps) in {elapsed:.2f} s "
          f"({1000 * elapsed / max(len(results), 1):.2f} ms/record), {cpu:.2f} s CPU")
    print(f"steps succeeded            {sum(s.success for s in steps)}/{len(steps)}")
    print(f"records with final_state   {len(with_goal)}")
    print(f"  unreachable in scene     {len(unreachable)}")
    print(f"  reachable                {len(reachable)}")
    rate = len(ok) / len(reachable) if reachable else float("nan")
    print(f"reference-plan success     {len(ok)}/{len(reachable)} = {rate:.1%} of reachable goals")
    paper = len(ok) / len(with_goal) if with_goal else float("nan")  # --sab-protocol paper's SR(goal) denominator
    print(f"  as the paper counts it   {len(ok)}/{len(with_goal)} = {paper:.1%} of every goal (unreachable: failures)")

    causes: Counter[str] = Counter()
    print("\nFailures on reachable goals:")
    for rec, r in reachable:
        if r.success:
            continue
        cause, why = classify(rec.id, r)
        causes[cause] += 1
        print(f"  [{cause}] {rec.id} {rec.scene}: {why}")
        if verbose:
            for s in r.steps:
                print(f"      {'ok ' if s.success else 'ERR'} {s.action}: {s.message}")
    print("  by cause: " + (", ".join(f"{k} {v}" for k, v in sorted(causes.items())) or "none"))
    sound = len(reachable) - causes["dataset"] - causes["physics?"]
    print(f"reference-plan success on reachable goals whose plan and goal are THOR-consistent "
          f"(and settled by public THOR facts): "
          f"{len(ok)}/{sound} = {len(ok) / sound:.1%}" if sound else "")
    print("\nUnreachable goals:")
    for rec, r in unreachable:
        print(f"  {rec.id} {rec.scene}: {r.unreachable_goal}")
    failed_steps = Counter(s.message.split(":")[0] for s in steps if not s.success)
    print("\nMost common step failures (all records):")
    for msg, n in failed_steps.most_common(12):
        print(f"  {n:4d}  {msg}")
    checks = Checks()
    checks.need(results and sum(s.success for s in steps) > len(steps) / 2,
                f"most reference steps succeeded ({sum(s.success for s in steps)} of {len(steps)})")
    checks.need(not reachable or ok, f"reachable goals were reached ({len(ok)} of {len(reachable)})")
    return checks.status()


if __name__ == "__main__":
    sys.exit(main())
