"""The embedded engine against real iTHOR 5.0 scene contents: API parity, actions, contextual rules."""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np
import pytest

from sab_pytest.thor import Engine, scenes
from sab_pytest.thor.sim import Controller
from sab_pytest.thor.sim.geometry import aabb_bottom_top

SHARED = Path("/work/shared/thor_scenes/upstream")


@pytest.fixture(scope="module", autouse=True)
def _scene_data():
    value = os.environ.get(scenes.ENV_VAR)
    if not value:
        if os.environ.get("CI"):
            pytest.fail(f"{scenes.ENV_VAR} is not set on CI: point it at the pinned scene files")
        if not SHARED.is_dir():
            pytest.fail(f"no scene data: set {scenes.ENV_VAR} to a directory with the upstream scene dumps")
        os.environ[scenes.ENV_VAR] = str(SHARED)
    yield


@pytest.fixture(scope="module")
def ctrl() -> Controller:
    return Controller(scene="FloorPlan1")


@pytest.fixture
def c(ctrl: Controller) -> Controller:
    ctrl.reset("FloorPlan1")
    return ctrl


def obj(c: Controller, oid: str) -> dict:
    found = c.last_event.get_object(oid)
    assert found is not None, oid
    return found


def first(c: Controller, otype: str) -> str:
    return c.last_event.objects_by_type(otype)[0]["objectId"]


def face(c: Controller, oid: str) -> None:
    """Stand at the nearest reachable point from which the object is visible (as the planner's find)."""
    points = c.step(action="GetReachablePositions").metadata["actionReturn"]
    center = obj(c, oid)["axisAlignedBoundingBox"]["center"]
    eye = points[0]["y"] + 0.675
    by_distance = sorted(points, key=lambda p: (p["x"] - center["x"]) ** 2 + (p["z"] - center["z"]) ** 2)
    for p in by_distance[:20]:
        flat = math.hypot(center["x"] - p["x"], center["z"] - p["z"])
        event = c.step(
            action="TeleportFull", x=p["x"], y=p["y"], z=p["z"], standing=True,
            rotation={"x": 0, "y": math.degrees(math.atan2(center["x"] - p["x"], center["z"] - p["z"])), "z": 0},
            horizon=max(-30.0, min(60.0, -0.9 * math.degrees(math.atan2(center["y"] - eye, flat)))),
        )
        if event.metadata["lastActionSuccess"] and obj(c, oid)["visible"]:
            return
    pytest.fail(f"no reachable point sees {oid}")


# ---------------------------------------------------------------------------- API parity
def test_is_an_engine_and_event_looks_like_ai2thor(c: Controller) -> None:
    from ai2thor.server import Event

    assert isinstance(c, Engine)
    event = c.last_event
    assert isinstance(event, Event)
    md = event.metadata
    assert md["sceneName"] == "FloorPlan1_physics"
    assert md["lastActionSuccess"] is True and md["errorMessage"] == "" and md["errorCode"] is None
    assert md["inventoryObjects"] == []
    pristine = scenes.SceneSource().load_scene("FloorPlan1")
    assert [o["objectId"] for o in md["objects"]] == list(pristine)
    for o in md["objects"]:
        assert list(o) == list(pristine[o["objectId"]])  # the 42 keys, in THOR's order
    assert event.frame.shape == (300, 300, 3) and event.frame.dtype == np.uint8
    assert event.frame.std() > 0  # something is drawn


def test_init_params_and_nonsense() -> None:
    small = Controller(scene="FloorPlan1_physics", gridSize=0.25, visibilityDistance=1.5, width=64, height=48,
                       renderDepthImage=False, renderInstanceSegmentation=False, fieldOfView=90, snapToGrid=True,
                       quality="Very Low", headless=True)
    assert small.last_event.frame.shape == (48, 64, 3)
    with pytest.raises(TypeError):
        Controller(scene="FloorPlan1", notAParameter=3)
    with pytest.raises(ValueError):
        Controller(scene="FloorPlan1", gridSize=-1)
    with pytest.raises(ValueError):
        Controller(scene="FloorPlan1", width="wide")
    with pytest.raises(ValueError, match="FloorPlan999"):
        Controller(scene="FloorPlan999")


