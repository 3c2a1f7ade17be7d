"""What every action handler of the embedded engine shares: the failure THOR reports
(``ActionFailed``, with its errorMessage and errorCode), the controller's settings (``Context``), the
parameter spec of an action, and the checks most actions start with (a visible target, a held object)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sab_pytest.thor.facts import OPEN_TO_PLACE_TYPES
from sab_pytest.thor.sim.world import World, surface_y

SLICE_COUNTS = {"Apple": 6, "Bread": 7, "Lettuce": 7, "Potato": 7, "Tomato": 7, "Egg": 1}
LIQUIDS = ("water", "coffee", "wine")
NUMBER = (int, float)


class ActionFailed(Exception):
    """An action that THOR would report with lastActionSuccess=false."""

    def __init__(self, message: str, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


@dataclass
class Context:
    """Per-controller settings the handlers need."""

    grid_size: float
    visibility_distance: float
    compatible: dict[str, frozenset[str]]  # objectType -> default compatible receptacle types
    rotate_step: float = 90.0


Handler = Callable[[World, Context, dict[str, Any]], Any]


@dataclass(frozen=True)
class Param:
    types: tuple[type, ...]
    required: bool = False


def obj_params(**extra: Param) -> dict[str, Param]:
    return {"objectId": Param((str,), required=True), "forceAction": Param((bool,)), **extra}


def target(world: World, args: dict[str, Any], key: str = "objectId") -> dict[str, Any]:
    oid = args[key]
    obj = world.get(oid)
    if obj is None:
        raise ActionFailed(f"objectId: {oid} is not the objectId on any object in the scene!", "InvalidArgument")
    if oid in world.inactive or (not args.get("forceAction", False) and not obj["visible"]):
        raise ActionFailed("Target object not found within the specified visibility.", "ObjectNotVisible")
    return obj


def held_object(world: World) -> dict[str, Any]:
    if world.held is None:
        raise ActionFailed("Agent is not holding any object.", "ObjectNotInInventory")
    return world.objects[world.held]


def release(world: World) -> dict[str, Any]:
    obj = world.objects[world.held]  # type: ignore[index]
    obj["isPickedUp"] = False
    world.held = None
    world.held_tilt = (0.0, 0.0)
    return obj


def place(world: World, oid: str, rid: str, spot: tuple[float, float, float] | None = None) -> None:
    world.detach(oid)
    x, bottom, z = spot or world.landing_spot(oid, rid)
    world.move_center_to(oid, x, bottom, z)
    world.attach(oid, rid)


# where a released object lands (a drop, a throw, the contents of what breaks)
def floor_of(world: World) -> dict[str, Any]:
    return next(o for o in world.objects.values() if o["objectType"] == "Floor")


def drop_target(world: World, falling: str, x: float, y: float, z: float) -> dict[str, Any]:
    """The receptacle whose resting surface is highest below (x, y, z), else the Floor."""
    exclude = set(world.subtree(falling))
    best: tuple[float, dict[str, Any]] | None = None
    for oid in world.order:
        rec = world.objects[oid]
        if not rec["receptacle"] or oid in exclude or oid in world.inactive or rec["objectType"] == "Floor":
            continue
        if rec["openable"] and not rec["isOpen"] and rec["objectType"] in OPEN_TO_PLACE_TYPES:
            continue
        if world.hidden_by_closed(oid):
            continue
        box = rec["axisAlignedBoundingBox"]
        c, s = box["center"], box["size"]
        top = surface_y(rec)
        if abs(x - c["x"]) <= s["x"] / 2 and abs(z - c["z"]) <= s["z"] / 2 and top < y and (
                best is None or top > best[0]):
            best = (top, rec)
    return best[1] if best else floor_of(world)


def fall(world: World, oid: str, x: float, y: float, z: float) -> dict[str, Any]:
    """Let ``oid`` fall from (x, y, z) onto what is below; returns the receptacle it landed on."""
    rec = drop_target(world, oid, x, y, z)
    spot = world.landing_spot(oid, rec["objectId"])
    if rec["objectType"] not in ("SinkBasin", "BathtubBasin"):  # basins funnel to their middle
        spot = (x, spot[1], z)
    place(world, oid, rec["objectId"], spot)
    return rec
