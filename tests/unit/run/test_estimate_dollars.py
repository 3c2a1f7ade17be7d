"""--sab-estimate in dollars, per role and model (issue 57), with map_vlm's helper models and a judge
panel priced under their own models (issues 55 and 60), --sab-budget's gate before each call, and what
a finished run cost from the usage the API returned."""

from __future__ import annotations

from pathlib import Path

import pytest

from sab_pytest.dataset import Case, load
from sab_pytest.errors import BUDGET_SPENT, InfraError
from sab_pytest.models.endpoints import resolve_endpoint
from sab_pytest.models.pricing import price_book
from sab_pytest.run.estimate import estimate, render
from sab_pytest.settings.resolution import resolve


@pytest.fixture
def cases(tiny_data: Path) -> list[Case]:
    return list(load(str(tiny_data), allow_modified=True).cases)


def _rows(est: dict) -> dict[tuple[str, str], dict]:
    return {(r["role"], r["model"]): r for r in est["rows"]}


def test_gpt_4o_is_priced_per_role_and_model_at_its_list_price(cases: list[Case], tmp_path: Path,
                                                               real_tiktoken_dir: Path) -> None:
    settings = resolve({"model": "gpt-4o", "no_cache": True}, user_cache=lambda: tmp_path)
    est = estimate(settings, cases)
    rows = _rows(est)
    assert set(rows) == {("agent", "gpt-4o"), ("judge", "gpt-4"), ("judge", "gpt-4o-2024-08-06")}
    detailed = sum(1 for c in cases if c.kind in ("unsafe_detailed", "safe_detailed"))
    assert rows[("judge", "gpt-4")]["calls"] == detailed  # the paper's detailed judge, on gpt-4
    gpt4 = rows[("judge", "gpt-4")]
    assert gpt4["cost_usd"] == pytest.approx((gpt4["prompt_tokens"] * 30 + gpt4["completion_tokens"] * 60) / 1e6,
                                             abs=1e-6)
    assert est["cost_usd"] == pytest.approx(sum(r["cost_usd"] for r in est["rows"]), abs=1e-5)
    assert est["unpriced"] == [] and all(r["tokenizer"].startswith("tiktoken") for r in est["rows"])
    text = "\n".join(render(est))
    assert "$2.5/$10" in text and "$30/$60" in text and "genai-prices" in text
    assert price_book(None).day.isoformat() in text  # the prices' date


def test_a_model_the_table_lacks_is_named_with_the_option_that_prices_it(cases: list[Case], tmp_path: Path) -> None:
    url = "http://127.0.0.1:9/v1"  # a server of the user's own (nothing listens: the estimate calls nothing)
    settings = resolve({"model": "my-llama", "judge_model": "gpt-4o", "base_url": url, "no_cache": True},
                       user_cache=lambda: tmp_path)
    est = estimate(settings, cases)
    assert est["unpriced"] == ["my-llama"] and _rows(est)[("agent", "my-llama")]["cost_usd"] is None
    assert est["cost_usd"] == pytest.approx(_rows(est)[("judge", "gpt-4o")]["cost_usd"])  # the priced rows alone
    text = "\n".join(render(est))
    assert "not priced: my-llama" in text and "--sab-price my-llama=IN,OUT" in text
    priced = estimate(resolve({"model": "my-llama", "judge_model": "gpt-4o", "base_url": url, "no_cache": True,
                               "prices": ("my-llama=1,2",)}, user_cache=lambda: tmp_path), cases)
    assert priced["unpriced"] == [] and _rows(priced)[("agent", "my-llama")]["price"]["source"] == "--sab-price"


def test_map_vlm_tallies_its_vision_and_converter_models_apart(cases: list[Case], tmp_path: Path,
                                                               real_scenes_dir: Path) -> None:
    """Issue 55: the paper's MAP sends the pictures to gpt-4o and the conversion to gpt-4o-mini; the
    estimate prices those calls at their own models, not the agent's."""
    settings = resolve({"model": "gpt-4.1", "strategy": "map_vlm", "protocol": "sab", "no_cache": True,
                        "map_vision_model": "gpt-4o", "map_converter_model": "gpt-4o-mini",
                        "thor_scenes": str(real_scenes_dir)}, user_cache=lambda: tmp_path)
    rows = _rows(estimate(settings, cases[:3]))
    agents = {model for role, model in rows if role == "agent"}
    assert {"gpt-4o", "gpt-4o-mini"} <= agents, rows.keys()
    mini = rows[("agent", "gpt-4o-mini")]
    assert mini["calls"] > 0 and mini["price"]["input_per_m"] == pytest.approx(0.15)


