"""Actions that change an object's state in place: open, close, toggle, slice, break, cook, dirty,
clean, fill with and empty liquid, use up. Each checks everything before it changes anything."""

from __future__ import annotations

from typing import Any

from sab_pytest.thor.facts import CLOSED_TO_TURN_ON, SCREEN_TYPES
from sab_pytest.thor.sim import physics_rules as rules
from sab_pytest.thor.sim.action_base import (
    LIQUIDS,
    SLICE_COUNTS,
    ActionFailed,
    Context,
    fall,
    release,
    target,
)
from sab_pytest.thor.sim.world import World


def _set_openness(world: World, ctx: Context, args: dict[str, Any], openness: float) -> None:
    obj = target(world, args)
    if not obj["openable"]:
        raise ActionFailed(f"{obj['objectId']} is not an Openable object")
    if not 0.0 <= openness <= 1.0:
        raise ActionFailed("Openness must be in [0:1]")
    if obj["objectType"] in CLOSED_TO_TURN_ON and obj["isToggled"] and openness > 0:
        raise ActionFailed("Target must be OFF to open!")
    obj["openness"] = float(openness)
    obj["isOpen"] = openness > 0


def open_object(world: World, ctx: Context, args: dict[str, Any]) -> None:
    _set_openness(world, ctx, args, float(args.get("openness", 1.0)))


def close_object(world: World, ctx: Context, args: dict[str, Any]) -> None:
    _set_openness(world, ctx, args, 0.0)


def _toggle(world: World, args: dict[str, Any], on: bool) -> None:
    obj = target(world, args)
    if not obj["toggleable"]:
        raise ActionFailed(f"{obj['objectId']} is not toggleable")
    if obj["isToggled"] == on:
        raise ActionFailed(f"can't toggle object {'on' if on else 'off'} if it's already {'on' if on else 'off'}!")
    if on and obj["objectType"] in CLOSED_TO_TURN_ON and obj["isOpen"]:
        raise ActionFailed("Target must be closed to Toggle On!")
    if on and obj["isBroken"]:
        raise ActionFailed("Target is broken and cannot be Toggled On!")
    obj["isToggled"] = on
    for cid in obj["controlledObjects"] or []:
        if cid in world.objects:
            world.objects[cid]["isToggled"] = on


def toggle_on(world: World, ctx: Context, args: dict[str, Any]) -> None:
    _toggle(world, args, True)


def toggle_off(world: World, ctx: Context, args: dict[str, Any]) -> None:
    _toggle(world, args, False)


def _spawn_pieces(world: World, src: dict[str, Any], new_type: str, count: int) -> None:
    box = src["axisAlignedBoundingBox"]
    c, s = box["center"], box["size"]
    axis = "x" if s["x"] >= s["z"] else "z"
    for k in range(count):
        size = dict(s)
        size[axis] = s[axis] / count
        center = dict(c)
        center[axis] = c[axis] - s[axis] / 2 + (k + 0.5) * size[axis]
        lo = [center[a] - size[a] / 2 for a in ("x", "y", "z")]
        hi = [center[a] + size[a] / 2 for a in ("x", "y", "z")]
        corners = [[xx, yy, zz] for xx in (hi[0], lo[0]) for yy in (hi[1], lo[1]) for zz in (hi[2], lo[2])]
        oid = f"{src['objectId']}|{new_type}_{k}"
        piece = {key: value for key, value in src.items()}
        offset = {a: center[a] - c[a] for a in ("x", "y", "z")}
        piece.update(
            name=f"{src['name']}_{new_type}_{k}",
            position={a: src["position"][a] + offset[a] for a in ("x", "y", "z")},
            rotation=dict(src["rotation"]),
            visible=False, isInteractable=False, receptacle=False, toggleable=False, isToggled=False,
            breakable=False, isBroken=False, canFillWithLiquid=False, isFilledWithLiquid=False, fillLiquid=None,
            dirtyable=False, isDirty=False, canBeUsedUp=False, isUsedUp=False,
            cookable=new_type in ("PotatoSliced", "BreadSliced", "EggCracked"),
            isCooked=src["isCooked"], isHeatSource=False, isColdSource=False, sliceable=False, isSliced=False,
            openable=False, isOpen=False, openness=0.0, pickupable=True, isPickedUp=False, moveable=False,
            mass=round(src["mass"] / count, 4), salientMaterials=["Food"], receptacleObjectIds=None,
            objectType=new_type, objectId=oid, assetId=f"{new_type}_{src['assetId'].split('_')[-1]}",
            parentReceptacles=None, controlledObjects=None, isMoving=False,
            axisAlignedBoundingBox={"cornerPoints": corners, "center": center, "size": size},
            objectOrientedBoundingBox={"cornerPoints": [list(p) for p in corners]},
        )
        world.add_object(piece, src["objectId"])
        for pid in src["parentReceptacles"] or []:
            piece["parentReceptacles"] = [*(piece["parentReceptacles"] or []), pid]
            ids = world.objects[pid]["receptacleObjectIds"]
            if ids is not None:
                ids.append(oid)


