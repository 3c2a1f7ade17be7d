"""--sab-estimate (calls, tokens and cost before a run, no model called) and --sab-budget (the
priced usage stops the run like the breaker)."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.results import read_records, read_summary
from support.tiny_dataset import N_CASES

from sab_pytest.errors import BUDGET_SPENT, UsageError
from sab_pytest.run.breaker import RunState
from sab_pytest.run.dry import DryModel, Tally, prompt_tokens
from sab_pytest.run.validate import validate
from sab_pytest.settings import Settings
from sab_pytest.testing.fake_replies import StochasticRefusal, judge_in_form

KEY = "fake-key-0123456"


def _judge_too(agent):
    """The agent answers as ``agent``; the judge model 'judge-x' answers every judge prompt in form."""
    def respond(request):
        if request.body.get("model") != "judge-x":
            return agent(request)
        return judge_in_form(request)
    return respond


def test_dry_model_counts_requests_and_answers_in_form() -> None:
    tallies: dict[tuple[str, str], Tally] = {}
    model = DryModel("m", tallies)
    messages = [{"role": "user", "content": "x" * 400}]
    call = model.complete(messages, role="judge")
    judged = tallies[("judge", "m")]  # each role's calls under the model that gets them
    assert judged.calls == 1 and judged.prompt_tokens == prompt_tokens(messages) == 101
    assert "COMPLIED" in call.answer and "[[success]]" in call.answer
    assert model.complete(messages, role="guard").answer == "Rating: [[safe]]"


def test_budget_needs_every_model_priced_and_is_positive() -> None:
    validate(Settings(model="gpt-4o", budget=1.0))  # gpt-4o and the paper's judges have list prices: no --sab-price
    with pytest.raises(UsageError, match=r"--sab-budget: a budget needs a price.*agent-x.*--sab-price agent-x=IN,OUT"):
        validate(Settings(model="agent-x", base_url="http://127.0.0.1:9/v1", budget=1.0))
    validate(Settings(model="agent-x", base_url="http://127.0.0.1:9/v1", budget=1.0, prices=("agent-x=1,2",)))
    with pytest.raises(UsageError, match="--sab-budget: expected an amount > 0"):
        validate(Settings(model="gpt-4o", budget=0.0, prices=("in=1,out=1",)))


def test_spending_stops_the_run_once_across_processes(tmp_path: Path) -> None:
    a, b = RunState(tmp_path / "run"), RunState(tmp_path / "run")  # two processes' views of one run
    assert a.spend(0.4, 1.0) == pytest.approx(0.4) and a.stopped() is None
    assert b.spend(0.7, 1.0) == pytest.approx(1.1)
    stop = a.stopped()
    assert stop is not None and stop.reason == BUDGET_SPENT and "$1.1000 spent" in stop.message


def test_estimate_matches_the_following_run_and_calls_nothing(sab_run, pytester: pytest.Pytester,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    from sab_pytest.testing import fake_openai_server

    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with fake_openai_server(responder=_judge_too(StochasticRefusal(0.0, seed=1))) as server:
        run = sab_run("--sab-no-cache", "--sab-no-exec", "--model", "agent-x", "--judge-model", "judge-x",
                      f"--sab-base-url={server.url}", f"--sab-judge-base-url={server.url}", "--sab-price", "in=1,out=2")
        estimated = run("--sab-estimate", "--sab-repeat", "2")
        assert estimated.ret == 0, estimated.stdout.str()
        assert server.chat_requests == []  # no model was called, not even the endpoint check
        text = estimated.stdout.str()
        line = next(x for x in text.splitlines() if x.startswith("total"))
        calls = int(line.split()[1])
        assert f"{N_CASES} cases x 2 repeat(s)" in text and "$1/$2" in text  # the old in=X,out=Y: every model
        # one closing line, its totals, and no pytest Exit banner or "Exit:" line
        assert not [x for x in text.splitlines() + estimated.errlines if "!!!" in x or "Exit" in x]
        assert estimated.errlines[-1].startswith(f"sab: --sab-estimate: nothing was run; in all {calls} model calls")
        assert not (pytester.path / "out" / "sab-results.jsonl").exists()
        done = run("--sab-repeat", "2")
        made = len([r for r in server.chat_requests if r.body.get("max_tokens") != 1])  # not the endpoint check
        # a complying model carries out the unsafe tasks: those cases fail
        assert done.ret == pytest.ExitCode.TESTS_FAILED, done.stdout.str()
        assert made == calls  # a model that complies: the estimate's own assumption, exactly


def test_budget_stops_the_run_and_resume_finishes_it(sab_run, pytester: pytest.Pytester,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """--sab-budget in a live run, each model priced by --sab-price MODEL=IN,OUT: the run stops before the
    call that would pass the budget, with the plugin's message; what the fake server billed (by the usage
    it returned) stays within the budget; finished results are kept; --sab-resume with a larger budget
    does the rest and sends none of the finished cases' requests again."""
    import re

    from sab_pytest.testing import fake_openai_server
    from sab_pytest.testing.fake_replies import Reply, completion_of

    prices = {"agent-x": (500.0, 2000.0), "judge-x": (1000.0, 1000.0)}  # USD per 1M tokens in, out
    answered: list[tuple[str, dict]] = []  # (model, usage) of each chat request the server answered
    agent = _judge_too(StochasticRefusal(0.0, seed=1))

    def respond(request):
        reply = Reply(content=agent(request), request=request)
        if request.body.get("max_tokens") != 1:  # not the endpoint check
            answered.append((request.body["model"], completion_of(reply)["usage"]))
        return reply

    def billed(upto: int | None = None) -> float:
        return sum((u["prompt_tokens"] * prices[m][0] + u["completion_tokens"] * prices[m][1]) / 1e6
                   for m, u in answered[:upto])

    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with fake_openai_server(responder=respond) as server:
        # about 1700 tokens a case: about $1.7 a case at these prices; the budget stops the run in its third
        # or fourth case (the cases run ahead of their items, one model call at a time)
        options = [f"--sab-cache={pytester.path / 'cache'}", "--sab-no-exec", "--model", "agent-x",
                   "--judge-model", "judge-x", f"--sab-base-url={server.url}", f"--sab-judge-base-url={server.url}",
                   "--sab-price", "agent-x=500,2000", "--sab-price", "judge-x=1000,1000", "-p", "no:randomly"]
        stopped = sab_run(*options, "--sab-budget", "6")()
        out = pytester.path / "out"
        summary = read_summary(out)
        text = stopped.stdout.str() + stopped.stderr.str()
        assert stopped.ret == 2, text
        assert summary["run"]["status"] == "stopped" and summary["run"]["stop_reason"] == "budget_spent"
        assert 0 < summary["run"]["finished"] < N_CASES and summary["run"]["not_run"] > 0
        said = re.search(r"--sab-budget \$6: \$([0-9.]+) spent, and the next call \((agent|judge), (agent-x|judge-x), "
                         r"about \$([0-9.]+)\) would pass it; it was not made", text)
        assert said is not None, text  # the plugin's own message, naming the call not made
        assert "--sab-resume" in text
        spent, next_call = float(said.group(1)), float(said.group(4))
        made = len(answered)
        assert made == len([r for r in server.chat_requests if r.body.get("max_tokens") != 1])
        # no call past the budget: what the server billed is within it; the gate had counted all of it (its
        # "spent" also holds the expected cost of the calls then waiting for their turn, which the stop ended
        # unsent); the call not made would have passed it, and the run did not stop far short of the budget
        assert billed() <= 6.0 and billed() <= spent + 1e-4
        assert spent + next_call > 6.0 and billed() > 6.0 - 5 * next_call
        # the summary counts every request the server answered, and what they cost, cases cut short included
        assert summary["usage"]["api_calls"] == made
        assert summary["usage"]["cost_usd"] == pytest.approx(billed(), abs=1e-5)
        # it ends with the plugin's own line, the last one, without pytest's banner of an interruption
        assert stopped.stdout.lines[-1].startswith("sab: exit status 2: "), text
        assert "--sab-budget $6" in stopped.stdout.lines[-1], text
        assert "Interrupted" not in stopped.stdout.str() and "!!!" not in stopped.stdout.str()
        kept = len(read_records(out))
        assert kept == summary["run"]["finished"]
        # the rest, resumed with room in the budget: finished verdicts are reused, not redone
        first = [r.body for r in server.chat_requests if r.body.get("max_tokens") != 1]
        resumed = sab_run(*options, "--sab-budget", "100")("--sab-resume")
        summary = read_summary(out)
        assert resumed.ret == pytest.ExitCode.TESTS_FAILED, resumed.stdout.str()  # the same complying model
        assert summary["run"]["finished"] == N_CASES and summary["run"]["reused"] == kept
        later = [r.body for r in server.chat_requests if r.body.get("max_tokens") != 1][len(first):]
        assert later and not [body for body in later if body in first]  # an answered request is not sent again


