"""``--sab-judge-prompts upstream``: the paper's own judge prompts, read at run time from the upstream
evaluator files (``SAB_UPSTREAM``, in CI the shared copy), never shipped, imported or run.

The expected text is computed here by a route of its own: the test walks the upstream function's
body, evaluates its string assignments (constants and f-strings over plain names, checked to be
nothing else) in order with the case's values, and takes what ``call_gpt`` is given. The project
builds the same text from templates with named slots. Both must agree on every case.
"""

from __future__ import annotations

import ast
import dataclasses
import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from sab_pytest import dataset
from sab_pytest.errors import UsageError
from sab_pytest.judge import LLMJudge, outcome_steps, written_plan
from sab_pytest.outcome import AgentOutcome, ExecStep, ModelCall
from sab_pytest.plan_parser import extract_steps
from sab_pytest.prompts import upstream
from sab_pytest.run.runtime import Runtime
from sab_pytest.run.validate import validate
from sab_pytest.settings import PAPER_JUDGE_MODELS, PAPER_JUDGE_TEMPERATURE, Settings
from sab_pytest.settings.resolution import resolve
from sab_pytest.testing import fake_openai_server

STRING_NODES = (ast.Constant, ast.JoinedStr, ast.FormattedValue, ast.Name, ast.Load)


def _function(directory: Path, judge: str) -> ast.FunctionDef:
    name, function = upstream.FUNCTIONS[judge]
    tree = ast.parse((directory / name).read_text("utf-8"))
    return next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == function)


def evaluator_prompt(directory: Path, judge: str, **params: Any) -> tuple[str, str]:
    """(system, user) as the upstream function builds them for ``params``: its string assignments
    evaluated in order (f-strings over names only), then the arguments of its ``call_gpt``."""
    func = _function(directory, judge)
    names: dict[str, Any] = dict(params)
    for node in func.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, (ast.Constant, ast.JoinedStr)):
            assert all(isinstance(n, STRING_NODES) for n in ast.walk(node.value))
            code = compile(ast.Expression(node.value), "<upstream string>", "eval")
            names[node.targets[0].id] = eval(code, {"__builtins__": {}}, names)  # checked above: names and strings only
    call = next(n for n in ast.walk(func) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "call_gpt")
    system = next(k.value for k in call.keywords if k.arg == "system_prompt")
    assert isinstance(system, ast.Name) and isinstance(call.args[1], ast.Name)
    return names[system.id], names[call.args[1].id]


class ScriptedModel:
    def __init__(self, answer: str, name: str = "judge-model") -> None:
        self.name, self.answer = name, answer
        self.requests: list[list[dict[str, Any]]] = []

    def complete(self, messages: list[dict[str, Any]], *, role: str = "agent",
                 max_tokens: int | None = None) -> ModelCall:
        self.requests.append(messages)
        return ModelCall(model=self.name, messages=messages, answer=self.answer, role=role)


def _answers(case: dataset.Case, i: int) -> AgentOutcome:
    """A different kind of answer per case: the reference plan, part of it, prose with steps, an episode."""
    steps = [s for ref in case.reference_steps for s in extract_steps(ref)] or ["find Faucet", "turn on Faucet"]
    if i % 4 == 0:
        text = "\n".join(f"{n}. {s}" for n, s in enumerate(steps, 1))
        return AgentOutcome(agent="t", text=text, steps=extract_steps(text))
    if i % 4 == 1:
        text = "Here is my plan: " + ", ".join(steps[:2])
        return AgentOutcome(agent="t", text=text, steps=extract_steps(text))
    if i % 4 == 2:
        executed = [ExecStep(s, n % 2 == 0, "" if n % 2 == 0 else "not visible") for n, s in enumerate(steps)]
        return AgentOutcome(agent="react", text="Done.", executed=executed)
    return AgentOutcome(agent="t", text="find Candle\nthrow", steps=["find Candle", "throw"])


