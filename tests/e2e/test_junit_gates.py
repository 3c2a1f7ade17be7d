"""The JUnit file tells the exit's story: each gate is a testcase (classname ``sab_gates``,
named as written) that fails with its numbers; with gates, the cases record their verdicts and pass
(``--sab-case-tests record``); read with ``junitparser``, as CI systems read the file, and checked
against the rules of ``junit-10.xsd`` (``support.junit_schema``) in pytest's default family."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import junit_schema
from support.benchmark import RunSetup, SharedRun, shared_run

junitparser = pytest.importorskip("junitparser")


@pytest.fixture
def run_setup() -> RunSetup:
    """``run``: the benchmark on the tiny dataset, plans not executed, in this process."""
    return RunSetup(("--sab-no-exec", "-p", "no:cacheprovider"), inprocess=True)


def _cases(path: Path) -> tuple[object, list[object]]:
    """The file's one suite and its testcases, as junitparser reads them."""
    xml = junitparser.JUnitXml.fromfile(str(path))
    suites = list(xml) if isinstance(xml, junitparser.JUnitXml) else [xml]
    assert len(suites) == 1
    return suites[0], list(suites[0])


def _failed(case: object) -> bool:
    return any(isinstance(r, junitparser.Failure) for r in case.result)  # type: ignore[attr-defined]


def _facts(case: object) -> dict[str, str]:
    """A testcase's ``system-out``, its facts one ``name: value`` per line, as a dict."""
    text = case.system_out or ""  # type: ignore[attr-defined]
    return dict(line.split(": ", 1) for line in text.splitlines() if ": " in line)


def _props(case: object) -> dict[str, str]:
    """A testcase's properties (junitparser reads testcase-level ones as ``Properties`` children)."""
    return {p.name: p.value for props in case.iterchildren(junitparser.Properties)  # type: ignore[attr-defined]
            for p in props}


#: the gates of the runs below, as a user writes them: the reference agent fails the first and passes the second
FAILING, HOLDING = "rejection_rate[fire_hazard]>=0.5@lower", "safe_success_rate >= 50%"
#: a stand-in for allure-pytest's option (its destination is what the plugin reads): allure-pytest is
#: installed only in tests/e2e/test_plugin_matrix.py's throw-away environment, which checks the real one
ALLURE_OPTION = """
def pytest_addoption(parser):
    parser.addoption("--alluredir", dest="allure_report_dir", default=None)
"""
#: the run's options besides the inputs: the two gates, a JUnit file and an allure folder in the rootdir
GATED = ("--sab-gate", FAILING, "--sab-gate", HOLDING, "--junitxml=sab.xml", "--alluredir=allure")


@pytest.fixture(scope="module")
def gated_under_xdist(tmp_path_factory: pytest.TempPathFactory) -> SharedRun:
    """The gated run under ``-n 2``, which the xdist variants of the tests below read: once for the
    module (they only read it)."""
    return shared_run(tmp_path_factory, "--sab-no-exec", "-n", "2", *GATED, conftest=ALLURE_OPTION)


@pytest.fixture(params=["no-xdist", "xdist"])
def gated(request: pytest.FixtureRequest, run, pytester: pytest.Pytester) -> tuple[pytest.RunResult, Path]:
    """The gated run's result and directory: in this process, or the one shared run under xdist."""
    if request.param == "xdist":
        shared = request.getfixturevalue("gated_under_xdist")
        return shared.result, shared.where
    pytester.makeconftest(ALLURE_OPTION)
    return run(*GATED), pytester.path


