"""The gates in an allure results folder (allure-pytest's ``--alluredir``).

allure-pytest builds a test's result from the hooks of an item it saw start (its setup, call and
teardown), so a report sent through ``pytest_runtest_logreport`` alone, as the gates are
(``junit_gates``), never reaches it, and a run that exits 1 on a gate would show only passing cases
in allure. Where the run writes allure results, each gate is therefore written there too, as allure's
own result file (the allure 2 result format: one ``<uuid>-result.json`` per test), under the gate's
node id. Only the process that decides the gates writes them (the xdist controller, or a run without
workers); nothing is written where allure-pytest is not in use.
"""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from pathlib import Path

import pytest

#: allure-pytest's destination of ``--alluredir``
ALLURE_DEST = "allure_report_dir"


def folder(config: pytest.Config) -> Path | None:
    """The allure results folder of this run, None where allure-pytest is not writing one."""
    where = getattr(config.option, ALLURE_DEST, None)
    return Path(where) if where else None


def write_result(config: pytest.Config, nodeid: str, name: str, status: str, message: str = "",
                 trace: str = "") -> None:
    """One gate as an allure result: ``status`` is pytest's outcome ("passed", "failed", "skipped"),
    which are allure's words too. A folder that cannot be written loses the allure entry only: the
    summary, JUnit file and exit status are already decided, so the run says so and goes on."""
    where = folder(config)
    if where is None:
        return
    now = int(time.time() * 1000)
    test_id = hashlib.md5(nodeid.encode(), usedforsecurity=False).hexdigest()  # stable across runs: allure's history
    result = {
        "uuid": str(uuid.uuid4()), "historyId": test_id, "testCaseId": test_id, "fullName": nodeid, "name": name,
        "status": status, "stage": "finished", "start": now, "stop": now,
        "statusDetails": {"message": message, "trace": trace} if message else {},
        "labels": [{"name": "suite", "value": "sab gates"}, {"name": "framework", "value": "sab-pytest"}],
    }
    try:
        where.mkdir(parents=True, exist_ok=True)
        (where / f"{result['uuid']}-result.json").write_text(json.dumps(result), encoding="utf-8")
    except OSError as exc:
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(f"sab: warning: the gate {name!r} could not be written to --alluredir {where}: {exc}")
