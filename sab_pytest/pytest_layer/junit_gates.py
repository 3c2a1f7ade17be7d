"""The JUnit file's testcases of the run's own: a case's (its facts as ``system-out``, no path of
this machine, properties only in the legacy family; below, ``legacy_family`` and ``annotate_case``)
and the gates'.

pytest's default family (``xunit2``) is valid against ``junit-10.xsd``, the schema strict readers
(Jenkins' xUnit plugin) validate with, as long as no testcase carries ``<properties>``, ``file`` or
``line``: the per-case properties are attached only where the user asks for ``legacy``/``xunit1``.
The facts (``junit.case_facts``) go into the testcase's ``system-out``, added to pytest's writer on
the controller when the case's teardown report arrives, before pytest's own handler of that report
closes the testcase (the aggregator's hook runs first).

The gates, and the run-level check that decides the exit status with them, as test reports:
each reaches every reporter through pytest's own ``pytest_runtest_logreport`` hook (the terminal's
counts and short summary, pytest-html, json-report, JUnit; allure, which reads only items' own
hooks, through ``allure_gates``), under one stable node id per gate
(``sab::gate[<gate as written>]``, ``sab::check[errors]``). So a run that exits 1 because of a gate
shows a failed test wherever tests are shown, and its last line counts it.

The gates are decided on the controller at the session's end, after the last case's report; the
reports are sent as pytest's runner sends them (log start, call report, a teardown report that
closes the JUnit testcase, log finish), before ``LogXML.pytest_sessionfinish`` writes the file.
Under xdist only the controller sends them. In the JUnit file a gate keeps classname ``sab_gates``
and its text as name (set before the report, so brackets in a gate's text are not read as a
parametrization), as CI test widgets list them.
"""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import PurePosixPath
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import pytest

from sab_pytest.pytest_layer import activation, allure_gates, pytest_adapter, terminal
from sab_pytest.reports import junit
from sab_pytest.reports.table import gate_numbers

if TYPE_CHECKING:
    from sab_pytest.results import Summary


def log_xml(config: pytest.Config) -> Any:
    """pytest's JUnit writer of this run (``LogXML``, private: ``pytest_adapter``), None without
    ``--junitxml`` (or on an xdist worker, or should the private name move)."""
    return pytest_adapter.junit_writer(config)


def drop_earlier_attempts(config: pytest.Config, is_case: Callable[[str], bool]) -> int:
    """Keep one testcase per benchmark case in the JUnit file, its last attempt's: pytest writes a
    testcase for every attempt pytest-rerunfailures makes, and an attempt that was run again would
    read as a passed case. ``is_case`` is asked about a testcase's name. Returns how many were dropped.

    A finished testcase is only its XML element by now (pytest frees the rest), hence the element's
    classname and name as the key."""
    xml = log_xml(config)
    ordered = getattr(xml, "node_reporters_ordered", None)
    if not ordered:
        return 0
    keys = []
    for reporter in ordered:
        element = reporter.to_xml()
        keys.append((element.get("classname"), element.get("name")))
    last = {key: index for index, key in enumerate(keys)}
    kept = [r for index, (r, key) in enumerate(zip(ordered, keys, strict=True))
            if last[key] == index or not is_case(str(key[1]))]
    dropped = len(ordered) - len(kept)
    ordered[:] = kept
    return dropped


#: node ids of the reports: one per gate (its text as written), one for the run-level check
GATE_NODEID = "sab::gate[{gate}]"
ERRORS_NODEID = "sab::check[errors]"
#: the JUnit classname of the run-level check (the gates' is ``junit.GATES_CLASSNAME``)
CHECKS_CLASSNAME = "sab_checks"


def report_gates(config: pytest.Config, summary: Summary, redact: Any = str, part: str | None = None) -> list[str]:
    """Send one test report per gate, and with gates one for "no case errored"; returns the reasons
    of those that failed (what decided an exit status 1), in order.

    ``part`` names the part of a sharded run this is (``--sab-shard``, pytest-split, pytest-shard):
    a part holds only some of the cases, so its gates would be decided on a fraction of the evidence
    and each part could contradict the merged run. Its gates and check are then reported as skipped,
    with what this part alone shows, and decide nothing: ``sab merge`` decides them over every part."""
    gates = summary.get("gates") or []
    reasons = []
    if gates:
        terminal.before_late_reports(config)
    for gate in gates:
        outcome: _GateFailure | _Skip | None = None
        if part is not None:
            outcome = _Skip(redact(f"{part}: sab merge decides the gate over every part "
                                   f"(this part alone: {gate_numbers(gate)})"))
        elif not gate["passed"]:
            message = redact(f"gate failed: {gate['gate']}: {gate_numbers(gate)}")
            outcome = _GateFailure(message, redact("\n".join(junit.gate_lines(summary, gate))))
            reasons.append(message)
        _send(config, GATE_NODEID.format(gate=gate["gate"]), junit.GATES_CLASSNAME, str(gate["gate"]), outcome,
              junit.gate_properties(gate), out=redact("\n".join(junit.gate_lines(summary, gate))))
    if gates:
        errors = int(summary.get("errors") or 0)
        outcome = None
        if part is not None:
            outcome = _Skip(f"{part}: sab merge checks that no case of any part errored ({errors} here)")
        elif errors:
            message = (f"{errors} case(s) ended in an error: with gates, the run passes only when no case "
                       "errored (they are counted in the summary's errors)")
            outcome = _GateFailure(message, message)
            reasons.append(message)
        _send(config, ERRORS_NODEID, CHECKS_CLASSNAME, "no case errored", outcome, [("sab_errors", str(errors))],
              out=f"cases that ended in an error: {errors}")
    return reasons


