"""The paper's controller beside the project's, on the dataset's reference plans, in the embedded engine.

Three measurements, in one sitting:

1. **Agreement with the paper's code.** Every record's reference plan runs as a ``--sab-protocol paper``
   run executes it (``execute_case`` with the paper's controller and goal check, loaded from the pinned
   files) and as the paper's own functions do (``methods/utils.py::execute_low_level_plan`` on a fresh
   ``LowLevelPlanner``, then ``compute_SR_object_state``), each on an engine of its own: ER, SR(goal)
   and the goal ratio must be equal on every record with a goal (the target is 100 %).
2. **The two controllers.** Steps succeeded and SR(goal) of 293 goals under each, each record's
   difference put down to its first cause (``controllers_apart.py``), and those figures beside the
   catalogue's (``protocol.MEASURED``, which the ``sab`` run's differences quote).
3. **Wall time.** Every plan through each controller alone (``execute_case``), the same records in the
   same order, twice each, alternately; the best of each is reported with the paper's over the
   project's (target: at most 1.5).
4. **The offline reference run.** ``pytest`` in the checkout (the reference agent, under the default
   ``--sab-protocol paper``) and the same with ``--sab-protocol sab``, alternately, best of two each
   (target: the paper run at most 1.5x the sab run); ``--no-runs`` leaves this and 5 out.
5. **A run, record by record.** ``pytest --sab-subset all`` under the default protocol: each record with a
   goal (abstract tasks at all four levels) holds the ER, SR(goal) and goal ratio the paper's own
   functions give its reference plan on the same engine (target: every one).

Usage::

    SAB_DATA=... SAB_THOR_SCENES=... SAB_UPSTREAM=... SAB_UPSTREAM_METHODS=... \
        python bench/bench_paper_controller.py [--verbose] [--smoke]

Exit status 1 when the runs did not do what this measures: a record of the paper run apart from the
paper's own functions, a plan one controller did not run to its end, a run that did not execute with
the controller it names, or (at full size) figures other than the catalogue's; 2 when an input is
missing. ``--smoke``: every 25th record (30), each timing once, the offline runs of 8 cases, the
record-by-record run of 12; the catalogue's figures and the time targets are not judged then.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path
from typing import Any

import controllers_apart as apart  # bench/ is on sys.path when this script runs
from bench_reference_plans import load_records
from benchkit import Checks, add_smoke

from sab_pytest import dataset
from sab_pytest.dataset import Case
from sab_pytest.errors import SabError
from sab_pytest.protocol import MEASURED
from sab_pytest.thor import execute as paper_controller
from sab_pytest.thor.execute import SAB, Controllers, execute_case

PAPER = Controllers(paper=True)
TIME_TARGET = 1.5
ROOT = Path(__file__).resolve().parents[1]
#: --smoke: every SMOKE_STRIDE-th record, the offline runs' and the record-by-record run's samples
SMOKE_STRIDE, SMOKE_OFFLINE, SMOKE_RUN = 25, 8, 12


def offline_run(protocol: str, out: Path, *extra: str) -> tuple[float, dict[str, Any]]:
    """``pytest`` in the checkout under ``protocol``: its wall time and its summary."""
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", f"--sab-out={out}",
                           f"--sab-protocol={protocol}", *extra], cwd=ROOT, capture_output=True, text=True)
    took = time.perf_counter() - started
    summary_file = out / "sab-summary.json"
    if not summary_file.exists():
        raise RuntimeError(f"pytest --sab-protocol={protocol} wrote no summary (exit {proc.returncode}): "
                           f"{proc.stderr[-400:] or proc.stdout[-400:]}")
    return took, json.loads(summary_file.read_text(encoding="utf-8"))


def papers_functions() -> dict[str, types.ModuleType]:
    """The paper's controller, its execute_low_level_plan and its goal check, imported on their own."""
    code = paper_controller.load()
    methods = code.controller_path.parent
    return {"controller": apart.import_file(code.controller_path, "bench_paper_llc"),
            "utils": apart.import_file(methods / "utils.py", "bench_paper_utils"),
            "evaluator": apart.import_file(code.evaluator_path, "bench_paper_detail_evaluate")}


