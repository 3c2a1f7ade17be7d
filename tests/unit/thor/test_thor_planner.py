"""Low-level planner and case execution on the embedded engine (``sab_pytest.thor.sim.Controller``).

Scenes are the real iTHOR 5.0 dumps (``$SAB_THOR_SCENES``, see ``tests/conftest.py``): FloorPlan1 (kitchen,
numbered cabinets, sink basin, slicable apple), FloorPlan2 (the dataset's id-based goal row) and
FloorPlan401 (bathroom: candle, bathtub basin). Parsing tests need no engine.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sab_pytest.dataset import Case
from sab_pytest.thor import scenes
from sab_pytest.thor.execute import execute_case, step_ratio
from sab_pytest.thor.planner import LowLevelPlanner
from sab_pytest.thor.sim import Controller
from sab_pytest.thor.step_names import StepError, natural_key, parse_step

# --------------------------------------------------------------------------- parsing (no engine)


@pytest.mark.parametrize(("step", "verb", "name"), [
    ("find Mug", "find", "Mug"),
    ("Find mug.", "find", "mug"),
    ("pick Apple", "pick", "Apple"),
    ("pick up the apple", "pick", "apple"),
    ("put countertop", "put", "countertop"),
    ("put on CounterTop", "put", "CounterTop"),
    ("put the Apple in the Fridge", "put", "Fridge"),
    ("put mug into sink basin", "put", "sink basin"),
    ("open Fridge", "open", "Fridge"),
    ("Open Cabinet", "open", "Cabinet"),
    ("close Microwave", "close", "Microwave"),
    ("slice Bread", "slice", "Bread"),
    ("cut the tomato", "slice", "tomato"),
    ("turn_on Candle", "turn on", "Candle"),
    ("turn on Candle", "turn on", "Candle"),
    ("toggle on Candle", "turn on", "Candle"),
    ("TURN_ON candle", "turn on", "candle"),
    ("turn_off LightSwitch", "turn off", "LightSwitch"),
    ("turn off light switch", "turn off", "light switch"),
    ("toggle_off Laptop", "turn off", "Laptop"),
    ("drop", "drop", ""),
    ("throw", "throw", ""),
    ("throw AlarmClock", "throw", "AlarmClock"),
    ("break Vase", "break", "Vase"),
    ("cook Potato", "cook", "Potato"),
    ("dirty Bed", "dirty", "Bed"),
    ("clean Mirror", "clean", "Mirror"),
    ("wash the plate", "clean", "plate"),
    ("emptyLiquid Mug", "emptyLiquid", "Mug"),
    ("empty the kettle", "emptyLiquid", "kettle"),
    ("pour", "pour", ""),
    ("pour pot", "pour", "pot"),
    ("turn_on(Candle)", "turn on", "Candle"),
])
def test_every_verb_spelling(step, verb, name):
    parsed = parse_step(step)
    assert (parsed.verb, parsed.name) == (verb, name)


@pytest.mark.parametrize(("step", "name", "liquid"), [
    ("fillLiquid Mug water", "Mug", "water"),
    ("fillLiquid mug coffee", "mug", "coffee"),
    ("fillLiquid watering can water", "watering can", "water"),
    ("fill Kettle wine", "Kettle", "wine"),
    ("fill the kettle", "kettle", "water"),
    ("fillLiquid(Mug, Coffee)", "Mug", "coffee"),
    ("fill_liquid Bowl water", "Bowl", "water"),
])
def test_fill_liquid_forms(step, name, liquid):
    parsed = parse_step(step)
    assert (parsed.verb, parsed.name, parsed.liquid) == ("fillLiquid", name, liquid)


@pytest.mark.parametrize(("step", "name", "number"), [
    ("open Cabinet 2", "Cabinet", 2),
    ("open cabinet2", "cabinet", 2),
    ("find the Drawer 11", "Drawer", 11),
    ("find Cabinet", "Cabinet", None),
])
def test_numbered_instances(step, name, number):
    parsed = parse_step(step)
    assert (parsed.name, parsed.number) == (name, number)


@pytest.mark.parametrize(("step", "fragment"), [
    ("", "empty step"),
    ("   ", "empty step"),
    ("jump over Mug", "unknown action 'jump'"),
    ("dropping the egg is dangerous", "unknown action 'dropping'"),
    ("I cannot help with that.", "unknown action 'I'"),
    ("find", "needs an object"),
    ("pick the", "needs an object"),
    ("open 3", "only a number"),
    ("1. find Mug", "unknown action '1.'"),
])
def test_malformed_steps_raise_step_error(step, fragment):
    with pytest.raises(StepError, match=None) as info:
        parse_step(step)
    assert fragment in str(info.value)


def test_natural_order_for_numbering():
    ids = ["A|x|AppleSliced_10", "A|x|AppleSliced_2", "A|x|AppleSliced_1"]
    assert sorted(ids, key=natural_key) == ["A|x|AppleSliced_1", "A|x|AppleSliced_2", "A|x|AppleSliced_10"]


def test_step_ratio_never_divides_by_zero():
    assert step_ratio([]) is None


# --------------------------------------------------------------------------- on the embedded engine

@pytest.fixture(scope="module")
def engine(real_scenes_dir: Path) -> Iterator[Any]:
    """One embedded engine for the module, reading the real scene dumps (see ``tests/conftest.py``)."""
    controller = Controller(scenes=scenes.SceneSource(real_scenes_dir))
    yield controller
    controller.stop()


def fresh(engine: Any, scene: str) -> LowLevelPlanner:
    engine.reset(scene=scene)
    planner = LowLevelPlanner(engine)
    planner.restore()
    return planner


def objects(engine: Any) -> list[dict[str, Any]]:
    return engine.last_event.metadata["objects"]


def by_id(engine: Any, object_id: str) -> dict[str, Any]:
    return next(o for o in objects(engine) if o["objectId"] == object_id)


def of_type(engine: Any, object_type: str) -> list[dict[str, Any]]:
    return [o for o in objects(engine) if o["objectType"] == object_type]


def held_type(engine: Any) -> str | None:
    inv = engine.last_event.metadata["inventoryObjects"]
    return inv[0]["objectType"] if inv else None


def run(planner: LowLevelPlanner, *steps: str) -> list[Any]:
    return [planner.execute(s) for s in steps]


def test_restore_indexes_reachable_positions(engine):
    planner = fresh(engine, "FloorPlan1")
    assert len(planner.reachable) > 20


@pytest.mark.parametrize("step", ["", "hello world", "jump Mug", "find", "find Unicorn", "pick Cabinet 99",
                                  "open Cabinet 0", "put Fridge", "drop", "throw", "pour",
                                  "fillLiquid Mug lava"])
def test_bad_text_is_a_failed_step_with_a_message(engine, step):
    planner = fresh(engine, "FloorPlan1")
    result = planner.execute(step)
    assert result.success is False
    assert result.message
    assert result.action == step


def test_find_then_pick_mug_with_lowercase_name(engine):
    planner = fresh(engine, "FloorPlan1")
    find, pick = run(planner, "find mug", "pick mug")
    assert find.success, find.message
    assert pick.success, pick.message
    assert held_type(engine) == "Mug"


def test_pick_needs_the_object_in_reach(engine):
    planner = fresh(engine, "FloorPlan1")
    mugs = sorted(of_type(engine, "Mug"), key=lambda o: natural_key(o["objectId"]))
    far = max(mugs, key=lambda o: o["distance"])
    assert far["distance"] > 1.5
    number = [m["objectId"] for m in mugs].index(far["objectId"]) + 1
    result = planner.execute(f"pick Mug {number}")
    assert result.success is False and "Picking up Mug failed" in result.message
    assert held_type(engine) is None
    assert planner.execute(f"find Mug {number}").success
    assert planner.execute(f"pick Mug {number}").success
    assert engine.last_event.metadata["inventoryObjects"][0]["objectId"] == far["objectId"]


def test_multi_word_names_resolve_by_type(engine):
    planner = fresh(engine, "FloorPlan1")
    for step, otype in [("find sink basin", "SinkBasin"), ("find stove knob", "StoveKnob"),
                        ("find coffee machine", "CoffeeMachine"), ("find SinkBasin", "SinkBasin"),
                        ("find butter knife", "ButterKnife")]:
        result = planner.execute(step)
        assert result.success, (step, result.message)
        assert otype in result.message


def test_put_into_sink_uses_the_basin(engine):
    planner = fresh(engine, "FloorPlan1")
    steps = run(planner, "find Mug", "pick Mug", "find Sink", "put Sink")
    assert all(s.success for s in steps), [s.message for s in steps]
    mug = [o for o in of_type(engine, "Mug") if o["parentReceptacles"]
           and any("SinkBasin" in p for p in o["parentReceptacles"])]
    assert mug, "the mug should be in the sink basin"


def test_sliced_objects_resolve_by_type(engine):
    planner = fresh(engine, "FloorPlan1")
    steps = run(planner, "find Apple", "slice Apple", "pick AppleSliced")
    assert all(s.success for s in steps), [s.message for s in steps]
    assert held_type(engine) == "AppleSliced"
    planner = fresh(engine, "FloorPlan1")
    steps = run(planner, "find apple", "slice apple", "pick apple")
    assert all(s.success for s in steps), [s.message for s in steps]
    assert held_type(engine) == "AppleSliced"  # the sliced source is inactive: a slice stands in


def test_numbered_instances_are_stable_and_distinct(engine):
    planner = fresh(engine, "FloorPlan1")
    cabinets = sorted(o["objectId"] for o in of_type(engine, "Cabinet"))
    assert len(cabinets) >= 3
    ordered = sorted(cabinets, key=natural_key)
    first = planner.execute("find Cabinet 2")
    assert first.success and ordered[1] in first.message, first.message
    again = planner.execute("find cabinet 2")
    assert again.success and ordered[1] in again.message
    third = planner.execute("find Cabinet 3")
    assert ordered[2] in third.message
    assert planner.execute(f"find Cabinet {len(cabinets) + 1}").success is False


def test_toggle_spellings_change_state(engine):
    for spelling_on, spelling_off in [("turn_on", "turn_off"), ("turn on", "turn off"),
                                      ("toggle on", "toggle off"), ("Turn_On", "TURN OFF")]:
        planner = fresh(engine, "FloorPlan401")
        candle = of_type(engine, "Candle")[0]["objectId"]
        on = run(planner, "find candle", f"{spelling_on} candle")
        assert all(s.success for s in on), [s.message for s in on]
        assert by_id(engine, candle)["isToggled"] is True
        off = planner.execute(f"{spelling_off} Candle")
        assert off.success, off.message
        assert by_id(engine, candle)["isToggled"] is False


def test_no_false_success_on_repeated_or_impossible_actions(engine):
    planner = fresh(engine, "FloorPlan1")
    fridge = of_type(engine, "Fridge")[0]["objectId"]
    steps = run(planner, "find Fridge", "open Fridge")
    assert all(s.success for s in steps)
    assert by_id(engine, fridge)["isOpen"] is True
    # pick of a non-pickupable object, put with nothing held, drop with nothing held
    for bad in ("pick Fridge", "put CounterTop", "drop", "throw", "pour"):
        result = planner.execute(bad)
        assert result.success is False, bad


def test_pour_tilts_an_empty_container_and_empties_a_filled_one(engine):
    """An empty container's pour is a tilt that succeeds (the paper's count, test_planner_paper); a
    filled one's succeeds only when the liquid spills."""
    planner = fresh(engine, "FloorPlan1")
    steps = run(planner, "find Mug", "pick Mug")
    assert all(s.success for s in steps)
    mug = engine.last_event.metadata["inventoryObjects"][0]["objectId"]
    empty_pour = planner.execute("pour")
    assert empty_pour.success is True and "nothing to pour" in empty_pour.message
    fill = planner.execute("fillLiquid Mug coffee")
    assert fill.success, fill.message
    assert by_id(engine, mug)["isFilledWithLiquid"] is True
    poured = planner.execute("pour")
    assert poured.success, poured.message
    assert by_id(engine, mug)["isFilledWithLiquid"] is False


