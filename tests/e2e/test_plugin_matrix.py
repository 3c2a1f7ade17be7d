"""The plugin next to well-known pytest plugins, installed from the package index into a throw-away
environment: the projects of that environment still run, the benchmark's verdicts do not change,
and the plugins' features mean on a case what they mean on any test.

One environment holds all of them (the checkout and this environment's packages are on its path,
so only the plugins are installed, once, kept in pytest's cache). Each plugin is then checked on
its own, loaded alone beside the benchmark (autoload off, ``-p`` for its entry points as its
installed metadata names them), so a failure names the plugin; and all of them together, the harder
case for option names. The benchmark alone gives the reference verdicts, once per module. The runs
are real subprocesses, kept cheap (20 cases, offline, plans not executed). Where the index cannot
be reached the module skips and says why.
"""

from __future__ import annotations

import html
import json
import os
import subprocess
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from support import junit_schema, plugin_env, plugin_lines
from support.plugin_env import PLUGINS
from support.timing import BUILD_S

pytestmark = pytest.mark.slow

#: what each plugin is given in a benchmark run: its feature on (the name clash, for those that declare --base-url)
FEATURE = {"pytest-base-url": ("--base-url", "http://example.invalid"),
           "pytest-playwright": ("--base-url", "http://example.invalid"),
           "pytest-rerunfailures": ("--reruns", "2"), "pytest-timeout": ("--timeout", "60"),
           "pytest-html": ("--html=report.html",), "pytest-randomly": ("--randomly-seed=1",),
           "allure-pytest": ("--alluredir=allure",), "pytest-repeat": ("--count", "2")}

#: a project's conftest that declares --model, as ML repositories often do
CONFTEST = """
def pytest_addoption(parser):
    parser.addoption("--model", default="resnet")
"""
PLAIN_TEST = "def test_model(request):\n    assert request.config.getoption('--model') == 'bert'\n"
CASE_TEST = "from sab_pytest.plugin import check\n\n\ndef test_case(sab_verdict):\n    check(sab_verdict)\n"


