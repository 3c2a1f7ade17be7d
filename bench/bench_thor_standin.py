"""Parity of ``--thor local`` (ai2thor's own Controller + the stand-in Unity process) with ``--thor sim``.

Runs every dataset record's reference plan twice, once in the embedded engine directly and once
through ``ai2thor.controller.Controller(local_executable_path=<stand-in>)``, and checks on every
record with a goal that both end in the same state: the same step outcomes and messages, the same
execution verdict, and the same metadata of every object in the scene. Prints the counts, the
records that differ (none expected) and the time per step of each path.

``--size N`` runs the ai2thor path at NxN frames (default: ``--thor local``'s, 300x300 as ai2thor's
own default); the embedded engine keeps its 300x300, so ``--size 600`` measures what the frame size
changes (the planner's ``find`` reads the picture's pixels, ``thor.framing``).

Every record must end the same on both paths, and the steps must run; else the bench exits 1.
``--smoke``: the first 10 records with a goal.

Usage::

    SAB_DATA=/path/to/safeagentbench SAB_THOR_SCENES=/path/to/upstream python bench/bench_thor_standin.py [--size N]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_reference_plans import load_records  # bench/ is on sys.path when this script runs
from benchkit import Checks, add_smoke

from sab_pytest import dataset
from sab_pytest.errors import SabError


def _state(engine: Any) -> str:
    return json.dumps(engine.last_event.metadata["objects"], sort_keys=True)


def _outcome(result: Any) -> tuple:
    return (result.success, result.step_ratio, result.unreachable_goal,
            [(s.action, s.success, s.message) for s in result.steps])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=None, help="dataset directory (default: $SAB_DATA, cache, download)")
    parser.add_argument("--size", type=int, default=None, help="frame width and height of the ai2thor path "
                        "(default: --thor local's)")
    add_smoke(parser)
    args = parser.parse_args(argv)
    from sab_pytest.thor import local, standin
    from sab_pytest.thor.execute import execute_case
    from sab_pytest.thor.sim import Controller

    try:
        records = [r for r in load_records(dataset.locate(args.data)) if r.final_state][:10 if args.smoke else None]
    except SabError as exc:
        print(f"bench_thor_standin: {exc}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["HOME"] = tmp  # ai2thor's ~/.ai2thor/log stays in the temporary directory
        launcher = standin.write_launcher(Path(tmp), os.environ.get("SAB_THOR_SCENES"))
        sim = Controller()
        t0 = time.perf_counter()
        size = args.size or local.WIDTH
        thor = local.start(str(launcher), width=size, height=size)
        started = time.perf_counter() - t0
        times = {"sim": 0.0, "local": 0.0}
        same, differ, steps, reached, reachable = 0, [], 0, 0, 0
        try:
            for rec in records:
                t = time.perf_counter()
                a = execute_case(rec, sim, list(rec.reference_steps))
                times["sim"] += time.perf_counter() - t
                t = time.perf_counter()
                b = execute_case(rec, thor, list(rec.reference_steps))
                times["local"] += time.perf_counter() - t
                steps += len(a.steps)
                reachable += a.unreachable_goal is None
                reached += bool(a.success) and bool(b.success)
                if _outcome(a) == _outcome(b) and _state(sim) == _state(thor):
                    same += 1
                else:
                    differ.append(rec.id)
        finally:
            thor.stop()
    print(f"records with a goal          {len(records)} ({steps} reference steps), {reachable} reachable")
    print(f"same final state and verdict {same}/{len(records)}")
    print(f"differ                       {len(differ)}" + (f": {', '.join(differ)}" if differ else ""))
    print(f"goals reached on both paths  {reached}/{reachable}")
    print(f"stand-in start (ai2thor Controller.__init__) {started:.2f} s")
    for name in ("sim", "local"):
        per = 1000 * times[name] / max(steps, 1)
        frames = f", {size}x{size} frames over the FIFO" if name == "local" else ""
        print(f"--thor {name:<6} {times[name]:6.2f} s  ({per:.2f} ms per step incl. reset{frames})")
    checks = Checks()
    checks.need(records and steps > 0, f"the records' reference steps ran ({len(records)} records, {steps} steps)")
    checks.need(not differ, f"every record ends the same on both paths ({len(differ)} differ)")
    checks.need(reached > 0, f"goals were reached on both paths ({reached})")
    return checks.status()


if __name__ == "__main__":
    sys.exit(main())
