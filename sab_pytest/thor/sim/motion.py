"""The robot's own moves and the queries about where it can stand: move, rotate, look, teleport,
reachable positions."""

from __future__ import annotations

import math
from typing import Any

from sab_pytest.thor.sim.action_base import (
    ActionFailed,
    Context,
    Handler,
)
from sab_pytest.thor.sim.geometry import MAX_HORIZON, MIN_HORIZON
from sab_pytest.thor.sim.world import World


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