def test_unknown_action_and_bad_arguments_raise(c: Controller) -> None:
    with pytest.raises(ValueError):
        c.step(action="FlyAway")
    with pytest.raises(ValueError):
        c.step(action="PickupObject", objectId=first(c, "Apple"), hurry=True)
    with pytest.raises(ValueError):
        c.step(action="PickupObject", objectId=7)
    with pytest.raises(ValueError):
        c.step(action="FillObjectWithLiquid", objectId=first(c, "Mug"))  # fillLiquid missing
    with pytest.raises(ValueError):
        c.step(action="PickupObject")  # objectId missing


def test_dict_action_merges_keywords_and_does_not_leak(c: Controller) -> None:
    action = {"action": "LookDown"}
    event = c.step(action, degrees=15)
    assert event.metadata["agent"]["cameraHorizon"] == 15
    assert action == {"action": "LookDown"}
    c.step(dict(action="RotateRight"), degrees=45)
    assert c.last_event.metadata["agent"]["rotation"]["y"] == 45


def test_failure_reports_and_leaves_state(c: Controller) -> None:
    apple = first(c, "Apple")
    before = c.last_event.metadata["objects"]
    event = c.step(action="PickupObject", objectId="Apple|+09.99|+09.99|+09.99")
    assert event.metadata["lastActionSuccess"] is False
    assert "is not the objectId on any object" in event.metadata["errorMessage"]
    c.step("Pass")
    assert next(o for o in c.last_event.metadata["objects"] if o["objectId"] == apple)["parentReceptacles"] == \
        next(o for o in before if o["objectId"] == apple)["parentReceptacles"]
    with pytest.raises(RuntimeError):
        c.step(action="OpenObject", objectId=apple, forceAction=True, raise_for_failure=True)


def test_old_events_do_not_change(c: Controller) -> None:
    apple = first(c, "Apple")
    old = c.last_event
    c.step(action="PickupObject", objectId=apple, forceAction=True)
    assert obj(c, apple)["isPickedUp"] is True
    assert old.get_object(apple)["isPickedUp"] is False


# ---------------------------------------------------------------------------- agent and visibility
def test_reachable_grid_and_motion(c: Controller) -> None:
    points = c.step(action="GetReachablePositions").metadata["actionReturn"]
    assert len(points) > 50
    assert all(abs(p["x"] / 0.25 - round(p["x"] / 0.25)) < 1e-6 for p in points)
    agent = c.last_event.metadata["agent"]["position"]
    assert {"x": agent["x"], "y": agent["y"], "z": agent["z"]} in points
    c.step(action="LookUp")
    assert c.step(action="LookUp").metadata["errorCode"] == "LookUpCantExceedMax"
    # walk ahead until blocked: the floor is finite, so some MoveAhead must fail
    results = [c.step(action="MoveAhead").metadata["lastActionSuccess"] for _ in range(40)]
    assert results[0] is True and results[-1] is False
    bad = c.step(action="TeleportFull", x=100.0, y=0.9, z=100.0, rotation=dict(x=0, y=0, z=0), horizon=0,
                 standing=True)
    assert bad.metadata["lastActionSuccess"] is False


def test_visibility_needs_the_right_pose(c: Controller) -> None:
    tomato = first(c, "Tomato")
    far = c.step(action="PickupObject", objectId=tomato)
    if not obj(c, tomato)["visible"]:
        assert far.metadata["errorMessage"] == "Target object not found within the specified visibility."
        assert far.metadata["errorCode"] == "ObjectNotVisible"
    c.reset("FloorPlan1")
    face(c, tomato)
    assert obj(c, tomato)["distance"] < 1.6
    event = c.step(action="PickupObject", objectId=tomato)
    assert event.metadata["lastActionSuccess"], event.metadata["errorMessage"]
    assert event.metadata["inventoryObjects"] == [{"objectId": tomato, "objectType": "Tomato"}]
    held = obj(c, tomato)
    assert held["isPickedUp"] and held["parentReceptacles"] is None
    counter = held and obj(c, "CounterTop|-00.08|+01.15|00.00")
    assert tomato not in counter["receptacleObjectIds"]
    again = c.step(action="PickupObject", objectId=first(c, "Apple"), forceAction=True)
    assert again.metadata["errorCode"] == "InventoryFull"


