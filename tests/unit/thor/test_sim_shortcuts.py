"""The embedded engine's shortcuts give exactly the answers of the plain computations they skip.

The engine avoids work on its hot paths: obstacle footprints bucketed by place, objects beyond the
visibility distance never tested against the frustum, answers of ``sees`` kept while neither the
camera nor the box changed, a frame's items built in the visibility pass, a picture drawn only from
the found object on, action arguments copied without ``deepcopy``, landing points whose flags are
worked out only as far as needed. Each is checked here against the plain computation, written out in
the test, on real scenes and seeded random inputs, including points right at the edges the shortcuts
cut at.
"""

from __future__ import annotations

import copy
import math
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sab_pytest.thor import framing, scenes
from sab_pytest.thor.sim import Controller
from sab_pytest.thor.sim.controller import _copied
from sab_pytest.thor.sim.geometry import (
    AGENT_RADIUS,
    Camera,
    NavMap,
    Pose,
    _disc_touches,
    _disc_touches_ellipse,
    distance_to,
    sees,
)
from sab_pytest.thor.sim.render import in_picture, item_of, shows
from sab_pytest.thor.sim.world import World, _overlap, _rect

SCENES = ("FloorPlan1", "FloorPlan205", "FloorPlan301", "FloorPlan414")


@pytest.fixture(scope="module")
def engine(real_scenes_dir: Path) -> Iterator[Controller]:
    controller = Controller(scenes=scenes.SceneSource(real_scenes_dir))
    yield controller
    controller.stop()


def plain_is_free(nav: NavMap, x: float, z: float) -> bool:
    fx0, fx1, fz0, fz1 = nav.floor_rect
    r = AGENT_RADIUS
    if not (fx0 + r <= x <= fx1 - r and fz0 + r <= z <= fz1 - r):
        return False
    if any(_disc_touches(x, z, rect, r) for rect in nav.obstacles):
        return False
    return not any(_disc_touches_ellipse(x, z, rect, r) for rect in nav.round_obstacles)


def test_bucketed_obstacles_answer_as_a_scan_of_all(engine: Controller) -> None:
    rng = random.Random(7)
    checked = blocked = 0
    for scene in SCENES:
        engine.reset(scene)
        assert engine.world is not None
        nav = engine.world.nav
        fx0, fx1, fz0, fz1 = nav.floor_rect
        points = [(rng.uniform(fx0, fx1), rng.uniform(fz0, fz1)) for _ in range(200)]
        for rect in nav.obstacles:  # right at the reach of each footprint, both sides of it
            for eps in (-1e-9, 0.0, 1e-9, 1e-7):
                r = AGENT_RADIUS + eps
                points += [(rect[0] - r, (rect[2] + rect[3]) / 2), (rect[1] + r, rect[2] - r / 2),
                           ((rect[0] + rect[1]) / 2, rect[3] + r), (rect[1] + r * math.sqrt(0.5), rect[3] + r * 0.7)]
        for x, z in points:
            assert nav.is_free(x, z) == plain_is_free(nav, x, z), (scene, x, z)
            blocked += not plain_is_free(nav, x, z)
        checked += len(points)
    assert checked > 1000 and 0 < blocked < checked  # both answers occur


def plain_visible(engine: Controller) -> dict[str, bool]:
    world = engine.world
    assert world is not None
    s = engine._settings
    camera = Camera(world.pose, float(s["fieldOfView"]), int(s["width"]), int(s["height"]))
    vis = float(s["visibilityDistance"])
    out = {}
    for oid in world.order:
        obj = world.objects[oid]
        if oid in world.inactive:
            out[oid] = False
        elif oid == world.held:
            out[oid] = True
        else:
            out[oid] = not world.hidden_by_closed(oid) and sees(camera, obj, vis)
    return out


