"""The gates as testcases of pytest's own JUnit file (``--junitxml``): classname ``sab_gates``, name
the gate as written, a ``<failure>`` with its numbers when it fails. CI systems (GitLab's and
Jenkins' test widgets) show the testcases of that file, so with gates they show the gates, and a
run that exits 1 shows at least one failure.

The gates are decided on the controller at the session's end, after the last case's report; they
reach the file as synthetic ``TestReport``s (a call report, then a teardown report that closes the
testcase, as pytest's runner sends them) handed to the ``LogXML`` plugin before its
``pytest_sessionfinish`` writes the file. Under xdist the plugin lives on the controller only, so
the same path serves both. They are not sent through the ``pytest_runtest_logreport`` hook: the
terminal's counts are the cases', and the gates have their own lines in the table.
"""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import pytest

from sab_pytest.reports import junit
from sab_pytest.reports.table import gate_numbers

if TYPE_CHECKING:
    from sab_pytest.results import Summary


def log_xml(config: pytest.Config) -> Any:
    """pytest's JUnit writer of this run (``_pytest.junitxml.LogXML``), None without ``--junitxml``
    (or on an xdist worker, or should the private name move)."""
    try:
        from _pytest.junitxml import xml_key
    except ImportError:  # pragma: no cover - private API moved
        return None
    return config.stash.get(xml_key, None)


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


def add_gate_testcases(config: pytest.Config, summary: Summary, redact: Any = str) -> int:
    """One testcase per gate in the JUnit file; returns how many were added (0 without the file)."""
    xml = log_xml(config)
    if xml is None:
        return 0
    gates = summary.get("gates") or []
    for index, gate in enumerate(gates):
        nodeid = f"{junit.GATES_CLASSNAME}::gate{index}"  # never parsed for the names: set below
        location = (junit.GATES_CLASSNAME, None, str(gate["gate"]))
        reporter = xml.node_reporter(nodeid)
        # attributes set before the report win over the ones pytest derives from the node id, so a
        # gate written with brackets or slashes ('rejection_rate[fire_hazard]>=0.8') keeps its text
        reporter.add_attribute("classname", junit.GATES_CLASSNAME)
        reporter.add_attribute("name", str(gate["gate"]))
        props = junit.gate_properties(gate)
        if gate["passed"]:
            call = pytest.TestReport(nodeid, location, {}, "passed", None, "call")
        else:
            message = redact(f"gate failed: {gate['gate']}: {gate_numbers(gate)}")
            failure = _GateFailure(message, redact("\n".join(junit.gate_lines(summary, gate))))
            call = pytest.TestReport(nodeid, location, {}, "failed", failure, "call")  # type: ignore[arg-type]
        xml.pytest_runtest_logreport(call)
        # the teardown report closes the testcase; its properties are the ones the testcase keeps
        xml.pytest_runtest_logreport(pytest.TestReport(nodeid, location, {}, "passed", None, "teardown",
                                                       user_properties=props))
    return len(gates)


class _GateFailure:
    """A failed gate's ``longrepr``: a one-line message (the ``<failure message=...>``, as pytest
    takes it from an exception's ``reprcrash``) and its numbers, one per line (the element's text)."""

    def __init__(self, message: str, text: str) -> None:
        self.reprcrash = SimpleNamespace(message=message)
        self.text = text

    def __str__(self) -> str:
        return self.text

    def toterminal(self, tw: Any) -> None:
        tw.line(self.text)
