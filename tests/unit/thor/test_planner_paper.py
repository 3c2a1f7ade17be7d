"""The low-level planner beside the paper's own controller (``low_level_controller.py``, SAB_UPSTREAM_METHODS),
both driving the same embedded engine in this process: where the project matches the paper (how many
standing points a ``find`` tries, a ``find`` counted by its teleport alone, a ``pour`` from an empty
container, ``--thor local``'s frame size), each test asks the paper's code what it does rather than
writing its answer down.

The paper's controller imports scipy for a KD-tree of the reachable points; where scipy is not
installed, a stand-in with the same ``query`` answers (nearest first, ties in index order).
"""

from __future__ import annotations

import importlib.util
import inspect
import itertools
import math
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from sab_pytest.thor import scenes
from sab_pytest.thor.planner import FIND_TRIES, LowLevelPlanner
from sab_pytest.thor.sim import Controller

TARGET = "Mug"  # neither Fridge nor Microwave, for which the paper's find adds an angle rule


class _KDTree:
    """scipy.spatial.KDTree's ``query`` as the paper's controller uses it (k nearest, nearest first)."""

    def __init__(self, data: Any) -> None:
        self.data = np.asarray(data, dtype=float)

    def query(self, x: Any, k: int = 1) -> tuple[Any, Any]:
        d = np.linalg.norm(self.data - np.asarray(x, dtype=float), axis=1)
        order = np.argsort(d, kind="stable")[:k]
        return d[order], order


