"""pytest-rerunfailures on benchmark cases: a rerun of a case that has a verdict reports the same
outcome without calling the model again; a rerun of a case the infrastructure failed runs it again;
the results file and the summary count each case once, with its last outcome.

In this process, on the tiny dataset (``--sab-subset all``), with the plugin's ``--reruns``.
"""

from __future__ import annotations

import threading
import xml.etree.ElementTree as ET
import zlib
from collections import Counter
from typing import Any

import pytest
from support.results import read_records, read_summary
from support.tiny_dataset import N_CASES

from sab_pytest.testing import Reply

pytest.importorskip("pytest_rerunfailures")


def test_a_case_with_a_verdict_keeps_it_on_every_rerun(sab_run, pytester: pytest.Pytester) -> None:
    run = sab_run("--model", "refuse", "--sab-case-tests", "fail")
    xml = pytester.path / "sab.xml"
    result = run("--reruns", "2", f"--junitxml={xml}")
    outcomes = result.parseoutcomes()
    records = read_records(run.out)
    wrong = sum(not r["passed"] for r in records)
    assert wrong > 0 and "errors" not in outcomes  # the refusing agent fails the safe cases: verdicts, not crashes
    assert (outcomes["failed"], outcomes["rerun"]) == (wrong, 2 * wrong)
    assert sorted(r["case"]["id"] for r in records) == sorted({r["case"]["id"] for r in records})  # one line each
    summary = read_summary(run.out)
    assert len(records) == N_CASES and summary["errors"] == 0 and summary["cases"] == N_CASES
    testcases = list(ET.parse(xml).getroot().iter("testcase"))  # one per case, its last attempt
    assert len(testcases) == N_CASES and sum(tc.find("failure") is not None for tc in testcases) == wrong


class _FirstTimeFails:
    """The fake server's responder: the first request for one task in four is an HTTP 500, every
    other request is a plan; counts what it received."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.asked: Counter[str] = Counter()
        self.failed = 0

    def __call__(self, request) -> Reply | str:
        task = request.last_user_message
        with self.lock:
            first = task not in self.asked
            self.asked[task] += 1
            if first and zlib.crc32(task.encode()) % 4 == 0:
                self.failed += 1
                return Reply.error(500, "the server had an error")
        return "1. find Apple\n2. pick Apple\n3. find Fridge\n4. open Fridge\n5. put Fridge"


@pytest.fixture
def server_script() -> dict[str, Any]:
    return {"responder": _FirstTimeFails()}


def test_a_case_the_infrastructure_failed_runs_again_and_counts_once(sab_run, server,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    run = sab_run("--model", "openai/agent-x", "--judge-model", "rules", "--sab-no-exec", "--sab-retries", "0",
                  "--sab-case-tests", "fail", "--sab-max-failures", "100")
    result = run("--reruns", "2", server=server)
    flaky = server.responder.failed
    outcomes = result.parseoutcomes()
    records = read_records(run.out)
    assert flaky > 0 and outcomes.get("rerun", 0) >= flaky and "errors" not in outcomes
    assert len(records) == N_CASES and not any(r.get("error") for r in records)  # one line per case, the last
    assert read_summary(run.out)["errors"] == 0
    # each request asked once, the flaky ones twice: a verdict's rerun calls nothing
    asked = server.responder.asked
    assert sum(asked.values()) == len(asked) + flaky and max(asked.values()) == 2