def drawable(world: World) -> list[Any]:
    """A frame's items the plain way: every active object but the floor that no closed receptacle shuts in."""
    return [item_of(oid, world.objects[oid]) for oid in world.order
            if oid not in world.inactive and world.objects[oid]["objectType"] != "Floor"
            and not world.hidden_by_closed(oid)]


def test_visibility_and_frame_items_match_the_full_computation(engine: Controller) -> None:
    """Over teleports, looks and object moves, every event's flags and distances are what testing every
    object gives."""
    rng = random.Random(3)
    events = seen = 0
    for scene in SCENES[:3]:
        event = engine.reset(scene)
        reachable = engine.step(action="GetReachablePositions").metadata["actionReturn"]
        for _ in range(12):
            p = rng.choice(reachable)
            event = engine.step(action="TeleportFull", x=p["x"], y=p["y"], z=p["z"],
                                rotation={"x": 0.0, "y": rng.choice([0.0, 37.5, 90.0, 181.0, 270.0]), "z": 0.0},
                                horizon=rng.choice([0.0, 30.0, -20.0]), standing=True)
            for action in ("LookDown", "RotateRight", "MoveAhead"):
                pickable = [o["objectId"] for o in event.metadata["objects"] if o["visible"] and o["pickupable"]]
                if pickable and not engine.world.held and rng.random() < 0.5:  # type: ignore[union-attr]
                    event = engine.step(action="PickupObject", objectId=rng.choice(pickable), forceAction=True)
                elif engine.world.held and rng.random() < 0.5:  # type: ignore[union-attr]
                    event = engine.step(action="DropHandObject", forceAction=True)
                else:
                    event = engine.step(action=action)
                want = plain_visible(engine)
                got = {o["objectId"]: o["visible"] for o in event.metadata["objects"]}
                assert got == want
                pose = engine.world.pose  # type: ignore[union-attr]
                assert [o["distance"] for o in event.metadata["objects"]] == [
                    distance_to(pose, engine.world.objects[o["objectId"]])  # type: ignore[union-attr]
                    for o in event.metadata["objects"]]
                assert event._frame_source._items == drawable(engine.world)  # type: ignore[arg-type]
                events += 1
                seen += sum(want.values())
    assert events == 108 and seen > 100


def test_picture_test_of_one_object_matches_the_whole_picture(engine: Controller) -> None:
    rng = random.Random(11)
    shown_count = 0
    for scene in SCENES:
        event = engine.reset(scene)
        reachable = engine.step(action="GetReachablePositions").metadata["actionReturn"]
        for _ in range(3):
            p = rng.choice(reachable)
            event = engine.step(action="TeleportFull", x=p["x"], y=p["y"], z=p["z"],
                                rotation={"x": 0.0, "y": rng.uniform(0, 360), "z": 0.0},
                                horizon=rng.choice([0.0, 30.0]), standing=True)
            everything = framing.shown(event.metadata)
            ids = [o["objectId"] for o in event.metadata["objects"]]
            for oid in sorted(everything) + rng.sample(ids, 8):  # what the picture shows, and some of the rest
                assert framing.shows(event.metadata, oid) == (oid in everything)
            shown_count += len(everything)
    cam = Camera(Pose(0.0, 0.9, 0.0), 90.0, 300, 300)
    table = ("Table|1", "DiningTable", [[x, y, z] for x in (-1, 1) for y in (0, 0.8) for z in (1, 2)], ())
    cup = ("Cup|1", "Cup", [[x, y, z] for x in (-0.1, 0.1) for y in (0.8, 0.9) for z in (1.4, 1.5)], ("Table|1",))
    wall = ("Box|1", "Box", [[x, y, z] for x in (-2, 2) for y in (0, 3) for z in (0.5, 0.6)], ())
    for items in ([table, cup], [table, cup, wall], [cup]):
        for oid in ("Table|1", "Cup|1", "Box|1", "Nothing|0"):
            assert shows(items, cam, oid) == (oid in in_picture(items, cam))
    assert shown_count > 30


