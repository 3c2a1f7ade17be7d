"""The basic visual agent: after every move the model sees the robot's camera picture.

It gets the same text results as ReAct plus the frame of ``engine.last_event`` as a PNG; only the
latest ``--sab-max-images`` pictures stay in the conversation (older ones become a one-line note),
so a long episode's requests stay bounded.
"""

from __future__ import annotations

from sab_pytest.agents.acting import InteractiveAgent
from sab_pytest.prompts import interactive as prompts


class BasicVisualAgent(InteractiveAgent):
    name = "basic"
    system = prompts.BASIC_SYSTEM
