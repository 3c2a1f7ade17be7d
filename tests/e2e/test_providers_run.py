"""Whole runs with named providers against the fake server (in this process): every request of
``--model azure/<d>`` in Azure OpenAI's URL shape with its key in ``api-key``; and each role on its
own, the agent on an OpenAI-compatible URL and the judge on Azure."""

from __future__ import annotations

from typing import Any

import pytest
from support.benchmark import RunSetup
from support.results import read_records, read_summary
from support.tiny_dataset import N_CASES

from sab_pytest.testing import FakeOpenAIServer, Reply
from sab_pytest.testing.fake_azure import content_filtered, is_azure

KEY = "azure-e2e-PLANTED-KEY-0123456789"


def responder(request) -> Reply | str:
    """Agents plan; judges judge; the prompt of one case trips the content filter."""
    text = "\n".join(str(m.get("content")) for m in request.messages)
    if request.body.get("model") == "judge-d":
        if "REFUSED" in text and "COMPLIED" in text:
            return "**COMPLIED**"
        if "completeness, safety" in text:
            return "Every part is done.\nRating: [[1, 1]]"
        return "The steps do the task.\nRating: [[success]]"
    if "Throw" in request.last_user_message:
        return Reply(status=400, body=content_filtered())
    return "1. find Apple\n2. pick Apple\n3. find Fridge\n4. open Fridge\n5. put Fridge"


@pytest.fixture
def server_script() -> dict[str, Any]:
    return {"responder": responder, "api_key": KEY}


@pytest.fixture
def run_setup(server: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch, pytester: pytest.Pytester) -> RunSetup:
    """Azure's variables point at the fake's root; OpenAI's key is the same (the fake has one key)."""
    monkeypatch.setenv("AZURE_OPENAI_ENDPOINT", server.url.removesuffix("/v1"))
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", KEY)
    monkeypatch.setenv("OPENAI_API_VERSION", "2024-10-21")
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    return RunSetup(("--sab-protocol", "sab", "--sab-no-exec", "--sab-retries", "1", "--sab-timeout", "5",
                     f"--sab-cache={pytester.path / 'cache'}"))


def test_azure_run_sends_every_request_in_azures_shape(run, server: FakeOpenAIServer) -> None:
    result = run("--model", "azure/agent-d", "--judge-model", "azure/judge-d", "--sab-repeat", "2")  # 38 cases
    records = read_records(run.out)
    assert len(records) == 2 * N_CASES >= 20
    requests = server.chat_requests
    assert len(requests) >= 2 * N_CASES and all(is_azure(r) for r in requests), {r.path for r in requests}
    assert not any("authorization" in r.headers for r in server.requests)
    paths = {r.path for r in requests}
    assert paths == {"/openai/deployments/agent-d/chat/completions", "/openai/deployments/judge-d/chat/completions"}
    # the content filter's refusal is the case's own named outcome, not an endpoint failure
    filtered = [r for r in records if (r.get("error") or "").startswith("content_filter")]
    assert [r["error_kind"] for r in filtered] == ["content_filter"] * 2  # the one case, twice
    summary = read_summary(run.out)
    # counted apart: neither an error (no error kind, the no-error check holds) nor a verdict (a skipped test)
    assert summary["content_filtered"] == 2 and summary["errors"] == 0 and summary["error_kinds"] == {}
    assert not summary.get("stopped") and "refused by the provider's content filter: 2" in result.stdout.str()
    result.assert_outcomes(skipped=2, passed=result.parseoutcomes().get("passed", 0),
                           failed=result.parseoutcomes().get("failed", 0))
    assert summary["model"] == "azure/agent-d" and summary["judge"] == "azure/judge-d"
    assert KEY not in (run.out / "sab-results.jsonl").read_text()


def test_each_role_on_its_own_provider(run, server: FakeOpenAIServer) -> None:
    """The agent at ``--base-url`` in OpenAI's shape, the judge at Azure's endpoint in Azure's."""
    result = run("--model", "agent-x", f"--sab-base-url={server.url}", "--judge-model", "azure/judge-d")
    agent = [r for r in server.chat_requests if r.body.get("model") == "agent-x"]
    judge = [r for r in server.chat_requests if r.body.get("model") == "judge-d"]
    assert agent and judge and len(agent) + len(judge) == len(server.chat_requests)
    assert all(r.path == "/v1/chat/completions" and r.authorization == f"Bearer {KEY}" for r in agent)
    assert all(is_azure(r) for r in judge)
    summary = read_summary(run.out)
    usage = summary["usage"]  # counted per role: each endpoint's check is one request more, the filtered one no call
    assert (usage["calls_by_agent"] + 2, usage["calls_by_judge"] + 1) == (len(agent), len(judge))
    assert usage["calls_by_agent"] + usage["calls_by_judge"] == usage["calls"]
    assert summary["providers"]["agent"] == "openai-compatible"
    assert set(summary["providers"]) > {"agent"} and {p for r, p in summary["providers"].items() if r != "agent"} == {
        "azure"}
    result.stdout.fnmatch_lines([f"calls by role: agent {usage['calls_by_agent']} (openai-compatible)   "
                                 f"judge {usage['calls_by_judge']} (azure)"])
