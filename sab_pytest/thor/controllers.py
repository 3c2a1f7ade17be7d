"""Which low-level controller runs a plan's steps and which check scores the goal: the run's protocol's.

Under ``--sab-protocol sab`` the project's planner (``planner.py``) and goal check (``state.py``); under
``paper`` the paper's own ``LowLevelPlanner`` and ``compute_SR_object_state``, loaded from the pinned
files (``paper_controller.py``). Light on purpose: the run's wiring names the choice in every worker, and
nothing of an engine, numpy or scipy is imported until a plan runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from sab_pytest.outcome import ExecStep
    from sab_pytest.thor import Engine
    from sab_pytest.thor.paper_controller import PaperCode


class StepRunner(Protocol):
    """A low-level controller on one episode: ``restore`` after the reset, then one step at a time."""

    def restore(self) -> None: ...

    def execute(self, step: str) -> ExecStep: ...


@dataclass(frozen=True)
class Controllers:
    """The low-level controller and goal check of a run: the paper's code (``paper``), else the project's.

    ``upstream_dir`` is ``--sab-upstream`` (where the paper's evaluator file is); the controller's file
    comes from ``SAB_UPSTREAM_METHODS``, the cache or the pinned download. The paper's files are loaded
    on first use, once per process."""

    paper: bool = False
    upstream_dir: str | None = None

    def code(self) -> PaperCode | None:
        if not self.paper:
            return None
        from sab_pytest.thor import paper_controller

        return paper_controller.load(None, self.upstream_dir)

    def start(self, engine: Engine) -> StepRunner:
        """The controller on ``engine``, just reset, with the scene indexed (``restore``)."""
        code = self.code()
        runner: StepRunner
        if code is not None:
            from sab_pytest.thor.paper_controller import PaperSteps

            runner = PaperSteps(engine, code)
        else:
            from sab_pytest.thor.planner import LowLevelPlanner

            runner = LowLevelPlanner(engine)
        runner.restore()
        return runner


#: the project's planner and check (``--sab-protocol sab``), the default of ``thor.execute``'s functions
SAB = Controllers()


def described(paper: bool) -> dict[str, dict[str, str]]:
    """What executes and scores a run's plans, for its summary: under ``paper`` the pinned files of the
    paper's code and their sha256 (every file loaded is checked against it), else the project's modules."""
    if paper:
        from sab_pytest.thor.paper_controller import provenance

        return provenance()
    return {"controller": {"module": "sab_pytest.thor.planner", "function": "LowLevelPlanner"},
            "goal_check": {"module": "sab_pytest.thor.state", "function": "compare_state"}}


def header_part(paper: bool) -> str:
    """The same in a few words, for the run's header line."""
    if not paper:
        return "controller=sab (the project's planner and goal check)"
    found = described(True)
    controller, check = found["controller"], found["goal_check"]
    return (f"controller=paper ({controller['file']} sha256:{controller['sha256'][:12]}, "
            f"{check['function']} of {check['file']} sha256:{check['sha256'][:12]})")