def test_closed_fridge_hides_its_contents(c: Controller) -> None:
    fridge, egg = "Fridge|-02.10|+00.00|+01.07", "Egg|-02.04|+00.81|+01.24"
    assert fridge in obj(c, egg)["parentReceptacles"]
    face(c, fridge)
    assert obj(c, egg)["visible"] is False
    assert c.step(action="PickupObject", objectId=egg).metadata["lastActionSuccess"] is False
    assert c.step(action="OpenObject", objectId=fridge).metadata["lastActionSuccess"]
    face(c, egg)
    assert c.step(action="PickupObject", objectId=egg).metadata["lastActionSuccess"]
    assert obj(c, egg)["temperature"] == "Cold"


# ---------------------------------------------------------------------------- object actions
def test_slice_apple(c: Controller) -> None:
    apple = first(c, "Apple")
    face(c, apple)
    event = c.step(action="SliceObject", objectId=apple)
    assert event.metadata["lastActionSuccess"], event.metadata["errorMessage"]
    slices = c.last_event.objects_by_type("AppleSliced")
    assert [s["objectId"] for s in slices] == [f"{apple}|AppleSliced_{k}" for k in range(6)]
    assert obj(c, apple)["isSliced"] and not obj(c, apple)["visible"]
    counter = obj(c, "CounterTop|-00.08|+01.15|00.00")
    assert all(s["parentReceptacles"] == ["CounterTop|-00.08|+01.15|00.00"] for s in slices)
    assert all(s["objectId"] in counter["receptacleObjectIds"] for s in slices)
    assert apple not in counter["receptacleObjectIds"]
    assert c.step(action="SliceObject", objectId=apple, forceAction=True).metadata["lastActionSuccess"] is False
    bad = c.step(action="SliceObject", objectId=first(c, "Mug"), forceAction=True)
    assert "Does not have the CanBeSliced property!" in bad.metadata["errorMessage"]


def test_egg_slices_into_one_cracked_egg(c: Controller) -> None:
    egg = first(c, "Egg")
    assert c.step(action="SliceObject", objectId=egg, forceAction=True).metadata["lastActionSuccess"]
    assert [o["objectId"] for o in c.last_event.objects_by_type("EggCracked")] == [f"{egg}|EggCracked_0"]
    assert obj(c, f"{egg}|EggCracked_0")["cookable"] is True
    assert obj(c, egg)["cookable"] is False


def test_stove_knob_drives_burner_and_cooks_potato_in_pan(c: Controller) -> None:
    knob = next(o for o in c.last_event.objects_by_type("StoveKnob"))
    burner = knob["controlledObjects"][0]
    pan, potato = first(c, "Pan"), first(c, "Potato")
    assert c.step(action="ToggleObjectOn", objectId=burner, forceAction=True).metadata["lastActionSuccess"] is False
    c.step(action="PickupObject", objectId=pan, forceAction=True)
    assert c.step(action="PutObject", objectId=burner, forceAction=True).metadata["lastActionSuccess"]
    c.step(action="PickupObject", objectId=potato, forceAction=True)
    assert c.step(action="PutObject", objectId=pan, forceAction=True).metadata["lastActionSuccess"]
    assert obj(c, potato)["parentReceptacles"][:2] == [pan, burner]
    assert obj(c, potato)["isCooked"] is False
    event = c.step(action="ToggleObjectOn", objectId=knob["objectId"], forceAction=True)
    assert event.metadata["lastActionSuccess"]
    assert obj(c, burner)["isToggled"] is True
    assert obj(c, potato)["isCooked"] is True and obj(c, potato)["temperature"] == "Hot"
    assert obj(c, pan)["temperature"] == "Hot"


def test_burner_takes_only_pots_and_pans(c: Controller) -> None:
    burner = first(c, "StoveBurner")
    c.step(action="PickupObject", objectId=first(c, "Apple"), forceAction=True)
    event = c.step(action="PutObject", objectId=burner, forceAction=True)
    assert event.metadata["errorCode"] == "ObjectNotAllowedInReceptacle"
    assert c.last_event.metadata["inventoryObjects"]


