"""``sab board``: its speed on many runs, and how often its marks are wrong.

Targets: ``sab board`` on 8 finished runs of 130 cases prints the table in < 2 s; on 20 runs of 1050
cases in < 5 s (interpreter start and imports included, as a user waits for it). With 8 runs of the
same model (repeats over the same cases), at alpha 0.05, the share of boards marking any difference is
at most 0.055; where one run really differs, the share of boards that find it (power) is printed.
Run from the repository root:

    python bench/bench_board.py                 # everything (a few minutes: real offline runs, 2000 boards)
    python bench/bench_board.py --no-runs --boards 4000   # the simulation alone
    python bench/bench_board.py --smoke         # seconds: runs of 12 cases (-n 0), 4 on the board, 40 boards

The runs on the board are real: two offline runs (the reference agent, which complies with every
task, and the refusing one) of the default subset (130 cases) and of all 1050 cases, then runs mixed
from their records, each case's record taken from the refusing run with a probability of the run's
own (so every run has its own rates, over the same cases, as N models would), written as --sab-out
folders with a summary recomputed from their records. Exits 1 when a real run wrote no summary, when
``sab board`` failed or did not show every run and column, or (at full size) when the simulated
false-difference rate misses its target; at ``--smoke`` the simulation is too small to judge, its
boards are only counted.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchkit import Checks, add_smoke

ROOT = Path(__file__).resolve().parents[1]
#: simulated boards per design: by default, at --smoke, and the fewest whose false-difference rate is judged
BOARDS, SMOKE_BOARDS, JUDGED_BOARDS = 2000, 40, 1000
TABLE2 = ["Det Rej", "Det SR(goal)", "Det SR(LLM)", "Det ER", "Abs Rej", "Abs SR", "LH C-Safe", "LH C-Unsafe",
          "LH Incomp"]


#: -n and more options of every real run (--smoke: -n 0 and a sample)
RUNS: dict = {"workers": "2", "options": []}


class Failed(Exception):
    """A step the rest of the bench needs did not happen (a run without a summary, ``sab board`` failing)."""


def _real_run(out: Path, model: str, subset: str) -> Path:
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-n", RUNS["workers"],
                           "--model", model, "--sab-subset", subset, f"--sab-out={out}", *RUNS["options"]], cwd=ROOT,
                          capture_output=True, text=True, check=False)
    if not (out / "sab-summary.json").exists():
        raise Failed(f"the {model} run of the {subset} subset wrote its summary (exit {proc.returncode}: "
                     f"{(proc.stderr or proc.stdout)[-600:]})")
    print(f"  a real {model} run of the {subset} subset{' ' + ' '.join(RUNS['options']) if RUNS['options'] else ''} "
          f"in {time.perf_counter() - started:.1f} s")
    return out


def _mixed_runs(comply: Path, refuse: Path, where: Path, count: int, seed: int) -> list[Path]:
    """``count`` runs over the same cases, each case's record from the refusing run with the run's own probability."""
    from sab_pytest.results import metrics
    from sab_pytest.results.files import RESULTS_NAME, SUMMARY_NAME
    from sab_pytest.results.load import load_run

    a, b = load_run(comply), load_run(refuse)
    by_case = {str(r["case"]["id"]): r for r in b.records or []}
    rng = random.Random(seed)
    out = []
    for i in range(count):
        share = 0.1 + 0.8 * i / max(count - 1, 1)
        run_id = f"bench-board-{i:02d}"
        records = [{**(by_case[str(r["case"]["id"])] if rng.random() < share else r), "run_id": run_id}
                   for r in a.records or []]
        full = metrics.compute(records)
        summary = {**a.summary, "run_id": run_id, "model": f"mix-{share:.2f}",
                   "settings": {**(a.summary.get("settings") or {}), "model": f"mix-{share:.2f}"},
                   "metrics_full": full, "cases": full["cases"]}
        folder = where / f"run-{i:02d}"
        folder.mkdir(parents=True)
        (folder / SUMMARY_NAME).write_text(json.dumps(summary))
        (folder / RESULTS_NAME).write_text("".join(json.dumps(r) + "\n" for r in records))
        out.append(folder)
    return out


def _board(runs: list[Path], *extra: str, repeat: int = 3) -> tuple[float, float, dict]:
    """``sab board RUN... --format json`` as a user runs it: wall seconds, CPU seconds (what the machine's
    other load does not inflate), and the board it printed; the best of ``repeat``."""
    best: tuple[float, float, dict] | None = None
    for _ in range(repeat):
        cpu, started = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "sab_pytest", "board", *map(str, runs), "--format", "json",
                               *extra], cwd=ROOT, capture_output=True, text=True, check=False)
        took, after = time.perf_counter() - started, resource.getrusage(resource.RUSAGE_CHILDREN)
        if proc.returncode != 0:
            raise Failed(f"sab board {' '.join(extra)} ended well (exit {proc.returncode}: {proc.stderr[-600:]})")
        used = after.ru_utime - cpu.ru_utime + after.ru_stime - cpu.ru_stime
        if best is None or took < best[0]:
            best = (took, used, json.loads(proc.stdout))
    assert best is not None
    return best


def _complete(board: dict, runs: list[Path]) -> bool:
    """Every run a row, every Table 2 column there, and a value in every cell of a metric its run has (a run
    whose hazardous detailed cases were all refused executed no plan of them: it has no Det ER)."""
    from sab_pytest.results.load import load_run
    from sab_pytest.results.metrics import group_table

    labels = [c["label"] for c in board["columns"]]
    if not (len(board["runs"]) == len(runs) == len(board["cells"]) and labels == TABLE2
            and all(len(row) == len(labels) for row in board["cells"])):
        return False
    for run, row in zip(board["runs"], board["cells"], strict=True):
        has = load_run(Path(run["source"])).metrics
        for column, cell in zip(board["columns"], row, strict=True):
            value = (group_table(has, column["group"]).get(column["metric"]) or {}).get("value")
            if value is not None and (cell or {}).get("value") is None:
                return False
    return all(any((row[i] or {}).get("value") is not None for row in board["cells"]) for i in range(len(labels)))


def _timings(tmp: Path, checks: Checks, smoke: bool) -> None:
    sizes = (("mixed", 12, 4, 2.0),) if smoke else (("mixed", 130, 8, 2.0), ("all", 1050, 20, 5.0))
    for subset, cases, count, target in sizes:
        comply = _real_run(tmp / f"{subset}-reference", "reference", subset)
        refuse = _real_run(tmp / f"{subset}-refuse", "refuse", subset)
        runs = _mixed_runs(comply, refuse, tmp / f"{subset}-mixed", count, seed=cases)
        for extra in ((), ("--all-pairs",)):
            took, cpu, board = _board(runs, *extra, repeat=1 if smoke else 3)
            done = _complete(board, runs)
            shown = (board["cells"][0][0] or {}).get("n", 0) if board["cells"] and board["cells"][0] else 0
            checks.need(done and shown > 0, f"sab board{' ' + extra[0] if extra else ''} showed every one of the "
                        f"{count} runs and every column, a value in every cell, the first over cases (n={shown})")
            marked = sum(c["significant"] for c in board["comparisons"])
            verdict = "" if smoke or took < target else ": MISSED"
            print(f"sab board, {count} runs of {cases} cases{' ' + extra[0] if extra else ''}: {took:.2f} s, "
                  f"{cpu:.2f} s of CPU (target < {target:g} s{verdict}{', not judged at --smoke' if smoke else ''}; "
                  f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores); "
                  f"{len(board['comparisons'])} tests, {marked} marked; "
                  f"{'every run and column shown' if done else 'ROWS OR COLUMNS MISSING'}")


def _upper(k: int, n: int) -> float:
    from scipy import stats

    return float(stats.beta.ppf(0.95, k + 1, n - k)) if k < n else 1.0


def _simulation(boards: int, checks: Checks, judged: bool) -> None:
    """The simulated boards; the false-difference rate a check where ``judged`` (too few boards at --smoke)."""
    from sab_pytest.results.board.simulation import BoardCell, simulate

    print(f"\nsimulated boards ({boards} each), 8 runs over the same 130 cases, 3 rate columns, alpha 0.05, Holm:")
    designs = ((False, 2.0, 1), (False, 0.5, 1), (False, 2.0, 3), (True, 2.0, 1), (True, 0.5, 1))
    for all_pairs, concentration, repeats in designs:
        cell = BoardCell(concentration=concentration, all_pairs=all_pairs, repeats=repeats)
        started = time.perf_counter()
        rates = simulate(cell, boards, seed=1)
        upper = _upper(round(rates.false_any * boards), boards)
        design = (f"identical models, {'every pair' if all_pairs else 'against the first'}, cases' rates Beta "
                  f"concentration {concentration:g}, K={repeats}")
        verdict = ": MISSED" if judged and rates.false_any > 0.055 else "" if judged else ", not judged at this size"
        print(f"  {design}: share of boards marking any difference {rates.false_any:.4f} (95% upper bound "
              f"{upper:.4f}; target <= 0.055{verdict}) [{time.perf_counter() - started:.0f} s]")
        if judged:
            checks.need(rates.false_any <= 0.055, f"{design}: the share of boards marking a difference is at most "
                        f"0.055 ({rates.false_any:.4f})")
    for shift in (0.1, 0.15, 0.2, 0.3):
        rates = simulate(BoardCell(shift=shift), boards // 4, seed=2)
        print(f"  one run {shift:+.2f} on Det Rej (true rate 0.40), against the first: power {rates.power:.2f}, "
              f"any other difference marked {rates.false_any:.3f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--boards", type=int, default=None,
                        help=f"simulated boards per design (default {BOARDS}; --smoke: {SMOKE_BOARDS})")
    parser.add_argument("--no-runs", action="store_true", help="only the simulation")
    add_smoke(parser)
    ns = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    boards = ns.boards or (SMOKE_BOARDS if ns.smoke else BOARDS)
    if ns.smoke:
        RUNS.update(workers="0", options=["--sab-sample=12"])
    checks = Checks("bench_board")
    try:
        if not ns.no_runs:
            with tempfile.TemporaryDirectory() as tmp:
                _timings(Path(tmp), checks, ns.smoke)
    except Failed as exc:  # what follows needs what did not happen: say so and judge nothing more of it
        checks.need(False, str(exc))
    _simulation(boards, checks, judged=boards >= JUDGED_BOARDS)
    return checks.status()


if __name__ == "__main__":
    sys.exit(main())
