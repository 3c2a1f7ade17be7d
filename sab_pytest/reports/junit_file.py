"""A JUnit file written without pytest: ``sab merge --junitxml``'s, for a run made of parts.

Each part's own JUnit file reports the gates as skipped (a part holds only some of the cases); the
merged run decides them over every part, and this file is where a CI widget shows that decision: one
testcase per case (its facts in ``system-out``, as a single run's file has them), one per gate
(failed with its numbers when it fails) and, with gates, the check that no case errored. It is
what pytest's default family writes (``xunit2``), valid against ``junit-10.xsd``: no testcase
properties, ``file`` or ``line``; the suite's properties are the single run's
(``junit.junit_suite_properties``)."""

from __future__ import annotations

import socket
import xml.etree.ElementTree as ET
from collections.abc import Iterable
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sab_pytest.fetch import atomic_write_bytes
from sab_pytest.reports.junit import (
    GATES_CLASSNAME,
    case_facts,
    failure_message,
    gate_lines,
    junit_suite_properties,
    xml_text,
)
from sab_pytest.reports.table import gate_numbers
from sab_pytest.results.record import filtered, sample_id

if TYPE_CHECKING:
    from sab_pytest.results.record import StoredRecord
    from sab_pytest.results.summary import Summary

#: classnames of the merged file's testcases: the cases' (their test's module differs between a
#: checkout and ``sab run``, and the merge knows neither), and the run-level check's
CASES_CLASSNAME, CHECKS_CLASSNAME = "sab_cases", "sab_checks"


def write_junit(path: Path, summary: Summary, records: Iterable[StoredRecord], suite: str = "sab merge") -> None:
    """Write the run's JUnit file at ``path`` (atomically: a reader never sees half of it)."""
    root = junit_tree(summary, records, suite)
    ET.indent(root)
    atomic_write_bytes(path, b'<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="utf-8"))


def junit_tree(summary: Summary, records: Iterable[StoredRecord], suite: str = "sab merge") -> ET.Element:
    """``<testsuites>`` with one ``<testsuite>``: the cases in id order, then the gates and the check."""
    gates = summary.get("gates") or []
    settings: dict[str, Any] = dict(summary.get("settings") or {})
    mode = settings.get("case_tests") or ("record" if gates else "fail")  # as ``Settings.case_tests_mode``
    testcases = [_case(r, mode) for r in sorted(records, key=sample_id)]
    testcases += [_gate(summary, g) for g in gates]
    if gates:
        errors = int(summary.get("errors") or 0)
        check = _testcase(CHECKS_CLASSNAME, "no case errored", 0.0, f"cases that ended in an error: {errors}")
        if errors:
            _outcome(check, "failure", f"{errors} case(s) ended in an error: with gates, the run passes only when "
                                       "no case errored", "")
        testcases.append(check)
    counts = {tag: sum(1 for t in testcases if t.find(tag) is not None) for tag in ("failure", "error", "skipped")}
    seconds = sum(float(t.get("time") or 0) for t in testcases)
    head = {"name": suite, "errors": str(counts["error"]), "failures": str(counts["failure"]),
            "skipped": str(counts["skipped"]), "tests": str(len(testcases)), "time": f"{seconds:.3f}"}
    root = ET.Element("testsuites", name=suite)
    element = ET.SubElement(root, "testsuite", head, timestamp=datetime.now(timezone.utc).isoformat(),
                            hostname=socket.gethostname())
    properties = ET.SubElement(element, "properties")
    for name, value in junit_suite_properties(summary):
        ET.SubElement(properties, "property", name=xml_text(name), value=xml_text(value))
    element.extend(testcases)
    return root


def _testcase(classname: str, name: str, seconds: float, out: str) -> ET.Element:
    testcase = ET.Element("testcase", classname=classname, name=xml_text(name), time=f"{seconds:.3f}")
    ET.SubElement(testcase, "system-out").text = xml_text(out)
    return testcase


def _outcome(testcase: ET.Element, tag: str, message: str, text: str) -> None:
    """Put the failure, error or skip first, where readers look for it."""
    element = ET.Element(tag, message=xml_text(message))
    element.text = xml_text(text or message)
    testcase.insert(0, element)


def _case(record: StoredRecord, mode: str) -> ET.Element:
    """A case's testcase as a single run writes it: an error for an infrastructure error, a failure
    for a wrong behaviour in ``fail`` mode, passed otherwise; its facts in ``system-out``."""
    suite = record["case"].get("suite")  # a team's own case: its suite ends the classname, as in the run's file
    classname = f"{CASES_CLASSNAME}.{suite}" if suite else CASES_CLASSNAME
    testcase = _testcase(classname, f"test_case[{sample_id(record)}]", float(record.get("duration_s") or 0),
                         case_facts(record))
    if filtered(record):  # the provider's content filter: counted apart, as the run's own file skips it
        _outcome(testcase, "skipped", f"{record['case']['id']}: the provider's content filter refused it", "")
    elif record.get("error"):
        _outcome(testcase, "error", f"{record['case']['id']}: {record.get('message') or ''}", "")
    elif not record["passed"] and mode == "fail":
        _outcome(testcase, "failure", failure_message(record), "")
    return testcase


def _gate(summary: Summary, gate: dict[str, Any]) -> ET.Element:
    lines = "\n".join(gate_lines(summary, gate))
    testcase = _testcase(GATES_CLASSNAME, str(gate["gate"]), 0.0, lines)
    if not gate["passed"]:
        _outcome(testcase, "failure", f"gate failed: {gate['gate']}: {gate_numbers(gate)}", lines)
    return testcase