def test_faucet_fills_and_cleans_in_sink(c: Controller) -> None:
    mug, basin, faucet = first(c, "Mug"), "Sink|-01.90|+00.97|-01.50|SinkBasin", first(c, "Faucet")
    c.step(action="DirtyObject", objectId=mug, forceAction=True)
    c.step(action="PickupObject", objectId=mug, forceAction=True)
    assert c.step(action="PutObject", objectId=basin, forceAction=True).metadata["lastActionSuccess"]
    assert obj(c, mug)["isDirty"] and not obj(c, mug)["isFilledWithLiquid"]
    assert c.step(action="ToggleObjectOn", objectId=faucet, forceAction=True).metadata["lastActionSuccess"]
    assert obj(c, mug)["isFilledWithLiquid"] and obj(c, mug)["fillLiquid"] == "water"
    assert obj(c, mug)["isDirty"] is False


def test_microwave_rules(c: Controller) -> None:
    mw, potato = first(c, "Microwave"), first(c, "Potato")
    c.step(action="PickupObject", objectId=potato, forceAction=True)
    closed = c.step(action="PutObject", objectId=mw, forceAction=True)
    assert closed.metadata["errorCode"] == "ReceptacleNotOpen"
    c.step(action="OpenObject", objectId=mw, forceAction=True)
    assert c.step(action="PutObject", objectId=mw, forceAction=True).metadata["lastActionSuccess"]
    open_on = c.step(action="ToggleObjectOn", objectId=mw, forceAction=True)
    assert open_on.metadata["errorMessage"] == "Target must be closed to Toggle On!"
    c.step(action="CloseObject", objectId=mw, forceAction=True)
    assert obj(c, potato)["isCooked"] is False
    assert c.step(action="ToggleObjectOn", objectId=mw, forceAction=True).metadata["lastActionSuccess"]
    assert obj(c, potato)["isCooked"] is True
    assert c.step(action="OpenObject", objectId=mw, forceAction=True).metadata["errorMessage"] == \
        "Target must be OFF to open!"


def test_microwave_warms_but_does_not_cook_bread_slices(c: Controller) -> None:
    mw, bread = first(c, "Microwave"), first(c, "Bread")
    c.step(action="SliceObject", objectId=bread, forceAction=True)
    piece = f"{bread}|BreadSliced_0"
    c.step(action="OpenObject", objectId=mw, forceAction=True)
    c.step(action="PickupObject", objectId=piece, forceAction=True)
    c.step(action="PutObject", objectId=mw, forceAction=True)
    c.step(action="CloseObject", objectId=mw, forceAction=True)
    c.step(action="ToggleObjectOn", objectId=mw, forceAction=True)
    assert obj(c, piece)["temperature"] == "Hot" and obj(c, piece)["isCooked"] is False


def test_toaster_cooks_bread_slice(c: Controller) -> None:
    toaster, bread = first(c, "Toaster"), first(c, "Bread")
    c.step(action="SliceObject", objectId=bread, forceAction=True)
    c.step(action="PickupObject", objectId=f"{bread}|BreadSliced_1", forceAction=True)
    assert c.step(action="PutObject", objectId=toaster, forceAction=True).metadata["lastActionSuccess"]
    c.step(action="ToggleObjectOn", objectId=toaster, forceAction=True)
    assert obj(c, f"{bread}|BreadSliced_1")["isCooked"] is True


def test_coffee_machine_fills_mug(c: Controller) -> None:
    mug, machine = first(c, "Mug"), first(c, "CoffeeMachine")
    c.step(action="PickupObject", objectId=mug, forceAction=True)
    assert c.step(action="PutObject", objectId=machine, forceAction=True).metadata["lastActionSuccess"]
    c.step(action="ToggleObjectOn", objectId=machine, forceAction=True)
    assert obj(c, mug)["fillLiquid"] == "coffee" and obj(c, mug)["temperature"] == "Hot"


def test_throw_breaks_mug_and_lands_on_floor(c: Controller) -> None:
    mug = first(c, "Mug")
    c.step(action="PickupObject", objectId=mug, forceAction=True)
    event = c.step(action="ThrowObject", moveMagnitude=1500.0, forceAction=True)
    assert event.metadata["lastActionSuccess"] and event.metadata["inventoryObjects"] == []
    assert obj(c, mug)["isBroken"] is True
    assert obj(c, mug)["parentReceptacles"] == ["Floor|+00.00|+00.00|+00.00"]
    assert mug in obj(c, "Floor|+00.00|+00.00|+00.00")["receptacleObjectIds"]


