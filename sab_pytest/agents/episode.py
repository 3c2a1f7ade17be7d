"""One case = one episode on the worker's engine: the harness side of the interactive agents.

:class:`Episode` owns what happens in the scene: it resets the engine to the case's scene, runs
each action through the run's low-level controller (the paper's under ``--sab-protocol paper``) after
the guard, when one is set, rated it safe, answers with the result and what changed, describes
what the robot can see, draws its picture, and keeps the record (every executed action, how the
episode ended). It never reads model text itself: moves come in already parsed.

:func:`play` is the turn loop shared by every agent that decides move by move: a *policy* proposes
the next move from the last result (a model through :class:`ModelPolicy`, or the offline script of
:class:`ScriptedPolicy`), the episode carries it out. Limits end an episode as *incomplete*, never
as an error: ``max_steps`` actions (an action asked for beyond it ends the episode), twice as many
turns in all (a model that only observes), two answers in a row without a move (the first gets a
reminder), the case's time budget. Engine faults are infrastructure: ``InfraError("engine")``,
carrying the partial outcome so nothing computed is lost.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sab_pytest.agents.pictures import keep_some, png_data_url, thumbnail_data_url
from sab_pytest.errors import ErrorKind, InfraError
from sab_pytest.outcome import AgentOutcome, ExecStep, ModelCall
from sab_pytest.plan_parser import is_explicit_refusal
from sab_pytest.prompts import interactive as prompts
from sab_pytest.thor import observation
from sab_pytest.thor.execute import SAB, Controllers

if TYPE_CHECKING:
    from sab_pytest.dataset import Case
    from sab_pytest.guard import Guard
    from sab_pytest.models import CallContext
    from sab_pytest.thor import Engine

Message = dict[str, Any]

@dataclass(frozen=True)
class EpisodeLimits:
    """``--sab-max-steps``, ``--sab-max-images`` and ``--sab-action-format``; ``schematic`` says the
    engine draws schematic pictures (the embedded engine), which the visual agents are then told."""

    max_steps: int = 20
    max_images: int = 2
    protocol: str = "tools"
    schematic: bool = False
    paper: bool = False  # --sab-protocol paper: the agents' prompts offer no way out of the task
    #: the low-level controller the actions run through (the paper's under ``paper``); None: the protocol's,
    #: with the evaluator file from its default place
    controllers: Controllers | None = None

    def using(self) -> Controllers:
        return self.controllers if self.controllers is not None else Controllers(paper=self.paper)


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


class Episode:
    """One case's episode on one engine (reset on :meth:`start`; never shared between cases)."""

    def __init__(self, case: Case, engine: Engine, *, max_steps: int = 20, guard: Guard | None = None,
                 using: Controllers | None = None) -> None:
        self.case = case
        self.using = using
        self.engine = engine
        self.max_steps = max_steps
        self.guard = guard
        self.executed: list[ExecStep] = []
        self.guard_log: list[dict[str, Any]] = []
        self.calls: list[ModelCall] = []  # every model call of the episode in order: agent's and guard's
        self.end: str | None = None
        self.closing = ""
        self.initial: list[dict[str, Any]] = []
        self.seen: list[dict[str, Any]] = []  # a small copy of each picture shown: {"step": n, "image": url}
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
        def reset() -> None:
            self.engine.reset(scene=self.case.scene)
            self._planner = (self.using or SAB).start(self.engine)

        self._engine("resetting the scene", reset)
        metadata = self.engine.last_event.metadata
        self.initial = list(metadata.get("objects") or [])
        self._names = observation.instance_names(self.initial)

    @property
    def over(self) -> bool:
        return self.end is not None

    # -- moves ----------------------------------------------------------------------------------
    def act(self, action: str) -> str:
        """Run one high-level action (guard first); the answer the agent gets."""
        # the paper's controller gets the line as it is written (stripped, as the paper's code splits lines)
        action = action.strip() if self.using is not None and self.using.paper else " ".join(action.split())
        if len(self.executed) >= self.max_steps:
            self.end = "step_limit"
            return f"Not run: the limit of {self.max_steps} actions is reached; the episode ends."
        if self.guard is not None:
            done = [(s.action, s.success) for s in self.executed]  # a failed step is shown as failed
            decision = self.guard.check(self.case.instruction, done, action)
            self.calls.extend(decision.calls)
            self.guard_log.append(decision.to_dict())
            if not decision.safe:
                self.end = "guard"
                self.closing = f"The safety guard stopped the task before the step {action!r}."
                return f"Not run: the safety guard rated {action!r} unsafe; the episode ends."
        before = observation.snapshot(self.engine.last_event.metadata)
        step = self._engine(f"executing {action!r}", lambda: self._planner.execute(action))
        self.executed.append(step)
        if not step.success:
            return f"Action '{action}' failed: {step.message or 'no reason given'}."
        changed = observation.changes(before, self.engine.last_event.metadata, self._names)
        return f"Action '{action}' succeeded." + (f" {'; '.join(changed)}." if changed else "")

    def object_types(self) -> list[str]:
        """The distinct object types of the scene after the reset, sorted: what the paper's agents are
        told is in the home before they start (its MAP baseline's oracle list, every type included)."""
        return sorted({str(o.get("objectType")) for o in self.initial if o.get("objectType")})

    def observe(self) -> str:
        return observation.describe(self.engine.last_event.metadata, self._names)

    def picture(self) -> str | None:
        """The robot's view now as a PNG data URL (None when the engine draws no frame). A small copy
        is kept for the record (``seen``), after how many executed steps it was taken: the request
        keeps the full picture, the record does not (``models.elide_images``)."""
        def draw() -> str | None:
            frame = self.engine.last_event.frame
            url = png_data_url(frame)
            if url is not None:
                self.seen.append({"step": len(self.executed), "image": thumbnail_data_url(frame)})
            return url

        return self._engine("drawing the frame", draw)

    def finish(self, end: str, closing: str = "") -> None:
        if self.end is None:
            self.end = end
            self.closing = closing

    # -- record ---------------------------------------------------------------------------------
    def outcome(self, agent: str, text: str, steps: Sequence[str] | None = None, turns: int = 0) -> AgentOutcome:
        """The agent's outcome: every call (the guard's included), executed actions, how it ended."""
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
                     "guard": self.guard_log or None,
                     **({"pictures": keep_some(self.seen), "pictures_shown": len(self.seen)} if self.seen else {})},
            initial_objects=self.initial)


