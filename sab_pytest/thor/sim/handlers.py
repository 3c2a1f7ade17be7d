"""Action handlers: preconditions (with THOR's error wording) and object-level effects.

Each handler checks everything before it changes anything, so a failed action leaves the scene as
it was (THOR's rule). ``ActionFailed`` carries THOR's errorMessage and errorCode. ``SPECS`` lists
each action's parameters and their types; the controller rejects unknown names, unknown parameters
and ill-typed values with ``ValueError`` exactly where ai2thor raises it.

Choices where THOR leaves things to physics or where 5.0 was not verifiable (see also
``physics_rules`` and ``world``):

* Slice counts: Apple 6, Bread 7, Lettuce 7, Potato 7, Tomato 7 pieces (``<id>|AppleSliced_0..5`` ...);
  Egg gives one ``<id>|EggCracked_0``. Slices are spread along the source's longer horizontal side,
  inherit its receptacles, temperature and cooked state. The source stays in the metadata with
  ``isSliced`` (or, for a broken egg, ``isBroken``) true and can no longer be seen or touched.
  Slicing or breaking twice fails.
* ThrowObject: the object flies along the camera's horizontal heading ``min(2, moveMagnitude/500)``
  metres (at least 0.5) and lands on the Floor, stopping at the floor's edge.
* DropHandObject: the object falls straight down from the hand onto the highest resting surface
  below the hand (open ones only for openables), else the Floor. THOR lists as parents whatever
  receptacle volumes an object rests in, without the type checks of PutObject, so a fork dropped
  onto a toaster is in the toaster. Whether it breaks: ``physics_rules.breaks_on_drop``.
* FillObjectWithLiquid on an already filled object replaces the liquid (succeeds).
* PutObject's object-specific checks (CoffeeMachine takes one Mug...) hold even with forceAction.
* Movement succeeds when the destination disc is free (see ``geometry``); TeleportFull also checks
  the horizon limits [-30, 60].
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sab_pytest.thor.facts import CLOSED_TO_TURN_ON, OPEN_TO_PLACE_TYPES, SCREEN_TYPES, SPECIFIC_RECEPTACLES
from sab_pytest.thor.sim import physics_rules as rules
from sab_pytest.thor.sim.geometry import MAX_HORIZON, MIN_HORIZON, aabb_bottom_top
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


def _obj_params(**extra: Param) -> dict[str, Param]:
    return {"objectId": Param((str,), required=True), "forceAction": Param((bool,)), **extra}


# ---------------------------------------------------------------- common checks
def _target(world: World, args: dict[str, Any], key: str = "objectId") -> dict[str, Any]:
    oid = args[key]
    obj = world.get(oid)
    if obj is None:
        raise ActionFailed(f"objectId: {oid} is not the objectId on any object in the scene!", "InvalidArgument")
    if oid in world.inactive or (not args.get("forceAction", False) and not obj["visible"]):
        raise ActionFailed("Target object not found within the specified visibility.", "ObjectNotVisible")
    return obj


def _held(world: World) -> dict[str, Any]:
    if world.held is None:
        raise ActionFailed("Agent is not holding any object.", "ObjectNotInInventory")
    return world.objects[world.held]


def _release(world: World) -> dict[str, Any]:
    obj = world.objects[world.held]  # type: ignore[index]
    obj["isPickedUp"] = False
    world.held = None
    world.held_tilt = (0.0, 0.0)
    return obj


# ---------------------------------------------------------------- object interactions
def pickup(world: World, ctx: Context, args: dict[str, Any]) -> None:
    obj = _target(world, args)
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


def _place(world: World, oid: str, rid: str, spot: tuple[float, float, float] | None = None) -> None:
    world.detach(oid)
    x, bottom, z = spot or world.landing_spot(oid, rid)
    world.move_center_to(oid, x, bottom, z)
    world.attach(oid, rid)


def put(world: World, ctx: Context, args: dict[str, Any]) -> None:
    held = _held(world)
    force = args.get("forceAction", False)
    rec = world.get(args["objectId"])
    if rec is None:
        raise ActionFailed(f"objectId: {args['objectId']} is not the objectId on any object in the scene!",
                           "InvalidArgument")
    if rec["objectId"] in world.inactive or (not force and not rec["visible"]):
        raise ActionFailed("Target receptacle not found within the specified visibility.", "ReceptacleNotVisible")
    _can_receive(world, ctx, held, rec, force)
    spot = world.landing_spot(held["objectId"], rec["objectId"])
    _release(world)
    _place(world, held["objectId"], rec["objectId"], spot)


def _floor(world: World) -> dict[str, Any]:
    return next(o for o in world.objects.values() if o["objectType"] == "Floor")


def _drop_target(world: World, falling: str, x: float, y: float, z: float) -> dict[str, Any]:
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
    return best[1] if best else _floor(world)


def _fall(world: World, oid: str, x: float, y: float, z: float) -> dict[str, Any]:
    """Let ``oid`` fall from (x, y, z) onto what is below; returns the receptacle it landed on."""
    rec = _drop_target(world, oid, x, y, z)
    spot = world.landing_spot(oid, rec["objectId"])
    if rec["objectType"] not in ("SinkBasin", "BathtubBasin"):  # basins funnel to their middle
        spot = (x, spot[1], z)
    _place(world, oid, rec["objectId"], spot)
    return rec


def drop(world: World, ctx: Context, args: dict[str, Any]) -> None:
    held = _held(world)
    x, y, z = world.hand_point()
    start = aabb_bottom_top(held)[0]
    _release(world)
    landed = _fall(world, held["objectId"], x, y, z)
    if rules.breaks_on_drop(held, landed, start - aabb_bottom_top(held)[0]):
        _break(world, held)


def throw(world: World, ctx: Context, args: dict[str, Any]) -> None:
    held = _held(world)
    force = float(args["moveMagnitude"])
    travel = max(0.5, min(2.0, force / 500.0))
    yaw = math.radians(world.pose.rotation)
    fx0, fx1, fz0, fz1 = world.nav.floor_rect
    x = min(max(world.pose.x + math.sin(yaw) * travel, fx0 + 0.05), fx1 - 0.05)
    z = min(max(world.pose.z + math.cos(yaw) * travel, fz0 + 0.05), fz1 - 0.05)
    _release(world)
    floor = _floor(world)
    _place(world, held["objectId"], floor["objectId"], (x, world.landing_spot(held["objectId"],
                                                                              floor["objectId"])[1], z))
    if rules.breaks_on_throw(held, force):
        _break(world, held)


def _set_openness(world: World, ctx: Context, args: dict[str, Any], openness: float) -> None:
    obj = _target(world, args)
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
    obj = _target(world, args)
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
    obj = _target(world, args)
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


def _break(world: World, obj: dict[str, Any]) -> None:
    obj["isBroken"] = True
    if obj["isFilledWithLiquid"]:
        rules.empty(obj)
    if obj["objectType"] in SCREEN_TYPES:
        obj["isToggled"] = False
    if obj["objectType"] == "Egg":
        _spawn_pieces(world, obj, "EggCracked", 1)
        _deactivate(world, obj)


def break_object(world: World, ctx: Context, args: dict[str, Any]) -> None:
    obj = _target(world, args)
    if not obj["breakable"]:
        raise ActionFailed(f"{obj['name']} does not have the CanBreak property!")
    if obj["isBroken"]:
        raise ActionFailed(f"{obj['name']} is already broken")
    if obj["objectId"] == world.held:  # it leaves the hand first, dropping where the hand is
        x, y, z = world.hand_point()
        _release(world)
        _fall(world, obj["objectId"], x, y, z)
    _break(world, obj)


def cook(world: World, ctx: Context, args: dict[str, Any]) -> None:
    obj = _target(world, args)
    if not obj["cookable"]:
        raise ActionFailed("Target object is not cookable!")
    obj["isCooked"] = True


def _dirty(world: World, args: dict[str, Any], dirty: bool) -> None:
    obj = _target(world, args)
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
    obj = _target(world, args)
    liquid = args["fillLiquid"]
    if not obj["canFillWithLiquid"]:
        raise ActionFailed(f"{obj['name']} does not have the CanFillWithLiquid property!")
    if liquid not in LIQUIDS:
        raise ActionFailed(f"Unknown liquid: {liquid}")
    if obj["isBroken"]:
        raise ActionFailed(f"{obj['name']} is broken and cannot hold liquid")
    rules.fill(obj, liquid)


def empty_liquid(world: World, ctx: Context, args: dict[str, Any]) -> None:
    obj = _target(world, args)
    if not obj["canFillWithLiquid"]:
        raise ActionFailed(f"{obj['name']} does not have the CanFillWithLiquid property!")
    if not obj["isFilledWithLiquid"]:
        raise ActionFailed("object already empty")
    rules.empty(obj)


def use_up(world: World, ctx: Context, args: dict[str, Any]) -> None:
    obj = _target(world, args)
    if not obj["canBeUsedUp"]:
        raise ActionFailed(f"{obj['name']} does not have the CanBeUsedUp property!")
    obj["isUsedUp"] = True


def rotate_held(world: World, ctx: Context, args: dict[str, Any]) -> None:
    held = _held(world)
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
                _fall(world, child, x, y - 0.1, z)


def place_at_point(world: World, ctx: Context, args: dict[str, Any]) -> None:
    obj = _target(world, {**args, "forceAction": True})
    if not obj["pickupable"]:
        raise ActionFailed(f"{obj['objectId']} is not pickupable and cannot be placed")
    pos = args["position"]
    if obj["objectId"] == world.held:
        _release(world)
    x, y, z = float(pos["x"]), float(pos["y"]), float(pos["z"])
    world.detach(obj["objectId"])
    world.move_center_to(obj["objectId"], x, y, z)  # the point is where its bottom rests
    rec = _drop_target(world, obj["objectId"], x, y + 1e-3, z)
    world.attach(obj["objectId"], rec["objectId"])


def spawn_coordinates(world: World, ctx: Context, args: dict[str, Any]) -> list[dict[str, float]]:
    rec = _target(world, {**args, "forceAction": True})
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


# ---------------------------------------------------------------- agent motion and queries
def reachable(world: World, ctx: Context, args: dict[str, Any]) -> list[dict[str, float]]:
    return [{"x": x, "y": world.nav.agent_y, "z": z} for x, z in world.nav.reachable]


def _move(world: World, ctx: Context, args: dict[str, Any], heading: float) -> None:
    dist = float(args.get("moveMagnitude", ctx.grid_size))
    yaw = math.radians(world.pose.rotation + heading)
    x = round(world.pose.x + math.sin(yaw) * dist, 4)
    z = round(world.pose.z + math.cos(yaw) * dist, 4)
    if not world.nav.is_free(x, z):
        raise ActionFailed("Agent 0 is blocked from moving: a collision was detected at the destination.")
    world.pose.x, world.pose.z = x, z
    world.held_tilt = (0.0, 0.0)
    world.carry_held()


def _mover(heading: float) -> Handler:
    return lambda world, ctx, args: _move(world, ctx, args, heading)


def _rotate(world: World, ctx: Context, args: dict[str, Any], sign: float) -> None:
    degrees = float(args.get("degrees", ctx.rotate_step))
    world.pose.rotation = round((world.pose.rotation + sign * degrees) % 360.0, 4)
    world.held_tilt = (0.0, 0.0)
    world.carry_held()


def _look(world: World, ctx: Context, args: dict[str, Any], sign: float) -> None:
    degrees = float(args.get("degrees", 30.0))
    horizon = round(world.pose.horizon + sign * degrees, 4)
    if horizon < MIN_HORIZON - 1e-6:
        raise ActionFailed(f"can't look up beyond {-MIN_HORIZON:g} degrees above the forward horizon",
                           "LookUpCantExceedMax")
    if horizon > MAX_HORIZON + 1e-6:
        raise ActionFailed(f"can't look down beyond {MAX_HORIZON:g} degrees below the forward horizon",
                           "LookDownCantExceedMin")
    world.pose.horizon = horizon


def _teleport(world: World, ctx: Context, args: dict[str, Any]) -> None:
    pos = args.get("position") or {}
    x = float(args.get("x", pos.get("x", world.pose.x)))
    z = float(args.get("z", pos.get("z", world.pose.z)))
    rot = args.get("rotation")
    yaw = float(rot.get("y", world.pose.rotation)) if isinstance(rot, dict) else world.pose.rotation
    horizon = float(args.get("horizon", world.pose.horizon))
    if not MIN_HORIZON - 1e-6 <= horizon <= MAX_HORIZON + 1e-6:
        raise ActionFailed(f"Horizon must be in [{MIN_HORIZON:g}:{MAX_HORIZON:g}], got {horizon}")
    if not world.nav.is_free(x, z):
        raise ActionFailed("Teleport position is not valid: the agent would collide with the scene.")
    world.pose.x, world.pose.z = x, z
    world.pose.rotation = yaw % 360.0
    world.pose.horizon = horizon
    world.pose.standing = bool(args.get("standing", True))
    world.held_tilt = (0.0, 0.0)
    world.carry_held()


def _noop(world: World, ctx: Context, args: dict[str, Any]) -> None:
    return None


_MOVE = {"moveMagnitude": Param(NUMBER), "forceAction": Param((bool,))}
_TURN = {"degrees": Param(NUMBER), "forceAction": Param((bool,))}
_POSE = {
    "x": Param(NUMBER), "y": Param(NUMBER), "z": Param(NUMBER), "position": Param((dict,)),
    "rotation": Param((dict,)), "horizon": Param(NUMBER), "standing": Param((bool,)),
    "forceAction": Param((bool,)),
}

# action name -> (handler, parameters)
SPECS: dict[str, tuple[Handler, dict[str, Param]]] = {
    "PickupObject": (pickup, _obj_params(manualInteract=Param((bool,)))),
    "PutObject": (put, _obj_params(placeStationary=Param((bool,)))),
    "DropHandObject": (drop, {"forceAction": Param((bool,))}),
    "ThrowObject": (throw, {"moveMagnitude": Param(NUMBER, required=True), "forceAction": Param((bool,))}),
    "OpenObject": (open_object, _obj_params(openness=Param(NUMBER))),
    "CloseObject": (close_object, _obj_params()),
    "ToggleObjectOn": (toggle_on, _obj_params()),
    "ToggleObjectOff": (toggle_off, _obj_params()),
    "SliceObject": (slice_object, _obj_params()),
    "BreakObject": (break_object, _obj_params()),
    "CookObject": (cook, _obj_params()),
    "DirtyObject": (dirty_object, _obj_params()),
    "CleanObject": (clean_object, _obj_params()),
    "FillObjectWithLiquid": (fill_liquid, _obj_params(fillLiquid=Param((str,), required=True))),
    "EmptyLiquidFromObject": (empty_liquid, _obj_params()),
    "UseUpObject": (use_up, _obj_params()),
    "RotateHeldObject": (rotate_held, {"pitch": Param(NUMBER), "yaw": Param(NUMBER), "roll": Param(NUMBER),
                                       "rotation": Param((dict,)), "forceAction": Param((bool,))}),
    "PlaceObjectAtPoint": (place_at_point, _obj_params(position=Param((dict,), required=True))),
    "GetSpawnCoordinatesAboveReceptacle": (spawn_coordinates, _obj_params(anywhere=Param((bool,)))),
    "GetReachablePositions": (reachable, {}),
    "TeleportFull": (_teleport, _POSE),
    "Teleport": (_teleport, _POSE),
    "MoveAhead": (_mover(0.0), _MOVE),
    "MoveBack": (_mover(180.0), _MOVE),
    "MoveLeft": (_mover(-90.0), _MOVE),
    "MoveRight": (_mover(90.0), _MOVE),
    "RotateLeft": (lambda w, c, a: _rotate(w, c, a, -1.0), _TURN),
    "RotateRight": (lambda w, c, a: _rotate(w, c, a, 1.0), _TURN),
    "LookUp": (lambda w, c, a: _look(w, c, a, -1.0), _TURN),
    "LookDown": (lambda w, c, a: _look(w, c, a, 1.0), _TURN),
    "Done": (_noop, {}),
    "Pass": (_noop, {}),
}
# Actions whose effects can change what contextual rules see (everything except pure queries).
QUERY_ACTIONS = frozenset({"GetReachablePositions", "GetSpawnCoordinatesAboveReceptacle", "Done", "Pass"})
