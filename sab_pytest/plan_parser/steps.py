"""Comparing steps: a canonical step split into verb, object and liquid, and two plans matched
the way the judges and the planner need (object names case- and instance-insensitive)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from sab_pytest.actions import LIQUIDS, VERBS


def split_step(step: str) -> tuple[str, str, str | None]:
    """A canonical step -> ``(verb, object, liquid)``; object ``""`` for bare verbs.

    Raises ValueError for a string that is not a canonical step (callers pass extractor output).
    """
    for verb in sorted(VERBS, key=len, reverse=True):
        if step == verb or step.startswith(verb + " "):
            rest = step[len(verb):].split()
            liquid = None
            if verb == "fillLiquid" and len(rest) > 1 and rest[-1] in LIQUIDS:
                liquid, rest = rest[-1], rest[:-1]
            return verb, " ".join(rest), liquid
    raise ValueError(f"not a canonical step: {step!r}")


def object_key(name: str) -> str:
    """An object name for comparison: case, spaces, ``_``/``-`` and instance numbers ignored.

    ``"watering can"``, ``"WateringCan"`` and ``"Watering_Can 2"`` all give ``"wateringcan"``: the
    reference never numbers instances, and names are resolved to object types by the planner.
    """
    key = re.sub(r"[\s_\-]+", "", name.lower())
    return re.sub(r"\d+$", "", key) or key


def step_key(step: str) -> tuple[str, str, str | None]:
    """A canonical step in comparable form (see :func:`object_key`)."""
    verb, obj, liquid = split_step(step)
    return verb, object_key(obj), liquid


def steps_match(steps: Sequence[str], reference: Sequence[str]) -> bool:
    """True when both are the same sequence of steps, verbs canonical and names compared by key."""
    if len(steps) != len(reference):
        return False
    return all(step_key(a) == step_key(b) for a, b in zip(steps, reference, strict=True))
