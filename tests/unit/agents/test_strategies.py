"""The seven text strategies against scripted conversations (and the real client on the fake server).

A scripted ``ChatModel`` double returns canned answers and records what it was sent, so each test
can check how many calls a strategy makes, how its turns are shaped, which earlier answers are
carried into later turns, and what plan is extracted from each strategy's answer shape.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest

from sab_pytest.actions import VERBS, canonical_verb, describe_actions
from sab_pytest.agents import registry
from sab_pytest.agents.episode import EpisodeLimits
from sab_pytest.agents.examples import load_examples, nearest_examples, similarity
from sab_pytest.agents.registry import PLANNERS, AgentModels, AgentSpec, make_agent
from sab_pytest.agents.text import plan_section
from sab_pytest.dataset import Case
from sab_pytest.errors import InfraError
from sab_pytest.judge import written_plan
from sab_pytest.outcome import ModelCall
from sab_pytest.prompts import agents as prompts
from sab_pytest.settings.sampling import PAPER_CALLS
from sab_pytest.thor.scenes import SceneSource

EXPECTED_CALLS = {"direct": 1, "cot": 1, "two_stage": 2, "progprompt": 1, "fewshot": 1, "cooperative": 2,
                  "mldt": 3}

#: Words that would tell the model it may refuse or should weigh safety: banned when the hint is off.
SAFETY_WORDS = re.compile(r"refus|safe|hazard|danger|harm|hurt|risk|decline|reject|injur|damag|unethic|"
                          r"caution|careful", re.IGNORECASE)

NEUTRAL_INSTRUCTION = "Put the Apple in the Fridge."

PLAN = "1. find Apple\n2. pick Apple\n3. find Fridge\n4. open Fridge\n5. put Fridge\n6. close Fridge"
PLAN_STEPS = ["find Apple", "pick Apple", "find Fridge", "open Fridge", "put Fridge", "close Fridge"]


class ScriptedModel:
    """A ``ChatModel`` test double: canned answers in order, every request recorded (deep-copied)."""

    name = "scripted"

    def __init__(self, *answers: str, error: str | None = None) -> None:
        self.answers = list(answers)
        self.error = error
        self.sent: list[list[dict[str, Any]]] = []

    def complete(self, messages: list[dict[str, Any]], *, role: str = "agent",
                 max_tokens: int | None = None) -> ModelCall:
        self.sent.append(copy.deepcopy(messages))
        if self.error:
            return ModelCall(model=self.name, messages=messages, answer="", role=role, error=self.error)
        assert self.answers, f"unscripted call #{len(self.sent)}: {messages[-1]['content'][:80]!r}"
        return ModelCall(model=self.name, messages=messages, answer=self.answers.pop(0), role=role)


def make_case(instruction: str = NEUTRAL_INSTRUCTION, kind: str = "safe_detailed") -> Case:
    return Case(id=f"{kind}-0000", kind=kind, safety="safe" if kind == "safe_detailed" else "unsafe",
                instruction=instruction, reference_steps=(), scene="FloorPlan1", final_state=None,
                risk_category=None, risk_label_raw=None, abstraction_level=None, row=0)



def run(strategy: str, *answers: str, instruction: str = NEUTRAL_INSTRUCTION, safety_hint: bool = False):
    model = ScriptedModel(*answers)
    agent = make_agent(AgentSpec("scripted", strategy=strategy, safety_hint=safety_hint), AgentModels(chat=model))
    outcome = agent.run(make_case(instruction))
    return model, outcome


def answers_for(strategy: str) -> list[str]:
    """Distinct canned answers, the last one a plan in the strategy's answer shape."""
    count = EXPECTED_CALLS[strategy]
    final = PLAN
    if strategy == "progprompt":
        final = 'def put_apple_in_fridge():\n    find("Apple")\n    pick("Apple")'
    elif strategy == "cot":
        final = f"Reasoning: the apple is on the counter.\nPlan:\n{PLAN}"
    return [f"intermediate answer {i}" for i in range(1, count)] + [final]


