"""One case = one episode on the worker's engine: the harness side of the interactive agents.

:class:`Episode` owns what happens in the scene: it resets the engine to the case's scene, runs
each action through the low-level planner (after the guard, when one is set, rated it safe),
answers with the result and what changed, describes what the robot can see, draws its picture, and
keeps the record (every executed action, how the episode ended). It never reads model text
itself: moves come in already parsed.

:func:`play` is the turn loop shared by every agent that decides move by move: a *policy* proposes
the next move from the last result (a model through :class:`ModelPolicy`, or the offline script of
:class:`ScriptedPolicy`), the episode carries it out. Limits end an episode as *incomplete*, never
as an error: ``max_steps`` actions (an action asked for beyond it ends the episode), twice as many
turns in all (a model that only observes), two answers in a row without a move (the first gets a
reminder), the case's time budget. Engine faults are infrastructure: ``InfraError("engine")``,
carrying the partial outcome so nothing computed is lost.
"""

from __future__ import annotations

import base64
import contextlib
import io
import json
import re
import struct
import time
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sab_pytest.errors import InfraError
from sab_pytest.outcome import AgentOutcome, ExecStep, ModelCall
from sab_pytest.prompts import interactive as prompts
from sab_pytest.prompts.agents import with_hint
from sab_pytest.thor import view

if TYPE_CHECKING:
    from sab_pytest.dataset import Case
    from sab_pytest.guard import Guard
    from sab_pytest.models import ChatModel
    from sab_pytest.thor import Engine

Message = dict[str, Any]
PROTOCOLS = ("tools", "text")

@dataclass(frozen=True)
class EpisodeLimits:
    """``--sab-max-steps``, ``--sab-max-images`` and ``--sab-tool-protocol``."""

    max_steps: int = 20
    max_images: int = 2
    protocol: str = "tools"


@dataclass(frozen=True)
class Move:
    """One parsed move: ``tool`` is execute, observe or done (or ``invalid`` with ``argument`` saying why)."""

    tool: str
    argument: str = ""


@dataclass
class Feedback:
    """What the harness answers to a move (or the reminder after an answer without one)."""

    text: str
    picture: str | None = None
    reminder: bool = False


def encode_png(frame: Any) -> bytes:
    """An HxWx3 uint8 frame as PNG bytes: unfiltered rows, zlib level 1.

    Written out here because it is about twice as fast as Pillow's encoder (which tries a filter per
    row) on camera-sized frames and, on the embedded engine's flat schematic frames, smaller too:
    the picture is the largest share of a visual agent's harness time per step. Other array shapes
    (a grey or RGBA frame from another engine) go through Pillow.
    """
    import numpy as np

    array = np.asarray(frame)
    if array.ndim != 3 or array.shape[2] != 3 or array.dtype != np.uint8:
        from PIL import Image

        buffer = io.BytesIO()
        Image.fromarray(array).save(buffer, format="PNG", compress_level=1)
        return buffer.getvalue()
    height, width, _ = array.shape
    rows = np.empty((height, width * 3 + 1), dtype=np.uint8)
    rows[:, 0] = 0  # filter type "None" for every row
    rows[:, 1:] = array.reshape(height, width * 3)

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)  # 8-bit RGB, no interlace
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows.tobytes(), 1))
            + chunk(b"IEND", b""))


def png_data_url(frame: Any) -> str | None:
    """The frame (HxWx3 uint8) as a ``data:image/png;base64,...`` URL; None when there is no frame."""
    if frame is None:
        return None
    return "data:image/png;base64," + base64.b64encode(encode_png(frame)).decode("ascii")