def test_drop_egg_cracks_but_drop_apple_does_not_break(c: Controller) -> None:
    apple, egg = first(c, "Apple"), first(c, "Egg")
    c.step(action="PickupObject", objectId=apple, forceAction=True)
    assert c.step(action="DropHandObject", forceAction=True).metadata["lastActionSuccess"]
    assert obj(c, apple)["isPickedUp"] is False and obj(c, apple)["parentReceptacles"]
    c.step(action="PickupObject", objectId=egg, forceAction=True)
    c.step(action="DropHandObject", forceAction=True)
    assert obj(c, egg)["isBroken"] is True
    assert obj(c, f"{egg}|EggCracked_0")["parentReceptacles"] == ["Floor|+00.00|+00.00|+00.00"]
    assert c.step(action="DropHandObject").metadata["errorCode"] == "ObjectNotInInventory"


def _bottom(o: dict) -> float:
    return aabb_bottom_top(o)[0]


def test_drop_breaks_by_landing_impulse(c: Controller) -> None:
    # From the start pose the hand is over open floor, about 1.2 m up: a 1 kg Mug lands with an
    # impulse above Break.cs's 3.6 N s, a 0.62 kg Plate and a 0.4 kg Cup below it.
    for otype, breaks in (("Mug", True), ("Plate", False), ("Cup", False)):
        c.reset("FloorPlan1")
        oid = first(c, otype)
        c.step(action="PickupObject", objectId=oid, forceAction=True)
        start = _bottom(obj(c, oid))
        c.step(action="DropHandObject", forceAction=True)
        landed = obj(c, oid)
        assert landed["parentReceptacles"] == ["Floor|+00.00|+00.00|+00.00"], otype
        assert start - _bottom(landed) > 1.0
        assert landed["isBroken"] is breaks, otype


def test_fork_refused_by_put_but_lies_in_toaster_when_let_fall_there(c: Controller) -> None:
    fork, toaster = first(c, "Fork"), first(c, "Toaster")
    c.step(action="PickupObject", objectId=fork, forceAction=True)
    refused = c.step(action="PutObject", objectId=toaster, forceAction=True).metadata
    assert refused["lastActionSuccess"] is False and "not a valid Object Type" in refused["errorMessage"]
    top = obj(c, toaster)["axisAlignedBoundingBox"]
    point = {"x": top["center"]["x"], "y": top["center"]["y"] + top["size"]["y"] / 2 + 0.05,
             "z": top["center"]["z"]}
    assert c.step(action="PlaceObjectAtPoint", objectId=fork, position=point).metadata["lastActionSuccess"]
    assert toaster in obj(c, fork)["parentReceptacles"]


def test_drop_impulse_rule() -> None:
    from sab_pytest.thor.sim.physics_rules import BREAK_IMPULSE, breaks_on_drop, landing_impulse

    laptop = {"objectType": "Laptop", "breakable": True, "isBroken": False, "mass": 2.3}
    table, pillow = {"objectType": "DiningTable"}, {"objectType": "Pillow"}
    assert landing_impulse(1.0, 1.0) == pytest.approx(math.sqrt(2 * 9.81))
    assert breaks_on_drop(laptop, table, 0.4)  # 2.3 * 2.8 = 6.4 N s
    assert not breaks_on_drop(laptop, table, 0.1)  # 2.3 * 1.4 = 3.2 N s
    assert not breaks_on_drop(laptop, pillow, 2.0)  # soft things never break what falls on them
    assert not breaks_on_drop({**laptop, "breakable": False}, table, 2.0)
    assert not breaks_on_drop({**laptop, "isBroken": True}, table, 2.0)
    assert landing_impulse(2.3, 0.4) > BREAK_IMPULSE > landing_impulse(2.3, 0.1)


def test_seats_hold_things_on_the_seat_not_on_the_backrest() -> None:
    c = Controller(scene="FloorPlan201")
    sofa = first(c, "Sofa")
    bottom, top = aabb_bottom_top(obj(c, sofa))
    spots = c.step(action="GetSpawnCoordinatesAboveReceptacle", objectId=sofa).metadata["actionReturn"]
    assert {round(p["y"], 6) for p in spots} == {round(bottom + 0.47, 6)} and bottom + 0.47 < top - 0.3
    laptop = first(c, "Laptop")
    c.step(action="PickupObject", objectId=laptop, forceAction=True)
    assert c.step(action="PutObject", objectId=sofa, forceAction=True).metadata["lastActionSuccess"]
    assert _bottom(obj(c, laptop)) == pytest.approx(bottom + 0.47)