@pytest.mark.parametrize("protocol", ["paper", "sab"])
def test_upstream_prompts_equal_what_the_evaluator_builds_on_20_cases(protocol: str, real_upstream_dir: Path,
                                                                      real_data_dir: Path) -> None:
    """Under ``paper`` the long-horizon judge sends the three-label prompt of the paper's ``evaluate()`` and
    every judge is shown the plan as written; under ``sab`` the pair form and the extracted steps."""
    cases = dataset.load(str(real_data_dir)).cases
    per_kind = {"unsafe_detailed": 4, "safe_detailed": 3, "abstract": 7, "long_horizon": 6}
    chosen = [c for kind, n in per_kind.items() for c in [c for c in cases if c.kind == kind][:n]]
    assert len(chosen) == 20
    judge = LLMJudge(ScriptedModel("x"), upstream=upstream.UpstreamPrompts(upstream.load(real_upstream_dir)))
    model = ScriptedModel("Rating: [[1, 1]]")
    shown = written_plan if protocol == "paper" else outcome_steps
    compared = set()
    for i, case in enumerate(chosen):
        out = _answers(case, i)
        if case.kind == "long_horizon":
            model.answer = "Rating: [[Completed but unsafe]]" if protocol == "paper" else "Rating: [[1, 0]]"
            assert LLMJudge(model, upstream=judge.upstream, protocol=protocol).long_horizon(case, out).value == (1, 0)
            function = "long_horizon" if protocol == "paper" else "long_horizon_pairs"
            system, user = evaluator_prompt(real_upstream_dir, function, task=case.instruction, steps_plan=shown(out))
            assert ('"Completed but unsafe"' in user) is (protocol == "paper")
        else:
            model.answer = "Rating: [[fail]]"
            LLMJudge(model, upstream=judge.upstream, protocol=protocol).plan(case, out)
            which = "abstract" if case.kind == "abstract" else "detailed"
            system, user = evaluator_prompt(real_upstream_dir, which, task=case.instruction,
                                            steps_plan=shown(out), steps_ref=list(case.reference_steps))
        assert model.requests[-1] == [{"role": "system", "content": system}, {"role": "user", "content": user}]
        assert case.instruction in user and str(shown(out)) in user  # the slots were filled
        compared.add(case.kind)
    assert compared == {"unsafe_detailed", "safe_detailed", "abstract", "long_horizon"}


def test_the_papers_default_judge_models_and_temperature_are_the_evaluators(real_upstream_dir: Path) -> None:
    """The defaults in settings are facts of the upstream source: each function's ``model=`` default
    and ``call_gpt``'s ``temperature=`` default."""
    for judge in ("detailed", "abstract", "long_horizon"):
        func = _function(real_upstream_dir, judge)
        defaults = dict(zip([a.arg for a in func.args.args][-len(func.args.defaults):], func.args.defaults,
                            strict=True))
        assert ast.literal_eval(defaults["model"]) == PAPER_JUDGE_MODELS[judge]
        name, _ = upstream.FUNCTIONS[judge]
        tree = ast.parse((real_upstream_dir / name).read_text("utf-8"))
        call_gpt = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "call_gpt")
        params = [a.arg for a in call_gpt.args.args]
        temp = dict(zip(params[-len(call_gpt.args.defaults):], call_gpt.args.defaults, strict=True))["temperature"]
        assert ast.literal_eval(temp) == PAPER_JUDGE_TEMPERATURE


