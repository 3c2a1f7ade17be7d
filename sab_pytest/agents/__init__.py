"""Agents: strategies that turn a case into an ``AgentOutcome``.

Every agent has a ``name`` and ``run(case, engine=None)``. Text planners ignore the engine;
interactive agents (ReAct, visual) act in it. Agents never execute model text: they parse it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from sab_pytest.dataset import Case
    from sab_pytest.outcome import AgentOutcome
    from sab_pytest.thor import Engine


class Agent(Protocol):
    name: str

    def run(self, case: Case, engine: Engine | None = None) -> AgentOutcome: ...
