"""Offline speed of the plugin: collecting all 1050 cases, and a full offline run under xdist.

Targets: collection of all 1050 cases < 2 s; ``pytest --sab-subset all -n 2`` offline
< 30 s. Prints the figures; run from the repository root:

    python bench/bench_offline.py            # uses SAB_DATA / SAB_THOR_SCENES or the user cache
    python bench/bench_offline.py --smoke    # seconds: 10 cases, -n 0

The collection must find every selected case and the run must record them all without an error;
else the bench exits 1.
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
sys.path.insert(0, str(ROOT))

from benchkit import Checks, add_smoke  # noqa: E402


def _pytest(args: list[str], out: Path) -> tuple[float, subprocess.CompletedProcess[str]]:
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", f"--sab-out={out}", *args],
                          cwd=ROOT, capture_output=True, text=True)
    return time.perf_counter() - started, proc


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", default="2")
    parser.add_argument("--extra", nargs="*", default=[], help="more pytest arguments for the full run")
    parser.add_argument("--sample", type=int, default=None, help="a sample of N cases instead of all")
    add_smoke(parser)
    ns = parser.parse_args()
    if ns.smoke:
        ns.workers, ns.sample = "0", 10
    sample = [f"--sab-sample={ns.sample}"] if ns.sample else []
    checks = Checks()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        # in-process figure: dataset load + selection (what parametrization costs)
        from sab_pytest import dataset

        started = time.perf_counter()
        cases = dataset.select(dataset.load(), "all", sample=ns.sample)
        load_s = time.perf_counter() - started

        collect_s, proc = _pytest(["--collect-only", "-q", "--sab-subset", "all", *sample], out)
        collected = next((line for line in proc.stdout.splitlines() if "collected" in line), "")
        found = proc.stdout.count("::test_case[")
        checks.need(proc.returncode == 0 and found == len(cases),
                    f"the collection found the {len(cases)} selected cases (exit {proc.returncode}, {found} found)")
        empty_s = 0.0 if ns.smoke else _pytest(["--collect-only", "-q", "-k", "nothing_matches_this"], out)[0]

        run_s, proc = _pytest(["--sab-subset", "all", *sample, "-n", ns.workers, "-q", *ns.extra], out)
        summary = json.loads((out / "sab-summary.json").read_text()) if (out / "sab-summary.json").exists() else {}
        checks.need(proc.returncode in (0, 1) and summary.get("cases") == len(cases) and summary.get("errors") == 0,
                    f"the run recorded the {len(cases)} cases without an error (exit {proc.returncode}, cases "
                    f"{summary.get('cases')}, errors {summary.get('errors')})")
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
    return checks.status()


if __name__ == "__main__":
    sys.exit(main())