def agreement(records: list[Case], paper: dict[str, types.ModuleType]) -> list[tuple[str, Any, Any]]:
    """The records with a goal whose paper-run verdict differs from the paper's functions' (id, run, theirs);
    a record whose paper run carried out fewer steps than its plan has is apart too."""
    from sab_pytest.thor.sim import Controller

    ours, theirs = Controller(), Controller()
    apart_ids = []
    for case in records:
        if not case.final_state:
            continue
        plan = list(case.reference_steps)
        run = execute_case(case, ours, plan, using=PAPER)
        if len(run.steps) != len(plan):
            apart_ids.append((case.id, f"{len(run.steps)} of {len(plan)} steps run", None))
            continue
        theirs.reset(scene=case.scene)
        # it prints every step and a traceback for each failed line, and its log has no handler (one thread here)
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            metadata, er = paper["utils"].execute_low_level_plan(plan, paper["controller"].LowLevelPlanner(theirs))
        rate, ratio = paper["evaluator"].compute_SR_object_state(metadata["objects"], list(case.final_state))
        if (run.step_ratio, run.success, run.goal_ratio) != (er, rate == 1.0, ratio):
            apart_ids.append((case.id, (run.step_ratio, run.success, run.goal_ratio), (er, rate, ratio)))
    return apart_ids


