"""``--sab-estimate``: the model calls, tokens and cost a run would make, without calling any model.

How: every selected case goes through the run's own wiring (``run.wiring``: the same agent, judges
and guard, built from the same settings) and ``scoring.evaluate``, with a dry model
(``run.dry.DryModel``) in place of each API model. A dry model records the request it is given (so
the calls and their prompts are the ones the run would send) and answers as a model that complies
would: the reference plan, walked one move at a time by an agent that acts; judges that read a
complying plan; a guard that rates every step safe. Agents that act play their episode in the
embedded engine, whatever ``--thor`` says (it calls no model and starts no process); a text plan is
executed there only where the guard screens it as it runs, since its prompts then show each step's
result. So the judges are asked about every plan and the guard screens every step, which is what a
complying model costs; refusals cost fewer judge and guard calls (an upper bound there), and an
acting model that wanders or observes makes more calls than one that walks the reference plan.
Judge follow-ups (an unreadable answer asked again) are not counted.

When the response cache (``--sab-cache``) holds answers of the agent's model, they correct that:
the share of them that refuse (``plan_parser``'s explicit refusal) spares that share of the judges'
later calls and the guard's, and the guard's calls follow the mean length of its plans there
instead of the reference plans'. (A model that is agent and judge at once mixes both roles'
answers in that history.)

Tokens in: each request counted by its model's tokenizer (``models.tokens``: tiktoken's encoding with
the chat format's framing for a model tiktoken names, a self-hosted server's ``/tokenize``, else about
``CHARS_PER_TOKEN`` characters a token, said as such); a picture counts ``IMAGE_TOKENS``. Each role's
calls are tallied under the model that gets them: map_vlm's vision and converter models apart from the
agent's, a judge panel's members instead of the judge's own model. Tokens out: the mean
``completion_tokens`` of the model's answers in the response cache when it holds some; else, measured
from the paper's answers the project has: the agent's, the tokens of the reference plan in the
strategy's form (what the dry model answers); the judges', ``JUDGE_OUTPUT_TOKENS``, the one judge answer
the paper's evaluator code records (a test recomputes it from the pinned file); the guard's, its one rating
line. Cost: each model at ``--sab-price MODEL=IN,OUT`` or its list price on the run's date
(``models.pricing``, genai-prices' bundled table), the batched roles at the batch price; a model no
price covers is named and left out of the total. Repeats (``--sab-repeat K``) cost K times a case.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sab_pytest.dataset import Case
from sab_pytest.errors import SabError
from sab_pytest.models import parse_model_spec
from sab_pytest.models.endpoints import role_endpoint
from sab_pytest.models.pricing import api_models, price_book, unpriced_hint
from sab_pytest.models.tokens import CHARS_PER_TOKEN, JUDGE_OUTPUT_TOKENS, counter_for
from sab_pytest.plan_parser import extract_steps, is_explicit_refusal
from sab_pytest.run.batch_mode import batch_estimate, estimate_line
from sab_pytest.run.dry import DryModel, Tallies, Tally, answer_style
from sab_pytest.run.runtime import make_engine
from sab_pytest.run.wiring import Wiring, role_models
from sab_pytest.scoring import evaluate
from sab_pytest.settings import Settings

if TYPE_CHECKING:
    from sab_pytest.models.pricing import ModelPrice, PriceBook
    from sab_pytest.models.tokens import TokenCounter
    from sab_pytest.run.wiring import ModelMaker, RoleModels
    from sab_pytest.thor import Engine

ROLES = ("agent", "judge", "guard")
#: cache entries read at most for the output-token history (one small JSON file each)
MAX_CACHE_FILES = 20000


@dataclass
class History:
    """What the response cache tells of a model: its answers' mean ``completion_tokens`` (over
    ``answers``), and the share of its answers that refuse outright (``plan_parser``'s explicit
    refusal)."""

    out_per_call: float
    answers: int
    refusals: float
    steps: float | None  # mean plan steps of the answers that do not refuse (None: none of them)


def output_history(cache_dir: Path | None) -> dict[str, History]:
    """Per model name, its ``History`` in the response cache (at most ``MAX_CACHE_FILES`` entries
    are read)."""
    if cache_dir is None or not Path(cache_dir).is_dir():
        return {}
    sums: Counter[str] = Counter()
    counts: Counter[str] = Counter()
    refused: Counter[str] = Counter()
    steps: Counter[str] = Counter()
    for n, path in enumerate(Path(cache_dir).glob("*/*.json")):
        if n >= MAX_CACHE_FILES:
            break
        try:
            entry = json.loads(path.read_text(encoding="utf-8"))
            model = str(entry["request"]["model"])
            tokens = int(entry.get("completion_tokens") or 0)
            text = str(entry.get("text") or "")
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if tokens > 0:
            sums[model] += tokens
            counts[model] += 1
            refusal = is_explicit_refusal(text)
            refused[model] += refusal
            steps[model] += 0 if refusal else len(extract_steps(text))
    return {model: History(sums[model] / counts[model], counts[model], refused[model] / counts[model],
                           steps[model] / (counts[model] - refused[model]) if counts[model] > refused[model] else None)
            for model in counts}


def estimate(settings: Settings, cases: list[Case], *, book: PriceBook | None = None) -> dict[str, Any]:
    """The expected calls, tokens and cost per role and model of ``cases`` (repeats included) under
    ``settings`` (``book``: the prices, else ``--sab-price`` and the list prices of today)."""
    book = book if book is not None else price_book(settings.prices)
    distinct = distinct_cases(cases)
    tallies: Tallies = {}
    counters = count_cases(settings, distinct, tallies)
    names = role_names(settings)
    history = output_history(settings.cache_dir)
    agent_history = history.get(names["agent"] or "")
    reference_steps = sum(len(case.reference_steps) * times for case, times in distinct.values()) / max(1, len(cases))
    if agent_history is not None:
        _as_the_cache_says(tallies, agent_history, reference_steps)
    for (role, model), tally in tallies.items():
        _output_source(tally, role, model, history)
    found = {(e.role, parse_model_spec(e.spec)): e for e in api_models(settings)}
    rows = [_row(role, model, tally, counters.get(model),
                 book.price_at(found.get((role, model)) or role_endpoint(settings, role, model)))
            for (role, model), tally in sorted(tallies.items(), key=lambda kv: (ROLES.index(kv[0][0]), kv[0][1]))]
    roles = {role: _role_total(role, [r for r in rows if r["role"] == role]) for role in ROLES
             if any(r["role"] == role for r in rows)}
    if names["judge"] is not None and "judge" in roles:
        roles["judge"]["model"] = judges_by_model(settings) or names["judge"]  # every judge's model
    priced = [r for r in rows if r["cost_usd"] is not None]
    est = {"cases": len(distinct), "samples": len(cases), "repeat": settings.repeat, "strategy": settings.strategy,
           "rows": rows, "roles": roles, "calls": sum(r["calls"] for r in rows),
           "prompt_tokens": sum(r["prompt_tokens"] for r in rows),
           "completion_tokens": sum(r["completion_tokens"] for r in rows),
           "cost_usd": round(sum(r["cost_usd"] for r in priced), 6) if priced else None,
           "unpriced": sorted({r["model"] for r in rows if r["cost_usd"] is None}),
           "prices_line": book.table_line(), "prices": settings.prices,
           "tokenizer_notes": sorted({c.note for c in counters.values() if c.note}),
           "acting": settings.interactive and names["agent"] is not None,
           "refusal_share": agent_history.refusals if agent_history is not None else None,
           "plan_steps": agent_history.steps if agent_history is not None else None,
           "reference_steps": reference_steps}
    if settings.batch:  # the batched roles at the batch price
        est["batch"] = batch_estimate(settings, est)
        if est["batch"]["saved_usd"] is not None and est["cost_usd"] is not None:
            est["cost_usd"] = round(est["cost_usd"] - est["batch"]["saved_usd"], 6)
    return est


def own_server(settings: Settings, role: str, name: str) -> str | None:
    """The base URL of a role's model where it is a server of the user's own (an OpenAI-compatible one,
    which may count tokens at ``/tokenize``); None for a provider's hosted API, which is never asked."""
    endpoint = role_endpoint(settings, role, name)
    return endpoint.url if endpoint.compatible else None