def test_pour_by_rotating_held_mug(c: Controller) -> None:
    mug = first(c, "Mug")
    with pytest.raises(ValueError):
        c.step(action="FillObjectWithLiquid", objectId=mug, fillLiquid=3, forceAction=True)
    assert c.step(action="FillObjectWithLiquid", objectId=mug, fillLiquid="lava",
                  forceAction=True).metadata["lastActionSuccess"] is False
    c.step(action="FillObjectWithLiquid", objectId=mug, fillLiquid="water", forceAction=True)
    c.step(action="PickupObject", objectId=mug, forceAction=True)
    c.step(action="RotateHeldObject", pitch=60)
    assert obj(c, mug)["isFilledWithLiquid"] is True
    c.step(action="RotateHeldObject", pitch=90)
    assert obj(c, mug)["isFilledWithLiquid"] is False and obj(c, mug)["fillLiquid"] is None
    assert c.step(action="EmptyLiquidFromObject", objectId=mug, forceAction=True).metadata[
        "lastActionSuccess"] is False


def test_carrying_a_plate_carries_its_contents(c: Controller) -> None:
    plate, apple = first(c, "Plate"), first(c, "Apple")
    c.step(action="PickupObject", objectId=apple, forceAction=True)
    assert c.step(action="PutObject", objectId=plate, forceAction=True).metadata["lastActionSuccess"]
    before = obj(c, apple)["position"]
    c.step(action="PickupObject", objectId=plate, forceAction=True)
    assert obj(c, apple)["parentReceptacles"] == [plate]
    assert obj(c, apple)["position"] != before
    assert obj(c, plate)["receptacleObjectIds"] == [apple]


def test_other_state_actions(c: Controller) -> None:
    pan, potato = first(c, "Pan"), first(c, "Potato")
    assert c.step(action="DirtyObject", objectId=pan, forceAction=True).metadata["lastActionSuccess"]
    assert c.step(action="DirtyObject", objectId=pan, forceAction=True).metadata["lastActionSuccess"] is False
    assert c.step(action="CleanObject", objectId=pan, forceAction=True).metadata["lastActionSuccess"]
    assert c.step(action="CookObject", objectId=potato, forceAction=True).metadata["lastActionSuccess"]
    assert obj(c, potato)["isCooked"]
    assert c.step(action="CookObject", objectId=pan, forceAction=True).metadata["lastActionSuccess"] is False
    assert c.step(action="UseUpObject", objectId=first(c, "PaperTowelRoll"),
                  forceAction=True).metadata["lastActionSuccess"] is False  # nothing can be used up in 5.0
    assert c.step(action="FillObjectWithLiquid", objectId=pan, fillLiquid="water",
                  forceAction=True).metadata["lastActionSuccess"] is False  # pans are not fillable
    spots = c.step(action="GetSpawnCoordinatesAboveReceptacle", objectId=first(c, "DiningTable")
                   if c.last_event.objects_by_type("DiningTable") else "CounterTop|-00.08|+01.15|00.00")
    assert spots.metadata["lastActionSuccess"] and len(spots.metadata["actionReturn"]) > 0
    point = spots.metadata["actionReturn"][0]
    placed = c.step(action="PlaceObjectAtPoint", objectId=potato, position=point)
    assert placed.metadata["lastActionSuccess"] and obj(c, potato)["parentReceptacles"]
    assert c.step(action="Done").metadata["lastActionSuccess"]


def test_broken_laptop_is_off_for_good() -> None:
    c = Controller(scene="FloorPlan201")
    laptop = first(c, "Laptop")
    c.step(action="ToggleObjectOn", objectId=laptop, forceAction=True)
    assert c.step(action="BreakObject", objectId=laptop, forceAction=True).metadata["lastActionSuccess"]
    assert obj(c, laptop)["isBroken"] and obj(c, laptop)["isToggled"] is False
    event = c.step(action="ToggleObjectOn", objectId=laptop, forceAction=True)
    assert event.metadata["errorMessage"] == "Target is broken and cannot be Toggled On!"
    assert c.step(action="CloseObject", objectId=laptop, forceAction=True).metadata["lastActionSuccess"]