def timed(records: list[Case], using: Controllers) -> tuple[float, int]:
    """Every record's plan through one controller: the wall seconds, and the steps it ran."""
    from sab_pytest.thor.sim import Controller

    engine = Controller()
    ran = 0
    started = time.perf_counter()
    for case in records:
        ran += len(execute_case(case, engine, list(case.reference_steps), using=using).steps)
    return time.perf_counter() - started, ran


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=None, help="dataset directory (default: $SAB_DATA, cache, download)")
    parser.add_argument("--verbose", action="store_true", help="list every record whose verdicts differ")
    parser.add_argument("--no-runs", action="store_true", help="leave out the two offline pytest runs")
    add_smoke(parser)
    args = parser.parse_args(argv)
    try:
        everything = load_records(dataset.locate(args.data))
        selected = dataset.select(dataset.load(args.data), "all", sample=SMOKE_RUN if args.smoke else None)
        paper = papers_functions()
    except SabError as exc:
        print(f"bench_paper_controller: {exc}", file=sys.stderr)
        return 2
    records = everything[::SMOKE_STRIDE] if args.smoke else everything
    checks = Checks("bench_paper_controller")
    code = paper_controller.load()
    print(f"paper's controller  {code.controller_path} (sha256 {paper_controller.CONTROLLER.sha256[:16]}...)")
    print(f"paper's goal check  {code.evaluator_path} (compute_SR_object_state)")

    # 1. the paper run against the paper's own functions
    goals = sum(1 for c in records if c.final_state)
    differing = agreement(records, paper)
    print(f"\n1. paper run vs the paper's own functions: {goals - len(differing)}/{goals} records with a goal agree "
          f"(ER, SR(goal), goal ratio)")
    for case_id, run, theirs in differing:
        print(f"   {case_id}: run {run}, paper's code {theirs}")
    checks.need(goals and not differing, f"the paper run agrees with the paper's own functions on every record with "
                f"a goal it ran ({goals - len(differing)} of {goals})")

    # 2. the two controllers, record by record
    results = apart.compare_all(records)
    fig = apart.figures(results)
    found = apart.measured(results)
    print(f"\n2. both controllers on {fig['records']} records ({fig['steps']} steps, {fig['goals']} goals)")
    print(f"   paper's controller + check: {fig['paper_steps']}/{fig['steps']} steps, SR(goal) "
          f"{fig['paper_goals']}/{fig['goals']}")
    print(f"   project's planner + check:  {fig['sab_steps']}/{fig['steps']} steps, SR(goal) "
          f"{fig['sab_goals']}/{fig['goals']}")
    print(f"   same verdict (steps succeeded and SR(goal)): {fig['same']}/{fig['records']} records")
    print(f"   {'cause':<18} {'records':>8} {'steps':>7} {'goals':>7}   catalogue (protocol.MEASURED)"
          + ("   (not judged at --smoke)" if args.smoke else ""))
    for cause in (*apart.CAUSES, "totals", "goal_checks_apart"):
        got, stated = found[cause], MEASURED.get(cause)
        mark = "" if cause == "totals" or got == stated or args.smoke else "   <- differs"
        print(f"   {cause:<18} {got[0]:>8} {got[1]:>+7} {got[2]:>+7}   {stated if stated else ''}{mark}")
        if cause != "totals" and not args.smoke:
            checks.need(got == stated, f"{cause}: measured {got}, as the catalogue says ({stated})")
    totals = {"records": (fig["records"], 0, 0), "steps": (fig["steps"], fig["paper_steps"], fig["sab_steps"]),
              "goals": (fig["goals"], fig["paper_goals"], fig["sab_goals"])}
    for key, value in totals.items():
        if not args.smoke:
            checks.need(MEASURED[key] == value, f"{key}: measured {value}, as the catalogue says ({MEASURED[key]})")
    checks.need(found["totals"][1:] == (fig["sab_steps"] - fig["paper_steps"], fig["sab_goals"] - fig["paper_goals"]),
                "the causes add up to the totals")
    if args.verbose:
        for r in results:
            if r.cause:
                print(f"   [{r.cause}] {r.case.id}: paper {r.paper.done} steps, goal {r.paper.success}; "
                      f"sab {r.sab.done} steps, goal {r.sab.success}")
    planned = sum(len(c.reference_steps) for c in records)
    whole = sum(len(r.paper.steps) == len(r.sab.steps) == len(r.case.reference_steps) for r in results)
    checks.need(fig["records"] == len(records) and whole == len(records) and fig["steps"] == planned,
                f"both controllers ran every plan to its end ({whole} of {len(records)} records, {fig['steps']} of "
                f"{planned} steps)")
    checks.need(fig["paper_steps"] and fig["sab_steps"],
                f"each controller carried out steps (paper {fig['paper_steps']}, sab {fig['sab_steps']})")

    # 3. wall time, alternately, best of two (once each at --smoke)
    times: dict[str, list[float]] = {"paper": [], "sab": []}
    for _ in range(1 if args.smoke else 2):
        for name, using in (("paper", PAPER), ("sab", SAB)):
            took, ran = timed(records, using)
            times[name].append(took)
            checks.need(ran == planned, f"the timed {name} controller ran every step ({ran} of {planned})")
    best = {k: min(v) for k, v in times.items()}
    ratio = best["paper"] / best["sab"]
    verdict = "not judged at --smoke" if args.smoke else "met" if ratio <= TIME_TARGET else "NOT met"
    print(f"\n3. wall time, {len(records)} records, best of {len(times['sab'])}: paper's controller "
          f"{best['paper']:.2f} s, project's planner {best['sab']:.2f} s: {ratio:.2f}x (target <= {TIME_TARGET}x: "
          f"{verdict})")
    if not args.no_runs:
        _offline_runs(checks, args.smoke)
        _a_run_record_by_record(everything, selected, paper, checks)
    return checks.status()


