"""What an agent produced for one case, and what the engine did with it.

These records are the contract between agents, the engine runner and the judges. Everything in
them is JSON-safe through ``to_dict`` so that it can travel from an xdist worker to the controller
inside ``report.user_properties`` and be written to ``sab-results.jsonl``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from sab_pytest.actions import step_verb


@dataclass
class ModelCall:
    """One chat-completion call (or a cache hit standing in for one).

    ``messages`` is the request as sent (OpenAI chat format, images already encoded), ``answer``
    the assistant text. ``error`` is set (and ``answer`` empty) when the call failed for good.
    """

    model: str
    messages: list[dict[str, Any]]
    answer: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    cache_hit: bool = False
    finish_reason: str | None = None
    role: str = "agent"  # "agent", "judge" or "guard"
    error: str | None = None
    tool_calls: list[dict[str, Any]] | None = None  # [{"id", "name", "arguments"}] of a tool-calling answer
    served_model: str | None = None  # the model the answer named (its ``model`` field), where it named one
    cached_tokens: int = 0  # of ``prompt_tokens``, those read from the provider's prompt cache (billed less)
    batched: bool = False  # answered by a batch of this run (``--sab-batch``): billed at the batch price

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class ExecStep:
    """One high-level step as the low-level planner ran it."""

    action: str
    success: bool
    message: str = ""

    @property
    def changed_home(self) -> bool:
        """Succeeded and did more than walk: every action but ``find`` changes some object."""
        return self.success and step_verb(self.action) != "find"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class AgentOutcome:
    """Everything an agent produced for one case.

    ``text`` is the final answer the judges read; ``steps`` the plan extracted from it (normalised
    ``verb object`` strings, see ``plan_parser``); ``calls`` every model call in order; ``executed``
    the actions an interactive agent ran itself (empty for text planners, whose plans are executed
    afterwards by the scorer).

    ``episode`` is set when the agent acted in the engine itself (interactive strategies, and any
    agent behind the guard): how the episode ended (``done``, ``step_limit``, ``time_budget``,
    ``no_action``, ``guard``), and the guard's decisions. The engine is then left in the episode's
    final state, which execution scoring reads instead of running the plan again.
    ``initial_objects`` (the scene's objects right after the reset) stays in the worker: it is
    what the goal check needs to tell an unreachable goal, not part of the record; so does
    ``screen_at_execution``.
    """

    agent: str
    text: str
    steps: list[str] = field(default_factory=list)
    calls: list[ModelCall] = field(default_factory=list)
    executed: list[ExecStep] = field(default_factory=list)
    refused: bool | None = None  # the agent's own explicit refusal, when it can tell
    #: the part of ``text`` that is the plan, where the strategy's answer holds more (cot: after its "Plan:"
    #: heading); None: all of it. What the paper's judges are shown, split into lines (``judge.written_plan``)
    plan_text: str | None = field(default=None, compare=False)
    episode: dict[str, Any] | None = None
    initial_objects: list[dict[str, Any]] | None = field(default=None, repr=False, compare=False)
    #: a guarded text plan whose case is executed: ``(engine, controllers) -> ExecResult`` screens each step
    #: with the results of the steps run before it and runs the approved ones with the run's controller
    #: (``agents/guarded.py``); the scorer calls it with the engine, or with None when nothing is executed
    #: after all (worker only)
    screen_at_execution: Any = field(default=None, repr=False, compare=False)
    #: the plan's lines as written, where they are the plan itself (the reference agent's dataset lines): what
    #: the paper's controller is fed under ``--sab-protocol paper`` instead of the extracted ``steps``
    lines: list[str] | None = field(default=None, repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        return {
            "agent": self.agent,
            "text": self.text,
            "steps": list(self.steps),
            "calls": [c.to_dict() for c in self.calls],
            "executed": [s.to_dict() for s in self.executed],
            "refused": self.refused,
            "episode": self.episode,
        }


@dataclass
class ExecResult:
    """Execution of a plan in an engine and comparison of the final state with the goal.

    ``success`` is None when execution did not apply (no ``final_state``, execution turned off) or
    the goal cannot be reached in the scene (``unreachable_goal`` then says why).
    """

    steps: list[ExecStep]
    success: bool | None
    step_ratio: float | None  # the paper's ER: executed-successfully / planned steps
    goal_ratio: float | None  # mean per-object property match against final_state
    unreachable_goal: str | None = None
    final_objects: list[dict[str, Any]] = field(default_factory=list)  # goal-relevant objects only

    def to_dict(self) -> dict[str, Any]:
        return {
            "steps": [s.to_dict() for s in self.steps],
            "success": self.success,
            "step_ratio": self.step_ratio,
            "goal_ratio": self.goal_ratio,
            "unreachable_goal": self.unreachable_goal,
            "final_objects": self.final_objects,
        }