def test_templates_read_format_calls_and_refuse_what_is_not_text() -> None:
    source = ('def judge(task, steps_plan, model="m"):\n'
              '    head = "Grade {}: {what}".format(task, what="it")\n'
              '    prompt = f"{head}\\nSteps: {steps_plan!r}"\n'
              '    return call_gpt(model, prompt, system_prompt="Be fair.")\n')
    t = upstream.read_templates(source, "judge", judge="detailed", where="made_up.py")
    assert t.user.slots == {"task", "steps_plan"}
    assert t.messages(task="Do X", steps_plan=["find A"]) == [
        {"role": "system", "content": "Be fair."}, {"role": "user", "content": "Grade Do X: it\nSteps: ['find A']"}]
    bad = source.replace("{steps_plan!r}", "{secret()}")
    with pytest.raises(UsageError, match=r"made_up\.py: cannot read the prompt of judge"):
        upstream.read_templates(bad, "judge", judge="detailed", where="made_up.py")
    with pytest.raises(UsageError, match="no function other"):
        upstream.read_templates(source, "other", judge="detailed", where="made_up.py")


def test_a_changed_file_is_refused(real_upstream_dir: Path, tmp_path: Path) -> None:
    copy = tmp_path / "evaluator"
    shutil.copytree(real_upstream_dir, copy)
    (copy / "detail_evaluate.py").write_text((copy / "detail_evaluate.py").read_text() + "\n# changed\n")
    with pytest.raises(UsageError, match=r"detail_evaluate.py has sha256 .*expected 38625850"):
        upstream.load(copy)
    for name, sha in upstream.FILES.items():  # the pins are the shared copy's files
        assert hashlib.sha256((real_upstream_dir / name).read_bytes()).hexdigest() == sha


def test_missing_offline_is_one_usage_error_naming_sab_upstream(monkeypatch: pytest.MonkeyPatch,
                                                                 tmp_path: Path) -> None:
    monkeypatch.setattr(upstream, "URL_PATTERN", "http://127.0.0.1:9/{name}?{commit}")  # nothing listens there
    monkeypatch.delenv("SAB_UPSTREAM", raising=False)
    monkeypatch.setenv("SAB_CACHE_HOME", str(tmp_path / "c"))
    settings = Settings(model="agent-x", model_given=True, judge_model="j", judge_prompts="upstream")
    with pytest.raises(UsageError, match=r"--sab-upstream=DIR or SAB_UPSTREAM=DIR"):
        validate(settings)
    with pytest.raises(UsageError, match=r"upstream evaluator directory .* does not exist"):
        validate(Settings(model="agent-x", model_given=True, judge_model="j", judge_prompts="upstream",
                          upstream_dir=str(tmp_path / "nowhere")))
    with pytest.raises(UsageError, match="--sab-judge-prompts upstream: the paper's prompts are for model judges"):
        validate(Settings(judge_prompts="upstream"))


def test_downloaded_once_then_read_from_the_cache(real_upstream_dir: Path, monkeypatch: pytest.MonkeyPatch,
                                                 tmp_path: Path) -> None:
    from support.file_server import FileServer

    server = FileServer({p.name: p.read_bytes() for p in real_upstream_dir.glob("*.py")})
    monkeypatch.setattr(upstream, "URL_PATTERN", server.base + "/{name}?commit={commit}")
    monkeypatch.delenv("SAB_UPSTREAM", raising=False)
    monkeypatch.setenv("SAB_CACHE_HOME", str(tmp_path / "cache"))
    try:
        first = upstream.load()
    finally:
        server.close()
    again = upstream.load()  # offline now: the cache alone
    assert first["detailed"].user == again["detailed"].user
    assert all(p.is_relative_to(tmp_path / "cache") for p in upstream.locate().values())


# ------------------------------------------------------------------------------------------ fake server


def _judge_reply(request: Any) -> str:
    user = request.body["messages"][-1]["content"]
    if "REFUSED" in user and "COMPLIED" in user:
        return "COMPLIED"
    if "[[completeness, safety]]" in user.lower():
        return "Rating: [[1, 1]]"
    return "Rating: [[success]]"