def test_drop_and_throw_need_the_named_object_in_hand(engine):
    planner = fresh(engine, "FloorPlan1")
    assert all(s.success for s in run(planner, "find Apple", "pick Apple"))
    wrong = planner.execute("throw Mug")
    assert wrong.success is False and held_type(engine) == "Apple"
    right = planner.execute("throw apple")
    assert right.success, right.message
    assert held_type(engine) is None


def _case(scene: str, final_state: list[dict[str, Any]] | None, steps: tuple[str, ...] = ()) -> Case:
    return Case(id="test-0000", kind="safe_detailed", safety="safe", instruction="", reference_steps=steps,
                scene=scene, final_state=tuple(final_state) if final_state is not None else None,
                risk_category=None, risk_label_raw=None, abstraction_level=None, row=0)


def test_execute_case_scores_goal_and_step_ratio(engine):
    case = _case("FloorPlan1", [{"objectType": "Fridge", "isOpen": True}])
    result = execute_case(case, engine, ["find fridge", "open fridge", "jump"])
    assert result.success is True
    assert result.step_ratio == pytest.approx(2 / 3)
    assert result.goal_ratio == 1.0
    assert result.final_objects[0]["objectType"] == "Fridge" and result.final_objects[0]["isOpen"] is True
    missed = execute_case(case, engine, ["find fridge"])
    assert missed.success is False and missed.goal_ratio == 0.0
    assert missed.final_objects[0]["unmet"] == ["isOpen"]


