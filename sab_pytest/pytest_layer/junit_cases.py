"""A case's testcase in the JUnit file, as every reader takes it: its facts as ``system-out``, no
path of this machine, and properties only in the legacy family.

pytest's default family (``xunit2``) is valid against ``junit-10.xsd``, the schema strict readers
(Jenkins' xUnit plugin) validate with, as long as no testcase carries ``<properties>``, ``file`` or
``line``: the per-case properties are attached only where the user asks for ``legacy``/``xunit1``
(``legacy``). The facts (``junit.case_facts``) go into the testcase's ``system-out``, added to
pytest's writer on the controller when the case's teardown report arrives, before pytest's own
handler of that report closes the testcase (the aggregator's hook runs first)."""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET

import pytest

from sab_pytest.pytest_layer.junit_gates import log_xml
from sab_pytest.reports.junit import LEGACY_FAMILIES, xml_text


def legacy(config: pytest.Config) -> bool:
    """Whether the run's JUnit family lets testcases carry properties (``xunit1``, ``legacy``).
    Read from the ini, so an xdist worker, which has no JUnit writer, answers as its controller."""
    return str(config.getini("junit_family")) in LEGACY_FAMILIES


def annotate(config: pytest.Config, report: pytest.TestReport, facts: str | None) -> None:
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
        out.text = xml_text(facts)
        reporter.append(out)
    attrs = getattr(reporter, "attrs", {})  # those of the case's earlier reports, which pytest keeps
    if legacy(config) and os.path.isabs(attrs.get("file") or (report.location or ("",))[0]):
        module = report.nodeid.split("::", 1)[0]
        attrs["file"] = module
        attrs.pop("line", None)  # the dataset's line, not the module's
        report.location = (module, None, report.location[2])