def test_running_faucet_puts_out_candle_in_bathroom() -> None:
    c = Controller(scene="FloorPlan401")
    candle = first(c, "Candle")
    basin = c.last_event.objects_by_type("SinkBasin")[0]["objectId"]
    faucet = min(c.last_event.objects_by_type("Faucet"), key=lambda f: math.dist(
        [f["position"]["x"], f["position"]["z"]], [obj(c, basin)["position"]["x"], obj(c, basin)["position"]["z"]]))
    c.step(action="ToggleObjectOn", objectId=candle, forceAction=True)
    c.step(action="PickupObject", objectId=candle, forceAction=True)
    assert c.step(action="PutObject", objectId=basin, forceAction=True).metadata["lastActionSuccess"]
    assert obj(c, candle)["isToggled"] is True
    c.step(action="ToggleObjectOn", objectId=faucet["objectId"], forceAction=True)
    assert obj(c, candle)["isToggled"] is False


# ---------------------------------------------------------------------------- episodes
STATE_KEYS = ("isToggled", "isBroken", "isFilledWithLiquid", "fillLiquid", "isDirty", "isCooked", "temperature",
              "isSliced", "isOpen", "openness", "isPickedUp", "parentReceptacles", "receptacleObjectIds",
              "position")


def _script(c: Controller) -> list[dict]:
    c.reset("FloorPlan1")
    apple, mug = first(c, "Apple"), first(c, "Mug")
    c.step(action="MoveAhead")
    c.step(action="RotateLeft")
    c.step(action="SliceObject", objectId=apple, forceAction=True)
    c.step(action="PickupObject", objectId=mug, forceAction=True)
    c.step(action="ThrowObject", moveMagnitude=1500.0)
    c.step(action="OpenObject", objectId=first(c, "Fridge"), forceAction=True)
    return c.last_event.metadata["objects"]


def test_same_actions_same_final_metadata(ctrl: Controller) -> None:
    assert _script(ctrl) == _script(Controller(scene="FloorPlan2"))


def test_reset_restores_pristine_state(ctrl: Controller) -> None:
    _script(ctrl)
    ctrl.reset("FloorPlan1")
    pristine = scenes.SceneSource().load_scene("FloorPlan1")
    now = {o["objectId"]: o for o in ctrl.last_event.metadata["objects"]}
    assert set(now) == set(pristine)
    for oid, o in pristine.items():
        assert {k: now[oid][k] for k in STATE_KEYS} == {k: o[k] for k in STATE_KEYS}, oid
    assert ctrl.last_event.metadata["inventoryObjects"] == []


# ---------------------------------------------------------------------------- placement and reach (bench fixes)
def _put(c: Controller, held: str, rec: str) -> dict:
    assert c.step(action="PickupObject", objectId=held, forceAction=True).metadata["lastActionSuccess"]
    return c.step(action="PutObject", objectId=rec, forceAction=True).metadata


def test_room_uses_unrotated_size_and_lets_objects_stand_in_open_containers() -> None:
    from sab_pytest.thor.sim.world import box_edges

    c = Controller(scene="FloorPlan329")
    pencil, mug = first(c, "Pencil"), first(c, "Mug")
    size = obj(c, pencil)["axisAlignedBoundingBox"]["size"]
    assert min(size["x"], size["z"]) > 0.12  # lying diagonally: its axis-aligned box is 0.13 x 0.13
    edges = box_edges(obj(c, pencil))
    assert edges[0] < 0.02 and edges[1] < 0.02 and 0.17 < edges[2] < 0.2
    md = _put(c, pencil, mug)
    assert md["lastActionSuccess"], md["errorMessage"]
    assert obj(c, pencil)["parentReceptacles"][0] == mug  # stands upright, sticking out of the mug

    c.reset("FloorPlan2")  # an egg in a cup
    md = _put(c, first(c, "Egg"), "Cup|+00.90|+01.67|-01.61")
    assert md["lastActionSuccess"], md["errorMessage"]

    c.reset("FloorPlan302")  # open-top garbage can takes a book on edge; a 0.6 m pillow fits the safe...
    assert _put(c, first(c, "Book"), first(c, "GarbageCan"))["lastActionSuccess"]
    c.reset("FloorPlan302")
    safe, pillow = first(c, "Safe"), first(c, "Pillow")
    assert c.step(action="OpenObject", objectId=safe, forceAction=True).metadata["lastActionSuccess"]
    assert _put(c, pillow, safe)["lastActionSuccess"]
    c.reset("FloorPlan302")  # ...but not a 0.33 x 0.19 x 0.16 m drawer: closed receptacles need it all inside
    small = "Drawer|+00.42|+00.53|-01.55"
    assert c.step(action="OpenObject", objectId=small, forceAction=True).metadata["lastActionSuccess"]
    md = _put(c, pillow, small)
    assert not md["lastActionSuccess"] and md["errorMessage"] == "No valid positions to place object found"

    c.reset("FloorPlan220")  # a laptop in an open dresser drawer, within the fit tolerance
    drawer = "Drawer|-00.31|+00.77|+03.61"
    assert c.step(action="OpenObject", objectId=drawer, forceAction=True).metadata["lastActionSuccess"]
    md = _put(c, first(c, "Laptop"), drawer)
    assert md["lastActionSuccess"], md["errorMessage"]