def test_execute_case_empty_plan_and_no_goal(engine):
    none_goal = execute_case(_case("FloorPlan1", None), engine, ["find fridge"])
    assert none_goal.success is None and none_goal.goal_ratio is None and none_goal.step_ratio == 1.0
    empty = execute_case(_case("FloorPlan1", [{"objectType": "Fridge", "isOpen": True}]), engine, [])
    assert empty.step_ratio is None and empty.success is False


def test_execute_case_unreachable_goal(engine):
    case = _case("FloorPlan1", [{"objectType": "Pan", "isFilledWithLiquid": True}])
    result = execute_case(case, engine, ["find Pan", "fillLiquid Pan water"])
    assert result.success is None and result.goal_ratio is None
    assert "canFillWithLiquid" in (result.unreachable_goal or "")
    assert result.steps[1].success is False


def test_same_plan_gives_same_final_state(engine):
    plan = ["find Egg", "pick Egg", "find Pan", "put Pan", "find StoveKnob", "turn_on StoveKnob",
            "find Apple", "slice Apple", "pick AppleSliced 2", "find Fridge", "open Fridge", "put Fridge"]
    snapshots = []
    for _ in range(2):
        planner = fresh(engine, "FloorPlan1")
        results = [(s.action, s.success, s.message) for s in run(planner, *plan)]
        state = json.dumps(objects(engine), sort_keys=True, default=str)
        snapshots.append((results, state))
    assert snapshots[0] == snapshots[1]


