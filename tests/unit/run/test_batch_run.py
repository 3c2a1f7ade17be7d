"""--sab-batch on the fake server: the judges and a text planner's calls go through the Batch API in
rounds, the records, metrics and gates are the live run's, and a run stopped while its batches wait
ends with its own message and exit status; run again with --sab-resume it collects them, sending
nothing twice."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
from support.results import read_records, read_summary
from support.tiny_dataset import N_CASES

from sab_pytest.reports.html.report import _metadata as html_metadata
from sab_pytest.reports.inspect.log import ending as inspect_ending
from sab_pytest.results.cost import walk_calls
from sab_pytest.run.breaker import RunState
from sab_pytest.testing import fake_openai_server
from sab_pytest.testing.fake_replies import judge_in_form

KEY = "fake-key-0123456"
VOLATILE = {"latency_s", "api_latency_s", "started_at", "finished_at", "duration_s", "run_id", "timings", "at",
            "queued_s", "wall_s"}


def _respond(request):
    """A deterministic model: the agent refuses about half the tasks (by a hash of the task's prompt:
    a live request streams, a batched one does not, so the whole body differs), the judge model answers in form."""
    if request.body.get("model") == "judge-x":
        return judge_in_form(request)
    digest = hashlib.sha256(request.last_user_message.encode()).digest()
    return "I will not do this: it could be dangerous." if digest[0] % 2 else "1. find Apple\n2. pick Apple"


def _stable(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _stable(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [_stable(v) for v in value]
    return value


def _options(pytester: pytest.Pytester, server, cache: str) -> list[str]:
    return [f"--sab-cache={pytester.path / cache}", "--model", "agent-x", "--judge-model", "judge-x",
            f"--sab-base-url={server.url}", f"--sab-judge-base-url={server.url}", "-p", "no:randomly",
            "--sab-gate", "rejection_rate>=0.1", "--sab-price", "in=1,out=2"]


def _without_batched(records: list[Any]) -> list[Any]:
    """The records without each call's ``batched`` flag (the one field a batch run's records differ by)."""
    def strip(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if k != "batched"}
        return [strip(v) for v in value] if isinstance(value, list) else value

    return [strip(r) for r in records]


def _live_requests(server) -> list[Any]:
    return [r for r in server.chat_requests if r.body.get("max_tokens") != 1]  # not the endpoint check


def test_a_batch_run_gives_the_live_run_s_records_with_no_live_request(sab_run, pytester: pytest.Pytester,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with fake_openai_server(responder=_respond) as server:
        live = sab_run(*_options(pytester, server, "live-cache"), out="live")()
        live_requests = len(_live_requests(server))
        server.reset()
        server.responder = _respond
        batched = sab_run(*_options(pytester, server, "batch-cache"), "--sab-batch", out="batch")()
        assert batched.ret == live.ret, batched.stdout.str()
        assert _live_requests(server) == []  # not one live request: the agent's and the judges' all batched
        assert len(server.batch.lines) == live_requests
        assert server.batch.created == 2  # one round of plans, one of judges (one model each)
        live_records = sorted(read_records(pytester.path / "live"), key=lambda r: r["case"]["id"])
        batch_records = sorted(read_records(pytester.path / "batch"), key=lambda r: r["case"]["id"])
        assert len(batch_records) == N_CASES
        assert _stable(_without_batched(batch_records)) == _stable(_without_batched(live_records))
        calls = [c for r in batch_records for c in walk_calls(r) if not c["cache_hit"]]
        assert calls and all(c["batched"] for c in calls)  # each call says a batch answered it
        assert not [c for r in live_records for c in walk_calls(r) if c["batched"]]
        live_summary, batch_summary = read_summary(pytester.path / "live"), read_summary(pytester.path / "batch")
        assert batch_summary["metrics"] == live_summary["metrics"]
        assert batch_summary["gates"] == live_summary["gates"]
        journal = [json.loads(x) for x in (pytester.path / "batch" / "sab-batches.jsonl").read_text().splitlines()]
        assert len([e for e in journal if "batch" in e]) == 2 and len([e for e in journal if "collected" in e]) == 2
        assert "sab: batch:" in batched.stdout.str()
        batch = batch_summary["batch"]
        assert (batch["batches"], batch["batched"], batch["retried_live"], batch["failed"]) == (2, live_requests, 0, 0)
        assert batch["live_prompt_tokens"] == 0 and batch["batched_prompt_tokens"] == live_summary["usage"][
            "billed_prompt_tokens"] == batch_summary["usage"]["billed_prompt_tokens"]
        # priced at $1 / $2 per 1M tokens: the batch costs half, and says what it saved
        assert batch["saved_usd"] == pytest.approx(live_summary["usage"]["cost_usd"] / 2, abs=1e-6)
        assert batch_summary["usage"]["cost_usd"] == pytest.approx(live_summary["usage"]["cost_usd"] / 2, abs=1e-6)
        assert f"{live_requests} request(s) answered in 2 batch(es), 0 retried live, 0 failed" in batched.stdout.str()
        from sab_pytest.reports.junit import junit_suite_properties

        props = dict(junit_suite_properties(batch_summary))  # JUnit too keeps batched and live tokens apart
        assert props["sab_batch_batched_prompt_tokens"] == str(batch["batched_prompt_tokens"])
        assert props["sab_batch_live_prompt_tokens"] == "0"
        # per role and model: every billed call batched, its tokens apart, its dollars at half the live run's
        live_rows = {(r["role"], r["model"]): r for r in live_summary["usage"]["by_model"]}
        rows = {(r["role"], r["model"]): r for r in batch_summary["usage"]["by_model"]}
        assert set(rows) == set(live_rows) == {("agent", "agent-x"), ("judge", "judge-x")}
        for key, row in rows.items():
            name = " ".join(key)
            assert live_rows[key]["batched_calls"] == 0 and "batch_price" not in live_rows[key]
            assert row["batched_calls"] == row["calls"] - row["cache_hits"] > 0 and row["batch_price"] == 0.5
            assert (row["batched_prompt_tokens"], row["batched_completion_tokens"]) == (
                row["prompt_tokens"], row["completion_tokens"]) == (
                live_rows[key]["prompt_tokens"], live_rows[key]["completion_tokens"])
            assert row["batched_cost_usd"] == row["cost_usd"] == pytest.approx(live_rows[key]["cost_usd"] / 2,
                                                                                 abs=1e-6)
            assert row["batch_saved_usd"] == pytest.approx(row["batched_cost_usd"], abs=1e-6)
            assert props[f"sab_batched_tokens_in {name}"] == str(row["batched_prompt_tokens"])
            assert props[f"sab_batched_tokens_out {name}"] == str(row["batched_completion_tokens"])
            assert props[f"sab_batched_cost_usd {name}"] == f"{row['batched_cost_usd']:.6f}"
            line = (f"cost {key[0]} {key[1]}: {row['calls']} calls, {row['prompt_tokens']} tokens in / "
                    f"{row['completion_tokens']} out billed, ${row['cost_usd']:.4f}; of them batched: "
                    f"{row['batched_calls']} calls, {row['batched_prompt_tokens']} tokens in / "
                    f"{row['batched_completion_tokens']} out at 0.5x the price, ${row['batched_cost_usd']:.4f}")
            assert line in batched.stdout.str()  # the terminal's table
            assert line in html_metadata(batch_summary)  # the HTML report's row
        assert "sab_batched_calls agent agent-x" not in dict(junit_suite_properties(live_summary))
        # the Inspect log's results metadata carries the summary's usage, rows and all
        ending = inspect_ending(batch_summary, [], "2026-01-01T00:00:00+00:00")
        assert ending.results is not None and ending.results.metadata["usage"]["by_model"] == batch_summary[
            "usage"]["by_model"]


def test_a_run_stopped_while_its_batches_wait_is_collected_by_resume(sab_run, pytester: pytest.Pytester,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with fake_openai_server(responder=_respond) as server:
        server.batch.hold = True  # the provider takes longer than the run may wait
        options = [*_options(pytester, server, "cache"), "--sab-batch"]
        stopped = sab_run(*options, "--sab-batch-wait", "0.3")()
        text = stopped.stdout.str()
        assert stopped.ret == pytest.ExitCode.INTERRUPTED, text
        assert "submitted, not finished" in text and "--sab-resume" in text
        assert read_records(pytester.path / "out") == [] and server.batch.created == 1
        server.batch.release()
        resumed = sab_run(*options)("--sab-resume")
        assert resumed.ret in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED), resumed.stdout.str()
        records = read_records(pytester.path / "out")
        assert sorted(r["case"]["id"] for r in records) == sorted({r["case"]["id"] for r in records})  # none twice
        assert len(records) == N_CASES  # none lost
        assert server.batch.created == 2  # the plans' batch collected, not sent again; then the judges'
        assert _live_requests(server) == []


def test_a_server_without_a_batch_api_is_named_before_the_first_case(sab_run, pytester: pytest.Pytester,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with fake_openai_server(responder=_respond, batch=False) as server:
        result = sab_run(*_options(pytester, server, "cache"), "--sab-batch")()
        assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
        assert "has no Batch API" in result.stdout.str() + result.stderr.str()
        assert read_records(pytester.path / "out") == []



@pytest.mark.parametrize("retry", ["live", "error"])
def test_lines_of_the_error_file_are_retried_live_or_named(sab_run, pytester: pytest.Pytester,
                                                           monkeypatch: pytest.MonkeyPatch, retry: str) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with fake_openai_server(responder=_respond) as server:
        failing: dict[str, str] = {}  # custom_id -> the request's last message

        def fail(custom_id: str, body: dict[str, Any]) -> bool:  # the judges' requests of two cases
            if body.get("model") == "judge-x" and (custom_id in failing or len(failing) < 2):
                failing[custom_id] = body["messages"][-1]["content"]
                return True
            return False

        server.batch.fail = fail
        spent: list[float] = []  # the budget's total of the run (all its spending), read as the run ends
        keep_total = RunState.remove
        monkeypatch.setattr(RunState, "remove", lambda state: (spent.append(state.spent()), keep_total(state)))
        result = sab_run(*_options(pytester, server, "cache"), "--sab-batch", "--sab-batch-retry", retry,
                         "--sab-budget", "100")()
        records = read_records(pytester.path / "out")
        summary = read_summary(pytester.path / "out")
        batch = summary["batch"]
        assert len(records) == N_CASES and len(failing) == 2, result.stdout.str()
        # the budget counted each call once: a request retried live by the gate as it was made (at the full
        # price), a batched one as its case finished (at the batch price): what the summary says the run cost
        assert spent and spent[-1] == pytest.approx(summary["usage"]["cost_usd"], abs=1e-5)
        judge = next(r for r in summary["usage"]["by_model"] if r["role"] == "judge")
        if retry == "live":  # exactly the failed requests, asked live once each
            assert sorted(r.messages[-1]["content"] for r in _live_requests(server)) == sorted(failing.values())
            assert (batch["retried_live"], batch["failed"]) == (2, 0)
            assert not [r for r in records if r.get("error")]
            # the two live calls at the full price, the judge's other calls at half of it
            live = [c for r in records for c in walk_calls(r) if c["role"] == "judge" and not c["batched"]]
            assert len(live) == 2 and judge["batched_calls"] == judge["calls"] - judge["cache_hits"] - 2
            live_in, live_out = sum(c["prompt_tokens"] for c in live), sum(c["completion_tokens"] for c in live)
            assert (judge["prompt_tokens"] - judge["batched_prompt_tokens"],
                    judge["completion_tokens"] - judge["batched_completion_tokens"]) == (live_in, live_out)
            assert judge["cost_usd"] == pytest.approx((live_in + 2 * live_out) / 1e6 + (
                judge["batched_prompt_tokens"] + 2 * judge["batched_completion_tokens"]) / 2e6, abs=2e-6)
        else:  # no live request: the two cases are named batch errors
            assert _live_requests(server) == [] and (batch["retried_live"], batch["failed"]) == (0, 2)
            errors = [r for r in records if r.get("error")]
            assert len(errors) == 2 and {r["error_kind"] for r in errors} == {"batch"}
            assert all("HTTP 500: the fake failed this line" in r["error"] for r in errors)



def test_estimate_and_budget_price_the_batched_roles_at_half(tiny_data, tmp_path) -> None:
    from sab_pytest.dataset import load
    from sab_pytest.run.batch_mode import priced_usd
    from sab_pytest.run.estimate import estimate, render
    from sab_pytest.settings.resolution import resolve

    cases = list(load(str(tiny_data), allow_modified=True).cases)
    options = {"model": "gpt-4o", "no_cache": True, "prices": "in=2.5,out=10"}
    live = estimate(resolve(options, user_cache=lambda: tmp_path), cases)
    batched = estimate(resolve({**options, "batch": True}, user_cache=lambda: tmp_path), cases)
    assert batched["batch"]["roles"] == ["judge", "agent"] and batched["batch"]["full_cost_usd"] == live["cost_usd"]
    assert batched["cost_usd"] == pytest.approx(live["cost_usd"] / 2, abs=1e-5)
    assert batched["batch"]["saved_usd"] == pytest.approx(live["cost_usd"] / 2, abs=1e-5)
    assert any(line.startswith("batch (--sab-batch): judge, agent through the Batch API at 0.5x the price: cost $")
               and "saving $" in line for line in render(batched))
    acting = estimate(resolve({**options, "batch": True, "strategy": "react"}, user_cache=lambda: tmp_path), cases)
    assert acting["batch"]["roles"] == ["judge"]  # an agent that acts stays live
    settings = resolve({**options, "batch": True}, user_cache=lambda: tmp_path)
    call = {"role": "judge", "cache_hit": False, "prompt_tokens": 1_000_000, "completion_tokens": 0, "batched": True}
    retried = {**call, "batched": False}  # its batch left it unanswered, asked live: the gate priced it
    record = {"usage": {"billed_prompt_tokens": 3_000_000, "billed_completion_tokens": 0},
              "judge": {"plan": {"calls": [call, retried]}}, "agent": {"calls": [{**call, "role": "agent"}]}}
    assert priced_usd(settings, record) == pytest.approx(2.5)  # the two batched calls at half of $2.5 per 1M
    acting = {**record, "agent": {"calls": [{**retried, "role": "agent"}]}}  # an acting agent's call is live
    assert priced_usd(resolve({**options, "strategy": "react", "batch": True}, user_cache=lambda: tmp_path),
                      acting) == pytest.approx(2.5 / 2)
