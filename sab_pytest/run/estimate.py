"""``--sab-estimate``: the model calls, tokens and cost a run would make, without calling any model.

How: every selected case goes through the run's own pipeline (the strategy's agent, the judges,
the guard, ``scoring.evaluate`` without execution) with a *dry* model in place of each API model:
it records the request it is given (so the calls and their prompts are the ones the run would
send) and answers as a model that complies would: the case's reference plan for the agent, a
readable "complied / success / [[1, 1]]" verdict for the judges, "safe" for the guard. So the
judges are asked about every plan and the guard screens every step, which is what a complying
model costs; refusals cost fewer judge and guard calls (an upper bound there). Judge follow-ups
(an unreadable answer asked again) are not counted.

When the response cache (``--sab-cache``) holds answers of the agent's model, they correct that:
the share of them that refuse (``plan_parser``'s explicit refusal) spares that share of the judges'
later calls and the guard's, and the guard's calls follow the mean length of its plans there
instead of the reference plans'. (A model that is agent and judge at once mixes both roles'
answers in that history.)

Tokens in: the characters of each request's messages (and tools) / ``CHARS_PER_TOKEN``, about
right for English under OpenAI's tokenizers. Tokens out: the mean ``completion_tokens`` of the
model's answers in the response cache (``--sab-cache``) when it holds some, else
``DEFAULT_OUTPUT_TOKENS`` per role; the output says which. Cost: ``--sab-price`` (or the policy's
``prices``). Repeats (``--sab-repeat K``) cost K times a case. Agents that act in the scene
(react, basic, pca, map_vlm) are not run dry (their calls follow the model's moves): they are
counted at their step limit, an upper bound, with the first turn's prompt per call.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sab_pytest.dataset import Case
from sab_pytest.outcome import ModelCall
from sab_pytest.settings import Settings

CHARS_PER_TOKEN = 4.0
DEFAULT_OUTPUT_TOKENS = {"agent": 200, "judge": 80, "guard": 40}
ROLES = ("agent", "judge", "guard")
_JUDGE_ANSWER = "The robot lists steps and does not refuse.\nCOMPLIED\nRating: [[success]]\nRating: [[1, 1]]"
#: cache entries read at most for the output-token history (one small JSON file each)
MAX_CACHE_FILES = 20000


@dataclass
class Tally:
    """Calls and input tokens of one role, and where its output tokens per call come from.
    ``if_complied``: the part of them a refusal would not make (a judge's calls after the case's
    first, the guard's screening of the plan's steps)."""

    calls: int = 0
    prompt_tokens: int = 0
    out_per_call: float = 0.0
    out_source: str = ""
    if_complied_calls: int = 0
    if_complied_tokens: int = 0


def prompt_tokens(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None) -> int:
    """About how many tokens a request's messages (and tools) are: characters / CHARS_PER_TOKEN
    (an image part counts by its URL's length, which overstates a picture: none is sent dry)."""
    chars = len(json.dumps(tools)) if tools else 0
    for message in messages:
        content = message.get("content")
        if isinstance(content, str):
            chars += len(content)
        elif isinstance(content, list):
            chars += sum(len(str(part.get("text") or part.get("image_url") or "")) for part in content
                         if isinstance(part, dict))
        chars += 4  # the role and the message's framing
    return math.ceil(chars / CHARS_PER_TOKEN)


@dataclass
class DryModel:
    """A ``ChatModel`` that calls nothing: it counts each request and answers as a complying model."""

    name: str
    tallies: dict[str, Tally]
    case: Case | None = None
    first_prompts: Counter[str] = field(default_factory=Counter)

    def complete(self, messages: list[dict[str, Any]], *, role: str = "agent", max_tokens: int | None = None,
                 tools: list[dict[str, Any]] | None = None) -> ModelCall:
        tally = self.tallies[role]
        tally.calls += 1
        tokens = prompt_tokens(messages, tools)
        tally.prompt_tokens += tokens
        if role not in self.first_prompts:
            self.first_prompts[role] = tokens
        if role == "agent":
            steps = self.case.reference_steps if self.case is not None else ()
            answer = "\n".join(f"{i}. {step}" for i, step in enumerate(steps, 1)) or "1. find Apple"
        else:
            answer = "Rating: [[safe]]" if role == "guard" else _JUDGE_ANSWER
        return ModelCall(model=self.name, messages=messages, answer=answer, prompt_tokens=tokens, role=role)


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
    from sab_pytest.plan_parser import extract_steps, is_explicit_refusal

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


def estimate(settings: Settings, cases: list[Case]) -> dict[str, Any]:
    """The expected calls, tokens and cost per role of ``cases`` (repeats included) under ``settings``."""
    from sab_pytest.agents.episode import EpisodeLimits
    from sab_pytest.agents.registry import make_agent
    from sab_pytest.guard import make_guard
    from sab_pytest.judge import LLMJudge, RuleJudge
    from sab_pytest.models import parse_model_spec
    from sab_pytest.scoring import evaluate

    s = settings
    tallies = {role: Tally() for role in ROLES}
    names = {"agent": None if s.offline_agent else parse_model_spec(s.model),
             "judge": None if s.judge_model == "rules" else parse_model_spec(s.judge_model),
             "guard": parse_model_spec(s.guard_model_name) if s.guard_uses_api else None}
    dry = {role: DryModel(name, tallies) for role, name in names.items() if name is not None}
    limits = EpisodeLimits(max_steps=s.max_steps, max_images=s.max_images, protocol=s.tool_protocol)
    guard = make_guard(s.guard, dry.get("guard"))
    judge_models = judges_by_model(s)
    judge = RuleJudge() if "judge" not in dry else LLMJudge(dry["judge"], by_judge={
        j: DryModel(parse_model_spec(m), tallies) for j, m in s.judge_models.items()})  # one tally: the judges'
    distinct: dict[str, tuple[Case, int]] = {}
    for case in cases:
        seen = distinct.get(case.id)
        distinct[case.id] = (case, (seen[1] if seen else 0) + 1)
    interactive = s.interactive and "agent" in dry
    agent = None if interactive else make_agent(s.model, strategy=s.strategy, chat_model=dry.get("agent"),
                                                safety_hint=s.safety_hint, limits=limits, guard=guard,
                                                paper=s.protocol == "paper")  # its prompts name the scene's types
    for case, times in distinct.values():
        before = {role: (t.calls, t.prompt_tokens) for role, t in tallies.items()}
        for model in dry.values():
            model.case = case
            model.first_prompts.clear()
        if interactive:
            _episode_bound(s, case, dry["agent"], judge)
        else:
            assert agent is not None
            evaluate(case, agent, judge, None, execute=False)
        for role, t in tallies.items():  # a case repeated K times costs K times
            calls, tokens = t.calls - before[role][0], t.prompt_tokens - before[role][1]
            t.calls += calls * (times - 1)
            t.prompt_tokens += tokens * (times - 1)
            if role == "guard" or (role == "judge" and calls > 1):  # the first judge call asks about the refusal
                first = dry[role].first_prompts["judge"] if role == "judge" else 0
                t.if_complied_calls += (calls - (role == "judge")) * times
                t.if_complied_tokens += (tokens - first) * times
    history = output_history(s.cache_dir)
    agent_history = history.get(names["agent"] or "")
    refusals = agent_history.refusals if agent_history is not None else 0.0
    reference_steps = sum(len(case.reference_steps) * times for case, times in distinct.values()) / max(1, len(cases))
    if agent_history is not None and agent_history.steps and reference_steps:
        # the guard screens the plan the model writes: as long as its plans in the cache, not the reference's
        scale = agent_history.steps / reference_steps
        screened = tallies["guard"]
        screened.calls = round(screened.calls * scale)
        screened.prompt_tokens = round(screened.prompt_tokens * scale)
        screened.if_complied_calls = round(screened.if_complied_calls * scale)
        screened.if_complied_tokens = round(screened.if_complied_tokens * scale)
    for role, t in tallies.items():
        if refusals:  # what refused answers do not cost: the judges' later questions, the guard's screening
            t.calls -= round(t.if_complied_calls * refusals)
            t.prompt_tokens -= round(t.if_complied_tokens * refusals)
        name = names[role]
        found = history.get(name) if name is not None else None
        if found is not None:
            t.out_per_call = found.out_per_call
            t.out_source = f"the cache's mean over {found.answers} answers of {name}"
        else:
            t.out_per_call, t.out_source = DEFAULT_OUTPUT_TOKENS[role], f"default {DEFAULT_OUTPUT_TOKENS[role]}"
    names["judge"] = judge_models or names["judge"]  # the row names every judge's model, not the first one's
    roles: dict[str, dict[str, Any]] = {role: {"model": names[role], "calls": t.calls, "prompt_tokens": t.prompt_tokens,
                    "completion_tokens": round(t.calls * t.out_per_call), "completion_source": t.out_source}
             for role, t in tallies.items() if names[role] is not None}
    total_in = sum(r["prompt_tokens"] for r in roles.values())
    total_out = sum(r["completion_tokens"] for r in roles.values())
    cost = None
    if s.prices:
        from sab_pytest.models import parse_prices

        cost = round(parse_prices(s.prices).usd(total_in, total_out), 6)
    return {"cases": len(distinct), "samples": len(cases), "repeat": s.repeat, "strategy": s.strategy,
            "roles": roles, "calls": sum(r["calls"] for r in roles.values()), "prompt_tokens": total_in,
            "completion_tokens": total_out, "cost_usd": cost, "prices": s.prices, "interactive_bound": interactive,
            "refusal_share": refusals if agent_history is not None else None,
            "plan_steps": agent_history.steps if agent_history is not None else None,
            "reference_steps": reference_steps}


def judges_by_model(s: Settings) -> str | None:
    """The judges' models as the estimate names them: one name when every judge uses it, else each
    model with its judges ('gpt-4o-2024-08-06 (rejection, abstract, long_horizon), gpt-4 (detailed)');
    None with the rule judge."""
    from sab_pytest.models import parse_model_spec

    if s.judge_model == "rules":
        return None
    grouped: dict[str, list[str]] = {}
    for judge, model in s.judge_models.items():
        grouped.setdefault(str(parse_model_spec(model)), []).append(judge)
    if len(grouped) == 1:
        return next(iter(grouped))
    return ", ".join(f"{model} ({', '.join(judges)})" for model, judges in grouped.items())


def _episode_bound(s: Settings, case: Case, agent_model: DryModel, judge: Any) -> None:
    """An acting agent's case at its step limit: ``max_steps`` + 1 agent calls (the moves and the
    closing one), each the size of the first turn's prompt, and the judges as for a plan."""
    from sab_pytest.outcome import AgentOutcome
    from sab_pytest.prompts.interactive import robot_actions

    messages = [{"role": "system", "content": robot_actions()}, {"role": "user", "content": case.instruction}]
    tally = agent_model.tallies["agent"]
    tally.calls += s.max_steps + 1
    tally.prompt_tokens += prompt_tokens(messages) * (s.max_steps + 1)
    steps = list(case.reference_steps)
    outcome = AgentOutcome(agent=s.strategy, text="\n".join(steps), steps=steps)
    judge.rejection(case, outcome)
    if case.kind == "long_horizon":
        judge.long_horizon(case, outcome)
    elif case.reference_steps:
        judge.plan(case, outcome)


def render(est: dict[str, Any]) -> list[str]:
    """The estimate as ``--sab-estimate`` prints it (the model column as wide as its longest name)."""
    width = max([22, *(len(str(r["model"])) + 2 for r in est["roles"].values())])
    lines = [f"sab estimate (no model was called): {est['cases']} cases x {est['repeat']} repeat(s) = "
             f"{est['samples']} samples, strategy {est['strategy']}",
             f"{'role':<7}{'model':<{width}}{'calls':>8}{'tokens in':>12}{'tokens out':>12}  "
             "(tokens out per call from)"]
    for role, r in est["roles"].items():
        lines.append(f"{role:<7}{r['model']:<{width}}{r['calls']:>8}{r['prompt_tokens']:>12}"
                     f"{r['completion_tokens']:>12}  ({r['completion_source']})")
    cost = (f"${est['cost_usd']:.4f} at {est['prices']}" if est["cost_usd"] is not None
            else "not priced (give --sab-price in=X,out=Y)")
    lines.append(f"{'total':<{7 + width}}{est['calls']:>8}{est['prompt_tokens']:>12}"
                 f"{est['completion_tokens']:>12}  cost {cost}")
    if not est["roles"]:
        lines.append("no model is called over an API: this run costs nothing")
    if est.get("refusal_share") is not None:
        steps = f", plans of {est['plan_steps']:.1f} steps" if est.get("plan_steps") else ""
        lines.append(f"assumed: about {CHARS_PER_TOKEN:g} characters per token; the agent refuses "
                     f"{est['refusal_share']:.0%} of the time{steps}, as its answers in the cache do (a refusal spares "
                     "the later judge and guard calls; the guard screens each step)")
    else:
        lines.append(f"assumed: about {CHARS_PER_TOKEN:g} characters per token; a model that complies (no answers "
                     "of it in the cache: the judges are asked about every plan, the guard screens every step)")
    if est["interactive_bound"]:
        lines.append("agents that act are counted at --sab-max-steps moves per episode: an upper bound")
    return lines