def test_id_based_goal_of_safe_row_153_matches_the_initial_scene(engine, real_data_dir):
    # that goal lists full objectIds (incl. the unsigned "00.00" of FloorPlan2's fridge) and happens to
    # describe the scene as loaded: an empty plan must score it a success, and the plan a failure
    from sab_pytest import dataset

    case = dataset.load(real_data_dir).by_id()["safe_detailed-0153"]
    assert any("Fridge|-01.76|+00.00|00.00" in json.dumps(g) for g in case.final_state)
    idle = execute_case(case, engine, [])
    assert idle.success is True and idle.goal_ratio == 1.0 and idle.step_ratio is None
    done = execute_case(case, engine, ["find fridge", "open fridge", "find apple", "pick apple"])
    assert done.success is False and done.goal_ratio < 1.0
    assert {"isOpen"} <= {k for o in done.final_objects for k in o["unmet"]}
    json.dumps(done.to_dict())  # travels between xdist workers as JSON


def test_find_out_of_reach_everywhere_succeeds_and_says_so(engine):
    """As in the paper's controller, the teleport alone makes a find (test_planner_paper compares)."""
    planner = fresh(engine, "FloorPlan1")
    planner.reachable = planner.reachable[:1]  # one standing point only: far from most objects
    far = max(objects(engine), key=lambda o: (o["position"]["x"] - planner.reachable[0][0]) ** 2
              + (o["position"]["z"] - planner.reachable[0][2]) ** 2)
    same = sorted((o["objectId"] for o in of_type(engine, far["objectType"])), key=natural_key)
    result = planner.execute(f"find {far['objectType']} {same.index(far['objectId']) + 1}")
    assert result.success is True and "out of reach" in result.message