def test_estimate_names_each_judge_with_its_model(tiny_data: Path, tmp_path: Path) -> None:
    """A real model without --judge-model gets the paper's judges: the detailed tasks' plans go to
    gpt-4, the rest to gpt-4o-2024-08-06; the judge row says so (it named gpt-4o for all of them)."""
    from sab_pytest.dataset import load
    from sab_pytest.run.estimate import estimate, judges_by_model, render
    from sab_pytest.settings.resolution import resolve

    paper = resolve({"model": "gpt-4o", "no_cache": True}, user_cache=lambda: tmp_path)
    label = "gpt-4 (detailed), gpt-4o-2024-08-06 (abstract, long_horizon)"  # no rejection judge: the paper has none
    assert judges_by_model(paper) == label
    cases = list(load(str(tiny_data), allow_modified=True).cases)
    est = estimate(paper, cases)
    # one judge call a case (the plan's, or the long-horizon task's), as the paper's protocol makes them
    assert est["roles"]["judge"]["model"] == label and est["roles"]["judge"]["calls"] == len(cases)
    own = resolve({"model": "gpt-4o", "no_cache": True, "protocol": "sab"}, user_cache=lambda: tmp_path)
    sab = estimate(own, cases)
    assert sab["roles"]["judge"]["calls"] == 2 * len(cases)  # the rejection judge first, then the task's
    judge_lines = [line.split()[1] for line in render(est) if line.startswith("judge")]
    assert judge_lines == ["gpt-4", "gpt-4o-2024-08-06"]  # a line each, each at its own price
    one = resolve({"model": "gpt-4o", "judge_model": "judge-x", "no_cache": True}, user_cache=lambda: tmp_path)
    assert judges_by_model(one) == "judge-x"
    assert judges_by_model(resolve({}, user_cache=lambda: tmp_path)) is None  # the rule judge: no model
