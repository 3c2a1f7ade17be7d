"""The short option names (``--model``, ``--base-url`` ...) never clash with another plugin's or a
project's own (``sab_pytest.pytest_layer.aliases``): whoever else declares one keeps it, the
benchmark takes its ``--sab-`` spelling, and a run of the benchmark says so once.

pytester runs in this process, with one-test projects: no case is run, so each run is cheap. A
conftest registers its options after every installed plugin; a ``-p`` plugin before ours.
"""

from __future__ import annotations

import pytest
from support.benchmark import run_pytest

#: a project whose conftest declares --model (and reads it), as ML repositories often do
CONFTEST_MODEL = """
import pytest

def pytest_addoption(parser):
    parser.addoption("--model", default="resnet")

@pytest.fixture
def model(request):
    return request.config.getoption("--model")
"""
TEST_MODEL = "def test_model(model):\n    assert model == 'bert'\n"

#: a plugin that declares --thor-url, loaded before ours with -p (as pytest-base-url may be, with --base-url)
OTHER_PLUGIN = """
def pytest_addoption(parser):
    parser.getgroup("other").addoption("--thor-url", dest="thor_url", default=None)
"""


def _header(result: pytest.RunResult) -> list[str]:
    return [line for line in result.stdout.lines if line.startswith("sab")]


def test_a_conftest_keeps_its_own_model_option(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(CONFTEST_MODEL)
    pytester.makepyfile(test_model=TEST_MODEL)
    result = run_pytest(pytester, "--model", "bert")
    result.assert_outcomes(passed=1)
    assert _header(result) == []  # another's option given: the benchmark was not asked for, nothing said


def test_a_plugin_loaded_first_keeps_its_option(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(other_plugin=OTHER_PLUGIN,
                        test_url="def test_url(request):\n    assert request.config.option.thor_url == 'http://x'\n")
    pytester.syspathinsert()
    result = run_pytest(pytester, "-p", "other_plugin", "--thor-url", "http://x")
    result.assert_outcomes(passed=1)
    assert _header(result) == []


def test_a_benchmark_run_names_the_sab_spelling_once_and_takes_it(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(CONFTEST_MODEL)
    pytester.makepyfile(test_model=TEST_MODEL, other_plugin=OTHER_PLUGIN)
    pytester.syspathinsert()
    result = run_pytest(pytester, "-p", "other_plugin", "--model", "bert", "--sab-model", "refuse",
                        "--judge-model", "rules", "--sab-sample", "1")
    result.assert_outcomes(passed=1)
    note, settings = _header(result)
    assert note.startswith("sab-pytest: ") and note.endswith(
        f"--model belongs to {pytester.path / 'conftest.py'} here: write --sab-model; "
        "--thor-url belongs to a plugin loaded before sab-pytest here: write --sab-thor-url")
    assert settings.startswith("sab: model=refuse, judge=rules")  # the short --judge-model is still ours


@pytest.mark.parametrize("where", ["ini", "env"])
def test_both_spellings_in_addopts(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, where: str) -> None:
    pytester.makepyfile(test_one="def test_one():\n    pass\n")
    addopts = "--model refuse --sab-judge-model rules --sab-sample 1"
    if where == "ini":
        pytester.makeini(f"[pytest]\naddopts = {addopts}\n")
    else:
        monkeypatch.setenv("PYTEST_ADDOPTS", addopts)
    result = run_pytest(pytester)
    result.assert_outcomes(passed=1)
    settings = [line for line in _header(result) if line.startswith("sab:")]  # (an installed plugin may own a name)
    assert settings == ["sab: model=refuse, judge=rules, subset=mixed sample=1, seed=42, engine=sim, controller=paper "
                        "(low_level_controller/low_level_controller.py sha256:983b855aff36, compute_SR_object_state "
                        "of evaluator/detail_evaluate.py sha256:38625850e39f)"]


def test_help_lists_both_spellings(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(CONFTEST_MODEL)
    text = run_pytest(pytester, "--help").stdout.str()
    assert "--sab-model=MODEL" in text and "--sab-judge-model=JUDGE_MODEL, --judge-model=JUDGE_MODEL" in text
    assert "--sab-model=MODEL, --model" not in text  # the conftest's --model is listed as its own
