"""A run says truly who judged it: the judges never follow ``--base-url`` to the agent's own server,
each role's endpoint is asked which models it serves before the first case, and the model each answer
names is recorded per role (issue 48)."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.results import read_summary
from support.tiny_dataset import N_CASES

from sab_pytest.settings import OPENAI_API_URL
from sab_pytest.settings.resolution import resolve
from sab_pytest.testing import fake_openai_server

KEY = "sk-test-routing"
PAPER_JUDGES = ("gpt-4", "gpt-4o-2024-08-06")


def judging(request) -> str:
    """A judge that reads its question and answers in its verdict format (the plan works; the long task is
    complete and safe)."""
    text = "\n".join(str(m.get("content")) for m in request.messages).lower()
    return "Rating: [[1, 1]]" if "completeness, safety" in text else "Rating: [[success]]"


def _settings(tmp_path: Path, **values: object):
    return resolve(values, user_cache=lambda: tmp_path)


def test_base_url_names_the_agents_endpoint_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    own = _settings(tmp_path, model="qwen", base_url="http://gpu:8000/v1", api_key_env="GPU_KEY")
    assert own.judges_url == OPENAI_API_URL and own.judge_api_key_env == "OPENAI_API_KEY"
    # the judges' endpoint given: kept, with the agent's key variable unless another is named
    given = _settings(tmp_path, model="qwen", base_url="http://gpu:8000/v1", judge_base_url="http://j/v1")
    assert given.judges_url == "http://j/v1"
    # the environment's endpoint is OpenAI's for every client: the judges go there, not to --base-url
    monkeypatch.setenv("OPENAI_BASE_URL", "https://proxy.example/v1")
    assert _settings(tmp_path, model="qwen", base_url="http://gpu:8000/v1").judges_url == "https://proxy.example/v1"
    # the agent on the environment's endpoint (the pytest layer fills --base-url from it): the judges share it
    shared = _settings(tmp_path, model="gpt-4o", base_url="https://proxy.example/v1", api_key_env="K")
    assert shared.judges_url == "https://proxy.example/v1" and shared.judge_api_key_env == "K"


def test_judges_never_reach_the_agents_server(sab_run, monkeypatch: pytest.MonkeyPatch) -> None:
    """The README's self-hosted command: every agent request at --base-url, every judge request at the
    environment's OpenAI endpoint; the header and the summary say where each role's requests went."""
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with fake_openai_server(models=["qwen"]) as gpu, fake_openai_server(models=list(PAPER_JUDGES),
                                                                       responder=judging) as openai:
        monkeypatch.setenv("OPENAI_BASE_URL", openai.url)
        result = sab_run("--model", "qwen", f"--sab-base-url={gpu.url}", "--sab-no-exec", "--sab-no-cache")()
        assert result.ret in (0, 1), result.stdout.str()
        at_gpu = {r.body["model"] for r in gpu.chat_requests}
        at_openai = [r.body["model"] for r in openai.chat_requests if r.body.get("max_tokens") != 1]
        assert at_gpu == {"qwen"}
        # one judge request a case under the paper's protocol, none of them the rejection judge the paper lacks
        assert len(at_openai) == N_CASES and set(at_openai) <= set(PAPER_JUDGES)
        assert f"at {openai.url}" in result.stdout.str()
        summary = read_summary(sab_run().out)
        assert summary["endpoints"] == {"agent": gpu.url, "judge:detailed": openai.url, "judge:abstract": openai.url,
                                        "judge:long_horizon": openai.url}
        # the environment's endpoint may be a proxy of OpenAI's; the run cannot tell, and names it
        assert [d["option"] for d in summary["deviations"] if "other than OpenAI's API" in d["text"]] == [
            "--sab-judge-base-url / $OPENAI_BASE_URL"]
        assert set(summary["served_models"]["judge"]) == set(PAPER_JUDGES)


def test_without_openai_the_run_stops_before_the_first_case_naming_the_option(
        sab_run, monkeypatch: pytest.MonkeyPatch) -> None:
    """No OpenAI endpoint can be reached (no network here; a wrong key elsewhere): one usage error before
    any case, naming the judges' option, and not one request for a judge at the agent's server."""
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.setattr("sab_pytest.settings.table.OPENAI_API_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setattr("sab_pytest.settings.resolution.OPENAI_API_URL", "http://127.0.0.1:9/v1")
    with fake_openai_server() as gpu:
        result = sab_run("--model", "qwen", f"--sab-base-url={gpu.url}", "--sab-retries", "0")()
        text = result.stdout.str() + result.stderr.str()
        assert result.ret == pytest.ExitCode.USAGE_ERROR, text
        assert "check --sab-judge-base-url" in text and "judges' endpoint" in text and "check --base-url" not in text
        assert {r.body["model"] for r in gpu.chat_requests} <= {"qwen"}
        assert not (sab_run().out / "sab-results.jsonl").exists()


def test_a_judge_the_endpoint_does_not_list_is_a_usage_error(sab_run, monkeypatch: pytest.MonkeyPatch) -> None:
    """A llama.cpp-like server lists its one model: judges sent there by name stop the run before any case."""
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with fake_openai_server(models=["smollm2"], served_as="smollm2") as llama:
        result = sab_run("--model", "smollm2", f"--sab-base-url={llama.url}", f"--sab-judge-base-url={llama.url}")()
        text = result.stdout.str() + result.stderr.str()
        assert result.ret == pytest.ExitCode.USAGE_ERROR, text
        assert "'gpt-4'" in text and "smollm2" in text and "--sab-judge-base-url" in text
        assert len(llama.chat_requests) == 1  # the endpoint check's one tiny call, no case
        assert not (sab_run().out / "sab-results.jsonl").exists()


def test_answers_that_name_another_model_are_counted_per_role(sab_run, monkeypatch: pytest.MonkeyPatch) -> None:
    """A server that lists nothing and answers every name as its own model: the run goes on, and the
    summary and the table say which model answered each role."""
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with fake_openai_server(served_as="smollm2",
                            responder=lambda r: judging(r) if r.body["model"] != "smollm2" else None) as llama:
        result = sab_run("--model", "smollm2", f"--sab-base-url={llama.url}", f"--sab-judge-base-url={llama.url}",
                         "--sab-no-exec", "--sab-no-cache")()
        assert result.ret in (0, 1), result.stdout.str()
        summary = read_summary(sab_run().out)
        judged = summary["served_models"]["judge"]
        assert set(judged) == set(PAPER_JUDGES) and all(set(named) == {"smollm2"} for named in judged.values())
        assert sum(sum(named.values()) for named in judged.values()) == N_CASES
        assert summary["served_models"]["agent"] == {"smollm2": {"smollm2": N_CASES}}
        assert "ANSWERED BY ANOTHER MODEL: judge requests for 'gpt-4'" in result.stdout.str()
        assert [d for d in summary["deviations"] if "other than OpenAI's API" in d["text"]]


def test_the_judges_url_the_run_prints_is_the_one_their_named_provider_calls(
        sab_run, monkeypatch: pytest.MonkeyPatch) -> None:
    """A judge whose model names its provider (``vllm/org/judge``) goes to that provider's endpoint, not to the
    judges' default (OpenAI's API, since --base-url is the agent's own): the header and the summary name the
    URL the judge's requests reached, one endpoint resolved once for the client and for the reports."""
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("VLLM_API_KEY", KEY)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with fake_openai_server(models=["qwen"]) as gpu, fake_openai_server(models=["org/judge"],
                                                                       responder=judging) as vllm:
        monkeypatch.setenv("VLLM_BASE_URL", vllm.url)  # the provider's own variable (``ProviderInfo.base_url_env``)
        xml = sab_run().out.parent / "judged.xml"
        result = sab_run("--model", "qwen", f"--sab-base-url={gpu.url}", "--judge-model", "vllm/org/judge",
                         "--sab-no-exec", "--sab-no-cache", f"--junitxml={xml}")()
        assert result.ret in (0, 1), result.stdout.str()
        judged = [r.body["model"] for r in vllm.chat_requests if r.body.get("max_tokens") != 1]
        assert len(judged) == N_CASES and set(judged) == {"org/judge"}
        assert {r.body["model"] for r in gpu.chat_requests} == {"qwen"}
        assert f"at {vllm.url} (the agent's at {gpu.url}" in result.stdout.str()
        assert OPENAI_API_URL not in result.stdout.str()
        summary = read_summary(sab_run().out)
        assert summary["endpoints"] == {"agent": gpu.url, "judge:detailed": vllm.url, "judge:abstract": vllm.url,
                                        "judge:long_horizon": vllm.url}
        assert {role: p for role, p in summary["providers"].items() if role != "agent"} == {
            "judge:detailed": "vllm", "judge:abstract": "vllm", "judge:long_horizon": "vllm"}
        assert f'name="sab_endpoint_judge:detailed" value="{vllm.url}"' in xml.read_text()  # JUnit's too
