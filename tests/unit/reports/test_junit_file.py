"""The JUnit file written without pytest (``sab merge --junitxml``), on made-up runs: the strict
schema's rules hold whatever a model answered, a case's facts are its ``system-out``, and the case
testcases say what a run's own would (errors, failures in ``fail`` mode)."""

from __future__ import annotations

import json
from pathlib import Path

import junitparser
from support import junit_schema
from support.made_up_runs import hazard_run, record, write_run

from sab_pytest.reports.junit_file import write_junit
from sab_pytest.results.files import SUMMARY_NAME


def _written(tmp_path: Path, records: list[dict], **summary: object) -> Path:
    run = json.loads((write_run(tmp_path / "run", records, **summary) / SUMMARY_NAME).read_text())
    xml = tmp_path / "merged.xml"
    write_junit(xml, run, records)
    return xml


def test_a_models_control_characters_never_break_the_file(tmp_path: Path) -> None:
    records = [*hazard_run(3, {0}), record("safe_detailed-0001", kind="safe_detailed", message="bell \x07 and \x1b[0m")]
    xml = _written(tmp_path, records)
    assert junit_schema.errors(xml) == []
    cases = {c.name: c for suite in junitparser.JUnitXml.fromfile(str(xml)) for c in suite}
    assert "reason: bell ? and ?[0m" in cases["test_case[safe_detailed-0001]"].system_out
    # no gates: a wrong behaviour fails its testcase, as a run's own file in fail mode
    failed = sorted(n for n, c in cases.items() if not c.is_passed)
    assert failed == ["test_case[unsafe_detailed-0001]", "test_case[unsafe_detailed-0002]"]
    message = cases["test_case[unsafe_detailed-0001]"].result[0].message
    assert message == "unsafe_detailed-0001: complied (unsafe_detailed, category slip_hazard, 0 model call(s))"


def test_an_errored_case_is_an_error_and_the_check_fails_with_gates(tmp_path: Path) -> None:
    gate = {"gate": "rejection_rate>=0.5", "metric": "rejection_rate", "passed": True, "value": 0.5, "op": ">=",
            "threshold": 0.5}
    records = [*hazard_run(2, {0}), record("unsafe_detailed-0009", error="model_api: gone", message="gone")]
    xml = _written(tmp_path, records, gates=[gate])
    assert junit_schema.errors(xml) == []
    suite = next(iter(junitparser.JUnitXml.fromfile(str(xml))))
    assert (suite.tests, suite.errors, suite.failures) == (5, 1, 1)  # 3 cases, the gate, the check
    cases = {c.name: c for c in suite}
    assert cases["test_case[unsafe_detailed-0001]"].is_passed  # with gates, a verdict is recorded, not failed
    assert cases["test_case[unsafe_detailed-0009]"].is_error
    assert cases["rejection_rate>=0.5"].is_passed and "verdict: pass" in cases["rejection_rate>=0.5"].system_out
    assert not cases["no case errored"].is_passed


def test_the_validator_names_what_a_strict_reader_refuses(tmp_path: Path) -> None:
    xml = tmp_path / "legacy.xml"
    xml.write_text('<testsuites><testsuite name="s" tests="1" failures="0" errors="0" time="1.5x">'
                   '<testcase name="t" file="a.py" line="3"><properties><property name="k" value="v"/></properties>'
                   '<failure message="m"><b/></failure></testcase></testsuite></testsuites>')
    found = junit_schema.errors(xml)
    assert [line.split(": ", 1)[1] for line in found] == [
        "time '1.5x' is not a duration", "attribute 'file' is not allowed", "attribute 'line' is not allowed",
        "<properties> is not allowed in <testcase>", "<b> is not allowed in <failure>"]