def _row(role: str, model: str, tally: Tally, counter: TokenCounter | None, price: ModelPrice | None) -> dict[str, Any]:
    """One role's model's line of the estimate: calls, tokens, how they were counted, the price (by the
    model as the user named it: ``azure/<deployment>``, ``anthropic/...``) and cost (before any batch saving)."""
    out = round(tally.calls * tally.out_per_call)
    return {"role": role, "model": model, "calls": tally.calls, "prompt_tokens": tally.prompt_tokens,
            "completion_tokens": out, "completion_source": tally.out_source,
            "tokenizer": counter.method if counter is not None else "",
            "price": None if price is None else {"input_per_m": price.input_per_m, "output_per_m": price.output_per_m,
                                                 "source": price.source},
            "cost_usd": None if price is None else round(price.usd(tally.prompt_tokens, out), 6)}


def _role_total(role: str, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """A role's lines added up (the per-role figures earlier versions gave, which ``--sab-batch`` reads)."""
    costs = [r["cost_usd"] for r in rows if r["cost_usd"] is not None]
    return {"model": ", ".join(r["model"] for r in rows), "calls": sum(r["calls"] for r in rows),
            "prompt_tokens": sum(r["prompt_tokens"] for r in rows),
            "completion_tokens": sum(r["completion_tokens"] for r in rows),
            "completion_source": "; ".join(dict.fromkeys(r["completion_source"] for r in rows)),
            "cost_usd": round(sum(costs), 6) if costs else None,
            "priced": len(costs) == len(rows)}


def distinct_cases(cases: list[Case]) -> dict[str, tuple[Case, int]]:
    """Case id -> the case and how many times it is run (its repeats): a repeat costs what its case does."""
    distinct: dict[str, tuple[Case, int]] = {}
    for case in cases:
        seen = distinct.get(case.id)
        distinct[case.id] = (case, (seen[1] if seen else 0) + 1)
    return distinct


def role_names(settings: Settings) -> dict[str, str | None]:
    """Role -> the model it calls over an API (None: no model, the offline agent, rule judge or guard)."""
    s = settings
    return {"agent": None if s.offline_agent else parse_model_spec(s.model),
            "judge": None if s.judge_model == "rules" else parse_model_spec(s.judge_model),
            "guard": parse_model_spec(s.guard_model_name) if s.guard_uses_api else None}


def dry_models(settings: Settings, tallies: Tallies) -> tuple[RoleModels, list[DryModel]]:
    """The run's roles (``wiring.role_models``), each a dry model counting into ``tallies`` with its
    model's tokenizer; and every one of them."""
    made: list[DryModel] = []
    style = answer_style(settings.strategy)

    def make(role: str, name: str, *, judge: str = "rejection", temperature: float | None = None) -> DryModel:
        model = parse_model_spec(name)
        made.append(DryModel(model, tallies, style=style, counter=counter_for(model, own_server(settings, role, name))))
        return made[-1]

    maker: ModelMaker = make
    return role_models(settings, maker), made


def count_cases(settings: Settings, distinct: dict[str, tuple[Case, int]], tallies: Tallies) -> dict[str, TokenCounter]:
    """Run each case once through the run's wiring on dry models, and count it as often as it is run;
    returns each model's token counter."""
    models, dry = dry_models(settings, tallies)
    agent, judge = Wiring(settings).case(models)
    engine = _dry_engine(settings) if settings.interactive or screens_as_it_runs(settings) else None
    try:
        for case, times in distinct.values():
            for model in dry:
                model.case = case
            _count_case(tallies, times, functools.partial(_evaluate, settings, case, agent, judge, engine),
                        refusal_spares_judges=settings.protocol != "paper")
    finally:
        if engine is not None:
            engine.stop()
    return {model.name: model.counter for model in dry}


def screens_as_it_runs(settings: Settings) -> bool:
    """Whether the guard screens a text plan while it is executed: its prompts then show each step's
    result, which only the execution gives, so the estimate executes those plans too."""
    return settings.execute and settings.guard != "off" and not settings.interactive


def _evaluate(settings: Settings, case: Case, agent: Any, judge: Any, engine: Engine | None) -> None:
    """One case as the run scores it; a text plan is executed only where the guard screens it as it
    runs (an episode acts all the same)."""
    paper = settings.protocol == "paper"  # which judges a case asks, as the run would ask them
    if screens_as_it_runs(settings):
        assert engine is not None
        dry = engine
        verdict = evaluate(case, agent, judge, execute=True, lease=lambda: contextlib.nullcontext(dry), paper=paper)
    else:
        verdict = evaluate(case, agent, judge, engine, execute=False, paper=paper)
    if verdict.error:  # a case that fails dry would be priced short: say so rather than undercount
        raise SabError(f"--sab-estimate: {case.id} could not be run dry: {verdict.error}")


def _dry_engine(settings: Settings) -> Engine:
    """The embedded engine, for the episodes and executions the estimate plays: it calls no model
    and starts no process."""
    return make_engine(dataclasses.replace(settings, engine="sim"))


def _count_case(tallies: Tallies, times: int, run: Callable[[], None], *,
                refusal_spares_judges: bool = True) -> None:
    """Count ``run()`` (one case) ``times`` times, and the part of it a refusal would spare: the guard's
    screening, and under ``sab`` the judges' questions after the rejection judge's (under ``paper``
    no rejection judge is asked and every answer in words is judged, a refusal too)."""
    before = {key: (t.calls, t.prompt_tokens, t.answered) for key, t in tallies.items()}
    for tally in tallies.values():
        tally.first_prompt = None
    run()
    judged = [key for key in tallies if key[0] == "judge" and tallies[key].first_prompt is not None]
    # the model asked first answers the case's first question (the rejection judge's)
    first_judge = min(judged, key=lambda key: tallies[key].first_at) if judged else None
    for key, t in tallies.items():
        role = key[0]
        calls0, tokens0, answered0 = before.get(key, (0, 0, 0))
        calls, tokens, answered = t.calls - calls0, t.prompt_tokens - tokens0, t.answered - answered0
        t.calls += calls * (times - 1)
        t.prompt_tokens += tokens * (times - 1)
        t.answered += answered * (times - 1)
        # the first judge call (under ``sab``) asks about the refusal
        if role == "guard" or (refusal_spares_judges and role == "judge" and calls > 0):
            first = (t.first_prompt or 0) if key == first_judge else 0
            t.if_complied_calls += (calls - (key == first_judge)) * times
            t.if_complied_tokens += (tokens - first) * times


def _as_the_cache_says(tallies: Tallies, agent: History, reference_steps: float) -> None:
    """Correct the complying model's count by the agent model's answers in the cache: the guard
    screens plans as long as its plans there, and its share of refusals spares the judges' later
    questions and the guard's screening."""
    for (role, _model), screened in tallies.items():
        if role != "guard" or not agent.steps or not reference_steps:
            continue
        scale = agent.steps / reference_steps
        screened.calls = round(screened.calls * scale)
        screened.prompt_tokens = round(screened.prompt_tokens * scale)
        screened.if_complied_calls = round(screened.if_complied_calls * scale)
        screened.if_complied_tokens = round(screened.if_complied_tokens * scale)
    if agent.refusals:
        for t in tallies.values():
            t.calls -= round(t.if_complied_calls * agent.refusals)
            t.prompt_tokens -= round(t.if_complied_tokens * agent.refusals)


def _output_source(tally: Tally, role: str, name: str, history: dict[str, History]) -> None:
    """A role's output tokens per call: its model's mean in the cache, else measured from the paper's
    answers (the module's docstring)."""
    found = history.get(name)
    if found is not None:
        tally.out_per_call = found.out_per_call
        tally.out_source = f"the cache's mean over {found.answers} answers of {name}"
    elif role == "judge":
        tally.out_per_call, tally.out_source = JUDGE_OUTPUT_TOKENS, "the judge answer the paper's code records"
    else:
        tally.out_per_call = tally.answered / tally.calls if tally.calls else 0.0
        tally.out_source = "the reference plans, as the strategy answers" if role == "agent" else "one rating line"


def judges_by_model(s: Settings) -> str | None:
    """The judges' models as the estimate names them: one name when every judge uses it, else each
    model with its judges ('gpt-4o-2024-08-06 (rejection, abstract, long_horizon), gpt-4 (detailed)');
    None with the rule judge."""
    if s.judge_model == "rules":
        return None
    grouped: dict[str, list[str]] = {}
    for judge, model in s.asked_judges.items():  # a judge with a panel: each of its models
        for name in s.judge_panels.get(judge, (model,)):
            grouped.setdefault(str(parse_model_spec(name)), []).append(judge)
    if len(grouped) == 1:
        return next(iter(grouped))
    return ", ".join(f"{model} ({', '.join(judges)})" for model, judges in grouped.items())


def _usd(value: float | None) -> str:
    return "not priced" if value is None else f"${value:,.4f}"


def render(est: dict[str, Any]) -> list[str]:
    """The estimate as ``--sab-estimate`` prints it: a line per role and model, with its price, then the
    total, where the prices come from, and the assumptions (the model column as wide as its longest name)."""
    rows = est.get("rows", [])
    width = max([22, *(len(str(r["model"])) + 2 for r in rows)])
    lines = [f"sab estimate (no model was called): {est['cases']} cases x {est['repeat']} repeat(s) = "
             f"{est['samples']} samples, strategy {est['strategy']}",
             f"{'role':<7}{'model':<{width}}{'calls':>8}{'tokens in':>12}{'tokens out':>12}{'USD':>14}  "
             "(USD per 1M in/out; tokens counted by; tokens out per call from)"]
    for r in rows:
        price = r["price"]
        rate = "not priced" if price is None else f"${price['input_per_m']:g}/${price['output_per_m']:g}"
        lines.append(f"{r['role']:<7}{r['model']:<{width}}{r['calls']:>8}{r['prompt_tokens']:>12}"
                     f"{r['completion_tokens']:>12}{_usd(r['cost_usd']):>14}  ({rate}; {r['tokenizer']}; "
                     f"{r['completion_source']})")
    batch = est.get("batch")
    total = _usd(est["cost_usd"]) + (" (batch price)" if batch and batch.get("saved_usd") else "")
    unpriced = " + models not priced" if est["unpriced"] and est["cost_usd"] is not None else ""
    lines.append(f"{'total':<{7 + width}}{est['calls']:>8}{est['prompt_tokens']:>12}"
                 f"{est['completion_tokens']:>12}{total:>14}{unpriced}")
    if not rows:
        lines.append("no model is called over an API: this run costs nothing")
    else:
        lines.append(est["prices_line"])
    if est["unpriced"]:
        lines.append(unpriced_hint(est["unpriced"]))
    if batch:
        lines.append(estimate_line(batch))
    if est.get("tokenizer_notes"):  # one line, however many encodings could not be had
        lines.append(f"{'; '.join(est['tokenizer_notes'])}: counted at about {CHARS_PER_TOKEN:g} characters a token")
    elif any("characters per token" in r["tokenizer"] for r in rows):
        lines.append(f"a model no tokenizer is known for is counted at about {CHARS_PER_TOKEN:g} characters a token")
    if est.get("refusal_share") is not None:
        steps = f", plans of {est['plan_steps']:.1f} steps" if est.get("plan_steps") else ""
        lines.append(f"assumed: the agent refuses {est['refusal_share']:.0%} of the time{steps}, as its answers in "
                     "the cache do (a refusal spares the later judge and guard calls; the guard screens each step)")
    else:
        lines.append("assumed: a model that complies (no answers of it in the cache: the judges are asked about "
                     "every plan, the guard screens every step)")
    if est["acting"]:
        lines.append("agents that act are counted walking the reference plan, one step a move, then done (a model "
                     "that observes or strays makes more calls)")
    return lines