# ------------------------------------------------------------------------------------------ the loop


#: Share of the case's remaining time budget an episode may use: the rest is kept for the judges, so
#: that an episode stopped by the budget is judged as incomplete instead of failing the case.
EPISODE_BUDGET_SHARE = 0.8


def episode_budget(context: CallContext | None,
                   share: float = EPISODE_BUDGET_SHARE) -> AbstractContextManager[CallContext | None]:
    """Within this block the case's ``context`` ends earlier, at ``share`` of what remains of its
    budget; yields it (None without a context: offline, no budget)."""
    return contextlib.nullcontext() if context is None else context.share(share)


def play(episode: Episode, policy: Any, *, visual: bool = False, context: CallContext | None = None) -> int:
    """Run turns until done or a limit; returns the number of turns. ``policy.next(feedback)`` gives
    the next :class:`Move`, or None for an answer without one. ``context``: the case's model context,
    whose spent budget ends the episode as incomplete."""
    feedback: Feedback | None = None
    reminded = False
    turns = 0
    max_turns = 2 * episode.max_steps + 2
    while not episode.over:
        if turns >= max_turns:
            episode.finish("turn_limit")
            break
        if context is not None and context.expired():
            if context.limited():  # pytest-timeout's limit: the case is over, as an error naming it
                raise context.out_of_time(f"episode: {context.bound()} spent after {turns} turns")
            episode.finish("time_budget")
            break
        turns += 1
        try:
            move = policy.next(feedback)
        except InfraError as exc:
            if exc.kind != ErrorKind.MODEL_TIMEOUT:
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


def start_episode(agent: str, case: Case, engine: Engine | None, limits: EpisodeLimits,
                  guard: Guard | None) -> Episode:
    """A started episode for ``case``; an agent that acts needs an engine, so none is an error."""
    if engine is None:
        raise InfraError("engine", f"strategy {agent!r} acts in the scene and needs an engine; none was given "
                                   f"for {case.id}")
    episode = Episode(case, engine, max_steps=limits.max_steps, guard=guard, using=limits.using())
    episode.start()
    return episode


class ScriptedEpisodeAgent:
    """The offline agents (``reference``, ``refuse``) under an interactive strategy: the same episode
    and loop, with the moves scripted instead of asked for (no model, no API)."""

    def __init__(self, name: str, moves: Callable[[Case], list[Move]], *, limits: EpisodeLimits | None = None,
                 guard: Guard | None = None, context: CallContext | None = None) -> None:
        self.name = name
        self._moves = moves
        self.limits = limits or EpisodeLimits()
        self.guard = guard
        self.context = context  # the case's: with an LLM judge or guard, a spent budget ends the episode

    def run(self, case: Case, engine: Engine | None = None) -> AgentOutcome:
        episode = start_episode(self.name, case, engine, self.limits, self.guard)
        try:
            turns = play(episode, ScriptedPolicy(self._moves(case)), context=self.context)
        except InfraError as exc:
            exc.outcome = episode.outcome(self.name, "")  # type: ignore[attr-defined]
            raise
        return episode.outcome(self.name, episode.closing, turns=turns)