def _send(config: pytest.Config, nodeid: str, classname: str, name: str, outcome: _GateFailure | _Skip | None,
          props: list[tuple[str, str]], out: str | None = None) -> None:
    """One gate's (or check's) reports; ``out``, its numbers, becomes the testcase's ``system-out``
    (passed, failed or skipped alike: in the strict schema it has no properties to carry them)."""
    location = (nodeid.split("::", 1)[0], None, nodeid.split("::", 1)[1])
    xml = log_xml(config)
    if xml is not None:
        reporter = xml.node_reporter(nodeid)  # attributes set before the report win over the node id's
        reporter.add_attribute("classname", classname)
        reporter.add_attribute("name", name)
    longrepr: tuple[str, int, str] | _GateFailure | None
    if isinstance(outcome, _Skip):  # pytest's form of a skip: (path, line, reason)
        status, longrepr = "skipped", ("sab", 0, f"Skipped: {outcome.reason}")
    else:
        status, longrepr = ("passed", None) if outcome is None else ("failed", outcome)
    if not legacy_family(config):
        props = []  # a testcase of the strict schema has no properties: its numbers are in the failure's text
    hook = config.hook
    hook.pytest_runtest_logstart(nodeid=nodeid, location=location)
    hook.pytest_runtest_logreport(report=pytest.TestReport(nodeid, location, {}, status, longrepr,  # type: ignore[arg-type]
                                                           "call", user_properties=props))
    if xml is not None and out is not None:  # after the failure or skip, which readers take first
        written = ET.Element("system-out")
        written.text = out
        xml.node_reporter(nodeid).nodes.append(written)
    # the teardown report closes the JUnit testcase; its properties are the ones the testcase keeps
    hook.pytest_runtest_logreport(report=pytest.TestReport(nodeid, location, {}, "passed", None, "teardown",
                                                           user_properties=props))
    hook.pytest_runtest_logfinish(nodeid=nodeid, location=location)
    if isinstance(outcome, _Skip):
        allure_gates.write_result(config, nodeid, name, status, outcome.reason)
    elif isinstance(outcome, _GateFailure):
        allure_gates.write_result(config, nodeid, name, status, outcome.reprcrash.message, outcome.text)
    else:
        allure_gates.write_result(config, nodeid, name, status)


class _Skip:
    """A gate a part of a sharded run reports without deciding it."""

    def __init__(self, reason: str) -> None:
        self.reason = reason


class _GateFailure:
    """A failed gate's ``longrepr``: a one-line message (the ``<failure message=...>``, as pytest
    takes it from an exception's ``reprcrash``) and its numbers, one per line (the element's text)."""

    def __init__(self, message: str, text: str) -> None:
        self.reprcrash = SimpleNamespace(path="sab", lineno=0, message=message)  # as pytest's ReprFileLocation
        self.text = text

    def __str__(self) -> str:
        return self.text

    def toterminal(self, tw: Any) -> None:
        tw.line(self.text)

def legacy_family(config: pytest.Config) -> bool:
    """Whether the run's JUnit family lets testcases carry properties (``xunit1``, ``legacy``).
    Read from the ini, so an xdist worker, which has no JUnit writer, answers as its controller."""
    return str(config.getini("junit_family")) in junit.LEGACY_FAMILIES


def junit_classname(nodeid: str) -> str | None:
    """The JUnit classname of a team's own case: its file's folder, dotted, then its suite
    (``own/kitchen.sab.yaml::...`` -> ``own.kitchen``), so CI readers group a suite's cases; None for
    any other test (pytest's own classname stands)."""
    module = nodeid.split("::", 1)[0]
    suffix = next((s for s in activation.CASE_FILE_SUFFIXES if module.endswith(s)), None)
    if suffix is None:
        return None
    path = PurePosixPath(module[: -len(suffix)])  # node ids separate folders with '/' on every system
    return ".".join([*path.parent.parts, path.name]).lstrip(".")


def annotate_case(config: pytest.Config, report: pytest.TestReport, facts: str | None) -> None:
    """On a case's teardown report (controller side): add ``facts`` (``junit.case_facts``) as its testcase's
    ``system-out``, make a skip's text its reason (pytest writes ``path:line: reason`` with the
    absolute path of the module that skipped), and in ``xunit1`` point ``file`` at the case module
    when the case's own location is outside the project (the dataset in ``$SAB_DATA`` or the
    user cache): every path in the file is then relative to the project."""
    xml = log_xml(config)
    if xml is None or report.when != "teardown":
        return
    reporter = xml.node_reporter(report)
    for node in getattr(reporter, "nodes", []):
        if node.tag == "skipped" and node.get("type") == "pytest.skip":
            node.text = node.get("message")
    if facts is not None:
        out = ET.Element("system-out")
        out.text = junit.xml_text(facts)
        reporter.append(out)
    attrs = getattr(reporter, "attrs", {})  # those of the case's earlier reports, which pytest keeps
    suite_class = junit_classname(report.nodeid)
    if suite_class is not None:  # a team's own case: its file's folder and suite, without the file's suffix
        attrs["classname"] = suite_class
    if legacy_family(config) and os.path.isabs(attrs.get("file") or (report.location or ("",))[0]):
        module = report.nodeid.split("::", 1)[0]
        attrs["file"] = module
        attrs.pop("line", None)  # the dataset's line, not the module's
        report.location = (module, None, report.location[2])
