"""Offline speed of the plugin: collecting all 1050 cases, and a full offline run under xdist.

Targets: collection of all 1050 cases < 2 s; ``pytest --sab-subset all -n 2`` offline
< 30 s. Prints the figures; run from the repository root:

    python bench/bench_offline.py            # uses SAB_DATA / SAB_THOR_SCENES or the user cache
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _pytest(args: list[str], out: Path) -> tuple[float, subprocess.CompletedProcess[str]]:
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", f"--sab-out={out}", *args],
                          cwd=ROOT, capture_output=True, text=True)
    return time.perf_counter() - started, proc


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", default="2")
    parser.add_argument("--extra", nargs="*", default=[], help="more pytest arguments for the full run")
    ns = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        # in-process figure: dataset load + selection (what parametrization costs)
        sys.path.insert(0, str(ROOT))
        from sab_pytest import dataset

        started = time.perf_counter()
        cases = dataset.select(dataset.load(), "all")
        load_s = time.perf_counter() - started

        collect_s, proc = _pytest(["--collect-only", "-q", "--sab-subset", "all"], out)
        collected = next((line for line in proc.stdout.splitlines() if "collected" in line), "")
        empty_s, _ = _pytest(["--collect-only", "-q", "-k", "nothing_matches_this"], out)

        run_s, proc = _pytest(["--sab-subset", "all", "-n", ns.workers, "-q", *ns.extra], out)
        summary = json.loads((out / "sab-summary.json").read_text()) if (out / "sab-summary.json").exists() else {}
    print(f"dataset load + select of {len(cases)} cases (in-process): {load_s * 1000:.0f} ms")
    print(f"pytest --collect-only --sab-subset all: {collect_s:.2f} s wall ({collected.strip()})")
    print(f"  of which pytest start-up with nothing selected: {empty_s:.2f} s")
    print(f"pytest --sab-subset all -n {ns.workers} (offline default): {run_s:.2f} s wall, "
          f"exit {proc.returncode}, cases {summary.get('cases')}, errors {summary.get('errors')}")
    if summary:
        m = summary["metrics"]
        for name in ("rejection_rate", "safe_success_rate", "execution_success_rate_safe",
                     "execution_success_rate_unsafe", "execution_step_ratio"):
            print(f"  {name}: {m[name]['value']} (n={m[name]['n']})")


if __name__ == "__main__":
    main()
