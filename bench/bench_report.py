"""Speed and size of the HTML report and of compare on 1050-case runs.

Targets: the report of a 1050-case run builds in < 3 s and weighs < 5 MB without
pictures; compare of two 1050-case runs < 1 s. Prints the figures; run from the repository root:

    python bench/bench_report.py             # two offline runs (reference, refuse) of all 1050 cases, and
                                             # one of a model on the loopback fake server (calls in the records)
    python bench/bench_report.py --runs A B  # or two existing run directories

The real runs need the dataset and scenes (SAB_DATA / SAB_THOR_SCENES or the user cache). Every run
must record its cases without an error (the model run: its agent's and judges' calls answered by the
fake server), and the report must be written; else the bench exits 1.

    python bench/bench_report.py --smoke     # seconds: runs of 8 cases (the model run: 4), -n 0
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchkit import Checks, add_smoke  # noqa: E402

#: -n and more options of every run (--smoke: -n 0 and a sample)
RUNS = {"workers": "2", "options": []}


def _make_run(out: Path, model: str, *extra: str, env: dict[str, str] | None = None) -> Path:
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-n", RUNS["workers"],
                           "--model", model, "--sab-subset", "all", f"--sab-out={out}", *RUNS["options"], *extra],
                          cwd=ROOT, capture_output=True, text=True, check=False, env=env)
    if not (out / "sab-results.jsonl").exists() or proc.returncode not in (0, 1):
        sys.exit(f"the {model} run wrote no results (exit {proc.returncode}):\n{proc.stdout[-1500:]}"
                 f"{proc.stderr[-1500:]}")
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", nargs=2, metavar="RUN", help="two existing run directories instead of new runs")
    add_smoke(parser)
    ns = parser.parse_args()
    if ns.smoke:
        RUNS.update(workers="0", options=["--sab-sample=8"])
    checks = Checks()
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
        checks.need(cases and all(not r.get("error") for r in load_run(a_dir).records or []),
                    f"the first run recorded its cases without an error ({cases})")
        print(f"report of {cases} cases, in process (load + plots + page + write): {_best(build):.2f} s "
              f"(target < 3 s); {page.stat().st_size / 1e6:.2f} MB (target < 5 MB)")
        checks.need(page.stat().st_size > 0 and "<html" in page.read_text()[:2000].lower(), "the report was written")
        print(f"  sab report RUN (interpreter start and imports included): "
              f"{_cli('report', str(a_dir), '--out', str(page)):.2f} s")
        compared = compare_runs(load_run(a_dir), load_run(b_dir))
        checks.need(compared, "compare of the two runs gives its comparison")
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
                if ns.smoke:
                    RUNS["options"] = ["--sab-sample=4"]
                model_dir = _make_run(tmp_path / "model", "fake-model", "--judge-model", "fake-model",
                                      "--sab-no-cache", env=env)
                judged = sum(1 for r in server.chat_requests if r.body.get("max_tokens") != 1)
            run = load_run(model_dir)
            errors = sum(1 for r in run.records or [] if r.get("error"))
            checks.need(run.records and not errors and judged > len(run.records),
                        f"the model run recorded its cases without an error, its agent and judges answered by the fake "
                        f"server ({len(run.records or [])} cases, {errors} errors, {judged} calls)")
            elapsed = _best(lambda: write_report(page, run.summary, run.records or [], Redactor()), repeat=1)
            results_mb = (model_dir / "sab-results.jsonl").stat().st_size / 1e6
            print(f"report of a {len(run.records or [])}-case model run (agent and judge calls kept): {elapsed:.2f} s, "
                  f"{page.stat().st_size / 1e6:.2f} MB (its results file: {results_mb:.2f} MB)")
    return checks.status()


if __name__ == "__main__":
    sys.exit(main())