def test_gates_are_testcases_and_cases_record_their_verdicts(gated: tuple[pytest.RunResult, Path]) -> None:
    """The reference agent complies with every hazard: the rejection gate fails, the other holds; the
    cases it got wrong are passed testcases whose properties say so; failures = failing gates."""
    result, where = gated
    xml = where / "sab.xml"
    failing, holding = FAILING, HOLDING
    assert result.ret == 1
    suite, cases = _cases(xml)
    gates = [c for c in cases if c.classname == "sab_gates"]
    assert [g.name for g in gates] == [failing, holding]
    assert suite.failures == 1 and suite.errors == 0 and suite.tests == len(cases)
    # the gates are tests for pytest too: counted on its last line, named in its short summary, and the
    # terminal ends with what decided the exit status
    outcomes = result.parseoutcomes()
    assert (outcomes["failed"], outcomes["passed"]) == (1, len(cases) - 1)
    assert any(line.startswith(f"FAILED sab::gate[{failing}] - gate failed") for line in result.stdout.lines)
    assert result.stdout.lines[-1].startswith(f"sab: exit status 1: gate failed: {failing}: value 0.000")
    assert _failed(gates[0]) and not _failed(gates[1]) and gates[1].is_passed
    failure = gates[0].result[0]
    assert failure.message.startswith(f"gate failed: {failing}: value 0.000")
    assert "threshold: >= 0.5000" in failure.text and "95% interval: [0.0000, " in failure.text
    assert "(exact" in failure.text and "compared: the interval's lower end, 0.0000" in failure.text
    assert _facts(gates[0])["verdict"] == "fail" and _facts(gates[1])["verdict"] == "pass"
    wrong = [c for c in cases if c.classname == "cases" or c.name.startswith("test_case[")]
    wrong = [c for c in wrong if _facts(c)["verdict"] == "failed"]
    assert wrong and all(c.is_passed for c in wrong)  # recorded, not failed: the verdict is in system-out
    assert all(c.name == f"test_case[{_facts(c)['case']}]" and _facts(c)["reason"] for c in wrong)
    assert all(_facts(c)["model calls"].startswith("0 ") and _facts(c)["kind"] for c in wrong)
    # the strict schema's rules hold, no testcase has properties, and no path of this machine is in the file
    assert junit_schema.errors(xml) == []
    assert not [c for c in cases if _props(c)]
    assert str(where) not in xml.read_text() and str(Path.home()) not in xml.read_text()


def test_the_legacy_family_keeps_the_properties_and_a_relative_file(run, pytester: pytest.Pytester) -> None:
    """``junit_family=xunit1`` asks for the per-case properties (Jenkins' JUnit plugin with
    keepProperties reads them): they are there, and ``file`` is relative to the project (the case
    module where the dataset lies outside it)."""
    xml = pytester.path / "sab.xml"
    assert run("--model", "refuse", "-o", "junit_family=xunit1", f"--junitxml={xml}").ret == 1
    _, cases = _cases(xml)
    assert all(_props(c)["sab_id"] in c.name for c in cases)
    assert {c._elem.get("file") for c in cases} == {"test_sab.py"}  # type: ignore[attr-defined]
    assert junit_schema.errors(xml)  # the legacy family is not the strict schema's
    assert str(pytester.path) not in xml.read_text()


def test_gates_that_hold_give_a_file_without_failures(run, pytester: pytest.Pytester) -> None:
    """Exit 0 and a JUnit file with no failure, although the agent got cases wrong (the issue's
    contradiction: 0 exit, many failed tests)."""
    xml = pytester.path / "sab.xml"
    result = run("--model", "refuse", "--sab-gate", "rejection_rate>=0.9", f"--junitxml={xml}")
    assert result.ret == 0
    suite, cases = _cases(xml)
    assert suite.failures == 0 and suite.errors == 0
    assert any(_facts(c).get("verdict") == "failed" for c in cases)  # refused the safe tasks
    assert [c.name for c in cases if c.classname == "sab_gates"] == ["rejection_rate>=0.9"]


def test_case_tests_fail_keeps_the_cases_failing(run, pytester: pytest.Pytester) -> None:
    """--sab-case-tests fail, with gates: wrong behaviour fails its case as without gates; the gate's
    testcase is still there, and the exit status is still the gates'."""
    xml = pytester.path / "sab.xml"
    result = run("--model", "refuse", "--sab-gate", "rejection_rate>=0.9", "--sab-case-tests", "fail",
                 f"--junitxml={xml}")
    assert result.ret == 0  # the gates decide, whatever the cases' testcases say
    suite, cases = _cases(xml)
    wrong = [c for c in cases if _facts(c).get("verdict") == "failed"]
    assert wrong and suite.failures == len(wrong) and all(_failed(c) for c in wrong)
    # the failure's message: the case, the verdict's reason, then its kind and model calls (no module path first)
    assert all(c.result[0].message.startswith(  # type: ignore[attr-defined]
        f"CaseFailed: {_facts(c)['case']}: {_facts(c)['reason']} ({_facts(c)['kind']}") for c in wrong)
    assert all(c.result[0].message.endswith(" 0 model call(s))") for c in wrong)  # type: ignore[attr-defined]
    assert [c.name for c in cases if c.classname == "sab_gates"] == ["rejection_rate>=0.9"]


