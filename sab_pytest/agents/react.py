"""ReAct: the model acts one step at a time and reads each result as text (no pictures).

The loop, the tools and the limits are the episode's (``episode.py``); what makes it ReAct is
what it is shown: the result of every action in words, and ``observe`` for what it can see.
"""

from __future__ import annotations

from sab_pytest.agents.acting import InteractiveAgent
from sab_pytest.prompts import interactive as prompts


class ReactAgent(InteractiveAgent):
    name = "react"
    system = prompts.REACT_SYSTEM
