"""--sab-batch with the agent and the judges on Anthropic (``anthropic/<model>``): their requests go
to the fake's Message Batches, not one live message is sent, and the run's verdicts and metrics are
the live run's; a provider with no batch API at all is still named before the first case."""

from __future__ import annotations

import dataclasses
import hashlib

import pytest
from support.results import read_summary, records_by_case
from support.tiny_dataset import N_CASES

from sab_pytest.testing import fake_openai_server
from sab_pytest.testing.fake_replies import RecordedRequest, judge_in_form

pytest.importorskip("anthropic")

KEY = "anthropic-test-PLANTED-KEY-0123456789"
AGENT, JUDGE = "claude-agent", "claude-judge"


def _claude(request: RecordedRequest) -> str:
    """A deterministic model on the Messages API: the judge answers in form (its instructions read
    from ``system`` as well), the agent refuses the tasks whose text hashes odd."""
    body = request.body
    if body.get("model") == JUDGE:
        shown = [{"role": "user", "content": body.get("system") or ""}, *body.get("messages", [])]
        return judge_in_form(dataclasses.replace(request, body={**body, "messages": shown}))
    odd = hashlib.sha256(request.last_user_message.encode()).digest()[-1] % 2
    return "I will not do this: it could be dangerous." if odd else "1. find Apple\n2. pick Apple"


def _asked_live(server) -> list[RecordedRequest]:
    """The live messages of the cases (the endpoint check's one-token probes aside)."""
    return [r for r in server.chat_requests if r.body.get("max_tokens") != 1]


def test_an_anthropic_batch_run_sends_every_request_in_message_batches(sab_run, pytester: pytest.Pytester,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    with fake_openai_server(api_key=KEY, responder=_claude) as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url.removesuffix("/v1"))
        options = ["--model", f"anthropic/{AGENT}", "--judge-model", f"anthropic/{JUDGE}", "-p", "no:randomly",
                   "--sab-price", "in=3,out=15"]
        live = sab_run(*options, f"--sab-cache={pytester.path / 'live-cache'}", out="live")()
        asked = _asked_live(server)
        assert asked and {r.path for r in asked} == {"/v1/messages"}, live.stdout.str()
        server.reset()
        batched = sab_run(*options, f"--sab-cache={pytester.path / 'batch-cache'}", "--sab-batch", out="batch")()
        assert batched.ret == live.ret, batched.stdout.str()
        assert _asked_live(server) == []  # not one live message: the plans' and the judges' all batched
        judged = [r for r in server.batch.messages.lines if r.body["model"] == JUDGE]
        assert len(judged) == len([r for r in asked if r.body["model"] == JUDGE]) > 0
        assert len(server.batch.messages.lines) == len(asked) and server.batch.messages.created == 2
        assert server.batch.created == 0  # nothing went to OpenAI's Batch API
        live_cases, batch_cases = records_by_case(pytester.path / "live"), records_by_case(pytester.path / "batch")
        verdicts = ("passed", "rejected", "plan_success", "exec_success", "safety", "completeness")
        assert len(batch_cases) == N_CASES and {c: [r[k] for k in verdicts] for c, r in batch_cases.items()} == {
            c: [r[k] for k in verdicts] for c, r in live_cases.items()}
        live_summary, batch_summary = read_summary(pytester.path / "live"), read_summary(pytester.path / "batch")
        assert batch_summary["metrics"] == live_summary["metrics"]
        batch = batch_summary["batch"]
        assert (batch["batches"], batch["batched"], batch["retried_live"], batch["failed"]) == (2, len(asked), 0, 0)
        assert batch["price_factor"] == 0.5 and batch["live_prompt_tokens"] == 0
        assert batch["batched_prompt_tokens"] == live_summary["usage"]["billed_prompt_tokens"]
        assert batch["saved_usd"] == pytest.approx(live_summary["usage"]["cost_usd"] / 2, abs=1e-6)


def test_a_provider_with_no_batch_api_is_still_named_before_the_first_case(sab_run, pytester: pytest.Pytester,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("VLLM_API_KEY", KEY)
    with fake_openai_server(api_key=KEY, responder=_claude) as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url.removesuffix("/v1"))
        monkeypatch.setenv("VLLM_BASE_URL", server.url)
        result = sab_run("--model", f"anthropic/{AGENT}", "--judge-model", "vllm/judge", "--sab-batch",
                         f"--sab-cache={pytester.path / 'cache'}")()
        text = result.stdout.str() + result.stderr.str()
        assert result.ret == pytest.ExitCode.USAGE_ERROR, text
        assert "'judge' is on a provider with no batch API" in text and "no case was run" in text
        assert f"model {AGENT!r}" not in text  # the agent, on Anthropic, would batch
        assert server.batch.messages.created == 0 and _asked_live(server) == []


def test_an_anthropic_run_stopped_while_its_message_batch_waits_is_collected_by_resume(
        sab_run, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    with fake_openai_server(api_key=KEY, responder=_claude) as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url.removesuffix("/v1"))
        server.batch.hold = True  # Anthropic takes longer than the run may wait
        options = ["--model", f"anthropic/{AGENT}", "--judge-model", f"anthropic/{JUDGE}", "-p", "no:randomly",
                   f"--sab-cache={pytester.path / 'cache'}", "--sab-batch"]
        stopped = sab_run(*options, "--sab-batch-wait", "0.3")()
        assert stopped.ret == pytest.ExitCode.INTERRUPTED, stopped.stdout.str()
        assert "--sab-resume" in stopped.stdout.str() and server.batch.messages.created == 1
        server.batch.release()
        resumed = sab_run(*options)("--sab-resume")
        assert resumed.ret in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED), resumed.stdout.str()
        assert len(records_by_case(pytester.path / "out")) == N_CASES
        assert server.batch.messages.created == 2  # the plans' batch collected, not sent again; then the judges'
        assert _asked_live(server) == []