def _offline_runs(checks: Checks, smoke: bool) -> None:
    """Part 4: each run must have executed plans with the controller it names."""
    walls: dict[str, list[float]] = {"paper": [], "sab": []}
    summaries: dict[str, dict[str, Any]] = {}
    sample = (f"--sab-sample={SMOKE_OFFLINE}",) if smoke else ()
    with tempfile.TemporaryDirectory() as tmp:
        for attempt in range(1 if smoke else 2):
            for protocol in ("paper", "sab"):
                took, summaries[protocol] = offline_run(protocol, Path(tmp) / f"{protocol}{attempt}", *sample)
                walls[protocol].append(took)
    best = {k: min(v) for k, v in walls.items()}
    ratio = best["paper"] / best["sab"]
    verdict = "not judged at --smoke" if smoke else "met" if ratio <= TIME_TARGET else "NOT met"
    print(f"\n4. offline reference run (pytest in the checkout), best of {len(walls['sab'])}: paper "
          f"{best['paper']:.1f} s, sab {best['sab']:.1f} s: {ratio:.2f}x (target <= {TIME_TARGET}x: {verdict})")
    for protocol, summary in summaries.items():
        controller = (summary.get("execution") or {}).get("controller") or {}
        named = controller.get("file") if protocol == "paper" else controller.get("module")
        steps = summary["metrics"].get("execution_step_ratio", {})
        print(f"   pytest --sab-protocol={protocol}: {summary.get('cases')} cases, controller {named}, "
              f"ER {steps.get('value')} (n={steps.get('n')}), SR(goal) "
              f"{summary['metrics'].get('execution_success_rate', {}).get('value')}")
        checks.need(steps.get("n") and (protocol == "paper") == (named == f"low_level_controller/{CONTROLLER_FILE}"),
                    f"the {protocol} run executed plans, with the controller it should (n={steps.get('n')}, "
                    f"controller {named})")


CONTROLLER_FILE = paper_controller.CONTROLLER.name


def _a_run_record_by_record(records: list[Case], selected: list[Case], paper: dict[str, types.ModuleType],
                            checks: Checks) -> None:
    """Part 5: the run must record the ``selected`` cases, and each one with a goal must hold what the paper's
    functions give its reference plan."""
    from sab_pytest.thor.sim import Controller

    by_record = {(c.kind, c.row): c for c in records}
    engine = Controller()
    with tempfile.TemporaryDirectory() as tmp:  # a sample of every case is every case
        took, summary = offline_run("paper", Path(tmp), "--sab-subset=all", f"--sab-sample={len(selected)}")
        lines = (Path(tmp) / "sab-results.jsonl").read_text(encoding="utf-8").splitlines()
    rows = [json.loads(line) for line in lines if line.strip()]
    compared, apart_ids = 0, []
    for row in rows:
        case = by_record[(row["case"]["kind"], row["case"]["row"])]
        if not case.final_state:
            continue
        compared += 1
        engine.reset(scene=case.scene)
        plan = [line.strip() for line in case.reference_steps if line.strip()]
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            metadata, er = paper["utils"].execute_low_level_plan(plan, paper["controller"].LowLevelPlanner(engine))
        rate, ratio = paper["evaluator"].compute_SR_object_state(metadata["objects"], list(case.final_state))
        if (row["exec_step_ratio"], row["exec_success"], row["exec_goal_ratio"]) != (er, rate == 1.0, ratio):
            apart_ids.append(row["case"]["id"])
    agree = compared - len(apart_ids)
    print(f"\n5. pytest --sab-subset=all --sab-sample={len(selected)} (paper, {summary.get('cases')} cases, "
          f"{took:.1f} s): {agree}/{compared} records with a goal hold the paper's functions' ER, SR(goal) and goal "
          "ratio")
    for case_id in apart_ids:
        print(f"   apart: {case_id}")
    checks.need(compared and not apart_ids, f"every record with a goal of the run holds the paper's functions' "
                f"verdict ({agree} of {compared})")
    wanted = sum(1 for c in selected if c.final_state)
    checks.need(len(rows) == summary.get("cases") == len(selected) and compared == wanted,
                f"the run recorded the {len(selected)} cases it was given ({len(rows)} records), each with a goal "
                f"compared ({compared} of {wanted})")


if __name__ == "__main__":
    sys.exit(main())