@pytest.fixture(scope="module")
def paper(real_methods_dir: Path) -> Iterator[types.ModuleType]:
    """The paper's ``low_level_controller`` module, loaded from its file."""
    with pytest.MonkeyPatch.context() as mp:
        if importlib.util.find_spec("scipy") is None:
            spatial = types.ModuleType("scipy.spatial")
            spatial.KDTree = _KDTree  # type: ignore[attr-defined]
            scipy = types.ModuleType("scipy")
            scipy.spatial = spatial  # type: ignore[attr-defined]
            mp.setitem(sys.modules, "scipy", scipy)
            mp.setitem(sys.modules, "scipy.spatial", spatial)
        spec = importlib.util.spec_from_file_location("paper_low_level_controller",
                                                      real_methods_dir / "low_level_controller.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        yield module


class _Refusing:
    """The engine, but a TeleportFull to a point within ``radius`` of ``centre`` (flat) fails, as a
    teleport into a spot THOR finds blocked does; both planners send their actions through it."""

    def __init__(self, engine: Controller) -> None:
        self.engine = engine
        self.centre = (0.0, 0.0)
        self.radius = -1.0

    @property
    def last_event(self) -> Any:
        return self.engine.last_event

    def step(self, action: Any = None, **kwargs: Any) -> Any:
        if isinstance(action, dict):
            kwargs = {**action, **kwargs}
            action = kwargs.pop("action")
        if action == "TeleportFull" and math.dist((kwargs["x"], kwargs["z"]), self.centre) <= self.radius:
            kwargs = {**kwargs, "x": 1000.0, "z": 1000.0}  # far off the floor: the engine refuses it
        return self.engine.step(action=action, **kwargs)

    def reset(self, scene: str | None = None, **init: Any) -> Any:
        return self.engine.reset(scene=scene, **init)

    def stop(self) -> None:
        self.engine.stop()


@pytest.fixture(scope="module")
def engine(real_scenes_dir: Path) -> Iterator[_Refusing]:
    wrapped = _Refusing(Controller(scenes=scenes.SceneSource(real_scenes_dir)))
    yield wrapped
    wrapped.stop()


def _target(engine: _Refusing) -> dict[str, Any]:
    engine.reset(scene="FloorPlan1")
    found = [o for o in engine.last_event.metadata["objects"] if o["objectType"] == TARGET]
    assert len(found) == 1 and not (found[0]["visible"] and found[0]["distance"] < 1.0)  # both teleport
    return found[0]


def _ours(engine: _Refusing, *steps: str) -> list[bool]:
    engine.reset(scene="FloorPlan1")
    planner = LowLevelPlanner(engine)  # type: ignore[arg-type]
    planner.restore()
    return [planner.execute(s).success for s in steps]


def _theirs(paper: types.ModuleType, engine: _Refusing, *steps: str) -> list[bool]:
    engine.reset(scene="FloorPlan1")
    planner = paper.LowLevelPlanner(engine)
    planner.restore_scene()
    return [planner.llm_skill_interact(s)["success"] for s in steps]


def _radii(engine: _Refusing, centre: tuple[float, float]) -> list[tuple[int, float]]:
    """(points refused, radius) for radii between the distinct distances of the reachable points from
    ``centre``: the planners' orders may differ on ties, never on which points a radius refuses."""
    engine.engine.step(action="GetReachablePositions")
    points = engine.last_event.metadata["actionReturn"]
    dists = sorted({round(math.dist((p["x"], p["z"]), centre), 6) for p in points})
    return [(sum(math.dist((p["x"], p["z"]), centre) <= r for p in points), r)
            for r in ((a + b) / 2 for a, b in itertools.pairwise(dists))]


def test_find_tries_as_many_standing_points_as_the_paper(paper, engine) -> None:
    target = _target(engine)
    engine.centre = (target["position"]["x"], target["position"]["z"])
    radii = _radii(engine, engine.centre)
    below = max((n, r) for n, r in radii if n < FIND_TRIES)
    at_or_above = min((n, r) for n, r in radii if n >= FIND_TRIES)
    checked = []
    try:
        for refused, radius in ((0, -1.0), below, at_or_above):
            engine.radius = radius
            ours, theirs = _ours(engine, f"find {TARGET}"), _theirs(paper, engine, f"find {TARGET}")
            assert ours == theirs, f"{refused} nearest points refused: ours {ours}, the paper's {theirs}"
            checked.append(ours[0])
    finally:
        engine.radius = -1.0
    assert checked == [True, True, False]  # the comparison covered both sides of the limit


def test_find_counts_the_teleport_alone_as_the_paper(paper, engine) -> None:
    """Every standing point near the object refused: the agent stands far from it, out of reach."""
    target = _target(engine)
    engine.centre = (target["position"]["x"], target["position"]["z"])
    radii = _radii(engine, engine.centre)
    engine.radius = next(r for n, r in radii if n >= len(radii) // 2)
    try:
        engine.reset(scene="FloorPlan1")
        ours = LowLevelPlanner(engine)  # type: ignore[arg-type]
        ours.restore()
        ours.reachable = [p for p in ours.reachable if math.dist((p[0], p[2]), engine.centre) > engine.radius]
        step = ours.execute(f"find {TARGET}")
        theirs = _theirs_far(paper, engine)
    finally:
        engine.radius = -1.0
    assert step.success == theirs and "out of reach" in step.message


def _theirs_far(paper: types.ModuleType, engine: _Refusing) -> bool:
    """The paper's find when its reachable points are only those the engine does not refuse."""
    engine.reset(scene="FloorPlan1")
    planner = paper.LowLevelPlanner(engine)
    planner.restore_scene()
    keep = [p for p in planner.reachable_positions if math.dist((p[0], p[2]), engine.centre) > engine.radius]
    planner.reachable_positions = np.array(keep)
    planner.reachable_position_kdtree = type(planner.reachable_position_kdtree)(planner.reachable_positions)
    return bool(planner.llm_skill_interact(f"find {TARGET.lower()}")["success"])


def test_pour_from_an_empty_container_counts_as_the_paper_counts_it(paper, engine) -> None:
    steps = ("pour", f"find {TARGET.lower()}", f"pick {TARGET.lower()}", "pour")
    ours, theirs = _ours(engine, *steps), _theirs(paper, engine, *steps)
    assert ours == theirs and ours[-1] is True


def test_local_frames_are_the_size_the_paper_ran_at(real_methods_dir, monkeypatch) -> None:
    """The paper's code builds its Controller without a size, so ai2thor's own default is the paper's."""
    from ai2thor.controller import Controller as Ai2thorController

    from sab_pytest.thor import local, server

    for source in real_methods_dir.glob("*.py"):
        for call in source.read_text(encoding="utf-8").split("Controller(")[1:]:
            assert "width" not in call.split(")")[0] and "height" not in call.split(")")[0], source.name
    defaults = inspect.signature(Ai2thorController.__init__).parameters
    paper_size = (defaults["width"].default, defaults["height"].default)
    made: list[dict[str, Any]] = []
    monkeypatch.setattr(local, "LocalController", lambda **kw: made.append(kw) or object())
    local.start(None)
    server.engine_factory("ai2thor")()
    assert [(kw["width"], kw["height"]) for kw in made] == [paper_size, paper_size]
    sim = Controller()
    assert (sim.last_event.metadata["screenWidth"], sim.last_event.metadata["screenHeight"]) == paper_size
