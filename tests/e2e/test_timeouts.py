"""pytest-timeout's ``--timeout`` on benchmark cases: the limit bounds each case, a case it ends is a
``timeout`` error naming the limit, and the requests it abandoned are counted in the run's usage.

In this process, on the tiny dataset, against the fake server (agent only, rule judge, no engine).
"""

from __future__ import annotations

import threading

import pytest
from support.calls import case_calls, is_preflight
from support.results import read_records, read_summary

from sab_pytest.testing import RecordedRequest, Reply, fake_openai_server

pytest.importorskip("pytest_timeout")

LIMIT_S = 1  # pytest-timeout's --timeout
SLOW_S = LIMIT_S + 1.5  # the server's time for a case's request: beyond the limit


class _FirstFast:
    """Answers the preflight and the first case request at once, every later request after
    ``SLOW_S``: one case has a verdict, the others reach the limit."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.served = 0

    def __call__(self, request: RecordedRequest) -> Reply | None:
        if is_preflight(request):
            return None
        with self.lock:
            self.served += 1
            first = self.served == 1
        return None if first else Reply.slow(SLOW_S, "1. find Apple\n2. pick Apple")


def test_a_case_cut_at_the_limit_is_a_timeout_error_and_its_request_is_counted(
        sab_run, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-timeouts")
    with fake_openai_server(responder=_FirstFast()) as server:
        run = sab_run("--model", "agent-x", "--judge-model", "rules", "--sab-no-exec", "--sab-sample", "3",
                      "--sab-timeout", "30", "--sab-retries", "0", f"--sab-base-url={server.url}",
                      f"--sab-judge-base-url={server.url}")
        result = run(f"--timeout={LIMIT_S}")
        received = len(case_calls(server.chat_requests))
    records = read_records(run.out)
    cut = [r for r in records if r.get("error")]
    assert len(records) == 3 and len(cut) == 2, [r.get("error") for r in records]
    for record in cut:
        assert record["error_kind"] == "timeout"
        assert f"pytest-timeout's --timeout {LIMIT_S} s spent" in record["error"]
    assert result.parseoutcomes()["errors"] == 2
    usage = read_summary(run.out)["usage"]
    # a cut case's request was sent (abandoned at the limit), or it never got a call slot in time (none
    # sent): the run's requests add up to what the server received either way
    assert usage["calls"] == 1 and 1 <= usage["abandoned_calls"] <= 2
    assert usage["calls"] + usage["abandoned_calls"] == received == usage["api_calls"]
    assert usage["failed_calls"] == 0  # the server failed nothing: the limit cut the calls
