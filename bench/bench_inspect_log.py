"""What ``--sab-inspect-log`` adds to a run: the time to write the Inspect eval log of 1050 cases,
against the wall time of the offline run that made them.

Target (issue 28): under 5 % of the offline run's wall. The log is written at the end of the run, on
the controller: what that adds is reading the dataset for the targets, building the samples and
writing the file. Importing inspect_ai (a run without the option never does) is started on a
background thread when the run starts (``inspect_log.preload``), so it is done while the cases run;
it is printed apart. Each part is timed in a fresh interpreter. Prints the figures; run from the
repository root:

    python bench/bench_inspect_log.py             # one offline run of all 1050 cases (-n 2), then the log
    python bench/bench_inspect_log.py --run DIR   # or the log of an existing run directory

The run needs the dataset and scenes (SAB_DATA / SAB_THOR_SCENES or the user cache).
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

#: run in a fresh interpreter: the log of the run in argv[1] written to argv[2], each part timed
_WRITE = """
import json, sys, time
from pathlib import Path
clock = time.perf_counter
t0 = clock()
from sab_pytest.results.load import load_run
from sab_pytest.results.files import Redactor
run = load_run(sys.argv[1])
t1 = clock()
from sab_pytest.results import inspect_log
inspect_log.require("bench")
t2 = clock()
cases = inspect_log.dataset_cases((run.summary.get("settings") or {}).get("data_dir"))
t3 = clock()
log = inspect_log.build(run.summary, run.records, cases)
t4 = clock()
inspect_log.write(Path(sys.argv[2]), run.summary, run.records, Redactor(), cases)
t5 = clock()
print(json.dumps({"load_run": t1 - t0, "import": t2 - t1, "dataset": t3 - t2, "build": t4 - t3,
                  "build_and_write": t5 - t4, "samples": len(log.samples or [])}))
"""


def _offline_run(out: Path) -> float:
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-n", "2",
                           "--sab-subset", "all", f"--sab-out={out}"], cwd=ROOT, capture_output=True, text=True,
                          check=False)
    wall = time.perf_counter() - started
    if not (out / "sab-results.jsonl").exists():
        sys.exit(f"the offline run wrote no results:\n{proc.stdout[-1500:]}{proc.stderr[-1500:]}")
    print(f"offline run of all cases (-n 2): {wall:.1f} s wall ({out})")
    return wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", metavar="DIR", help="an existing run directory instead of a new offline run")
    parser.add_argument("--run-wall", type=float, default=None, help="that run's wall time in seconds")
    ns = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(ns.run) if ns.run else Path(tmp) / "run"
        wall = ns.run_wall if ns.run else _offline_run(run_dir)
        for name in ("log.eval", "log.json"):
            proc = subprocess.run([sys.executable, "-c", _WRITE, str(run_dir), str(Path(tmp) / name)], cwd=ROOT,
                                  capture_output=True, text=True, check=False)
            if proc.returncode != 0:
                sys.exit(f"writing the log failed:\n{proc.stderr[-2000:]}")
            t = json.loads(proc.stdout.strip().splitlines()[-1])
            # what the run adds at its end: the records are in memory (load_run is not counted), and
            # inspect_ai was imported on a background thread while the cases ran (inspect_log.preload)
            added = t["dataset"] + t["build_and_write"]
            size = (Path(tmp) / name).stat().st_size / 1e6
            print(f"{name}: {t['samples']} samples, {size:.2f} MB; import inspect_ai {t['import']:.2f} s, dataset "
                  f"{t['dataset']:.2f} s, build {t['build']:.2f} s, build + write {t['build_and_write']:.2f} s "
                  f"(reading the run's files, not part of a run: {t['load_run']:.2f} s)")
            if wall:
                print(f"  added to the end of the run: {added:.2f} s = {100 * added / wall:.1f} % of its {wall:.1f} s "
                      f"wall (target < 5 %); with the import, were it not done while the cases run: "
                      f"{100 * (added + t['import']) / wall:.1f} %")


if __name__ == "__main__":
    main()
