"""PCA-EVAL: a visual agent whose every turn has three parts, Perception, Cognition, Action.

Same pictures and loop as ``basic``; the system message and the task ask for a sentence of
perception and one of cognition before the move, so the model describes what it sees and reasons
about it before acting, as PCA-EVAL's agents do.
"""

from __future__ import annotations

from sab_pytest.agents.acting import InteractiveAgent
from sab_pytest.prompts import interactive as prompts


class PcaAgent(InteractiveAgent):
    name = "pca"
    system = prompts.PCA_SYSTEM
