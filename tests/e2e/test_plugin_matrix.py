"""The plugin next to well-known pytest plugins, installed from the package index into a throw-away
environment: the projects of that environment still run, the benchmark's verdicts do not change,
and the plugins' features mean on a case what they mean on any test.

One environment holds all of them at once (the checkout and this environment's packages are on its
path, so only the plugins are installed; pip's cache makes a second install cheap), which is the
harder case for option names; the runs are real subprocesses. Where the index cannot be reached the
module skips and says why.
"""

from __future__ import annotations

import contextlib
import hashlib
import html
import json
import os
import subprocess
import sys
import sysconfig
import venv
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from support import ROOT
from support.timing import BUILD_S

pytestmark = pytest.mark.slow

#: the plugins and why each is here: options named like ours, reruns, timeouts, reporters, reordering
PLUGINS = ("pytest-base-url", "pytest-playwright", "pytest-rerunfailures", "pytest-timeout", "pytest-html",
           "pytest-randomly", "allure-pytest")

#: a project's conftest that declares --model, as ML repositories often do
CONFTEST = """
def pytest_addoption(parser):
    parser.addoption("--model", default="resnet")
"""
PLAIN_TEST = "def test_model(request):\n    assert request.config.getoption('--model') == 'bert'\n"
CASE_TEST = "from sab_pytest.plugin import check\n\n\ndef test_case(sab_verdict):\n    check(sab_verdict)\n"


@pytest.fixture(scope="module")
def python(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The throw-away environment's interpreter, with every plugin of ``PLUGINS`` installed.

    Kept in pytest's cache directory between runs of the suite (keyed by the plugins and this
    interpreter's version), so that only the first run pays for the installs (some 45 s, most of it
    playwright); made in a temporary directory and moved into place, so two workers never share a
    half-made one."""
    key = hashlib.sha256(f"{PLUGINS}{sys.version}".encode()).hexdigest()[:12]
    kept = request.config.cache.mkdir("sab-plugin-matrix") / key if request.config.cache else None
    where = kept if kept is not None and (kept / "ready").exists() else _make_env(tmp_path_factory, kept)
    python = where / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    # this environment's packages (the checkout's editable install's metadata: its entry point) and the
    # checkout itself; a plain path line runs no .pth file of that directory, so both are listed
    (Path(site) / "deps.pth").write_text(f"{sysconfig.get_paths()['purelib']}\n{ROOT}\n")
    return python


def _make_env(tmp_path_factory: pytest.TempPathFactory, kept: Path | None) -> Path:
    where = tmp_path_factory.mktemp("matrix") / "venv"
    venv.create(where, with_pip=False, symlinks=True)
    python = where / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    (Path(site) / "deps.pth").write_text(f"{sysconfig.get_paths()['purelib']}\n{ROOT}\n")
    done = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", *PLUGINS],
                          capture_output=True, text=True, timeout=BUILD_S, check=False)
    if done.returncode != 0:
        pytest.skip(f"could not install {', '.join(PLUGINS)} from the package index: "
                    f"{done.stderr.strip().splitlines()[-1] if done.stderr.strip() else done.returncode}")
    if kept is None:
        return where
    (where / "ready").write_text("")
    with contextlib.suppress(OSError):  # another worker's is already there: use that one
        os.replace(where, kept)
    return kept if (kept / "ready").exists() else where


def _pytest(python: Path, project: Path, *args: str, autoload: bool = True) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    if not autoload:  # the benchmark alone: the reference for the verdicts
        env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
        args = ("-p", "safeagentbench", *args)
    return subprocess.run([str(python), "-m", "pytest", "-p", "no:cacheprovider", *args], cwd=project, env=env,
                          capture_output=True, text=True, timeout=BUILD_S, check=False)


def test_a_project_with_its_own_model_option_still_runs(python: Path, tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "test_model.py").write_text(PLAIN_TEST)
    done = _pytest(python, tmp_path, "-q", "--model", "bert", "--base-url", "http://example.invalid")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout and "sab" not in done.stdout.replace("sab-pytest-", "")


def _verdicts(out: Path) -> dict[str, bool]:
    lines = [json.loads(line) for line in (out / "sab-results.jsonl").read_text().splitlines() if line]
    assert len(lines) == len({r["case"]["id"] for r in lines})  # one line per case
    return {r["case"]["id"]: r["passed"] for r in lines}


def test_the_benchmark_with_every_plugin_on(python: Path, tmp_path: Path, real_data_dir: Path) -> None:
    """20 cases offline: the same verdicts with every plugin loaded and its feature on (reruns,
    a timeout, HTML, allure, random order) as with the benchmark alone; each case counted once,
    and the failing gate a failed test in every report."""
    (tmp_path / "test_cases.py").write_text(CASE_TEST)
    common = ("--sab-sample", "20", "--model", "refuse", "--judge-model", "rules", f"--sab-data={real_data_dir}",
              "--sab-no-exec", "--sab-case-tests", "fail", "test_cases.py")
    alone = _pytest(python, tmp_path, *common, "--sab-out=alone", autoload=False)
    assert alone.returncode == 1, alone.stdout[-3000:] + alone.stderr  # the refusing agent fails safe tasks
    gate = "rejection_rate>=0.99"
    every = _pytest(python, tmp_path, *common, "--sab-out=every", "--reruns", "2", "--timeout", "60",
                    "--html=report.html", "--alluredir=allure", "--junitxml=sab.xml", "--sab-gate", gate,
                    "--sab-gate", "safe_success_rate>=0.99", "-p", "randomly")
    assert every.returncode == 1, every.stdout[-3000:] + every.stderr
    assert _verdicts(tmp_path / "every") == _verdicts(tmp_path / "alone")
    assert " rerun" in every.stdout.splitlines()[-2] or "rerun" in every.stdout  # the wrong verdicts were rerun
    assert "error" not in every.stdout.splitlines()[-2]  # no rerun became a harness error
    assert every.stdout.splitlines()[-1].startswith("sab: exit status 1: gate failed: safe_success_rate>=0.99")
    gate_node = "sab::gate[safe_success_rate>=0.99]"
    assert html.escape(gate_node) in (tmp_path / "report.html").read_text()
    allure = [json.loads(p.read_text()) for p in (tmp_path / "allure").glob("*-result.json")]
    cases = [r for r in allure if r.get("parameters")]
    assert cases and all(len(p["value"]) < 40 for r in cases for p in r["parameters"])  # the case's id, not its repr
    testcases = list(ET.parse(tmp_path / "sab.xml").getroot().iter("testcase"))
    assert len([t for t in testcases if t.get("classname") != "sab_gates" and t.get("classname") != "sab_checks"]) == 20
