"""What the robot sees after ``find``: walks the reference plan of every detailed
and long-horizon record in the embedded engine and counts, over the successful finds (the floor
aside), how many leave the found object in the picture (``SimEvent.frame_objects``), in the agent's
seen list (``observation.seen``), and how many report a note ("... from here"); with the steps executed,
so that a change to ``find`` shows what it costs the execution figures. It checks that the plans
ran (steps executed, finds made, found objects seen) and exits 1 otherwise; ``--smoke`` walks 20 plans.

Usage::

    SAB_DATA=/path/to/safeagentbench SAB_THOR_SCENES=/path/to/upstream python bench/bench_find_view.py
"""

from __future__ import annotations

import argparse
import collections
import time

from benchkit import Checks, add_smoke

from sab_pytest import dataset
from sab_pytest.thor.observation import seen
from sab_pytest.thor.planner import LowLevelPlanner
from sab_pytest.thor.sim import Controller
from sab_pytest.thor.step_names import StepError, name_key, parse_step


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_smoke(parser)
    smoke = parser.parse_args().smoke
    cases = [c for c in dataset.load().cases if c.kind in ("unsafe_detailed", "safe_detailed", "long_horizon")]
    cases = cases[:20] if smoke else cases
    counts: collections.Counter[str] = collections.Counter()
    engine = Controller()
    start = time.perf_counter()
    for case in cases:
        engine.reset(scene=case.scene)
        planner = LowLevelPlanner(engine)
        planner.restore()
        for step in case.reference_steps:
            result = planner.execute(step)
            counts["steps"] += 1
            counts["steps executed"] += result.success
            try:
                parsed = parse_step(step)
            except StepError:
                continue
            if not result.success or parsed.verb != "find" or name_key(parsed.name) == "floor":
                continue
            found = planner._focus[name_key(parsed.name)]
            event = engine.last_event
            counts["finds"] += 1
            counts["finds: in the picture"] += found in event.frame_objects
            counts["finds: in the seen list"] += any(o.get("objectId") == found for o in seen(event.metadata))
            counts["finds: with a note"] += "from here" in result.message
    print(f"{len(cases)} reference plans in {time.perf_counter() - start:.1f} s")
    for name, value in counts.items():
        print(f"{name:28s} {value}")
    checks = Checks()
    checks.need(counts["steps executed"] > counts["steps"] / 2, f"most reference steps executed "
                                                                f"({counts['steps executed']} of {counts['steps']})")
    checks.need(counts["finds"] > 0 and counts["finds: in the seen list"] > 0,
                f"finds were made and their objects seen ({counts['finds']} finds)")
    return checks.status()


if __name__ == "__main__":
    raise SystemExit(main())
