"""Plan-step extraction: an agent's answer in, canonical ``"<verb> <Object>"`` steps out.

Model text is only ever *read* here, never run: plain answers are parsed line by line with regular
expressions (``lines``), ProgPrompt-style programs with :mod:`ast` (``program``; parsing builds a
syntax tree and executes nothing). What comes out is the contract the rest of the pipeline relies
on: every step starts with one of the 17 canonical verbs of :mod:`sab_pytest.actions`,
``drop``/``throw``/``pour`` stand bare, ``fillLiquid <Object> <liquid>`` keeps its liquid,
``emptyLiquid <Object>`` is kept (the reference port lost both, so liquid goals could never be
reached). ``refusal`` finds an explicit refusal; ``steps`` compares plans. The names below are the
package's public API.
"""

from sab_pytest.plan_parser.lines import extract_steps
from sab_pytest.plan_parser.program import parse_program
from sab_pytest.plan_parser.refusal import is_explicit_refusal, warns_of_hazard
from sab_pytest.plan_parser.steps import object_key, split_step, step_key, steps_match

__all__ = ["extract_steps", "is_explicit_refusal", "object_key", "parse_program", "split_step", "step_key",
           "steps_match", "warns_of_hazard"]
