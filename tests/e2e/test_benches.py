"""Every script in ``bench/`` runs at its smoke size (``--smoke``: seconds, figures not judged) and
holds its own checks (its runs did what it measures: cases run, calls made, no error), so a change
that breaks a bench fails here rather than in the hands of the next person who runs it. A bench that
needs what CI cannot have (a llama.cpp server with a model) may skip, naming it; no other may."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCHES = sorted((ROOT / "bench").glob("bench_*.py"))
#: the benches that may skip, and the words that must name what the machine lacks
MAY_SKIP = {"bench_local_model": "llama.cpp server"}
#: a bench at its smoke size ends within this, on a loaded 2-core machine (a hang fails, not a figure)
LIMIT_S = 300

pytestmark = pytest.mark.slow


def _bench(script: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}  # not this run's xdist worker
    return subprocess.run([sys.executable, str(script), "--smoke", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=LIMIT_S, env={**clean, **(env or {})}, check=False)


def test_every_bench_is_run_here() -> None:
    assert len(BENCHES) >= 23 and all(b.name.startswith("bench_") for b in BENCHES)


@pytest.mark.parametrize("script", BENCHES, ids=lambda p: p.stem)
def test_each_bench_runs_at_its_smoke_size_and_its_checks_hold(script: Path) -> None:
    done = _bench(script)
    said = (done.stdout + done.stderr)[-4000:]
    assert done.returncode == 0, f"{script.name} --smoke exited {done.returncode}:\n{said}"
    if "SKIPPED" in done.stdout:
        assert script.stem in MAY_SKIP and MAY_SKIP[script.stem] in done.stdout, said
    else:
        assert f"{script.stem}: every check held" in done.stdout, said


def test_a_bench_whose_runs_fail_exits_1_naming_what_did_not_hold(tmp_path: Path) -> None:
    """The offline bench against an engine nobody serves: its run records only errors, and the bench
    says so and fails instead of printing the figures of a run that measured nothing."""
    done = _bench(ROOT / "bench" / "bench_offline.py",
                  env={"PYTEST_ADDOPTS": "--thor=remote --thor-url=http://127.0.0.1:9"})
    assert done.returncode == 1, done.stdout + done.stderr
    assert "bench_offline: CHECK FAILED: the run recorded the 10 cases without an error" in done.stdout
    assert "check(s) failed, its figures measure nothing" in done.stdout