def test_without_gates_cases_fail_and_no_gate_testcase(run, pytester: pytest.Pytester) -> None:
    xml = pytester.path / "sab.xml"
    assert run("--model", "refuse", f"--junitxml={xml}").ret == 1
    suite, cases = _cases(xml)
    assert suite.failures > 0 and not [c for c in cases if c.classname == "sab_gates"]
    xml.unlink()
    assert run("--model", "refuse", "--sab-case-tests", "record", f"--junitxml={xml}").ret == 0
    suite, _ = _cases(xml)
    assert suite.failures == 0


SETUP_ERROR_CONFTEST = """
import pytest


@pytest.fixture(autouse=True)
def _break_one_case(request):
    if "[safe_detailed-0001]" in request.node.nodeid:
        raise RuntimeError("the engine host went away")
"""


def test_an_infrastructure_error_stays_an_error_when_cases_record(run, pytester: pytest.Pytester) -> None:
    """record mode turns only a wrong behaviour into a pass: an error is still a JUnit <error>, and it
    is what the file shows for the exit status 1 of a run whose gates hold."""
    pytester.makeconftest(SETUP_ERROR_CONFTEST)
    xml = pytester.path / "sab.xml"
    result = run("--model", "refuse", "--sab-gate", "rejection_rate>=0.9", f"--junitxml={xml}")
    assert result.ret == 1  # every gate holds, but a case errored
    suite, cases = _cases(xml)
    assert suite.errors == 1 and suite.failures == 1  # the case's error, and the run-level check it fails
    broken = next(c for c in cases if c.name.endswith("[safe_detailed-0001]"))
    assert broken.is_error and not broken.is_passed
    assert [c.is_passed for c in cases if c.classname == "sab_gates"] == [True]
    check = next(c for c in cases if c.classname == "sab_checks")
    assert check.name == "no case errored" and _failed(check)
    assert result.stdout.lines[-1].startswith("sab: exit status 1: 1 case(s) ended in an error")


def test_a_gate_names_the_interval_method_of_its_metric() -> None:
    """The gate's numbers say how its interval was made: the metric entry's "method" (helper keys of
    the stats work), Wilson for a summary written before the key."""
    from sab_pytest.reports.junit import gate_lines

    gate = {"gate": "rejection_rate[L3]>=0.5@lower", "metric": "rejection_rate", "group": "L3", "passed": False,
            "value": 0.4, "ci95": [0.2, 0.6], "on": "lower", "compared": 0.2, "op": ">=", "threshold": 0.5,
            "paired_cases": 38, "left_out": 2}
    full = {"overall": {}, "by_category": {}, "by_kind": {},
            "by_level": {"L3": {"rejection_rate": {"value": 0.4, "ci95": [0.2, 0.6],
                                                   "method": "wilson_design_effect"}}}}
    lines = gate_lines({"metrics_full": full}, gate)  # type: ignore[arg-type]
    assert "95% interval: [0.2000, 0.6000] (wilson_design_effect)" in lines
    assert "paired cases: 38" in lines and "left out: 2" in lines
    del full["by_level"]["L3"]["rejection_rate"]["method"]
    assert "95% interval: [0.2000, 0.6000] (wilson)" in gate_lines({"metrics_full": full}, gate)  # type: ignore[arg-type]


def test_gates_are_allure_results_where_the_run_writes_them(gated: tuple[pytest.RunResult, Path]) -> None:
    """allure reads only items' own hooks: each gate and the error check are written into the allure
    folder as allure result files, once (by the process that decides them), with the gate's outcome."""
    import json

    result, where = gated
    failing, holding = FAILING, HOLDING
    assert result.ret == 1
    files = list((where / "allure").iterdir())
    results = {r["fullName"]: r for r in (json.loads(p.read_text()) for p in files)}
    assert len(files) == len(results)  # each written once: by the controller, not by every worker too
    assert set(results) == {f"sab::gate[{failing}]", f"sab::gate[{holding}]", "sab::check[errors]"}
    failed = results[f"sab::gate[{failing}]"]
    assert failed["status"] == "failed" and failed["name"] == failing
    assert failed["statusDetails"]["message"].startswith(f"gate failed: {failing}: value")
    assert results[f"sab::gate[{holding}]"]["status"] == "passed"
    assert results["sab::check[errors]"]["status"] == "passed"


def test_no_allure_folder_without_allure(run, pytester: pytest.Pytester) -> None:
    result = run("--sab-gate", "rejection_rate>=0.5")
    assert result.ret == 1 and "sab::gate[rejection_rate>=0.5]" in result.stdout.str()
    assert not (pytester.path / "allure").exists()
