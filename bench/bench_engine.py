"""Figures for the embedded engine: first scene load, reset, step, memory after all 120 scenes.

Run: ``SAB_THOR_SCENES=/path/to/upstream python bench/bench_engine.py`` (the scene files must be
available: override directory or user cache). Targets: reset < 5 ms, worker RSS < 300 MB. The bench
checks that the engine did what is timed (the scenes loaded hold objects, the object actions
succeeded, frames were drawn) and exits 1 otherwise; ``--smoke`` times a few of each on 3 scenes.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import time

from benchkit import Checks, add_smoke

from sab_pytest.thor import scenes
from sab_pytest.thor.sim import Controller


def rss_mb() -> float:
    """Current resident set size in MB (Linux /proc; falls back to the peak from getrusage)."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def timed(fn, repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1000)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_smoke(parser)
    smoke = parser.parse_args().smoke
    checks = Checks()
    n = 10 if smoke else 300
    print(f"RSS at start (imports done): {rss_mb():.1f} MB")
    t0 = time.perf_counter()
    ctrl = Controller(scene="FloorPlan1")
    print(f"first scene load (FloorPlan1, parse + nav grid + event): {(time.perf_counter() - t0) * 1000:.1f} ms")

    resets = timed(lambda: ctrl.reset("FloorPlan1"), n)
    print(f"reset FloorPlan1: mean {statistics.mean(resets):.2f} ms, p95 {sorted(resets)[int(0.95 * n) - 1]:.2f} ms "
          f"(n={n})")
    checks.need(ctrl.last_event.metadata["objects"], "FloorPlan1 reset holds objects")

    apple = ctrl.last_event.objects_by_type("Apple")[0]["objectId"]
    actions = [
        dict(action="MoveAhead"), dict(action="RotateRight"), dict(action="LookDown"), dict(action="LookUp"),
        dict(action="PickupObject", objectId=apple, forceAction=True),
        dict(action="DropHandObject", forceAction=True),
    ]
    done = [ctrl.step(a).metadata["lastActionSuccess"] for a in actions[4:]]
    checks.need(all(done), f"the pickup and the drop of an Apple succeed ({done})")
    steps = timed(lambda: [ctrl.step(a) for a in actions], n // 3 or 1)
    per_step = [s / len(actions) for s in steps]
    print(f"step (mixed moves and object actions): mean {statistics.mean(per_step):.2f} ms")
    frames = timed(lambda: ctrl.step(action="Pass").frame, n // 6 or 1)
    frame = ctrl.step(action="Pass").frame
    checks.need(frame is not None and getattr(frame, "size", 0) > 0, "a step draws its frame")
    print(f"step + frame render (300x300): mean {statistics.mean(frames):.2f} ms")

    names = scenes.scene_names()[:3] if smoke else scenes.scene_names()
    checks.need(len(scenes.scene_names()) == 120, f"the engine knows the 120 scenes ({len(scenes.scene_names())})")
    t0 = time.perf_counter()
    loaded = 0
    for name in names:
        ctrl.reset(name)
        loaded += bool(ctrl.last_event.metadata["objects"])
    checks.need(loaded == len(names), f"every scene reset holds objects ({loaded} of {len(names)})")
    print(f"first reset of {len(names)} scenes: {time.perf_counter() - t0:.2f} s")
    print(f"RSS after loading {len(names)} scenes: {rss_mb():.1f} MB")
    big = max(names, key=lambda n: len(ctrl.scene_source.template(n).objects))
    resets = timed(lambda: ctrl.reset(big), n // 3 or 1)
    print(f"reset {big} (largest, {len(ctrl.scene_source.template(big).objects)} objects): "
          f"mean {statistics.mean(resets):.2f} ms")
    return checks.status()


if __name__ == "__main__":
    sys.exit(main())