def _deactivate(world: World, obj: dict[str, Any]) -> None:
    world.remove_from_world(obj["objectId"])
    world.inactive.add(obj["objectId"])
    obj["visible"] = obj["isInteractable"] = False


def slice_object(world: World, ctx: Context, args: dict[str, Any]) -> None:
    obj = target(world, args)
    if obj["objectId"] == world.held:
        raise ActionFailed("target object cannot be sliced if it is in the agent's hand")
    if not obj["sliceable"]:
        raise ActionFailed(f"{obj['name']} Does not have the CanBeSliced property!")
    if obj["isSliced"]:
        raise ActionFailed(f"{obj['name']} is already sliced")
    count = SLICE_COUNTS.get(obj["objectType"], 1)
    new_type = "EggCracked" if obj["objectType"] == "Egg" else f"{obj['objectType']}Sliced"
    _spawn_pieces(world, obj, new_type, count)
    obj["isSliced"] = True
    _deactivate(world, obj)


def shatter(world: World, obj: dict[str, Any]) -> None:
    obj["isBroken"] = True
    if obj["isFilledWithLiquid"]:
        rules.empty(obj)
    if obj["objectType"] in SCREEN_TYPES:
        obj["isToggled"] = False
    if obj["objectType"] == "Egg":
        _spawn_pieces(world, obj, "EggCracked", 1)
        _deactivate(world, obj)


def break_object(world: World, ctx: Context, args: dict[str, Any]) -> None:
    obj = target(world, args)
    if not obj["breakable"]:
        raise ActionFailed(f"{obj['name']} does not have the CanBreak property!")
    if obj["isBroken"]:
        raise ActionFailed(f"{obj['name']} is already broken")
    if obj["objectId"] == world.held:  # it leaves the hand first, dropping where the hand is
        x, y, z = world.hand_point()
        release(world)
        fall(world, obj["objectId"], x, y, z)
    shatter(world, obj)


def cook(world: World, ctx: Context, args: dict[str, Any]) -> None:
    obj = target(world, args)
    if not obj["cookable"]:
        raise ActionFailed("Target object is not cookable!")
    obj["isCooked"] = True


def _dirty(world: World, args: dict[str, Any], dirty: bool) -> None:
    obj = target(world, args)
    if not obj["dirtyable"]:
        raise ActionFailed(f"{obj['name']} does not have the Dirtyable property!")
    if obj["isDirty"] == dirty:
        raise ActionFailed(f"{obj['name']} is already {'dirty' if dirty else 'clean'}!")
    obj["isDirty"] = dirty


def dirty_object(world: World, ctx: Context, args: dict[str, Any]) -> None:
    _dirty(world, args, True)


def clean_object(world: World, ctx: Context, args: dict[str, Any]) -> None:
    _dirty(world, args, False)


def fill_liquid(world: World, ctx: Context, args: dict[str, Any]) -> None:
    obj = target(world, args)
    liquid = args["fillLiquid"]
    if not obj["canFillWithLiquid"]:
        raise ActionFailed(f"{obj['name']} does not have the CanFillWithLiquid property!")
    if liquid not in LIQUIDS:
        raise ActionFailed(f"Unknown liquid: {liquid}")
    if obj["isBroken"]:
        raise ActionFailed(f"{obj['name']} is broken and cannot hold liquid")
    rules.fill(obj, liquid)


def empty_liquid(world: World, ctx: Context, args: dict[str, Any]) -> None:
    obj = target(world, args)
    if not obj["canFillWithLiquid"]:
        raise ActionFailed(f"{obj['name']} does not have the CanFillWithLiquid property!")
    if not obj["isFilledWithLiquid"]:
        raise ActionFailed("object already empty")
    rules.empty(obj)


def use_up(world: World, ctx: Context, args: dict[str, Any]) -> None:
    obj = target(world, args)
    if not obj["canBeUsedUp"]:
        raise ActionFailed(f"{obj['name']} does not have the CanBeUsedUp property!")
    obj["isUsedUp"] = True