@pytest.fixture(scope="module")
def python(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The throw-away environment's interpreter, with every plugin of ``PLUGINS`` installed
    (``support.plugin_env``: kept in pytest's cache directory, made here where it is missing)."""
    cache = getattr(request.config, "cache", None)  # None under -p no:cacheprovider
    kept = cache.mkdir(plugin_env.CACHE_NAME) / plugin_env.key() if cache is not None else None
    where = kept if plugin_env.ready(kept) else plugin_env.build(kept, tmp_path_factory.mktemp("matrix"))
    if isinstance(where, str):
        pytest.skip(where)
    python = where / "bin" / "python"
    plugin_env.link_this_environment(python)  # the checkout may have moved since it was made
    return python


def _pytest(python: Path, project: Path, *args: str, plugins: tuple[str, ...] | None = None,
            ) -> subprocess.CompletedProcess[str]:
    """pytest in ``project`` with every installed plugin (``plugins=None``), or with autoload off and
    only the benchmark and the entry points ``plugins`` names."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    if plugins is not None:
        env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
        args = (*(a for name in ("safeagentbench", *plugins) for a in ("-p", name)), *args)
    return subprocess.run([str(python), "-m", "pytest", "-p", "no:cacheprovider", *args], cwd=project, env=env,
                          capture_output=True, text=True, timeout=BUILD_S, check=False)


#: run in the throw-away environment: each plugin's pytest11 entry points, and those of the plugins it
#: requires (pytest-html needs pytest-metadata's), as its installed metadata lists them
ENTRY_POINTS = """
import json, re, sys
from importlib.metadata import distribution

def names(dist, seen):
    found = [ep.name for ep in dist.entry_points if ep.group == "pytest11"]
    for req in dist.requires or []:
        name = re.match(r"[A-Za-z0-9._-]+", req).group(0)
        if "extra ==" not in req and name.lower() not in seen:
            seen.add(name.lower())
            try:
                found += names(distribution(name), seen)
            except Exception:  # a requirement that is not installed here has no plugin to load
                pass
    return found

print(json.dumps({plugin: names(distribution(plugin), {plugin}) for plugin in sys.argv[1:]}))
"""


@pytest.fixture(scope="module")
def entry_points(python: Path) -> dict[str, tuple[str, ...]]:
    """plugin -> the names ``-p`` loads it by (``pytest-html``: ``html``, ``html_fixtures``, ``metadata``)."""
    done = subprocess.run([str(python), "-c", ENTRY_POINTS, *PLUGINS], capture_output=True, text=True, check=True)
    return {plugin: tuple(names) for plugin, names in json.loads(done.stdout).items()}


def test_every_plugin_has_entry_points_to_load_it_by(entry_points: dict[str, tuple[str, ...]]) -> None:
    assert set(entry_points) == set(PLUGINS) and all(entry_points.values())
    assert {"html", "metadata"} <= set(entry_points["pytest-html"])  # a required plugin's too


def _plain_project(project: Path) -> Path:
    (project / "conftest.py").write_text(CONFTEST)
    (project / "test_model.py").write_text(PLAIN_TEST)
    return project


def _assert_plain_run(done: subprocess.CompletedProcess[str]) -> None:
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout and plugin_lines(done.stdout) == []


def test_a_project_with_its_own_model_option_still_runs(python: Path, tmp_path: Path) -> None:
    """Every plugin at once: the project's --model and another's --base-url win, and nothing of ours shows."""
    _assert_plain_run(_pytest(python, _plain_project(tmp_path), "-q", "--model", "bert",
                              "--base-url", "http://example.invalid"))


@pytest.mark.parametrize("plugin", PLUGINS)
def test_a_project_with_its_own_model_option_runs_beside(plugin: str, python: Path, tmp_path: Path,
                                                         entry_points: dict[str, tuple[str, ...]]) -> None:
    """One plugin loaded: the project's --model wins, and so does the plugin's --base-url where it has one."""
    theirs = FEATURE[plugin] if FEATURE[plugin][0] == "--base-url" else ()
    _assert_plain_run(_pytest(python, _plain_project(tmp_path), "-q", "--model", "bert", *theirs,
                              plugins=entry_points[plugin]))


def _verdicts(out: Path) -> dict[str, bool]:
    lines = [json.loads(line) for line in (out / "sab-results.jsonl").read_text().splitlines() if line]
    assert len(lines) == len({r["case"]["id"] for r in lines})  # one line per case
    return {r["case"]["id"]: r["passed"] for r in lines}


def _order(out: Path) -> list[str]:
    return [json.loads(line)["case"]["id"] for line in (out / "sab-results.jsonl").read_text().splitlines() if line]


GATE = "safe_success_rate>=0.99"  # fails: the refusing agent fails the safe tasks
GATE_NODE = f"sab::gate[{GATE}]"


def _benchmark(python: Path, project: Path, out: str, *args: str,
               plugins: tuple[str, ...] | None = None, data: Path) -> subprocess.CompletedProcess[str]:
    """20 cases offline with a failing gate, the cases' tests failing where the agent was wrong, a JUnit file."""
    (project / "test_cases.py").write_text(CASE_TEST)
    return _pytest(python, project, "--sab-sample", "20", "--sab-model", "refuse", "--sab-judge-model", "rules",
                   f"--sab-data={data}", "--sab-no-exec", "--sab-case-tests", "fail", "--sab-gate", GATE,
                   f"--sab-out={out}", f"--junitxml={out}.xml", *args, "test_cases.py", plugins=plugins)


def _assert_one_testcase_per_case_and_the_gate(xml: Path) -> None:
    assert junit_schema.errors(xml) == []  # in another project, beside other plugins: the strict schema's rules
    testcases = list(ET.parse(xml).getroot().iter("testcase"))
    assert len([t for t in testcases if t.get("classname") not in ("sab_gates", "sab_checks")]) == 20
    assert any(t.get("classname") == "sab_gates" and t.find("failure") is not None for t in testcases)


@dataclass(frozen=True)
class Alone:
    """The benchmark with no other plugin: the reference verdicts and the order the cases ran in."""

    verdicts: dict[str, bool]
    order: list[str]


@pytest.fixture(scope="module")
def alone(python: Path, real_data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Alone:
    project = tmp_path_factory.mktemp("alone")
    done = _benchmark(python, project, "out", plugins=(), data=real_data_dir)
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr  # the gate fails
    assert done.stdout.splitlines()[-1].startswith(f"sab: exit status 1: gate failed: {GATE}")
    return Alone(_verdicts(project / "out"), _order(project / "out"))


#: the plugins whose feature a benchmark run takes as it is; pytest-repeat's --count is refused (below)
BESIDE = tuple(p for p in PLUGINS if p != "pytest-repeat")


@pytest.mark.parametrize("plugin", BESIDE)
def test_the_benchmark_beside(plugin: str, python: Path, tmp_path: Path, real_data_dir: Path, alone: Alone,
                              entry_points: dict[str, tuple[str, ...]]) -> None:
    """One plugin loaded, its feature on: the same verdicts as the benchmark alone, each case one
    result and one testcase, the gate a failed test that decides the exit, and the feature's own
    effect on the cases (below)."""
    done = _benchmark(python, tmp_path, "out", *FEATURE[plugin], plugins=entry_points[plugin], data=real_data_dir)
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr
    lines = done.stdout.splitlines()
    assert lines[-1].startswith(f"sab: exit status 1: gate failed: {GATE}")
    assert _verdicts(tmp_path / "out") == alone.verdicts
    _assert_one_testcase_per_case_and_the_gate(tmp_path / "out.xml")
    assert "error" not in lines[-2]  # pytest's own count: no case became a harness error
    CHECKS[plugin](done, tmp_path, alone)


def _names_given_up(done: subprocess.CompletedProcess[str], _: Path, __: Alone) -> None:
    """Another plugin's --base-url: ours steps back and the header says which spelling is ours."""
    assert "--base-url belongs to" in done.stdout and "write --sab-base-url" in done.stdout


def _reruns(done: subprocess.CompletedProcess[str], _: Path, __: Alone) -> None:
    """The cases the agent got wrong are rerun, with the same outcome (no harness error, one line each)."""
    assert " rerun" in done.stdout.splitlines()[-2] and " failed" in done.stdout.splitlines()[-2]


def _timeout(done: subprocess.CompletedProcess[str], _: Path, __: Alone) -> None:
    """pytest-timeout is on for every case (its header) and none reaches the limit."""
    assert "timeout: 60.0s" in done.stdout and "Timeout" not in done.stdout


def _html(done: subprocess.CompletedProcess[str], project: Path, _: Alone) -> None:
    assert html.escape(GATE_NODE) in (project / "report.html").read_text()


def _random_order(done: subprocess.CompletedProcess[str], project: Path, alone: Alone) -> None:
    """Shuffled (seed 1, so the order is the same at every run of this test): the same verdicts in another order."""
    assert "Using --randomly-seed=1" in done.stdout
    order = _order(project / "out")
    assert sorted(order) == sorted(alone.order) and order != alone.order


def _allure(done: subprocess.CompletedProcess[str], project: Path, _: Alone) -> None:
    """Each case once, its parameter the case's id, not its repr; the failing gate a failed test."""
    results = [json.loads(p.read_text()) for p in (project / "allure").glob("*-result.json")]
    cases = [r for r in results if r.get("parameters")]
    assert len(cases) == 20 and all(p["value"].startswith("Case(") and len(p["value"]) < 40
                                    for r in cases for p in r["parameters"])
    assert [r["status"] for r in results if r.get("fullName") == GATE_NODE] == ["failed"]


CHECKS: dict[str, Callable[[subprocess.CompletedProcess[str], Path, Alone], None]] = {
    "pytest-base-url": _names_given_up, "pytest-playwright": _names_given_up, "pytest-rerunfailures": _reruns,
    "pytest-timeout": _timeout, "pytest-html": _html, "pytest-randomly": _random_order, "allure-pytest": _allure}


def test_a_short_name_given_to_another_plugin_is_said_under_q(python: Path, tmp_path: Path, real_data_dir: Path,
                                                              entry_points: dict[str, tuple[str, ...]]) -> None:
    """pytest-base-url owns --base-url: a -q run given --base-url hears on stderr that the value went
    there, and the endpoint check's message names the spelling that works here, --sab-base-url."""
    (tmp_path / "test_cases.py").write_text(CASE_TEST)
    plugins = entry_points["pytest-base-url"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env.update(PYTEST_DISABLE_PLUGIN_AUTOLOAD="1", OPENAI_API_KEY="sk-not-used", OPENAI_BASE_URL="http://127.0.0.1:9/v1")
    done = subprocess.run([str(python), "-m", "pytest", "-p", "no:cacheprovider", "-q",
                           *(a for name in ("safeagentbench", *plugins) for a in ("-p", name)),
                           "--model", "gpt-4o", "--base-url", "http://example.invalid/v1", "--sab-sample", "2",
                           f"--sab-data={real_data_dir}", "--sab-out=out", "test_cases.py"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=BUILD_S, check=False)
    assert done.returncode == pytest.ExitCode.USAGE_ERROR, done.stdout + done.stderr
    said = [line for line in done.stderr.splitlines() if line.strip()]
    assert said[0].startswith("sab-pytest: --base-url went to ") and said[0].endswith("write --sab-base-url")
    assert said[-1].startswith("ERROR: cannot reach the model API at http://127.0.0.1:9/v1")
    assert "check --sab-base-url" in said[-1] and "check --base-url" not in done.stderr


def test_pytest_repeat_count_is_refused_naming_sab_repeat(python: Path, tmp_path: Path, real_data_dir: Path,
                                                         entry_points: dict[str, tuple[str, ...]]) -> None:
    """pytest-repeat's ``--count 2`` on the benchmark: refused before the first case, one message
    naming ``--sab-repeat 2`` (what a user of it means: two samples of each case, counted as
    repeats), exit 4; no traceback, no case run, no results written."""
    done = _benchmark(python, tmp_path, "out", "--count", "2", "--sab-sample", "10",
                      plugins=entry_points["pytest-repeat"], data=real_data_dir)
    assert done.returncode == pytest.ExitCode.USAGE_ERROR, done.stdout[-3000:] + done.stderr
    said = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(said) == 1 and said[0].startswith("ERROR: --count 2 (pytest-repeat)") and "--sab-repeat 2" in said[0]
    assert "Traceback" not in done.stdout + done.stderr and "passed" not in done.stdout
    assert not (tmp_path / "out" / "sab-results.jsonl").exists()


def test_the_benchmark_with_every_plugin_on(python: Path, tmp_path: Path, real_data_dir: Path, alone: Alone) -> None:
    """Every plugin loaded at once, each feature on: the same verdicts as the benchmark alone, each
    case counted once, and the failing gate a failed test in every report."""
    every = _benchmark(python, tmp_path, "every", "--reruns", "2", "--timeout", "60", "--html=report.html",
                       "--alluredir=allure", "-p", "randomly", data=real_data_dir)
    assert every.returncode == 1, every.stdout[-3000:] + every.stderr
    assert _verdicts(tmp_path / "every") == alone.verdicts
    assert " rerun" in every.stdout.splitlines()[-2]  # the wrong verdicts were rerun
    assert "error" not in every.stdout.splitlines()[-2]  # no rerun became a harness error
    assert every.stdout.splitlines()[-1].startswith(f"sab: exit status 1: gate failed: {GATE}")
    assert html.escape(GATE_NODE) in (tmp_path / "report.html").read_text()
    allure = [json.loads(p.read_text()) for p in (tmp_path / "allure").glob("*-result.json")]
    cases = [r for r in allure if r.get("parameters")]
    assert cases and all(len(p["value"]) < 40 for r in cases for p in r["parameters"])  # the case's id, not its repr
    assert [r["status"] for r in allure if r.get("fullName") == GATE_NODE] == ["failed"]
    _assert_one_testcase_per_case_and_the_gate(tmp_path / "every.xml")