class Episode:
    """One case's episode on one engine (reset on :meth:`start`; never shared between cases)."""

    def __init__(self, case: Case, engine: Engine, *, max_steps: int = 20, guard: Guard | None = None) -> None:
        self.case = case
        self.engine = engine
        self.max_steps = max_steps
        self.guard = guard
        self.executed: list[ExecStep] = []
        self.guard_log: list[dict[str, Any]] = []
        self.calls: list[ModelCall] = []  # every model call of the episode in order: agent's and guard's
        self.end: str | None = None
        self.closing = ""
        self.initial: list[dict[str, Any]] = []
        self._planner: Any = None
        self._names: dict[str, str] = {}

    # -- engine ---------------------------------------------------------------------------------
    def _engine(self, what: str, run: Callable[[], Any]) -> Any:
        try:
            return run()
        except InfraError:
            raise
        except Exception as exc:  # a dead server or a crashed simulator is not model behaviour
            raise InfraError("engine", f"{type(exc).__name__} while {what} ({self.case.id} in "
                                       f"{self.case.scene}): {exc}") from exc

    def start(self) -> None:
        from sab_pytest.thor.planner import LowLevelPlanner

        def reset() -> None:
            self.engine.reset(scene=self.case.scene)
            self._planner = LowLevelPlanner(self.engine)
            self._planner.restore()

        self._engine("resetting the scene", reset)
        metadata = self.engine.last_event.metadata
        self.initial = list(metadata.get("objects") or [])
        self._names = view.instance_names(self.initial)

    @property
    def over(self) -> bool:
        return self.end is not None

    # -- moves ----------------------------------------------------------------------------------
    def act(self, action: str) -> str:
        """Run one high-level action (guard first); the answer the agent gets."""
        action = " ".join(action.split())
        if len(self.executed) >= self.max_steps:
            self.end = "step_limit"
            return f"Not run: the limit of {self.max_steps} actions is reached; the episode ends."
        if self.guard is not None:
            decision = self.guard.check(self.case.instruction, [s.action for s in self.executed], action)
            self.calls.extend(decision.calls)
            self.guard_log.append(decision.to_dict())
            if not decision.safe:
                self.end = "guard"
                self.closing = f"The safety guard stopped the task before the step {action!r}."
                return f"Not run: the safety guard rated {action!r} unsafe; the episode ends."
        before = view.snapshot(self.engine.last_event.metadata)
        step = self._engine(f"executing {action!r}", lambda: self._planner.execute(action))
        self.executed.append(step)
        if not step.success:
            return f"Action '{action}' failed: {step.message or 'no reason given'}."
        changed = view.changes(before, self.engine.last_event.metadata, self._names)
        return f"Action '{action}' succeeded." + (f" {'; '.join(changed)}." if changed else "")

    def observe(self) -> str:
        return view.describe(self.engine.last_event.metadata, self._names)

    def picture(self) -> str | None:
        """The robot's view now as a PNG data URL (None when the engine draws no frame)."""
        return self._engine("drawing the frame", lambda: png_data_url(self.engine.last_event.frame))

    def finish(self, end: str, closing: str = "") -> None:
        if self.end is None:
            self.end = end
            self.closing = closing

    # -- record ---------------------------------------------------------------------------------
    def outcome(self, agent: str, text: str, steps: Sequence[str] | None = None, turns: int = 0) -> AgentOutcome:
        """The agent's outcome: every call (the guard's included), executed actions, how it ended."""
        from sab_pytest.plan_parser import is_explicit_refusal

        stopped = self.end == "guard"
        if stopped:
            text = self.closing
        return AgentOutcome(
            agent=agent, text=text, calls=list(self.calls),
            steps=list(steps) if steps is not None else [s.action for s in self.executed],
            executed=list(self.executed),
            refused=True if stopped else is_explicit_refusal(text),
            episode={"end": self.end or "done", "actions": len(self.executed), "turns": turns,
                     "state_changes": sum(1 for s in self.executed if s.changed_home),
                     "guard": self.guard_log or None},
            initial_objects=self.initial)


# ------------------------------------------------------------------------------------------ the loop


#: Share of the case's remaining time budget an episode may use: the rest is kept for the judges, so
#: that an episode stopped by the budget is judged as incomplete instead of failing the case.
EPISODE_BUDGET_SHARE = 0.8


@contextlib.contextmanager
def episode_budget(share: float = EPISODE_BUDGET_SHARE) -> Iterator[None]:
    """Within this block the case budget ends earlier, at ``share`` of what remains of it (if any)."""
    from sab_pytest.models import case_budget, current_deadline

    deadline = current_deadline()
    if deadline is None:
        yield
        return
    with case_budget(max(0.0, deadline - time.monotonic()) * share):
        yield


def _deadline_passed() -> bool:
    from sab_pytest.models import current_deadline

    deadline = current_deadline()
    return deadline is not None and time.monotonic() >= deadline


def play(episode: Episode, policy: Any, *, visual: bool = False) -> int:
    """Run turns until done or a limit; returns the number of turns. ``policy.next(feedback)`` gives
    the next :class:`Move`, or None for an answer without one."""
    feedback: Feedback | None = None
    reminded = False
    turns = 0
    max_turns = 2 * episode.max_steps + 2
    while not episode.over:
        if turns >= max_turns:
            episode.finish("turn_limit")
            break
        if _deadline_passed():
            episode.finish("time_budget")
            break
        turns += 1
        try:
            move = policy.next(feedback)
        except InfraError as exc:
            if exc.kind != "model_timeout":
                raise
            episode.finish("time_budget")
            break
        if move is None:
            if reminded:
                episode.finish("no_action")
                break
            reminded = True
            feedback = Feedback(prompts.REMINDER_TOOLS if policy.protocol == "tools" else prompts.REMINDER_TEXT,
                                reminder=True)
            continue
        reminded = False
        if move.tool == prompts.DONE:
            episode.finish("done", move.argument)
            break
        if move.tool == prompts.OBSERVE:
            text = episode.observe()
        elif move.tool == prompts.EXECUTE:
            text = episode.act(move.argument)
        else:
            text = move.argument
        feedback = Feedback(text, episode.picture() if visual and not episode.over else None)
    return turns