def test_a_judge_panel_replaces_the_judges_own_model(cases: list[Case], tmp_path: Path) -> None:
    """Issue 60 item 6: a panel that covers the detailed judge is asked in place of gpt-4: the estimate
    prices the panel's members and no gpt-4 call."""
    settings = resolve({"model": "gpt-4o", "no_cache": True, "judge_panel": ("detailed=gpt-4o-mini,gpt-4.1,gpt-4o",)},
                       user_cache=lambda: tmp_path)
    rows = _rows(estimate(settings, cases))
    detailed = sum(1 for c in cases if c.kind in ("unsafe_detailed", "safe_detailed"))
    assert ("judge", "gpt-4") not in rows
    for member in ("gpt-4o-mini", "gpt-4.1", "gpt-4o"):
        assert rows[("judge", member)]["calls"] == detailed


def test_the_budget_gate_stops_before_the_call_that_would_pass_it(tmp_path: Path) -> None:
    from sab_pytest.models.pricing import BudgetGate
    from sab_pytest.run.breaker import RunState

    class Client:
        spec, server, name = "gpt-4o", None, "gpt-4o"
        endpoint = resolve_endpoint("gpt-4o")  # where the client's requests go, as the run resolved it

    state = RunState(tmp_path / "run")
    gate = BudgetGate(1.0, price_book(["gpt-4o=1000,1000"]), state)  # $0.001 a token
    small = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}
    gate.before(Client(), small, "agent")  # a few tokens and 40 out: about $0.05, set aside
    assert 0.04 < state.spent() < 0.06
    gate.after(Client(), small, 100, 100)  # the API's usage takes its place: $0.2
    assert state.spent() == pytest.approx(0.2)
    big = {"model": "gpt-4o", "messages": [{"role": "user", "content": "word " * 900}]}
    with pytest.raises(InfraError) as stopped:
        gate.before(Client(), big, "judge")  # about $0.92 more would pass $1: not made
    assert stopped.value.kind == BUDGET_SPENT and state.stopped() is not None
    assert state.spent() == pytest.approx(0.2)  # nothing set aside for the call not made
    failing = {"model": "gpt-4o", "messages": [{"role": "user", "content": "x"}]}
    other = BudgetGate(1.0, price_book(["gpt-4o=1000,1000"]), RunState(tmp_path / "other"))
    other.before(Client(), failing, "agent")
    other.failed(failing)  # no answer: what was set aside goes back
    assert other.state.spent() == pytest.approx(0.0)


def test_what_a_run_cost_per_role_and_model(tmp_path: Path) -> None:
    from sab_pytest.results.cost import by_model

    settings = resolve({"model": "gpt-4o", "no_cache": True}, user_cache=lambda: tmp_path)
    call = {"role": "agent", "model": "gpt-4o", "cache_hit": False, "prompt_tokens": 1000, "completion_tokens": 100}
    records = [{"outcome": {"calls": [call, {**call, "cache_hit": True}]},
                "judges": {"detailed": {"calls": [{"role": "judge", "model": "gpt-4", "cache_hit": False,
                                                   "prompt_tokens": 2000, "completion_tokens": 10}]}}}]
    cost = by_model(records, settings)
    rows = {(r["role"], r["model"]): r for r in cost["rows"]}
    agent, judge = rows[("agent", "gpt-4o")], rows[("judge", "gpt-4")]
    assert (agent["calls"], agent["cache_hits"], agent["prompt_tokens"]) == (2, 1, 1000)  # a hit costs nothing
    assert agent["cost_usd"] == pytest.approx((1000 * 2.5 + 100 * 10) / 1e6)
    assert judge["cost_usd"] == pytest.approx((2000 * 30 + 10 * 60) / 1e6)
    assert cost["cost_usd"] == pytest.approx(agent["cost_usd"] + judge["cost_usd"], abs=1e-6)
    assert judge["batched_calls"] == 0 and "batch_price" not in judge


def test_batched_calls_are_priced_apart_at_the_batch_price(tmp_path: Path) -> None:
    """Of a role's model's calls, those a batch answered are counted apart and priced at half (OpenAI's
    batch price); a request retried live after its batch failed is a live call, at the full price. A call
    of a case cut short by the run's stop (its priced fields only, no messages) is billed like any other,
    and left out of the tokenizer's count against the bill."""
    from sab_pytest.results.cost import by_model, cost_lines, priced_fields

    settings = resolve({"model": "gpt-4o", "judge_model": "gpt-4", "no_cache": True, "batch": True},
                       user_cache=lambda: tmp_path)
    judged = {"role": "judge", "model": "gpt-4", "cache_hit": False, "prompt_tokens": 2000, "completion_tokens": 10,
              "messages": [{"role": "user", "content": "word " * 1990}]}
    batched = {**judged, "batched": True, "prompt_tokens": 1000,
               "messages": [{"role": "user", "content": "word " * 990}]}
    cut_short = priced_fields([{**judged, "batched": True}])  # a case the run's stop cut short kept these
    assert "messages" not in cut_short[0]
    records = [{"judges": {"a": {"calls": [judged, batched]}}}, {"calls": cut_short}]
    row = by_model(records, settings)["rows"][0]
    assert (row["calls"], row["batched_calls"]) == (3, 2)
    assert (row["prompt_tokens"], row["batched_prompt_tokens"]) == (5000, 3000)
    assert row["batched_completion_tokens"] == 20 and row["batch_price"] == 0.5
    full = (2000 * 30 + 10 * 60) / 1e6  # the live call, at gpt-4's list price
    half = (3000 * 30 + 20 * 60) / 1e6 * 0.5
    assert row["batched_cost_usd"] == pytest.approx(half) and row["batch_saved_usd"] == pytest.approx(half)
    assert row["cost_usd"] == pytest.approx(full + half)
    assert abs(row["count_error"]) < 0.05  # the two calls that kept their requests, against their own bill
    line = next(x for x in cost_lines({"by_model": [row]}) if x.startswith("cost judge gpt-4"))
    assert "of them batched: 2 calls, 3000 tokens in / 20 out at 0.5x the price, $" in line