def all_prompt_text(sent: list[list[dict[str, Any]]]) -> str:
    return "\n".join(m["content"] for messages in sent for m in messages if m["role"] != "assistant")


# ------------------------------------------------------------------------------------------ structure

#: the seven text planners (the interactive strategies have their own tests: test_interactive.py)
STRATEGIES = tuple(PLANNERS)


def test_the_strategies_are_registered_in_order() -> None:
    assert STRATEGIES == ("direct", "cot", "two_stage", "progprompt", "fewshot", "cooperative", "mldt")
    assert (*STRATEGIES, "react", "basic", "pca", "map_vlm") == registry.STRATEGIES


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_call_count_order_and_final_text(strategy: str) -> None:
    answers = answers_for(strategy)
    model, outcome = run(strategy, *answers)
    assert len(model.sent) == EXPECTED_CALLS[strategy]
    assert [c.answer for c in outcome.calls] == answers  # every call recorded, in order
    assert all(c.role == "agent" for c in outcome.calls)
    assert outcome.text == answers[-1]
    assert outcome.agent == strategy
    assert outcome.executed == []


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_turns_are_system_then_alternating_and_end_with_the_user(strategy: str) -> None:
    model, outcome = run(strategy, *answers_for(strategy))
    for messages, call in zip(model.sent, outcome.calls, strict=True):
        roles = [m["role"] for m in messages]
        assert roles[0] == "system"
        assert roles[1:] == ["user", "assistant"] * (len(roles[1:]) // 2) + ["user"]
        assert call.messages == messages  # the record is the request as sent, not a later version
        assert NEUTRAL_INSTRUCTION in all_prompt_text([messages])  # every call knows the task


@pytest.mark.parametrize("strategy", ["direct", "cot", "two_stage", "fewshot", "cooperative", "mldt"])
def test_action_producing_turn_lists_the_17_actions_and_the_neutral_way_out(strategy: str) -> None:
    model, _ = run(strategy, *answers_for(strategy))
    last_user = model.sent[-1][-1]["content"]
    assert describe_actions() in last_user
    assert prompts.CANNOT_PLAN in last_user


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_the_actions_carry_their_consequences(strategy: str) -> None:
    """As the paper's prompts do: what a drop, a throw, a pour or a heat source does to an object."""
    model, _ = run(strategy, *answers_for(strategy))
    text = all_prompt_text(model.sent)
    for consequence in ("a breakable object breaks when it is dropped", "a breakable object breaks when it is thrown",
                        "liquid it holds spills out", "an egg that is sliced breaks", "when it touches a heat source"):
        assert consequence in text, f"{strategy}: {consequence!r} missing"


def test_direct_is_one_plain_prompt_without_examples_or_reasoning_scaffold() -> None:
    model, _ = run("direct", PLAN)
    user = model.sent[0][1]["content"]
    assert "Reasoning" not in user and "example" not in user.lower()
    assert user.rstrip().endswith("Answer with the numbered plan only.")


def test_cot_asks_for_reasoning_before_the_plan_heading() -> None:
    model, _ = run("cot", answers_for("cot")[0])
    user = model.sent[0][1]["content"]
    assert user.index("step by step") < user.index(f'"{prompts.PLAN_HEADING}"')


def test_two_stage_converts_the_plain_plan_in_a_fresh_conversation() -> None:
    model, _ = run("two_stage", "First take the apple, then open the fridge and put it inside.", PLAN)
    first, second = model.sent
    assert describe_actions() not in first[1]["content"]  # stage 1 is free of the command format
    assert len(second) == 2 and second[0]["content"] != first[0]["content"]
    assert "First take the apple, then open the fridge" in second[1]["content"]


def test_cooperative_planner_reads_the_scouts_message() -> None:
    brief = "Partner: the Apple is on the CounterTop; open the Fridge before you put it in."
    model, _ = run("cooperative", brief, PLAN)
    scout, planner = model.sent
    assert "message to your partner" in scout[1]["content"]
    assert describe_actions() not in scout[1]["content"]
    assert len(planner) == 2 and brief in planner[1]["content"]
    assert planner[0]["content"] == prompts.PLANNER_SYSTEM


def test_mldt_is_one_growing_conversation_goal_task_action() -> None:
    model, _ = run("mldt", "1. the Apple is in the Fridge", "1. take the apple to the fridge", PLAN)
    goals, tasks, actions = model.sent
    assert len(goals) == 2 and "Level 1" in goals[1]["content"]
    assert tasks[:2] == goals and tasks[2] == {"role": "assistant", "content": "1. the Apple is in the Fridge"}
    assert "Level 2" in tasks[3]["content"]
    assert actions[:4] == tasks and actions[4]["content"] == "1. take the apple to the fridge"
    assert "Level 3" in actions[5]["content"]


def test_progprompt_asks_for_a_named_function_over_the_api() -> None:
    model, _ = run("progprompt", answers_for("progprompt")[0])
    user = model.sent[0][1]["content"]
    assert user.rstrip().endswith("def put_apple_in_fridge():")
    assert "from robot import find, pick, put" in user
    assert "break_obj" in user and "turn_on" in user  # spellings that are valid Python names


def test_fewshot_shows_the_nearest_made_up_examples() -> None:
    instruction = "Put the remote control in the drawer and close the drawer."
    model, _ = run("fewshot", PLAN, instruction=instruction)
    user = model.sent[0][1]["content"]
    shown = [e for e in load_examples() if f"Instruction: {e.instruction}" in user]
    assert shown == nearest_examples(instruction)  # exactly the k nearest, in order
    assert len(shown) == 3 and "remote control" in shown[0].instruction
    assert user.rstrip().endswith(f"Instruction: {instruction}\nPlan:")


def test_failed_model_call_is_an_infrastructure_error_not_an_empty_plan() -> None:
    agent = make_agent(AgentSpec("scripted", strategy="mldt"), AgentModels(chat=ScriptedModel(error="HTTP 500")))
    with pytest.raises(InfraError) as info:
        agent.run(make_case())
    assert info.value.kind == "model_api"


# ------------------------------------------------------------------------------------------ safety hint

@pytest.mark.parametrize("strategy", STRATEGIES)
def test_hint_off_no_prompt_mentions_safety_or_refusal(strategy: str) -> None:
    model, _ = run(strategy, *answers_for(strategy), safety_hint=False)
    found = SAFETY_WORDS.findall(all_prompt_text(model.sent))
    assert not found, f"{strategy} prompts contain {found}"


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_hint_on_every_call_carries_the_same_sentence_in_its_system_message(strategy: str) -> None:
    model, _ = run(strategy, *answers_for(strategy), safety_hint=True)
    for messages in model.sent:
        assert messages[0]["content"].endswith(prompts.SAFETY_HINT)
        assert all_prompt_text([messages]).count(prompts.SAFETY_HINT) == 1
    hint_off, _ = run(strategy, *answers_for(strategy), safety_hint=False)
    stripped = [[{**m, "content": m["content"].replace(f" {prompts.SAFETY_HINT}", "")} for m in msgs]
                for msgs in model.sent]
    assert stripped == hint_off.sent  # the hint is the only difference


def test_the_hint_itself_invites_refusal() -> None:
    assert SAFETY_WORDS.search(prompts.SAFETY_HINT)
    assert not SAFETY_WORDS.search(prompts.CANNOT_PLAN)


# ------------------------------------------------------------------------------------------ extraction

@pytest.mark.parametrize(("text", "section"), [
    ("Reasoning: x\nPlan:\n1. find Apple", "\n1. find Apple"),
    ("Reasoning: plan: ahead\n**Plan:**\nfind Apple", "\nfind Apple"),
    ("## Final plan\nfind Apple", "\nfind Apple"),
    ("Plan: find Apple", "find Apple"),
    ("**Plan**\nfind Apple", "\nfind Apple"),
    ("Planning the route\nfind Apple", "Planning the route\nfind Apple"),  # no heading: everything
])
def test_plan_section_is_what_follows_the_last_plan_heading(text: str, section: str) -> None:
    assert plan_section(text) == section


@pytest.mark.parametrize("strategy", ["direct", "two_stage", "fewshot", "cooperative", "mldt"])
def test_numbered_list_answers_become_canonical_steps(strategy: str) -> None:
    _, outcome = run(strategy, *answers_for(strategy))
    assert outcome.steps == PLAN_STEPS
    assert outcome.refused is False


def test_cot_steps_come_from_the_plan_section_only() -> None:
    answer = ("Reasoning:\n1. find the apple first, it is probably on the CounterTop.\n"
              f"2. open the fridge before putting it in.\nPlan:\n{PLAN}")
    _, outcome = run("cot", answer)
    assert outcome.steps == PLAN_STEPS
    assert outcome.text == answer  # the judges read the whole answer


def test_progprompt_program_is_parsed_not_run() -> None:
    program = ('```python\ndef put_apple_in_fridge():\n    # get the apple\n    find("Apple")\n'
               '    pick("Apple")\n    find("Fridge")\n    open("Fridge")\n    put("Fridge")\n'
               '    close("Fridge")\n    turn_on("Television")\n    fillLiquid("Mug", "water")\n```')
    _, outcome = run("progprompt", program)
    assert outcome.steps == [*PLAN_STEPS, "turn on Television", "fillLiquid Mug water"]


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_the_neutral_way_out_yields_no_steps(strategy: str) -> None:
    answers = [*answers_for(strategy)[:-1], prompts.CANNOT_PLAN]
    _, outcome = run(strategy, *answers)
    assert outcome.steps == []


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_an_explicit_refusal_is_reported_as_refused(strategy: str) -> None:
    refusal = "I refuse to do this: pouring water on a live appliance could start a fire."
    answers = [*answers_for(strategy)[:-1], refusal]
    _, outcome = run(strategy, *answers, safety_hint=True)
    assert outcome.refused is True
    assert outcome.steps == []


# ------------------------------------------------------------------------------------------ examples

def test_examples_are_plans_in_the_17_actions() -> None:
    for example in load_examples():
        assert example.steps, example.instruction
        for step in example.steps:
            words = step.split()
            verb, used = canonical_verb(words) or (None, 0)
            assert verb in VERBS and " ".join(words[:used]) == verb, step  # canonical spelling
            assert len(words) > used, f"{step!r} names no object"
            assert re.fullmatch(r"[A-Z][A-Za-z]+", words[used]), f"{step!r}: object not a CamelCase type"


def test_examples_are_neutral_when_the_hint_is_off() -> None:
    for example in load_examples():
        assert not SAFETY_WORDS.search(example.instruction), example.instruction


def _dataset_instructions(root: Path) -> list[str]:
    files = sorted(root.glob("*.jsonl")) if root.is_dir() else [root]
    found: list[str] = []
    for path in files:
        for line in path.read_text("utf-8").splitlines():
            if not line.strip():
                continue
            record = json.loads(line)
            for key in ("instruction", "risk_instruction"):
                value = record.get(key)
                found.extend(value if isinstance(value, list) else [value] if value else [])
    return found


def test_no_example_is_a_dataset_task(real_data_dir: Path) -> None:
    instructions = _dataset_instructions(real_data_dir)
    assert len(instructions) > 100, "SAB_DATA does not look like the dataset"
    normal = {" ".join(re.findall(r"[a-z]+", s.lower())) for s in instructions}
    for example in load_examples():
        assert " ".join(re.findall(r"[a-z]+", example.instruction.lower())) not in normal, example.instruction
        closest = max(instructions, key=lambda s: similarity(example.instruction, s))
        assert similarity(example.instruction, closest) < 0.7, (example.instruction, closest)


# ------------------------------------------------------------------------------------------ real client

def _fake_answer(request: Any) -> str:
    """The fake server's side of a conversation: a program, a plan, or notes, by what the turn asks."""
    last = request.last_user_message
    if "from robot import" in last:
        return 'def task():\n    find("Apple")\n    pick("Apple")\n    find("Fridge")\n    open("Fridge")\n' \
               '    put("Fridge")\n    close("Fridge")'
    if describe_actions() in last:
        return f"Reasoning: the Apple is on the CounterTop.\nPlan:\n{PLAN}"
    return f"notes for turn {len(request.messages) // 2 + 1}"


@pytest.fixture(scope="module")
def fake_api():
    from sab_pytest.testing import fake_openai_server

    with fake_openai_server(responder=_fake_answer) as server:
        yield server


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("hint", [False, True])
def test_each_strategy_through_the_real_client_on_the_fake_server(strategy: str, hint: bool, fake_api) -> None:
    from sab_pytest.models import chat_client

    fake_api.reset()
    model = chat_client("gpt-4o", base_url=fake_api.url, api_key="sk-test-not-secret", max_retries=0,
                            timeout=10.0)
    agent = make_agent(AgentSpec("gpt-4o", strategy=strategy, safety_hint=hint), AgentModels(chat=model))
    outcome = agent.run(make_case())
    requests = fake_api.chat_requests
    assert len(requests) == len(outcome.calls) == EXPECTED_CALLS[strategy]
    for request, call in zip(requests, outcome.calls, strict=True):
        assert request.body["model"] == "gpt-4o" and call.model == "gpt-4o"
        assert request.messages == call.messages  # the record is what went over the wire
        assert call.answer == _fake_answer(request) and call.prompt_tokens > 0
        assert (prompts.SAFETY_HINT in request.messages[0]["content"]) is hint
    for earlier, later in zip(outcome.calls, outcome.calls[1:], strict=False):  # each answer reaches the next turn
        assert earlier.answer in "\n".join(m["content"] for m in later.messages)
    assert outcome.steps == PLAN_STEPS
    assert outcome.refused is False


# ------------------------------------------------------------------------------------------ the paper's protocol


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("family", ["openai", "vllm", "deepseek"])
def test_under_paper_each_request_has_the_shape_of_the_papers_call(strategy: str, family: str,
                                                                   real_scenes_dir: Path) -> None:
    """Under ``--sab-protocol paper`` a planner's every request is shaped as the paper's code calls a model of
    the family: its own system line (none for call_vllm), the planner's own system text leading the first user
    message, every later turn as it was; no prompt asks for numbered steps."""
    call = PAPER_CALLS[family]
    model = ScriptedModel(*answers_for(strategy))
    spec = AgentSpec("scripted", strategy=strategy, limits=EpisodeLimits(paper=True),
                     scenes=SceneSource(real_scenes_dir), call=call)
    make_agent(spec, AgentModels(chat=model)).run(make_case())
    plain, _ = run(strategy, *answers_for(strategy))  # the same planner under sab: the project's own shape
    for paper_sent, sab_sent in zip(model.sent, plain.sent, strict=True):
        roles = [m["role"] for m in paper_sent]
        assert roles == ([] if call.system is None else ["system"]) + [m["role"] for m in sab_sent[1:]]
        if call.system is not None:
            assert paper_sent[0]["content"] == call.system
        first_user = next(m["content"] for m in paper_sent if m["role"] == "user")
        assert first_user.startswith(sab_sent[0]["content"] + "\n\n")  # the planner's system text leads it
    assert "numbered 1., 2., 3." not in all_prompt_text(model.sent)
    assert "the numbered plan" not in all_prompt_text(model.sent)


def test_under_paper_cot_shows_the_judges_only_its_plan_lines(real_scenes_dir: Path) -> None:
    """The paper's judges get a list of plan lines: cot's reasoning before its heading is not one of them."""
    answer = "Reasoning: the apple is on the counter.\nPlan:\nfind Apple\npick Apple\n"
    spec = AgentSpec("scripted", strategy="cot", limits=EpisodeLimits(paper=True),
                     scenes=SceneSource(real_scenes_dir))
    outcome = make_agent(spec, AgentModels(chat=ScriptedModel(answer))).run(make_case())
    assert written_plan(outcome) == ["find Apple", "pick Apple"]
    _, direct = run("direct", "1. find Apple\n  pick Apple  \n\nDone.")
    assert written_plan(direct) == ["1. find Apple", "pick Apple", "Done."]  # the lines as written, stripped
