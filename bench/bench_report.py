"""Speed and size of the HTML report and of compare on 1050-case runs.

Targets: the report of a 1050-case run builds in < 3 s and weighs < 5 MB without
pictures; compare of two 1050-case runs < 1 s. Prints the figures; run from the repository root:

    python bench/bench_report.py             # two offline runs (reference, refuse) of all 1050 cases, and
                                             # one of a model on the loopback fake server (calls in the records)
    python bench/bench_report.py --runs A B  # or two existing run directories

The real runs need the dataset and scenes (SAB_DATA / SAB_THOR_SCENES or the user cache).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _make_run(out: Path, model: str, *extra: str, env: dict[str, str] | None = None) -> Path:
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-n", "2",
                           "--model", model, "--sab-subset", "all", f"--sab-out={out}", *extra],
                          cwd=ROOT, capture_output=True, text=True, check=False, env=env)
    if not (out / "sab-results.jsonl").exists():
        sys.exit(f"the {model} run wrote no results:\n{proc.stdout[-1500:]}{proc.stderr[-1500:]}")
    print(f"made a {model} run of all cases in {time.perf_counter() - started:.1f} s ({out})")
    return out


def _best(fn, repeat: int = 3) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return min(times)


def _cli(*args: str) -> float:
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "sab_pytest", *args], cwd=ROOT, capture_output=True, text=True,
                          check=False)
    if proc.returncode != 0:
        sys.exit(f"sab {' '.join(args)} failed:\n{proc.stderr[-1500:]}")
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", nargs=2, metavar="RUN", help="two existing run directories instead of new runs")
    ns = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from sab_pytest.reports.html.report import write_report
    from sab_pytest.results.compare import compare_runs
    from sab_pytest.results.files import Redactor
    from sab_pytest.results.load import load_run

    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        if ns.runs:
            a_dir, b_dir = (Path(r) for r in ns.runs)
        else:
            a_dir = _make_run(tmp_path / "reference", "reference")
            b_dir = _make_run(tmp_path / "refuse", "refuse")
        page = tmp_path / "report.html"

        def build() -> None:
            run = load_run(a_dir)
            write_report(page, run.summary, run.records or [], Redactor())

        cases = len(load_run(a_dir).records or [])
        print(f"report of {cases} cases, in process (load + plots + page + write): {_best(build):.2f} s "
              f"(target < 3 s); {page.stat().st_size / 1e6:.2f} MB (target < 5 MB)")
        print(f"  sab report RUN (interpreter start and imports included): "
              f"{_cli('report', str(a_dir), '--out', str(page)):.2f} s")
        elapsed = _best(lambda: compare_runs(load_run(a_dir), load_run(b_dir)))
        print(f"compare of two {cases}-case runs, in process (load both + every metric and group + paired tests + "
              f"flips): {elapsed:.2f} s (target < 1 s)")
        print(f"  sab compare A B (interpreter start included): "
              f"{_cli('compare', str(a_dir), str(b_dir)):.2f} s")
        if not ns.runs:
            import os

            from sab_pytest.testing import fake_openai_server

            with fake_openai_server() as server:  # every record then holds its agent and judge calls
                env = {**os.environ, "OPENAI_BASE_URL": server.url, "OPENAI_API_KEY": "sk-bench-not-a-key"}
                model_dir = _make_run(tmp_path / "model", "fake-model", "--judge-model", "fake-model",
                                      "--sab-no-cache", env=env)
            run = load_run(model_dir)
            elapsed = _best(lambda: write_report(page, run.summary, run.records or [], Redactor()), repeat=1)
            results_mb = (model_dir / "sab-results.jsonl").stat().st_size / 1e6
            print(f"report of a {len(run.records or [])}-case model run (agent and judge calls kept): {elapsed:.2f} s, "
                  f"{page.stat().st_size / 1e6:.2f} MB (its results file: {results_mb:.2f} MB)")


if __name__ == "__main__":
    main()
