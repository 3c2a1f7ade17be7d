"""The dry model of ``--sab-estimate``: a ``ChatModel`` that calls nothing, counts each request it is
given, and answers as a model that complies would.

Its answers are the estimate's assumption about the model, so they live in one place, which the
estimate's test also hands the fake server: an agent's in the strategy's form (a numbered plan, a
ProgPrompt program, or one move at a time as a tool call or an ``Action:`` line) walking the case's
reference plan; one judge answer that every judge, under both protocols' readers, reads as complied,
task done and safe; "safe" from the guard.
"""

from __future__ import annotations

import functools
import itertools
import json
import threading
from dataclasses import dataclass, field
from typing import Any

from sab_pytest import plan_parser
from sab_pytest.agents.offline import scripted_moves
from sab_pytest.dataset import Case
from sab_pytest.models.tokens import TokenCounter, char_count, char_rule
from sab_pytest.outcome import ModelCall
from sab_pytest.prompts.agents import program_call
from sab_pytest.settings.strategies import strategy_info

#: one answer every judge reads as complied, task done, safe, under both protocols' readers (the paper's reads
#: the first [[..]] for long-horizon tasks and the line after the last "Rating: " for plans)
JUDGE_ANSWER = "The robot lists steps and does not refuse.\nCOMPLIED\nRating: [[1, 1]]\nRating: [[success]]"
GUARD_ANSWER = "Rating: [[safe]]"
#: a planner's answer to a case without reference steps: a plan, so the judges are asked about it
NO_REFERENCE_ANSWER = "1. find Apple"


@dataclass
class Tally:
    """Calls and tokens of one role's model. ``if_complied``: the part of them a refusal would not make
    (a judge's calls after the case's first, the guard's screening of the plan's steps).
    ``first_prompt``: the tokens of the role's first call in the case being counted. ``answered``: the
    tokens of the dry answers given (what a complying model writes), over ``calls``."""

    calls: int = 0
    prompt_tokens: int = 0
    out_per_call: float = 0.0
    out_source: str = ""
    if_complied_calls: int = 0
    if_complied_tokens: int = 0
    first_prompt: int | None = None
    first_at: int = 0  # when (``_SEQUENCE``) that first call was made: which judge's model was asked first
    answered: int = 0


#: (role, model) -> the tally of that role's calls to that model
Tallies = dict[tuple[str, str], Tally]


def prompt_tokens(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None) -> int:
    """About how many tokens a request's messages (and tools) are, by the character rule (``models.tokens``)."""
    return char_count(messages, tools)


#: how a complying agent answers: a numbered plan, a ProgPrompt program, or one move at a time
PLAN, PROGRAM, MOVES = "plan", "program", "moves"  # the ``answers`` of ``settings.strategies``


def answer_style(strategy: str) -> str:
    """How the agent of ``strategy`` is answered, as its line of the strategies' table says
    (``settings.strategies``): the acting agents that decide move by move get moves (map_vlm plans in
    words), ProgPrompt a program, every other planner a numbered plan."""
    return strategy_info(strategy).answers


def complying_answer(style: str, case: Case | None, messages: list[dict[str, Any]],
                     tools: bool) -> tuple[str, tuple[str, dict[str, str]] | None]:
    """A complying agent model's answer in ``style``: its text, and its tool call (name, arguments)
    when it acts through ``tools``. It walks the case's reference plan (a plan with one find step
    when the case has none): all at once as a plan or program, or one step a move (counted by the
    answers already in the conversation) and then done."""
    if style == MOVES:
        moves = scripted_moves("reference")(case) if case is not None else []
        turn = sum(1 for message in messages if message.get("role") == "assistant")
        move = moves[min(turn, len(moves) - 1)] if moves else None
        tool, argument = (move.tool, move.argument) if move is not None else ("done", "")
        if tools:
            return "", (tool, {"action" if tool == "execute" else "message": argument})
        return (f"Action: {argument}" if tool == "execute" else f"Action: {tool} {argument}".strip()), None
    steps = _reference_plan(tuple(case.reference_steps)) if case is not None else ()
    if style == PROGRAM:
        return "\n".join(program_call(step) for step in steps or [NO_REFERENCE_ANSWER[3:]]), None
    return "\n".join(f"{i}. {step}" for i, step in enumerate(steps, 1)) or NO_REFERENCE_ANSWER, None


@functools.lru_cache(maxsize=4096)
def _reference_plan(reference: tuple[str, ...]) -> tuple[str, ...]:
    """A case's reference steps as the plan parser reads them (once a case: an agent asks many times)."""
    return tuple(plan_parser.extract_steps("\n".join(reference)))


_COUNTING = threading.Lock()
_SEQUENCE = itertools.count(1)


@dataclass
class DryModel:
    """A ``ChatModel`` that calls nothing: it counts each request under its role and its own name (map_vlm's
    helpers and a judge panel's members each under their own model), by ``counter`` (the model's tokenizer),
    and answers as a complying model (an agent's answers in ``style``, see ``complying_answer``)."""

    name: str
    tallies: Tallies
    case: Case | None = None
    style: str = PLAN
    counter: TokenCounter = field(default_factory=char_rule)

    def complete(self, messages: list[dict[str, Any]], *, role: str = "agent", max_tokens: int | None = None,
                 tools: list[dict[str, Any]] | None = None) -> ModelCall:
        tokens = self.counter.messages(messages, tools)
        # the request is counted, not kept: nothing reads a dry call's messages, and copying them into each
        # verdict (``ModelCall.to_dict``) was a sixth of an estimate's time
        call = ModelCall(model=self.name, messages=[], answer="", prompt_tokens=tokens, role=role)
        tool = None
        if role != "agent":
            call.answer = GUARD_ANSWER if role == "guard" else JUDGE_ANSWER
        else:
            call.answer, tool = complying_answer(self.style, self.case, messages, bool(tools))
        answered = self.counter.messages([{"role": "assistant", "content": call.answer}]) if call.answer else 0
        with _COUNTING:  # a judge panel asks its models from threads of its own
            tally = self.tallies.setdefault((role, self.name), Tally())
            tally.calls += 1
            tally.prompt_tokens += tokens
            tally.answered += answered
            if tally.first_prompt is None:
                tally.first_prompt, tally.first_at = tokens, next(_SEQUENCE)
        if tool is not None:
            call.tool_calls = [{"id": f"dry-{tally.calls}", "name": tool[0], "arguments": json.dumps(tool[1])}]
        return call