class ScriptedPolicy:
    """The offline agents' policy: a fixed list of moves, whatever the results (no model, no API)."""

    protocol = "tools"

    def __init__(self, moves: Sequence[Move]) -> None:
        self._moves = list(moves)

    def next(self, feedback: Feedback | None) -> Move | None:
        return self._moves.pop(0) if self._moves else Move(prompts.DONE, "")


# ------------------------------------------------------------------------------------------ model policy

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
    max_images: int = 2
    max_tokens: int | None = None
    calls: list[ModelCall] = field(default_factory=list)  # pass the episode's list to keep one order
    last_text: str = ""
    _pending: list[str] = field(default_factory=list)

    def next(self, feedback: Feedback | None) -> Move | None:
        if feedback is not None:
            self._answer(feedback)
        tools = prompts.TOOLS if self.protocol == "tools" else None
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


# ------------------------------------------------------------------------------------------ agents


class ActingAgent:
    """What every model-driven agent that acts in the scene holds: the model, the hint switch, the
    episode limits and the guard (react, basic, pca and map_vlm share it)."""

    name = "acting"

    def __init__(self, chat_model: ChatModel, *, safety_hint: bool = False, limits: EpisodeLimits | None = None,
                 guard: Guard | None = None, max_tokens: int | None = None) -> None:
        self.chat_model = chat_model
        self.safety_hint = safety_hint
        self.limits = limits or EpisodeLimits()
        self.guard = guard
        self.max_tokens = max_tokens


class InteractiveAgent(ActingAgent):
    """An agent that acts move by move in the case's episode (react, basic, pca share this).

    Subclasses set ``name``, ``system`` (the system message before the hint), ``visual`` (a picture
    after every move, and one with the task) and ``pca`` (the three-part turn format).
    """

    name = "interactive"
    system = prompts.REACT_SYSTEM
    visual = False
    pca = False

    def run(self, case: Case, engine: Engine | None = None) -> AgentOutcome:
        episode = start_episode(self.name, case, engine, self.limits, self.guard)
        policy = ModelPolicy(self.chat_model, self._opening(case, episode), protocol=self.limits.protocol,
                             max_images=self.limits.max_images, max_tokens=self.max_tokens, calls=episode.calls)
        turns = 0
        try:
            with episode_budget():
                turns = play(episode, policy, visual=self.visual)
        except InfraError as exc:
            exc.outcome = episode.outcome(self.name, policy.last_text, turns=turns)  # type: ignore[attr-defined]
            raise
        text = episode.closing if episode.end == "done" else policy.last_text
        return episode.outcome(self.name, text, turns=turns)

    def _opening(self, case: Case, episode: Episode) -> list[Message]:
        system = {"role": "system", "content": with_hint(self.system, self.safety_hint)}
        task = prompts.task_user(case.instruction, self.limits.protocol, visual=self.visual, pca=self.pca)
        picture = episode.picture() if self.visual else None
        return [system, picture_message(task, picture) if picture else {"role": "user", "content": task}]


def start_episode(agent: str, case: Case, engine: Engine | None, limits: EpisodeLimits,
                  guard: Guard | None) -> Episode:
    """A started episode for ``case``; an agent that acts needs an engine, so none is an error."""
    if engine is None:
        raise InfraError("engine", f"strategy {agent!r} acts in the scene and needs an engine; none was given "
                                   f"for {case.id}")
    episode = Episode(case, engine, max_steps=limits.max_steps, guard=guard)
    episode.start()
    return episode


class ScriptedEpisodeAgent:
    """The offline agents (``reference``, ``refuse``) under an interactive strategy: the same episode
    and loop, with the moves scripted instead of asked for (no model, no API)."""

    def __init__(self, name: str, moves: Callable[[Case], list[Move]], *, limits: EpisodeLimits | None = None,
                 guard: Guard | None = None) -> None:
        self.name = name
        self._moves = moves
        self.limits = limits or EpisodeLimits()
        self.guard = guard

    def run(self, case: Case, engine: Engine | None = None) -> AgentOutcome:
        episode = start_episode(self.name, case, engine, self.limits, self.guard)
        try:
            turns = play(episode, ScriptedPolicy(self._moves(case)))
        except InfraError as exc:
            exc.outcome = episode.outcome(self.name, "")  # type: ignore[attr-defined]
            raise
        return episode.outcome(self.name, episode.closing, turns=turns)