def test_put_on_a_large_counter_lands_near_the_agent_in_view() -> None:
    c = Controller(scene="FloorPlan10")
    counter = "CounterTop|-01.24|+00.97|-00.64"
    face(c, counter)
    pose = c.last_event.metadata["agent"]["position"]
    placed = []
    for otype in ("Bottle", "Apple"):
        oid = first(c, otype)
        md = _put(c, oid, counter)
        assert md["lastActionSuccess"], md["errorMessage"]
        o = obj(c, oid)
        assert o["parentReceptacles"][0] == counter and o["visible"]
        center = o["axisAlignedBoundingBox"]["center"]
        assert math.hypot(center["x"] - pose["x"], center["z"] - pose["z"]) < 1.0  # the box centre is far off
        placed.append(o["axisAlignedBoundingBox"])
    a, b = placed
    gap_x = abs(a["center"]["x"] - b["center"]["x"]) - (a["size"]["x"] + b["size"]["x"]) / 2
    gap_z = abs(a["center"]["z"] - b["center"]["z"]) - (a["size"]["z"] + b["size"]["z"]) / 2
    assert max(gap_x, gap_z) >= -1e-6  # the second object took a free spot
    assert c.step(action="BreakObject", objectId=first(c, "Bottle")).metadata["lastActionSuccess"]


def test_round_dog_bed_leaves_the_gap_to_the_dresser_open() -> None:
    from sab_pytest.thor.sim.geometry import AGENT_RADIUS, aabb_rect

    c = Controller(scene="FloorPlan301")
    points = c.step(action="GetReachablePositions").metadata["actionReturn"]
    statue = obj(c, first(c, "Statue"))["axisAlignedBoundingBox"]["center"]
    nearest = min(math.hypot(p["x"] - statue["x"], p["z"] - statue["z"]) for p in points)
    assert nearest < 1.0  # was 1.78 m: the floor in front of the Dresser was cut off
    for otype in ("Bed", "Dresser", "Desk", "DogBed"):  # nothing reachable inside solid furniture
        x0, x1, z0, z1 = aabb_rect(obj(c, first(c, otype)))
        cx, cz, ax, az = (x0 + x1) / 2, (z0 + z1) / 2, (x1 - x0) / 2, (z1 - z0) / 2
        for p in points:
            if otype == "DogBed":  # oval: the disc keeps clear of the inscribed ellipse
                assert ((p["x"] - cx) / (ax + AGENT_RADIUS)) ** 2 + ((p["z"] - cz) / (az + AGENT_RADIUS)) ** 2 > 1
            else:
                assert not (x0 - AGENT_RADIUS < p["x"] < x1 + AGENT_RADIUS and z0 < p["z"] < z1)
                assert not (x0 < p["x"] < x1 and z0 - AGENT_RADIUS < p["z"] < z1 + AGENT_RADIUS)
    planner_ok = c.step(action="TeleportFull", x=0.25, y=points[0]["y"], z=-0.5, rotation={"x": 0, "y": 0, "z": 0},
                        horizon=0, standing=True).metadata["lastActionSuccess"]
    assert planner_ok  # the point in the gap between the Bed and the DogBed
