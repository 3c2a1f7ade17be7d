"""What ``--sab-inspect-log`` adds to an offline run of all 1050 cases, and what writing the log of
a finished run costs (``sab inspect-log``).

Target: the log adds under 5 % to the offline run's wall time. With ``.eval`` the samples
are written while the cases run (``reports.inspect.live``); ``.json`` is written at the end. The
offline run keeps both cores busy and its wall time varies by several seconds from run to run on a
shared machine, so the runs alternate (without the option, with ``.eval``, with ``.json``) and the
medians are compared; each run's CPU time (user + system, all processes) is printed beside it.

    python bench/bench_inspect_log.py               # 3 rounds of the three runs (-n 2), then the CLI write
    python bench/bench_inspect_log.py --workers 0   # the same in one process (pytest -n 0): a core left free
    python bench/bench_inspect_log.py --rounds 5
    python bench/bench_inspect_log.py --run DIR     # only the CLI write, of an existing run directory

Run from the repository root; the runs need the dataset and scenes (SAB_DATA / SAB_THOR_SCENES or the
user cache). Every run must record its cases and write its log; each log the CLI writes is read back
with Inspect's own reader and must hold one sample per record; else the bench exits 1.

    python bench/bench_inspect_log.py --smoke       # seconds: one .eval run of 6 cases (-n 0), the CLI's .json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchkit import Checks, add_smoke  # noqa: E402

#: the three kinds of run, by the option they add
MODES = {"without": (), ".eval": ("--sab-inspect-log={out}/run.eval",), ".json": ("--sab-inspect-log={out}/run.json",)}

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
from sab_pytest.reports.inspect import log as inspect_log
inspect_log.require("bench")
t2 = clock()
cases = inspect_log.dataset_cases((run.summary.get("settings") or {}).get("data_dir"))
inspect_log.write(Path(sys.argv[2]), run.summary, run.records, Redactor(), cases)
t3 = clock()
from inspect_ai.log import read_eval_log
back = read_eval_log(sys.argv[2])
print(json.dumps({"load_run": t1 - t0, "import": t2 - t1, "write": t3 - t2, "records": len(run.records),
                  "samples": len(back.samples or [])}))
"""


#: more options of every offline run (--sample N: a sample of the cases instead of all)
OPTIONS: list[str] = []


def _offline_run(out: Path, extra: tuple[str, ...], workers: int) -> tuple[float, float]:
    """One offline run of every case (``-n workers``): its wall and CPU seconds (every process it started)."""
    before = os.times()
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-n", str(workers),
                           "--sab-subset", "all", f"--sab-out={out}", *OPTIONS, *(e.format(out=out) for e in extra)],
                          cwd=ROOT, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    after = os.times()
    if not (out / "sab-results.jsonl").exists() or "could not write" in proc.stdout or proc.returncode not in (0, 1):
        sys.exit(f"the offline run failed (exit {proc.returncode}):\n{proc.stdout[-1500:]}{proc.stderr[-1500:]}")
    for mode, ext in ((".eval", ".eval"), (".json", ".json")):
        if any(mode in e for e in extra) and not (out / f"run{ext}").is_file():
            sys.exit(f"the offline run with --sab-inspect-log wrote no run{ext}:\n{proc.stdout[-1500:]}")
    return wall, (after.children_user - before.children_user) + (after.children_system - before.children_system)


def _rounds(rounds: int, workers: int, tmp: Path, modes: tuple[str, ...] = tuple(MODES)) -> Path:
    walls: dict[str, list[float]] = {mode: [] for mode in modes}
    last = tmp
    for n in range(1, rounds + 1):
        for mode in modes:
            extra = MODES[mode]
            out = tmp / f"{n}-{mode.strip('.')}"
            wall, cpu = _offline_run(out, extra, workers)
            walls[mode].append(wall)
            print(f"round {n}, {mode:8} {wall:6.1f} s wall, {cpu:6.1f} s CPU", flush=True)
            last = out
    if "without" not in walls:
        return last
    base = statistics.median(walls["without"])
    print(f"\nmedian wall of {rounds} offline runs of all cases (-n {workers}): without the log {base:.1f} s")
    for mode in (".eval", ".json"):
        median = statistics.median(walls[mode])
        print(f"  with {mode:5}: {median:.1f} s, {median - base:+.1f} s = {100 * (median - base) / base:+.1f} % "
              f"(target < 5 %)")
    return last


def _cli_write(run_dir: Path, tmp: Path, checks: Checks, names: tuple[str, ...] = ("log.eval", "log.json")) -> None:
    for name in names:
        proc = subprocess.run([sys.executable, "-c", _WRITE, str(run_dir), str(tmp / name)], cwd=ROOT,
                              capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            sys.exit(f"writing the log failed:\n{proc.stderr[-2000:]}")
        t = json.loads(proc.stdout.strip().splitlines()[-1])
        size = (tmp / name).stat().st_size / 1e6
        checks.need(t["records"] > 0 and t["samples"] == t["records"],
                    f"{name}, read back by Inspect, holds one sample per record ({t['samples']} of {t['records']})")
        print(f"inspect-log of a finished run, {name}: {size:.2f} MB; reading the run {t['load_run']:.2f} s, "
              f"import inspect_ai {t['import']:.2f} s, dataset + samples + write {t['write']:.2f} s")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="rounds of the three offline runs (default 3)")
    parser.add_argument("--workers", type=int, default=2, help="pytest -n of the runs (default 2)")
    parser.add_argument("--run", metavar="DIR", help="only the CLI write, of an existing run directory")
    parser.add_argument("--sample", type=int, default=None, help="a sample of N cases instead of all")
    add_smoke(parser)
    ns = parser.parse_args()
    if ns.smoke:
        ns.rounds, ns.workers, ns.sample = 1, 0, 6
    OPTIONS[:] = [f"--sab-sample={ns.sample}"] if ns.sample else []
    checks = Checks()
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        if ns.smoke:  # each path once: the log written while the run goes, the CLI's other format
            _cli_write(Path(ns.run) if ns.run else _rounds(1, 0, tmp, (".eval",)), tmp, checks, ("log.json",))
        else:
            _cli_write(Path(ns.run) if ns.run else _rounds(ns.rounds, ns.workers, tmp), tmp, checks)
    return checks.status()


if __name__ == "__main__":
    sys.exit(main())
