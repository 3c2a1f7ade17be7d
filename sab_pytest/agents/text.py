"""The seven text-planning strategies: a case's instruction in, a written plan out.

Each strategy keeps one baseline's idea (prompt text is in ``prompts/agents.py``):

=============  =====  ==========================================================================
strategy       calls  idea
=============  =====  ==========================================================================
direct         1      LoTa-Bench: action list + rules + instruction, plan straight away
cot            1      reason step by step under "Reasoning:", then "Plan:" and the plan
two_stage      2      plain-language plan, then a fresh conversation converts it to actions
progprompt     1      ProgPrompt: actions as a Python-like API, the answer is a program
fewshot        1      LLM-Planner: the 3 made-up examples nearest to the instruction in context
cooperative    2      CoELA: a scout robot briefs its partner, the partner plans from the brief
mldt           3      MLDT: goal level, task level, action level in one conversation
=============  =====  ==========================================================================

What the judges read (``AgentOutcome.text``) is always the final answer, unedited, as the reference
port scored the last assistant turn. ``steps`` is the plan extracted from it (for ``cot`` only from
the part after the "Plan:" heading, so that reasoning sentences never become steps; for
``progprompt`` by parsing the program, never running it). ``refused`` is the agent's own explicit
refusal as ``plan_parser.is_explicit_refusal`` reads the final answer. Every model call is kept in order
in ``calls``. Model failures are not caught here: ``ChatModel`` raises ``InfraError`` and the case
becomes a pytest error, never a silent empty plan.

The safety hint (off by default, as the paper ran its baselines) is described in
``prompts/agents.py``: when on, every system message of every strategy gets the same one sentence.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from sab_pytest import plan_parser
from sab_pytest.agents.examples import fixed_examples, nearest_examples
from sab_pytest.errors import InfraError
from sab_pytest.outcome import AgentOutcome, ModelCall
from sab_pytest.prompts import agents as prompts
from sab_pytest.thor.scenes import SceneSource

if TYPE_CHECKING:
    from sab_pytest.dataset import Case
    from sab_pytest.models import ChatModel
    from sab_pytest.settings.sampling import PaperCall
    from sab_pytest.thor import Engine

Message = dict[str, Any]

#: A line that opens the plan section of a chain-of-thought answer ("Plan:", "**Final plan:**", "## Plan").
_PLAN_HEADING = re.compile(r"^[ \t#*]*(?:final[ \t]+)?plan[ \t*]*(?::[ \t*]*|$)", re.IGNORECASE | re.MULTILINE)


def _msg(role: str, content: str) -> Message:
    return {"role": role, "content": content}


class TextPlanner:
    """What all strategies share: the model, the hint switch, recording calls, building the outcome.

    Subclasses set ``name`` and implement ``_converse``, which talks to the model through
    ``_ask`` and returns the final answer; ``_extract`` may be overridden for other answer shapes.
    """

    name = "text"

    def __init__(self, chat_model: ChatModel, *, safety_hint: bool = False,
                 max_tokens: int | None = None, paper: bool = False, scenes: SceneSource | None = None,
                 call: PaperCall | None = None) -> None:
        self.chat_model = chat_model
        self.safety_hint = safety_hint
        self.max_tokens = max_tokens
        self.paper = paper  # --sab-protocol paper: the scene's object types, no way out (``prompts.Framing``)
        # where the paper framing reads a scene's object types: the run's scene files, not the engine's,
        # because a text planner plans before (and without) any engine
        self.scenes = scenes if scenes is not None else SceneSource()
        self.call = call  # --sab-protocol paper: the messages in the shape of the paper's code's call (``paper_shape``)

    def run(self, case: Case, engine: Engine | None = None) -> AgentOutcome:
        """Plan for ``case`` (the engine is ignored: text planners plan once, the scorer executes)."""
        calls: list[ModelCall] = []
        framing = prompts.paper_framing(scene_object_types(case.scene, self.scenes)) if self.paper else prompts.SAB
        text = self._converse(case.instruction, calls, framing)
        return AgentOutcome(agent=self.name, text=text, steps=self._extract(text), calls=calls,
                            refused=plan_parser.is_explicit_refusal(text), plan_text=self._plan_text(text))

    # -- helpers for subclasses ---------------------------------------------------------------

    def _system(self, text: str) -> Message:
        """A system message; the safety hint goes here and only here."""
        return _msg("system", prompts.with_hint(text, self.safety_hint))

    def _ask(self, messages: list[Message], calls: list[ModelCall]) -> str:
        """One model call on a *copy* of ``messages`` (callers keep growing their list), recorded."""
        sent = paper_shape(messages, self.call) if self.call is not None else list(messages)
        call = self.chat_model.complete(sent, role="agent", max_tokens=self.max_tokens)
        if call.error:  # the protocol says implementations raise; never plan from a failed call
            raise InfraError("model_api", f"{self.name}: model call failed: {call.error}")
        calls.append(call)
        return call.answer

    def _ask_once(self, system: str, user: str, calls: list[ModelCall]) -> str:
        """A fresh two-message conversation (system, user): the shape of most strategy turns."""
        return self._ask([self._system(system), _msg("user", user)], calls)

    def _converse(self, instruction: str, calls: list[ModelCall], framing: prompts.Framing) -> str:
        raise NotImplementedError

    def _extract(self, text: str) -> list[str]:
        return plan_parser.extract_steps(text)

    def _plan_text(self, text: str) -> str | None:
        """The part of the answer that is the plan (None: all of it), for the judges of ``paper``."""
        return None


def paper_shape(messages: list[Message], call: PaperCall) -> list[Message]:
    """``messages`` as the paper's code's ``call`` sends a prompt: its own system line (``call_gpt``'s "You are a
    helpful assistant.", none for ``call_vllm``), and this project's system text (the planner's role, the
    safety hint when on) leading the first user message, so every word of the prompt still reaches the
    model. Later turns (a strategy's conversation) stay as they are."""
    own = [m["content"] for m in messages if m["role"] == "system"]
    rest = [dict(m) for m in messages if m["role"] != "system"]
    if own and rest and rest[0]["role"] == "user":
        rest[0]["content"] = "\n\n".join([*own, rest[0]["content"]])
    return ([_msg("system", call.system)] if call.system is not None else []) + rest


class DirectPlanner(TextPlanner):
    """LoTa-Bench-like: one call, no reasoning scaffold, no examples."""

    name = "direct"

    def _converse(self, instruction: str, calls: list[ModelCall], framing: prompts.Framing) -> str:
        return self._ask_once(prompts.PLANNER_SYSTEM, prompts.direct_user(instruction, framing), calls)


class CotPlanner(TextPlanner):
    """Chain of thought in one call; steps come only from the section after the plan heading."""

    name = "cot"

    def _converse(self, instruction: str, calls: list[ModelCall], framing: prompts.Framing) -> str:
        return self._ask_once(prompts.PLANNER_SYSTEM, prompts.cot_user(instruction, framing), calls)

    def _extract(self, text: str) -> list[str]:
        return super()._extract(plan_section(text))

    def _plan_text(self, text: str) -> str | None:
        """The plan after the heading: the reasoning is no step of the plan a judge of the paper is given."""
        return plan_section(text)


def plan_section(text: str) -> str:
    """The part of a chain-of-thought answer after its last plan heading (all of it if none)."""
    headings = list(_PLAN_HEADING.finditer(text))
    return text[headings[-1].end():] if headings else text


class TwoStagePlanner(TextPlanner):
    """Plain-language plan first; a separate converter turns it into the 17 actions."""

    name = "two_stage"

    def _converse(self, instruction: str, calls: list[ModelCall], framing: prompts.Framing) -> str:
        plain = self._ask_once(prompts.TWO_STAGE_SYSTEM, prompts.two_stage_plan_user(instruction, framing), calls)
        return self._ask_once(prompts.CONVERTER_SYSTEM,
                              prompts.two_stage_convert_user(instruction, plain, framing), calls)


class ProgPromptPlanner(TextPlanner):
    """ProgPrompt: the answer is a program over the action API, parsed (never executed)."""

    name = "progprompt"

    def _converse(self, instruction: str, calls: list[ModelCall], framing: prompts.Framing) -> str:
        examples = [e.as_pair() for e in fixed_examples()]
        return self._ask_once(prompts.PROGRAM_SYSTEM, prompts.progprompt_user(instruction, examples, framing),
                              calls)

    def _extract(self, text: str) -> list[str]:
        return plan_parser.parse_program(text)


class FewShotPlanner(TextPlanner):
    """LLM-Planner-like: the made-up examples most similar to the instruction, then the task."""

    name = "fewshot"
    k = 3

    def _converse(self, instruction: str, calls: list[ModelCall], framing: prompts.Framing) -> str:
        examples = [e.as_pair() for e in nearest_examples(instruction, self.k)]
        return self._ask_once(prompts.PLANNER_SYSTEM, prompts.fewshot_user(instruction, examples, framing), calls)


class CooperativePlanner(TextPlanner):
    """CoELA-like: a communication turn (scout briefs partner), then the partner plans from it.

    The two turns are two agents, so they are two conversations: the planner sees the scout's
    message as text from a teammate, not as its own earlier turn.
    """

    name = "cooperative"

    def _converse(self, instruction: str, calls: list[ModelCall], framing: prompts.Framing) -> str:
        brief = self._ask_once(prompts.SCOUT_SYSTEM, prompts.cooperative_brief_user(instruction, framing), calls)
        return self._ask_once(prompts.PLANNER_SYSTEM, prompts.cooperative_plan_user(instruction, brief, framing),
                              calls)


class MldtPlanner(TextPlanner):
    """MLDT: goal, task and action levels as three turns of one conversation."""

    name = "mldt"

    def _converse(self, instruction: str, calls: list[ModelCall], framing: prompts.Framing) -> str:
        conversation = [self._system(prompts.MLDT_SYSTEM), _msg("user", prompts.mldt_goals_user(instruction, framing))]
        goals = self._ask(conversation, calls)
        conversation += [_msg("assistant", goals), _msg("user", prompts.mldt_tasks_user())]
        tasks = self._ask(conversation, calls)
        conversation += [_msg("assistant", tasks), _msg("user", prompts.mldt_actions_user(framing))]
        return self._ask(conversation, calls)


def scene_object_types(scene: str, source: SceneSource) -> list[str]:
    """The distinct object types of ``scene`` at reset, sorted: what the paper tells every agent is in the
    home (read from the scene data the embedded engine loads, the same list an episode's reset gives)."""
    return sorted({str(o["objectType"]) for o in source.template(scene).objects if o.get("objectType")})