def test_action_arguments_are_copied_as_deepcopy_would() -> None:
    args = {"action": "TeleportFull", "x": 1.0, "rotation": {"x": 0.0, "y": 90, "z": None},
            "path": [[1, 2], {"a": True}], "name": "x"}
    copied = _copied(args)
    assert copied == copy.deepcopy(args)
    copied["rotation"]["y"] = 5
    copied["path"][0].append(3)
    assert args["rotation"]["y"] == 90 and args["path"][0] == [1, 2]
    odd = {"action": "X", "where": (1, 2), "deep": [[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]}
    assert _copied(odd) == copy.deepcopy(odd) and _copied(odd)["deep"] is not odd["deep"]
    cyclic: dict[str, Any] = {"action": "X"}
    cyclic["self"] = cyclic
    again = _copied(cyclic)  # deepcopy keeps the cycle; a plain walk would never end
    assert again["self"] is again


def plain_landing(world: World, object_id: str, rec: dict[str, Any], surface_y: float) -> tuple[float, float]:
    """Every candidate's flags worked out, then the tiers read off: free and in view, free, any."""
    c, s = rec["axisAlignedBoundingBox"]["center"], rec["axisAlignedBoundingBox"]["size"]
    osz = world.objects[object_id]["axisAlignedBoundingBox"]["size"]
    axes = []
    for k in ("x", "z"):
        half = max((s[k] - osz[k]) / 2, 0.0)
        n = int(half / 0.05 + 1e-9)
        axes.append([c[k] + i * 0.05 for i in range(-n, n + 1)])
    cands = sorted(((x, z) for x in axes[0] for z in axes[1]),
                   key=lambda p: (round((p[0] - world.pose.x) ** 2 + (p[1] - world.pose.z) ** 2, 9), p))
    others = [_rect(world.objects[o]) for o in rec["receptacleObjectIds"] or []
              if o != object_id and world.objects[o]["pickupable"]]
    free = [(x, z) for x, z in cands if not any(
        _overlap((x - osz["x"] / 2, x + osz["x"] / 2, z - osz["z"] / 2, z + osz["z"] / 2), r) for r in others)]
    seen = free
    if world.view is not None:
        fov, width, height, reach = world.view
        cam = Camera(world.pose, fov, width, height)
        ex, _, ez = cam.origin
        seen = [(x, z) for x, z in free
                if (x - ex) ** 2 + (z - ez) ** 2 <= reach * reach and cam.in_view((x, surface_y, z))]
    for tier in (seen, free, cands):
        solid = [p for p in tier if not world.nav.is_free(*p)]
        if solid or tier:
            return (solid or tier)[0]
    return c["x"], c["z"]


def test_landing_points_match_the_full_tiers(engine: Controller) -> None:
    rng = random.Random(5)
    compared = 0
    for scene in SCENES:
        engine.reset(scene)
        world = engine.world
        assert world is not None
        reachable = engine.step(action="GetReachablePositions").metadata["actionReturn"]
        small = [oid for oid in world.order if world.objects[oid]["pickupable"] and oid not in world.inactive]
        receptacles = [oid for oid in world.order if world.objects[oid]["receptacle"]
                       and world.objects[oid]["objectType"] != "Floor"]
        for _ in range(15):
            p = rng.choice(reachable)
            engine.step(action="TeleportFull", x=p["x"], y=p["y"], z=p["z"],
                        rotation={"x": 0.0, "y": rng.uniform(0, 360), "z": 0.0}, horizon=30.0, standing=True)
            oid, rid = rng.choice(small), rng.choice(receptacles)
            rec = world.objects[rid]
            y = rng.uniform(0.0, 1.5)
            assert world._nearest_free_point(oid, rec, y) == plain_landing(world, oid, rec, y)
            compared += 1
    assert compared == 15 * len(SCENES)
