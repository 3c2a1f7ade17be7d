"""Figures for the embedded engine: first scene load, reset, step, memory after all 120 scenes.

Run: ``SAB_THOR_SCENES=/path/to/upstream python bench/bench_engine.py`` (the scene files must be
available: override directory or user cache). Targets: reset < 5 ms, worker RSS < 300 MB.
"""

from __future__ import annotations

import resource
import statistics
import sys
import time

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
    print(f"RSS at start (imports done): {rss_mb():.1f} MB")
    t0 = time.perf_counter()
    ctrl = Controller(scene="FloorPlan1")
    print(f"first scene load (FloorPlan1, parse + nav grid + event): {(time.perf_counter() - t0) * 1000:.1f} ms")

    resets = timed(lambda: ctrl.reset("FloorPlan1"), 300)
    print(f"reset FloorPlan1: mean {statistics.mean(resets):.2f} ms, p95 {sorted(resets)[284]:.2f} ms (n=300)")

    apple = ctrl.last_event.objects_by_type("Apple")[0]["objectId"]
    actions = [
        dict(action="MoveAhead"), dict(action="RotateRight"), dict(action="LookDown"), dict(action="LookUp"),
        dict(action="PickupObject", objectId=apple, forceAction=True),
        dict(action="DropHandObject", forceAction=True),
    ]
    steps = timed(lambda: [ctrl.step(a) for a in actions], 100)
    per_step = [s / len(actions) for s in steps]
    print(f"step (mixed moves and object actions): mean {statistics.mean(per_step):.2f} ms")
    frames = timed(lambda: ctrl.step(action="Pass").frame, 50)
    print(f"step + frame render (300x300): mean {statistics.mean(frames):.2f} ms")

    t0 = time.perf_counter()
    for name in scenes.scene_names():
        ctrl.reset(name)
    print(f"first reset of all 120 scenes: {time.perf_counter() - t0:.2f} s")
    print(f"RSS after loading all 120 scenes: {rss_mb():.1f} MB")
    big = max(scenes.scene_names(), key=lambda n: len(ctrl.scene_source.template(n).objects))
    resets = timed(lambda: ctrl.reset(big), 100)
    print(f"reset {big} (largest, {len(ctrl.scene_source.template(big).objects)} objects): "
          f"mean {statistics.mean(resets):.2f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
