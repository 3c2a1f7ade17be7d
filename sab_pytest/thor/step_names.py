"""What a high-level step names, for the low-level planner: the step split into verb, object name,
instance number and liquid (``StepError`` when it is not one of the 17 actions), the common names
that mean THOR types, what a target must be able to do for each verb, and the geometry the
planner measures reach with."""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sab_pytest.actions import BY_VERB, LIQUIDS, canonical_verb, step_words

ObjectMeta = Mapping[str, Any]

#: common names that are not THOR types -> the types they can mean (first present one wins ties)
SYNONYMS: dict[str, tuple[str, ...]] = {
    "table": ("DiningTable", "CoffeeTable", "SideTable", "Desk"),
    "counter": ("CounterTop",),
    "refrigerator": ("Fridge",),
    "stove": ("StoveBurner",),
    "burner": ("StoveBurner",),
    "oven": ("Microwave",),
    "tv": ("Television",),
    "phone": ("CellPhone",),
    "trashcan": ("GarbageCan",),
    "bin": ("GarbageCan",),
    "lamp": ("DeskLamp", "FloorLamp"),
    "plant": ("HousePlant",),
    "tap": ("Faucet",),
    "couch": ("Sofa",),
    "shower": ("ShowerHead",),
    "light": ("LightSwitch",),
}

#: verb -> metadata flag a target must have for the action to make sense (preference, not a ban)
VERB_FLAG: dict[str, str] = {
    "pick": "pickupable", "put": "receptacle", "open": "openable", "close": "openable",
    "slice": "sliceable", "turn on": "toggleable", "turn off": "toggleable", "break": "breakable",
    "cook": "cookable", "dirty": "dirtyable", "clean": "dirtyable", "fillLiquid": "canFillWithLiquid",
    "emptyLiquid": "canFillWithLiquid",
}

#: verb -> (state key, value it must have for the action to change anything)
STATE_PRECONDITION: dict[str, tuple[str, bool]] = {
    "open": ("isOpen", False), "close": ("isOpen", True), "turn on": ("isToggled", False),
    "turn off": ("isToggled", True), "slice": ("isSliced", False), "break": ("isBroken", False),
    "cook": ("isCooked", False), "dirty": ("isDirty", False), "clean": ("isDirty", True),
    "fillLiquid": ("isFilledWithLiquid", False), "emptyLiquid": ("isFilledWithLiquid", True),
}

_ARTICLES = {"a", "an", "the", "some", "this", "that"}
PRONOUNS = {"it", "them", "object", "item", "heldobject"}
_PREPOSITIONS = ("into", "onto", "inside", "in", "on", "to")
_NUMBER_TAIL = re.compile(r"^(.*?\D)\s*(\d+)$")
_NATURAL = re.compile(r"(\d+)")
CAMERA_OFFSET = 0.675  # camera height above the agent's standing position (m), as in iTHOR
REACH = 1.5  # THOR's default visibility distance (m): the "in reach" radius


class StepError(Exception):
    """A step that cannot even be attempted; the message becomes the failed step's message."""


@dataclass(frozen=True)
class ParsedStep:
    """A step split into canonical verb, object words, instance number and liquid."""

    verb: str
    name: str  # object text as written ("watering can"), "" when the verb takes none
    number: int | None = None
    liquid: str | None = None


def parse_step(step: str) -> ParsedStep:
    """Split a step; raise ``StepError`` for anything that is not one of the 17 actions.

    Tolerated noise: surrounding whitespace and quotes, a trailing period, call syntax
    (``turn_on(Candle)``, ``fillLiquid(Mug, water)``), leading articles, and for ``put`` a
    ``<held> in/on <receptacle>`` phrase (the receptacle is what counts).
    """
    if not isinstance(step, str):
        raise StepError(f"step is not text: {step!r}")
    words = step_words(step)
    if not words:
        raise StepError("empty step")
    found = canonical_verb(words)
    if found is None:
        raise StepError(f"unknown action {words[0]!r} in step {step!r}")
    verb, used = found
    rest = words[used:]
    liquid = None
    if verb == "fillLiquid":
        # "fill the kettle" without a liquid: water, what a robot at a tap would use
        liquid = rest.pop().lower() if rest and rest[-1].lower() in LIQUIDS else "water"
    if verb == "put":
        lowered = [w.lower() for w in rest]
        for prep in _PREPOSITIONS:
            if prep in lowered[1:]:  # "put Apple in Fridge" -> Fridge; "put in Fridge" handled by alias
                rest = rest[len(lowered) - lowered[::-1].index(prep):]
                break
    while rest and rest[0].lower() in _ARTICLES:
        rest = rest[1:]
    name = " ".join(rest)
    number = None
    match = _NUMBER_TAIL.match(name)
    if match:
        name, number = match.group(1).strip(), int(match.group(2))
    elif name.isdigit():
        raise StepError(f"object name is only a number in step {step!r}")
    if BY_VERB[verb].takes_object and not name:
        raise StepError(f"'{verb}' needs an object, step {step!r} names none")
    return ParsedStep(verb, name, number, liquid)


@functools.lru_cache(maxsize=4096)
def name_key(name: str) -> str:
    """Case-, space- and punctuation-free spelling used to compare names with objectTypes."""
    return re.sub(r"[^0-9a-z]", "", name.casefold())


def natural_key(text: str) -> tuple[Any, ...]:
    """Sort key that orders ``_2`` before ``_10``."""
    return tuple(int(p) if p.isdigit() else p for p in _NATURAL.split(text))


def position(obj: Mapping[str, Any]) -> tuple[float, float, float]:
    p = obj.get("position") or {}
    return float(p.get("x", 0.0)), float(p.get("y", 0.0)), float(p.get("z", 0.0))


def box_gap(point: tuple[float, float, float], obj: Mapping[str, Any]) -> float:
    """Horizontal distance from a standing point to the nearest point of the object's box."""
    box = obj.get("axisAlignedBoundingBox") or {}
    center, size = box.get("center"), box.get("size")
    x, _, z = point
    if not center or not size:
        ox, _, oz = position(obj)
        return math.hypot(ox - x, oz - z)
    dx = max(abs(x - float(center["x"])) - float(size["x"]) / 2, 0.0)
    dz = max(abs(z - float(center["z"])) - float(size["z"]) / 2, 0.0)
    return math.hypot(dx, dz)
