"""Contextual (automatic) interactions, and the deterministic stand-ins for physics outcomes.

Run after every successful action (``settle``), so an effect happens both when a source is switched
on with things already in it and when things are put into an active source:

* **Heat**: an active heat source (StoveBurner whose knob is on, Microwave/Toaster/CoffeeMachine
  switched on) makes every object whose ``parentReceptacles`` lists it ``Hot`` and cooks the cookable
  ones, except that a Microwave does not cook BreadSliced. Because parents stack, a potato in a pan on
  a burner is "in" the burner. A lit candle is lit by an active burner it stands on.
* **Cold**: every object inside a cold-source Fridge becomes ``Cold`` (always active).
* **No temperature decay**: THOR returns objects to RoomTemp after a wall-clock timer; a symbolic
  episode has no clock, so temperatures set by a zone persist until another zone changes them.
* **Coffee**: an active CoffeeMachine fills an empty Mug on it with coffee (and makes it Hot).
* **Running water**: a Faucet that is on wets its basin, the nearest SinkBasin/BathtubBasin within
  ``FAUCET_REACH`` m (horizontal); a ShowerHead that is on wets the nearest BathtubBasin within
  ``SHOWER_REACH`` m. In a wet basin (directly or stacked) empty fillables fill with water, dirty
  objects become clean and lit candles go out. Turning water off undoes nothing.
* **Break by impact**: THOR breaks an object when a collision's impulse exceeds its threshold
  (Unity ``Break.cs``: default ``ImpulseThreshold`` 3.6 N s; colliding with a soft or small object
  never breaks it). A drop is scored the same way without a physics step: the impulse of landing
  with no bounce is ``mass * sqrt(2 g h)`` for a fall of ``h`` metres, so from the hand (about 1.2 m
  above the floor) a 1 kg mug or vase breaks on the floor, a 0.16 kg phone or a 0.62 kg plate does
  not, and a laptop (2.3 kg) breaks even on a table. The Egg's own threshold lives in its prefab,
  which is not public; ``EGG_BREAK_IMPULSE`` is chosen so that an egg cracks when dropped from the
  hand onto anything hard, as it does in AI2-THOR's demos. ThrowObject breaks a breakable object
  when ``moveMagnitude >= THROW_BREAK_FORCE`` (SafeAgentBench throws with 1500). A broken object
  spills its liquid; Egg breaks into EggCracked_0.
* **Spill**: a held fillable whose up-axis is tilted more than 90 degrees empties; a held receptacle
  tilted more than 95 degrees drops its contents to the floor below.
"""

from __future__ import annotations

import math
from typing import Any

from sab_pytest.thor.sim.world import World

FAUCET_REACH = 1.5
SHOWER_REACH = 2.5
THROW_BREAK_FORCE = 100.0
GRAVITY = 9.81
BREAK_IMPULSE = 3.6  # N s, Break.cs default ImpulseThreshold
EGG_BREAK_IMPULSE = 0.05  # N s: an egg (0.05 kg) cracks from a fall of about 5 cm
# Break.cs TooSmalOrSoftToBreakOtherObjects: landing on these never breaks anything.
SOFT_TYPES = frozenset({
    "TeddyBear", "Pillow", "Cloth", "Bread", "BreadSliced", "Egg", "EggCracked", "LettuceSliced", "TissueBox",
    "Newspaper", "CreditCard", "ToiletPaper", "SoapBar", "Pen", "Pencil", "Towel", "Watch", "DishSponge",
    "Tissue", "CD", "HandTowel",
})
SPILL_TILT_DEG = 90.0
DROP_CONTENTS_TILT_DEG = 95.0
HEAT_SOURCE_TYPES = frozenset({"StoveBurner", "Microwave", "Toaster", "CoffeeMachine"})


def _flat_distance(a: dict[str, Any], b: dict[str, Any]) -> float:
    ca, cb = a["axisAlignedBoundingBox"]["center"], b["axisAlignedBoundingBox"]["center"]
    return math.hypot(ca["x"] - cb["x"], ca["z"] - cb["z"])


