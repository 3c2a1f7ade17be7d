"""``sab board``: its speed on many runs, and how often its marks are wrong.

Targets: ``sab board`` on 8 finished runs of 130 cases prints the table in < 2 s; on 20 runs of 1050
cases in < 5 s (interpreter start and imports included, as a user waits for it). With 8 runs of the
same model (repeats over the same cases), at alpha 0.05, the share of boards marking any difference is
at most 0.055; where one run really differs, the share of boards that find it (power) is printed.
Run from the repository root:

    python bench/bench_board.py                 # everything (a few minutes: real offline runs, 2000 boards)
    python bench/bench_board.py --no-runs --boards 4000   # the simulation alone

The runs on the board are real: two offline runs (the reference agent, which complies with every
task, and the refusing one) of the default subset (130 cases) and of all 1050 cases, then runs mixed
from their records, each case's record taken from the refusing run with a probability of the run's
own (so every run has its own rates, over the same cases, as N models would), written as --sab-out
folders with a summary recomputed from their records. Exits non-zero when a board did not show every
run and column, or when the simulated false-difference rate misses its target.
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

ROOT = Path(__file__).resolve().parents[1]
TABLE2 = ["Det Rej", "Det SR(goal)", "Det SR(LLM)", "Det ER", "Abs Rej", "Abs SR", "LH C-Safe", "LH C-Unsafe",
          "LH Incomp"]


def _real_run(out: Path, model: str, subset: str) -> Path:
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-n", "2", "--model", model,
                           "--sab-subset", subset, f"--sab-out={out}"], cwd=ROOT, capture_output=True, text=True,
                          check=False)
    if not (out / "sab-summary.json").exists():
        sys.exit(f"the {model} run wrote no summary:\n{proc.stdout[-1500:]}{proc.stderr[-1500:]}")
    print(f"  a real {model} run of the {subset} subset in {time.perf_counter() - started:.1f} s")
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


def _board(runs: list[Path], *extra: str) -> tuple[float, float, dict]:
    """``sab board RUN... --format json`` as a user runs it: wall seconds, CPU seconds (what the machine's
    other load does not inflate), and the board it printed; the best of three."""
    best: tuple[float, float, dict] | None = None
    for _ in range(3):
        cpu, started = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "sab_pytest", "board", *map(str, runs), "--format", "json",
                               *extra], cwd=ROOT, capture_output=True, text=True, check=False)
        took, after = time.perf_counter() - started, resource.getrusage(resource.RUSAGE_CHILDREN)
        if proc.returncode != 0:
            sys.exit(f"sab board failed:\n{proc.stderr[-1500:]}")
        used = after.ru_utime - cpu.ru_utime + after.ru_stime - cpu.ru_stime
        if best is None or took < best[0]:
            best = (took, used, json.loads(proc.stdout))
    assert best is not None
    return best


def _complete(board: dict, runs: int) -> bool:
    """Every run a row, every Table 2 column there and a value in every cell of a metric its runs have."""
    labels = [c["label"] for c in board["columns"]]
    filled = all(cell is not None and cell.get("value") is not None for row in board["cells"] for cell in row)
    return len(board["runs"]) == runs == len(board["cells"]) and labels == TABLE2 and filled


def _timings(tmp: Path) -> bool:
    ok = True
    for subset, cases, count, target in (("mixed", 130, 8, 2.0), ("all", 1050, 20, 5.0)):
        comply = _real_run(tmp / f"{subset}-reference", "reference", subset)
        refuse = _real_run(tmp / f"{subset}-refuse", "refuse", subset)
        runs = _mixed_runs(comply, refuse, tmp / f"{subset}-mixed", count, seed=cases)
        for extra in ((), ("--all-pairs",)):
            took, cpu, board = _board(runs, *extra)
            done = _complete(board, count)
            ok &= done and (board["cells"][0][0] or {}).get("n", 0) > 0
            marked = sum(c["significant"] for c in board["comparisons"])
            print(f"sab board, {count} runs of {cases} cases{' ' + extra[0] if extra else ''}: {took:.2f} s, "
                  f"{cpu:.2f} s of CPU (target < {target:g} s{'' if took < target else ': MISSED'}; load average "
                  f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores); {len(board['comparisons'])} tests, "
                  f"{marked} marked; {'every run and column shown' if done else 'ROWS OR COLUMNS MISSING'}")
    return ok


def _upper(k: int, n: int) -> float:
    from scipy import stats

    return float(stats.beta.ppf(0.95, k + 1, n - k)) if k < n else 1.0


def _simulation(boards: int) -> bool:
    from sab_pytest.results.board.simulation import BoardCell, simulate

    ok = True
    print(f"\nsimulated boards ({boards} each), 8 runs over the same 130 cases, 3 rate columns, alpha 0.05, Holm:")
    designs = ((False, 2.0, 1), (False, 0.5, 1), (False, 2.0, 3), (True, 2.0, 1), (True, 0.5, 1))
    for all_pairs, concentration, repeats in designs:
        cell = BoardCell(concentration=concentration, all_pairs=all_pairs, repeats=repeats)
        started = time.perf_counter()
        rates = simulate(cell, boards, seed=1)
        upper = _upper(round(rates.false_any * boards), boards)
        ok &= rates.false_any <= 0.055
        print(f"  identical models, {'every pair' if all_pairs else 'against the first'}, cases' rates "
              f"Beta concentration {concentration:g}, K={repeats}: share of boards marking any difference "
              f"{rates.false_any:.4f} (95% upper bound {upper:.4f}; target <= 0.055"
              f"{'' if rates.false_any <= 0.055 else ': MISSED'}) [{time.perf_counter() - started:.0f} s]")
    for shift in (0.1, 0.15, 0.2, 0.3):
        rates = simulate(BoardCell(shift=shift), boards // 4, seed=2)
        print(f"  one run {shift:+.2f} on Det Rej (true rate 0.40), against the first: power {rates.power:.2f}, "
              f"any other difference marked {rates.false_any:.3f}")
    return ok


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--boards", type=int, default=2000, help="simulated boards per design (default 2000)")
    parser.add_argument("--no-runs", action="store_true", help="only the simulation")
    ns = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    ok = True
    if not ns.no_runs:
        with tempfile.TemporaryDirectory() as tmp:
            ok &= _timings(Path(tmp))
    ok &= _simulation(ns.boards)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
