"""Actions on what the robot holds: pick up, put, drop, throw, rotate, place at a point, and the
spawn coordinates a receptacle offers. Where the object ends up follows ``physics_rules``."""

from __future__ import annotations

import math
from typing import Any

from sab_pytest.thor.facts import OPEN_TO_PLACE_TYPES, SPECIFIC_RECEPTACLES
from sab_pytest.thor.sim import physics_rules as rules
from sab_pytest.thor.sim.action_base import (
    ActionFailed,
    Context,
    drop_target,
    fall,
    floor_of,
    held_object,
    place,
    release,
    target,
)
from sab_pytest.thor.sim.geometry import aabb_bottom_top
from sab_pytest.thor.sim.state_changes import shatter
from sab_pytest.thor.sim.world import World, surface_y


def pickup(world: World, ctx: Context, args: dict[str, Any]) -> None:
    obj = target(world, args)
    if world.held is not None:
        raise ActionFailed("Agent hand has something in it already! Can't pick up anything else.", "InventoryFull")
    if not obj["pickupable"]:
        raise ActionFailed(f"{obj['objectId']} must have the property CanPickup to be picked up.",
                           "ObjectNotPickupable")
    world.detach(obj["objectId"])
    obj["isPickedUp"] = True
    world.held = obj["objectId"]
    world.held_tilt = (0.0, 0.0)
    world.carry_held()


def _can_receive(world: World, ctx: Context, held: dict[str, Any], rec: dict[str, Any], force: bool) -> None:
    rtype = rec["objectType"]
    if not rec["receptacle"]:
        raise ActionFailed("This target object is NOT a receptacle!")
    if rec["openable"] and not rec["isOpen"] and rtype in OPEN_TO_PLACE_TYPES:
        raise ActionFailed("Target openable Receptacle is CLOSED, can't place if target is not open!",
                           "ReceptacleNotOpen")
    if rtype in SPECIFIC_RECEPTACLES:
        if held["objectType"] not in SPECIFIC_RECEPTACLES[rtype]:
            raise ActionFailed(f"{held['objectType']} is not a valid Object Type to be placed in {rec['name']}",
                               "ObjectNotAllowedInReceptacle")
        if any(world.objects[c]["pickupable"] for c in rec["receptacleObjectIds"] or []):
            raise ActionFailed(f"{rec['name']} is full right now", "ReceptacleFull")
    elif not force:
        allowed = ctx.compatible.get(held["objectType"])
        if allowed and rtype not in allowed:
            raise ActionFailed(f"{held['objectType']} cannot be placed in {rtype}",
                               "ObjectNotAllowedInReceptacle")
    if rec["objectId"] in world.subtree(held["objectId"]):
        raise ActionFailed("No valid positions to place object found")
    if not world.has_room(held["objectId"], rec["objectId"]):
        raise ActionFailed("No valid positions to place object found", "ReceptacleFull")


def put(world: World, ctx: Context, args: dict[str, Any]) -> None:
    held = held_object(world)
    force = args.get("forceAction", False)
    rec = world.get(args["objectId"])
    if rec is None:
        raise ActionFailed(f"objectId: {args['objectId']} is not the objectId on any object in the scene!",
                           "InvalidArgument")
    if rec["objectId"] in world.inactive or (not force and not rec["visible"]):
        raise ActionFailed("Target receptacle not found within the specified visibility.", "ReceptacleNotVisible")
    _can_receive(world, ctx, held, rec, force)
    spot = world.landing_spot(held["objectId"], rec["objectId"])
    release(world)
    place(world, held["objectId"], rec["objectId"], spot)


def drop(world: World, ctx: Context, args: dict[str, Any]) -> None:
    held = held_object(world)
    x, y, z = world.hand_point()
    start = aabb_bottom_top(held)[0]
    release(world)
    landed = fall(world, held["objectId"], x, y, z)
    if rules.breaks_on_drop(held, landed, start - aabb_bottom_top(held)[0]):
        shatter(world, held)


def throw(world: World, ctx: Context, args: dict[str, Any]) -> None:
    held = held_object(world)
    force = float(args["moveMagnitude"])
    travel = max(0.5, min(2.0, force / 500.0))
    yaw = math.radians(world.pose.rotation)
    fx0, fx1, fz0, fz1 = world.nav.floor_rect
    x = min(max(world.pose.x + math.sin(yaw) * travel, fx0 + 0.05), fx1 - 0.05)
    z = min(max(world.pose.z + math.cos(yaw) * travel, fz0 + 0.05), fz1 - 0.05)
    release(world)
    floor = floor_of(world)
    place(world, held["objectId"], floor["objectId"], (x, world.landing_spot(held["objectId"],
                                                                              floor["objectId"])[1], z))
    if rules.breaks_on_throw(held, force):
        shatter(world, held)


def rotate_held(world: World, ctx: Context, args: dict[str, Any]) -> None:
    held = held_object(world)
    rot = args.get("rotation")
    if rot is not None:
        pitch, roll = float(rot.get("x", 0.0)), float(rot.get("z", 0.0))
    else:
        pitch, roll = float(args.get("pitch", 0.0)), float(args.get("roll", 0.0))
    p0, r0 = world.held_tilt
    world.held_tilt = (p0 + pitch, r0 + roll)
    tilt = rules.tilt_degrees(*world.held_tilt)
    if tilt > rules.SPILL_TILT_DEG and held["isFilledWithLiquid"]:
        rules.empty(held)
    if tilt > rules.DROP_CONTENTS_TILT_DEG and held["receptacleObjectIds"]:
        x, y, z = world.hand_point()
        for child in list(held["receptacleObjectIds"]):
            still_inside = child in (world.objects[held["objectId"]]["receptacleObjectIds"] or ())
            if world.objects[child]["pickupable"] and still_inside:
                fall(world, child, x, y - 0.1, z)


def place_at_point(world: World, ctx: Context, args: dict[str, Any]) -> None:
    obj = target(world, {**args, "forceAction": True})
    if not obj["pickupable"]:
        raise ActionFailed(f"{obj['objectId']} is not pickupable and cannot be placed")
    pos = args["position"]
    if obj["objectId"] == world.held:
        release(world)
    x, y, z = float(pos["x"]), float(pos["y"]), float(pos["z"])
    world.detach(obj["objectId"])
    world.move_center_to(obj["objectId"], x, y, z)  # the point is where its bottom rests
    rec = drop_target(world, obj["objectId"], x, y + 1e-3, z)
    world.attach(obj["objectId"], rec["objectId"])


def spawn_coordinates(world: World, ctx: Context, args: dict[str, Any]) -> list[dict[str, float]]:
    rec = target(world, {**args, "forceAction": True})
    if not rec["receptacle"]:
        raise ActionFailed("This target object is NOT a receptacle!")
    box = rec["axisAlignedBoundingBox"]
    c, s = box["center"], box["size"]
    top = surface_y(rec)
    steps = 3
    return [
        {"x": c["x"] - s["x"] / 2 + (i + 0.5) * s["x"] / steps, "y": top,
         "z": c["z"] - s["z"] / 2 + (k + 0.5) * s["z"] / steps}
        for i in range(steps) for k in range(steps)
    ]
