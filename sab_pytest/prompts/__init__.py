"""Prompt text, kept apart from the code that sends it.

Prompts live in their own modules (``agents.py`` for the model under test, ``judges.py`` for the
LLM judges) so that a reviewer can read every word a model is shown in one place, and so that tests
can check wording rules (no safety wording unless the safety hint is on) without running agents.
All prompts are written for this project; none is copied from the paper or the reference ports.
"""