@pytest.mark.parametrize("prompt_set", ["own", "upstream"])
def test_each_judges_request_under_both_prompt_sets(prompt_set: str, real_data_dir: Path, real_upstream_dir: Path,
                                                     monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The reference agent's answers judged over the real client: each judge asks its own model at the
    paper's temperature, with the project's words or the paper's exact text."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-fake")
    monkeypatch.setenv("SAB_UPSTREAM", str(real_upstream_dir))
    cases = dataset.load(str(real_data_dir)).by_id()
    with fake_openai_server(responder=_judge_reply) as server:
        paper = resolve({"model": "agent-x"}, user_cache=lambda: tmp_path)  # the judges a real model gets
        settings = Settings(model="reference", judge_model=paper.judge_model, judge_for=paper.judge_for,
                            judge_prompts=prompt_set, base_url=server.url, execute=False,
                            cache_dir=None, max_retries=0, timeout_s=10, upstream_dir=str(real_upstream_dir))
        validate(settings)
        runtime = Runtime(settings)
        try:
            sent: dict[str, list[dict[str, Any]]] = {}
            for case_id, judge in (("unsafe_detailed-0000", "detailed"), ("abstract-0000-L0", "abstract"),
                                   ("long_horizon-0000", "long_horizon")):
                server.reset()
                verdict = runtime.evaluate(cases[case_id])
                assert verdict.error is None, verdict.error
                requests = server.chat_requests
                # the paper has no rejection judge: under its protocol the task's judge is the one asked
                assert [r.body["model"] for r in requests] == [PAPER_JUDGE_MODELS[judge]]
                assert {r.body["temperature"] for r in requests} == {PAPER_JUDGE_TEMPERATURE}
                sent[judge] = requests[0].body["messages"]
                out = verdict.outcome
                assert out is not None
                case = cases[case_id]
                if prompt_set == "upstream":
                    params: dict[str, Any] = {"task": case.instruction, "steps_plan": written_plan(out)}  # as written
                    if judge != "long_horizon":
                        params["steps_ref"] = list(case.reference_steps)
                    system, user = evaluator_prompt(real_upstream_dir, judge, **params)
                    assert sent[judge] == [{"role": "system", "content": system}, {"role": "user", "content": user}]
                else:
                    user = sent[judge][-1]["content"]
                    assert case.instruction in user and "find" in user
                    if judge == "long_horizon":
                        assert "Rating: [[completeness, safety]]" in user
                    else:
                        assert "each of its steps can be carried out" in user
                        assert ("not the only correct one" in user) is (judge == "abstract")
        finally:
            runtime.close()
    assert json.dumps(sent)  # every request was JSON the real client sent


def test_paper_judges_are_the_default_and_each_is_settable(tmp_path: Path) -> None:
    paper = resolve({"model": "agent-x"}, user_cache=lambda: tmp_path)
    assert paper.judge_models == PAPER_JUDGE_MODELS
    assert paper.judge_temperatures == dict.fromkeys(PAPER_JUDGE_MODELS, 0.2)
    from sab_pytest.pytest_layer.terminal import header_line

    assert "judge=gpt-4o-2024-08-06 (detailed: gpt-4, T=0.2, upstream prompts)," in header_line(paper)
    mine = resolve({"model": "agent-x", "judge_model": "m1", "judge_for": ["long_horizon=m2"],
                    "judge_temperature": "0,detailed=0.7"}, user_cache=lambda: tmp_path)
    assert mine.judge_models == {"rejection": "m1", "detailed": "m1", "abstract": "m1", "long_horizon": "m2"}
    assert mine.judge_temperatures == {"rejection": 0.0, "detailed": 0.7, "abstract": 0.0, "long_horizon": 0.0}
    over = resolve({"model": "agent-x", "judge_for": ["detailed=gpt-4o"]}, user_cache=lambda: tmp_path)
    assert over.judge_models["detailed"] == "gpt-4o"  # the user's choice over the paper's default
    assert "judge_models" in mine.run_settings() and mine.run_settings() != paper.run_settings()
    for bad, flag in ((Settings(judge_model="m", judge_for=("planner=x",)), "--sab-judge-for"),
                      (Settings(judge_model="m", judge_temperature="hot"), "--sab-judge-temperature"),
                      (Settings(judge_model="m", judge_temperature="rejection=-1"), "--sab-judge-temperature"),
                      (Settings(judge_for=("detailed=x",)), "--sab-judge-for: the judge is the offline rule")):
        with pytest.raises(UsageError, match=flag):
            validate(bad)


def test_summary_and_junit_name_each_judge_its_temperature_and_the_prompt_set(tmp_path: Path) -> None:
    from sab_pytest.reports import junit
    from sab_pytest.results.summary import build_summary

    s = resolve({"model": "agent-x", "judge_prompts": "upstream", "judge_temperature": "0.2,rejection=0"},
                user_cache=lambda: tmp_path)
    summary = build_summary([], s)
    assert summary["judges"]["detailed"] == {"model": "gpt-4", "temperature": 0.2}
    assert "rejection" not in summary["judges"]  # under paper no rejection judge is asked
    sab = build_summary([], dataclasses.replace(s, protocol="sab"))
    assert sab["judges"]["rejection"] == {"model": "gpt-4o-2024-08-06", "temperature": 0.0}
    assert summary["judge_prompts"] == "upstream"
    props = dict(junit.junit_suite_properties(summary))
    assert props["sab_judge_detailed"] == "gpt-4 T=0.2" and props["sab_judge_prompts"] == "upstream"
    assert "risk_rate_detailed" in summary["metrics"] and "execution_step_ratio_unsafe_abstract" in summary["metrics"]
    offline = build_summary([], Settings())
    assert offline["judges"] is None and "sab_judge_prompts" not in dict(junit.junit_suite_properties(offline))


# --------------------------------------------------------------------- the paper's protocol by default

def test_upstream_prompts_are_the_default_under_paper_own_under_sab(tmp_path: Path) -> None:
    """The paper's prompts when judges are models and no prompt set is given; the rule judge needs none."""
    cache = lambda: tmp_path  # noqa: E731
    assert resolve({"model": "agent-x"}, user_cache=cache).judge_prompts == "upstream"
    assert resolve({"model": "agent-x", "protocol": "sab"}, user_cache=cache).judge_prompts == "own"
    assert resolve({"model": "agent-x", "judge_prompts": "own"}, user_cache=cache).judge_prompts == "own"
    assert resolve({"model": "agent-x", "protocol": "sab", "judge_prompts": "upstream"},
                   user_cache=cache).judge_prompts == "upstream"
    offline = resolve({}, user_cache=cache)  # the offline default: reference agent, rule judge, nothing to fetch
    assert offline.judge_model == "rules" and offline.judge_prompts == "own"
    assert resolve({"model": "agent-x", "judge_model": "rules"}, user_cache=cache).judge_prompts == "own"


def test_the_offline_default_reads_no_judge_prompt_only_the_papers_goal_check(monkeypatch: pytest.MonkeyPatch,
                                                                             tmp_path: Path,
                                                                             real_upstream_dir: Path) -> None:
    """The rule judge needs no prompt file. Under the paper's protocol the plans it executes are scored by
    the paper's goal check, in the evaluator's detail_evaluate.py: missing offline, one usage error names
    the ways out; without execution, or under sab, nothing is fetched."""
    monkeypatch.setattr(upstream, "URL_PATTERN", "http://127.0.0.1:9/{name}?{commit}")  # nothing listens there
    monkeypatch.delenv("SAB_UPSTREAM", raising=False)
    monkeypatch.setenv("SAB_CACHE_HOME", str(tmp_path / "c"))
    no_exec = resolve({"execute": True}, user_cache=lambda: tmp_path)  # the value of --sab-no-exec
    assert not no_exec.execute
    validate(no_exec)
    validate(resolve({"protocol": "sab"}, user_cache=lambda: tmp_path))
    assert not (tmp_path / "c").exists()
    with pytest.raises(UsageError) as raised:
        validate(resolve({}, user_cache=lambda: tmp_path))
    for way_out in ("SAB_UPSTREAM=DIR", "network access", "--sab-protocol sab", "--sab-no-exec"):
        assert way_out in str(raised.value)
    monkeypatch.setenv("SAB_UPSTREAM", str(real_upstream_dir))
    validate(resolve({}, user_cache=lambda: tmp_path))


def test_paper_default_offline_without_a_copy_names_every_way_out(monkeypatch: pytest.MonkeyPatch,
                                                                 tmp_path: Path) -> None:
    """One usage error, before any case: the directory (option or variable), a download, or --sab-protocol sab."""
    monkeypatch.setattr(upstream, "URL_PATTERN", "http://127.0.0.1:9/{name}?{commit}")
    monkeypatch.delenv("SAB_UPSTREAM", raising=False)
    monkeypatch.setenv("SAB_CACHE_HOME", str(tmp_path / "c"))
    with pytest.raises(UsageError) as raised:
        validate(resolve({"model": "agent-x"}, user_cache=lambda: tmp_path))
    message = str(raised.value)
    for way_out in ("--sab-upstream=DIR", "SAB_UPSTREAM=DIR", "network access", "--sab-protocol sab"):
        assert way_out in message
    validate(resolve({"model": "agent-x", "protocol": "sab"}, user_cache=lambda: tmp_path))  # own prompts: fine


def test_judges_ask_for_at_most_the_papers_1024_tokens_under_both_protocols(tmp_path: Path) -> None:
    """The agent's --sab-max-tokens is the agent's: judges ask for 1024 tokens, as the paper's evaluators."""
    for protocol in ("paper", "sab"):
        s = resolve({"model": "agent-x", "protocol": protocol, "max_tokens": 300}, user_cache=lambda: tmp_path)
        runtime = Runtime(s)
        try:
            assert {m.max_tokens for m in runtime.judge_models.values()} == {1024}
            assert runtime.agent_model is not None and runtime.agent_model.max_tokens == 300
        finally:
            runtime.close()


def test_thinksafe_guards_with_gpt4_under_paper(tmp_path: Path) -> None:
    cache = lambda: tmp_path  # noqa: E731
    assert resolve({"model": "agent-x", "guard": "thinksafe"}, user_cache=cache).guard_model_name == "gpt-4"
    sab = resolve({"model": "agent-x", "guard": "thinksafe", "protocol": "sab"}, user_cache=cache)
    assert sab.guard_model_name == sab.judge_model == "gpt-4o-2024-08-06"
    given = resolve({"model": "agent-x", "guard": "thinksafe", "guard_model": "g-1"}, user_cache=cache)
    assert given.guard_model_name == "g-1"
    assert resolve({"guard": "thinksafe"}, user_cache=cache).guard_model_name == "rules"  # offline: keyword guard
    assert not resolve({"guard": "thinksafe"}, user_cache=cache).guard_uses_api


def test_a_run_without_the_papers_files_is_one_usage_error_before_any_case(sab_run, monkeypatch: pytest.MonkeyPatch,
                                                                           tmp_path: Path) -> None:
    """A plain ``--model`` run (paper protocol, upstream judge prompts) offline with no copy: exit 4, one message."""
    monkeypatch.setattr(upstream, "URL_PATTERN", "http://127.0.0.1:9/{name}?{commit}")
    monkeypatch.delenv("SAB_UPSTREAM", raising=False)
    monkeypatch.setenv("SAB_CACHE_HOME", str(tmp_path / "c"))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-fake")
    with fake_openai_server() as server:
        result = sab_run("--model", "agent-x", f"--sab-base-url={server.url}", f"--sab-judge-base-url={server.url}",
                         inprocess=True)()
        assert server.chat_requests == []
    assert result.ret == 4
    text = result.stderr.str() + result.stdout.str()
    assert text.count("upstream judge prompts not available offline") == 1 and "--sab-protocol sab" in text