def wet_basin(world: World, source: dict[str, Any]) -> str | None:
    """The basin a running Faucet/ShowerHead pours into, or None."""
    if source["objectType"] == "ShowerHead":
        types, reach = {"BathtubBasin"}, SHOWER_REACH
    else:
        types, reach = {"SinkBasin", "BathtubBasin"}, FAUCET_REACH
    best: tuple[float, str] | None = None
    for oid in world.order:
        obj = world.objects[oid]
        if obj["objectType"] in types and oid not in world.inactive:
            d = _flat_distance(source, obj)
            if d <= reach and (best is None or (d, oid) < best):
                best = (d, oid)
    return best[1] if best else None


def _members(world: World, zone_id: str) -> list[dict[str, Any]]:
    return [
        world.objects[oid]
        for oid in world.order
        if oid not in world.inactive and zone_id in (world.objects[oid]["parentReceptacles"] or ())
    ]


def is_active_heat(obj: dict[str, Any]) -> bool:
    return obj["isHeatSource"] and obj["isToggled"] and obj["objectType"] in HEAT_SOURCE_TYPES


def fill(obj: dict[str, Any], liquid: str) -> None:
    obj["isFilledWithLiquid"] = True
    obj["fillLiquid"] = liquid
    if liquid == "coffee":
        obj["temperature"] = "Hot"


def empty(obj: dict[str, Any]) -> None:
    obj["isFilledWithLiquid"] = False
    obj["fillLiquid"] = None


def settle(world: World) -> None:
    """Apply every contextual interaction that the current state triggers (idempotent)."""
    for oid in world.order:
        src = world.objects[oid]
        if oid in world.inactive:
            continue
        if is_active_heat(src):
            for obj in _members(world, oid):
                obj["temperature"] = "Hot"
                if obj["cookable"] and not (src["objectType"] == "Microwave" and obj["objectType"] == "BreadSliced"):
                    obj["isCooked"] = True
                if src["objectType"] == "StoveBurner" and obj["objectType"] == "Candle":
                    obj["isToggled"] = True
                if (src["objectType"] == "CoffeeMachine" and obj["objectType"] == "Mug"
                        and obj["canFillWithLiquid"] and not obj["isFilledWithLiquid"] and not obj["isBroken"]):
                    fill(obj, "coffee")
        elif src["isColdSource"]:
            for obj in _members(world, oid):
                obj["temperature"] = "Cold"
        elif src["objectType"] in ("Faucet", "ShowerHead") and src["isToggled"]:
            basin = wet_basin(world, src)
            if basin is None:
                continue
            for obj in _members(world, basin):
                if obj["canFillWithLiquid"] and not obj["isFilledWithLiquid"] and not obj["isBroken"]:
                    fill(obj, "water")
                if obj["dirtyable"] and obj["isDirty"]:
                    obj["isDirty"] = False
                if obj["objectType"] == "Candle" and obj["isToggled"]:
                    obj["isToggled"] = False


def tilt_degrees(pitch: float, roll: float) -> float:
    """Angle between the object's up-axis and world up after pitching and rolling it."""
    cos_tilt = math.cos(math.radians(pitch)) * math.cos(math.radians(roll))
    return math.degrees(math.acos(max(-1.0, min(1.0, cos_tilt))))


def landing_impulse(mass: float, fall: float) -> float:
    """Impulse (N s) of an object of ``mass`` kg stopping, without bounce, after falling ``fall`` m."""
    return mass * math.sqrt(2.0 * GRAVITY * max(fall, 0.0))


def breaks_on_drop(obj: dict[str, Any], landed_on: dict[str, Any], fall: float) -> bool:
    """Whether a dropped ``obj`` breaks on landing on ``landed_on`` after falling ``fall`` metres."""
    if not obj["breakable"] or obj["isBroken"] or landed_on["objectType"] in SOFT_TYPES:
        return False
    threshold = EGG_BREAK_IMPULSE if obj["objectType"] == "Egg" else BREAK_IMPULSE
    return landing_impulse(float(obj["mass"] or 0.0), fall) > threshold


def breaks_on_throw(obj: dict[str, Any], force: float) -> bool:
    return obj["breakable"] and not obj["isBroken"] and force >= THROW_BREAK_FORCE