def test_a_finished_run_says_what_each_roles_model_cost(sab_run, pytester: pytest.Pytester,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A run against the fake server (a server of one's own: priced by --sab-price per model): the summary,
    the table and the JUnit properties give each role's model's billed tokens and dollars, and the
    tokenizer's count of the requests sent beside them."""
    from support.results import read_summary

    from sab_pytest.reports.junit import junit_suite_properties
    from sab_pytest.testing import fake_openai_server
    from sab_pytest.testing.fake_replies import StochasticRefusal

    monkeypatch.setenv("OPENAI_API_KEY", "fake-key-0123456")
    with fake_openai_server(responder=StochasticRefusal(1.0, seed=1)) as server:
        run = sab_run("--sab-no-cache", "--sab-no-exec", "--model", "gpt-4o", "--judge-model", "gpt-4",
                      f"--sab-base-url={server.url}", f"--sab-judge-base-url={server.url}",
                      "--sab-price", "gpt-4o=2.5,10", "--sab-price", "gpt-4=30,60")
        done = run()
    usage = read_summary(run.where())["usage"]
    rows = {(r["role"], r["model"]): r for r in usage["by_model"]}
    assert set(rows) == {("agent", "gpt-4o"), ("judge", "gpt-4")}, done.stdout.str()
    agent, judge = rows[("agent", "gpt-4o")], rows[("judge", "gpt-4")]
    assert agent["cost_usd"] == pytest.approx((agent["prompt_tokens"] * 2.5 + agent["completion_tokens"] * 10) / 1e6,
                                              abs=1e-6)
    assert judge["cost_usd"] == pytest.approx((judge["prompt_tokens"] * 30 + judge["completion_tokens"] * 60) / 1e6,
                                              abs=1e-6)
    assert usage["cost_usd"] == pytest.approx(agent["cost_usd"] + judge["cost_usd"], abs=1e-5)
    assert agent["tokenizer"] == "tiktoken o200k_base" and agent["counted_prompt_tokens"] > 0
    text = done.stdout.str()
    assert f"cost agent gpt-4o: {agent['calls']} calls" in text and "cost judge gpt-4:" in text
    summary = read_summary(run.where())
    props = dict(junit_suite_properties(summary))
    assert props["sab_cost_usd judge gpt-4"] == f"{judge['cost_usd']:.6f}"
    assert props["sab_tokens_in agent gpt-4o"] == str(agent["prompt_tokens"])
    from sab_pytest.reports.html.report import _metadata

    page = _metadata(summary)  # the HTML report's run facts: a row of the cost per role and model
    assert "cost by role and model" in page and f"cost judge gpt-4: {judge['calls']} calls" in page
    assert "by_model" not in page  # not dumped again among the usage figures


def test_a_self_hosted_model_is_estimated_by_its_servers_tokenizer(cases: list[Case], tmp_path: Path) -> None:
    from sab_pytest.testing import fake_openai_server

    with fake_openai_server(tokenize="vllm") as server:
        settings = resolve({"model": "qwen2.5-7b", "judge_model": "qwen2.5-7b", "base_url": server.url,
                            "judge_base_url": server.url, "no_cache": True}, user_cache=lambda: tmp_path)
        est = estimate(settings, cases[:3])
        assert server.chat_requests == [] and any(r.path == "/tokenize" for r in server.requests)
    assert {r["tokenizer"] for r in est["rows"]} == {"the server's /tokenize (vLLM's wire format)"}


def test_missing_encodings_fall_back_to_the_character_rule_in_one_line(cases: list[Case], tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from sab_pytest.models.tokens import tiktoken_counter

    empty = tmp_path / "encodings"
    empty.mkdir()
    monkeypatch.setenv("SAB_TIKTOKEN_CACHE", str(empty))  # nothing there, and nothing is downloaded
    tiktoken_counter.cache_clear()
    try:
        est = estimate(resolve({"model": "gpt-4o", "no_cache": True}, user_cache=lambda: tmp_path), cases)
    finally:
        tiktoken_counter.cache_clear()
    said = [line for line in render(est) if "not available" in line]
    assert len(said) == 1 and "cl100k_base" in said[0] and "o200k_base" in said[0], said
    assert said[0].endswith("counted at about 4 characters a token")
    assert all(r["tokenizer"] == "about 4 characters per token" for r in est["rows"]) and est["cost_usd"]
