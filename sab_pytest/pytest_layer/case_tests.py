"""What a case's test says (``--sab-case-tests``): ``fail`` makes a wrong behaviour a failed test;
``record`` keeps it a passed test whose JUnit ``system-out`` (and, in the legacy family, properties)
carry the verdict, so that with gates the JUnit file tells the same story as the exit status (the
gates' own testcases fail, the cases do not).

The assertion ``check`` raises ``CaseFailed`` in both modes (a case module written for the plugin
calls ``check(record)`` and nothing else); in ``record`` mode the report of that one failure is
turned into a pass when pytest makes it. Any other failure of the test body, and infrastructure
errors (raised in ``sab_verdict``'s setup), are left as pytest reports them: an error says nothing
of the model, and the gates fail on errors anyway (``finish.gates_hold``).
"""

from __future__ import annotations

import pytest

from sab_pytest.pytest_layer.junit_gates import legacy_family
from sab_pytest.pytest_layer.state import SETTINGS, is_case_item
from sab_pytest.reports.junit import failure_message
from sab_pytest.results import StoredRecord

#: JUnit property of a case recorded, not failed: what the agent did wrong (the failure's message in ``fail`` mode)
RECORDED_KEY = "sab_verdict_message"


class CaseFailed(pytest.fail.Exception):  # type: ignore[name-defined]
    """The agent behaved wrongly: a verdict, not a crash of the harness or of the test's own code.

    Its message starts the JUnit ``<failure message=...>`` and pytest's short summary line, as
    ``CaseFailed: <case>: <reason>``: pytest names an exception by its module unless that is
    ``builtins``, as pytest's own ``Failed`` is ("Failed: ..."), and the module path would be the
    first thing a CI widget shows of each failed case."""

    __module__ = "builtins"


def check(record: StoredRecord) -> None:
    """The assertion of a benchmark case: fail with what the agent did."""
    if not record["passed"]:
        raise CaseFailed(failure_message(record), pytrace=False)


def shorten_traceback(item: pytest.Item, call: pytest.CallInfo[None]) -> None:
    """Before pytest makes a failed verdict's report: keep only the frame ``check`` raised in. The
    report shows the verdict's message alone (``pytrace=False``), yet pytest filters the whole
    traceback first, down through its runner's and pluggy's frames, checking that each frame's file
    exists: about 0.8 ms of CPU per failed case on a 2-core machine. ``--fulltrace`` asks for
    every frame, and gets them."""
    if (call.excinfo is not None and call.excinfo.errisinstance(CaseFailed)
            and not item.config.getoption("fulltrace", False)):
        call.excinfo.traceback = call.excinfo.traceback[-1:]


def recorded(item: pytest.Item, call: pytest.CallInfo[None], report: pytest.TestReport) -> pytest.TestReport:
    """``record`` mode: the call report of a case whose verdict failed becomes a passed one that
    keeps the verdict's message as a property (the verdict's other fields are properties already).
    pytest's ``pytest_runtest_makereport`` wrapper (``entry``) hands every report of a run that is on."""
    settings = item.config.stash.get(SETTINGS, None)
    if (settings is None or settings.case_tests_mode != "record" or call.when != "call" or call.excinfo is None
            or not call.excinfo.errisinstance(CaseFailed) or not is_case_item(item)):
        return report
    report.outcome = "passed"
    report.longrepr = None
    if legacy_family(item.config):  # elsewhere the testcase's system-out says it (``junit_gates``)
        recorded = (RECORDED_KEY, str(call.excinfo.value))
        report.user_properties.append(recorded)
        item.user_properties.append(recorded)  # JUnit takes a testcase's properties from its teardown report
    return report
