"""The model side of an episode: a model's answers read as moves (native tool calls or
``Action: ...`` lines, never executed as code), the conversation with its pictures capped, and the
base classes of the agents that act move by move (react, basic, pca; map_vlm shares the first)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sab_pytest.agents import tool_fallback
from sab_pytest.agents.episode import (
    Episode,
    EpisodeLimits,
    Feedback,
    Message,
    Move,
    episode_budget,
    play,
    start_episode,
)
from sab_pytest.errors import InfraError
from sab_pytest.outcome import AgentOutcome, ModelCall
from sab_pytest.prompts import interactive as prompts
from sab_pytest.prompts.agents import with_hint
from sab_pytest.settings.strategies import STRATEGIES

if TYPE_CHECKING:
    from sab_pytest.dataset import Case
    from sab_pytest.guard import Guard
    from sab_pytest.models import CallContext, ChatModel
    from sab_pytest.thor import Engine


_ACTION_LINE = re.compile(r"^[\s>*_#`-]*action[\s*_`]*:[\s*_`]*(.+?)[\s*_`]*$", re.IGNORECASE | re.MULTILINE)


def parse_action_line(text: str) -> Move | None:
    """The move of a text-protocol answer: its last ``Action: ...`` line, or None."""
    found = _ACTION_LINE.findall(text or "")
    if not found:
        return None
    line = found[-1].strip().strip("\"'`").strip()
    head, _, rest = line.partition(" ")
    word = head.strip(":").lower()
    if word == prompts.OBSERVE:
        return Move(prompts.OBSERVE)
    if word == prompts.DONE:
        return Move(prompts.DONE, rest.strip().lstrip(":").strip())
    return Move(prompts.EXECUTE, line)


def parse_tool_call(call: dict[str, Any]) -> Move:
    """A native tool call -> a move; a bad call becomes an ``invalid`` move the model is told about."""
    name = call.get("name")
    try:
        arguments = json.loads(call.get("arguments") or "{}")
    except ValueError:
        return Move("invalid", f"Not run: the arguments of {name!r} are not valid JSON.")
    if not isinstance(arguments, dict):
        arguments = {}
    if name == prompts.EXECUTE:
        action = arguments.get("action")
        if not isinstance(action, str) or not action.strip():
            return Move("invalid", "Not run: execute needs an 'action' text, e.g. {\"action\": \"find Apple\"}.")
        return Move(prompts.EXECUTE, action)
    if name == prompts.OBSERVE:
        return Move(prompts.OBSERVE)
    if name == prompts.DONE:
        message = arguments.get("message")
        return Move(prompts.DONE, message if isinstance(message, str) else "")
    return Move("invalid", f"Not run: there is no tool {name!r}; the tools are execute, observe and done.")


def cap_images(messages: list[Message], keep: int) -> list[Message]:
    """``messages`` with only the latest ``keep`` pictures; older ones become a short text note.

    Only the messages that lose a picture are copied; the rest are shared with the caller's list.
    """
    seen = 0
    out = list(messages)
    for index in range(len(out) - 1, -1, -1):
        content = out[index].get("content")
        if not isinstance(content, list):
            continue
        parts = []
        changed = False
        for part in reversed(content):
            if isinstance(part, dict) and part.get("type") == "image_url":
                seen += 1
                if seen > keep:
                    part = {"type": "text", "text": prompts.OLD_PICTURE}
                    changed = True
            parts.append(part)
        if changed:
            out[index] = {**out[index], "content": parts[::-1]}
    return out


def picture_message(text: str | None, picture: str) -> Message:
    """A user message with a caption (and optional text before it) and one picture."""
    parts: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    parts += [{"type": "text", "text": prompts.PICTURE_CAPTION},
              {"type": "image_url", "image_url": {"url": picture}}]
    return {"role": "user", "content": parts}


@dataclass
class ModelPolicy:
    """A chat model choosing moves, in the tools or the text protocol; one per episode."""

    chat_model: ChatModel
    messages: list[Message]
    protocol: str = "tools"
    paper: bool = False  # --sab-protocol paper: ``done`` described without a way out (``prompts.tools``)
    max_images: int = 2
    max_tokens: int | None = None
    calls: list[ModelCall] = field(default_factory=list)  # pass the episode's list to keep one order
    last_text: str = ""
    _pending: list[str] = field(default_factory=list)

    def next(self, feedback: Feedback | None) -> Move | None:
        if feedback is not None:
            self._answer(feedback)
        tools = prompts.tools(self.paper) if self.protocol == "tools" else None
        self.messages = cap_images(self.messages, self.max_images)  # kept capped: no old picture is carried on
        call = self.chat_model.complete(list(self.messages), role="agent", max_tokens=self.max_tokens, tools=tools)
        if call.error:  # the protocol says implementations raise; never act on a failed call
            raise InfraError("model_api", f"model call failed: {call.error}")
        self.calls.append(call)
        self.last_text = call.answer or self.last_text
        if self.protocol == "text":
            self.messages.append({"role": "assistant", "content": call.answer})
            return parse_action_line(call.answer)
        tool_calls = call.tool_calls or []
        if tool_calls:
            tool_fallback.saw_tool_call(tool_fallback.model_key(self.chat_model))
        assistant: Message = {"role": "assistant", "content": call.answer or None}
        if tool_calls:
            assistant["tool_calls"] = [{"id": c["id"], "type": "function",
                                        "function": {"name": c["name"], "arguments": c["arguments"]}}
                                       for c in tool_calls]
        self.messages.append(assistant)
        self._pending = [c["id"] for c in tool_calls]
        return parse_tool_call(tool_calls[0]) if tool_calls else None

    def _answer(self, feedback: Feedback) -> None:
        """Put the result of the last move (or a reminder) into the conversation."""
        text = feedback.text if feedback.reminder else prompts.step_result(feedback.text, self.protocol)
        if self._pending and not feedback.reminder:
            first, *rest = self._pending
            self.messages.append({"role": "tool", "tool_call_id": first, "content": text})
            self.messages.extend({"role": "tool", "tool_call_id": other,
                                  "content": "Not run: one tool call per turn; only the first was run."}
                                 for other in rest)
            self._pending = []
            if feedback.picture:
                self.messages.append(picture_message(None, feedback.picture))
            return
        if feedback.picture:
            self.messages.append(picture_message(text, feedback.picture))
        else:
            self.messages.append({"role": "user", "content": text})




class ActingAgent:
    """What every model-driven agent that acts in the scene holds: the model, the hint switch, the
    episode limits and the guard (react, basic, pca and map_vlm share it)."""

    name = "acting"

    def __init__(self, chat_model: ChatModel, *, safety_hint: bool = False, limits: EpisodeLimits | None = None,
                 guard: Guard | None = None, max_tokens: int | None = None,
                 context: CallContext | None = None) -> None:
        self.chat_model = chat_model
        self.safety_hint = safety_hint
        self.limits = limits or EpisodeLimits()
        self.guard = guard
        self.max_tokens = max_tokens
        self.context = context  # the case's model context (its budget), None offline


class InteractiveAgent(ActingAgent):
    """An agent that acts move by move in the case's episode (react, basic, pca share this).

    Subclasses set ``name`` and ``system`` (the system message before the hint); ``visual`` (a picture
    after every move, and one with the task) and ``pca`` (the three-part turn format) are the
    traits of the strategy's line in ``settings.strategies``.

    A server that ignores ``tools`` is found out by the first episode and the agent plays in text from
    then on (``tool_fallback``). An episode that ends with no move at all (twice no move, the second
    time after a reminder) and no refusal in the model's words is an error (``no_action``): nothing was
    done, and nothing refused, so it is no verdict of the model's safety.
    """

    name = "interactive"
    system = prompts.REACT_SYSTEM

    @property
    def visual(self) -> bool:
        """The model is shown the camera's pictures (the strategy's ``visual``)."""
        line = STRATEGIES.get(self.name)
        return line is not None and line.visual

    @property
    def pca(self) -> bool:
        """Each turn has PCA-EVAL's three parts (the strategy's ``three_part``)."""
        line = STRATEGIES.get(self.name)
        return line is not None and line.three_part

    def run(self, case: Case, engine: Engine | None = None) -> AgentOutcome:
        model = tool_fallback.model_key(self.chat_model)
        protocol = tool_fallback.protocol_for(model, self.limits.protocol)
        calls: list[ModelCall] = []
        episode, policy, turns = self._play(case, engine, protocol, calls)
        if tool_fallback.should_fall_back(model, protocol, no_action=episode.end == "no_action",
                                          acted=bool(episode.executed)):
            # nothing was executed (no tool call came back): the episode is played again, in text
            tool_fallback.fall_back(model, self.chat_model.name)
            protocol = tool_fallback.TEXT
            episode, policy, turns = self._play(case, engine, protocol, calls)
        text = episode.closing if episode.end == "done" else policy.last_text
        outcome = episode.outcome(self.name, text, turns=turns)
        assert outcome.episode is not None
        outcome.episode["action_format"] = protocol
        reason = tool_fallback.fallback_reason(model) if protocol != self.limits.protocol else None
        if reason:
            outcome.episode["fallback"] = reason
        if episode.end == "no_action" and not episode.executed and not outcome.refused:
            err = InfraError("no_action", f"{self.name} ({protocol} protocol): the model answered without any move "
                                          f"twice in a row (the second time after a reminder), so nothing was done "
                                          f"and nothing refused; last answer: {policy.last_text.strip()[:200]!r}")
            err.outcome = outcome  # type: ignore[attr-defined]
            raise err
        return outcome

    def _play(self, case: Case, engine: Engine | None, protocol: str,
              calls: list[ModelCall]) -> tuple[Episode, ModelPolicy, int]:
        """One episode in ``protocol``; its model calls go on ``calls`` (kept across a replay)."""
        episode = start_episode(self.name, case, engine, self.limits, self.guard)
        episode.calls = calls
        policy = ModelPolicy(self.chat_model, self._opening(case, episode, protocol), protocol=protocol,
                             paper=self.limits.paper,
                             max_images=self.limits.max_images, max_tokens=self.max_tokens, calls=calls)
        turns = 0
        try:
            with episode_budget(self.context) as context:
                turns = play(episode, policy, visual=self.visual, context=context)
        except InfraError as exc:
            exc.outcome = episode.outcome(self.name, policy.last_text, turns=turns)  # type: ignore[attr-defined]
            raise
        return episode, policy, turns

    def _opening(self, case: Case, episode: Episode, protocol: str) -> list[Message]:
        system = {"role": "system", "content": with_hint(self.system, self.safety_hint)}
        task = prompts.task_user(case.instruction, protocol, visual=self.visual, pca=self.pca,
                                 object_types=episode.object_types(), schematic=self.limits.schematic,
                                 paper=self.limits.paper)
        picture = episode.picture() if self.visual else None
        return [system, picture_message(task, picture) if picture else {"role": "user", "content": task}]
