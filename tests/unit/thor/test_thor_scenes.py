"""Scene data: override directory, lazy pinned download (against a local HTTP server), caching."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest
from support.file_server import FileServer

from sab_pytest.errors import UsageError
from sab_pytest.thor import scenes
from sab_pytest.thor.sim import Controller

SHARED = Path("/work/shared/thor_scenes/upstream")
FRIDGE = "Fridge|-02.10|+00.00|+01.07"


def _scene_dir() -> Path:
    value = os.environ.get(scenes.ENV_VAR)
    if value:
        return Path(value)
    if os.environ.get("CI"):
        pytest.fail(f"{scenes.ENV_VAR} is not set on CI: point it at the pinned scene files")
    if not SHARED.is_dir():
        pytest.fail(f"no scene data: set {scenes.ENV_VAR} to a directory with the upstream scene dumps")
    return SHARED


@pytest.fixture(autouse=True)
def _fresh_state():
    scenes.clear_caches()
    yield
    scenes.clear_caches()


def test_manifest_names_all_120_scenes_with_pinned_hashes() -> None:
    names = scenes.scene_names()
    assert len(names) == 120 and names[0] == "FloorPlan1" and names[-1] == "FloorPlan430"
    entry = scenes.manifest()["scenes"]["FloorPlan1"]
    assert len(entry["sha256"]) == 64 and entry["path"].endswith("FloorPlan1_physics.json")
    assert scenes.manifest()["commit"] in scenes.manifest()["raw_url_pattern"]


def test_load_from_override_and_copies_are_independent() -> None:
    source = scenes.SceneSource(_scene_dir())
    objects = source.load_scene("FloorPlan1_physics")
    assert len(objects) == 77 and "Fridge|-02.10|+00.00|+01.07" in objects
    assert source.directory == _scene_dir()
    objects["Fridge|-02.10|+00.00|+01.07"]["receptacleObjectIds"].clear()
    objects["Fridge|-02.10|+00.00|+01.07"]["axisAlignedBoundingBox"]["cornerPoints"][0][0] = 99.0
    again = source.load_scene("FloorPlan1")
    assert again["Fridge|-02.10|+00.00|+01.07"]["receptacleObjectIds"] == ["Egg|-02.04|+00.81|+01.24"]
    assert again["Fridge|-02.10|+00.00|+01.07"]["axisAlignedBoundingBox"]["cornerPoints"][0][0] != 99.0
    # parsed once per directory, whichever source of it asks
    assert source.template("FloorPlan1") is scenes.SceneSource(_scene_dir()).template("FloorPlan1_physics")


def _flat_copy(folder: Path, fridge_open: bool, receptacles: list[str]) -> Path:
    """A flat scene folder holding FloorPlan1 with its Fridge open or closed and an object-types table
    in which a Fridge takes only ``receptacles``: two such folders differ in what a source must read."""
    folder.mkdir()
    dump = json.loads((_scene_dir() / scenes.manifest()["scenes"]["FloorPlan1"]["path"]).read_text())
    dump[FRIDGE]["isOpen"] = fridge_open
    (folder / "FloorPlan1_physics.json").write_text(json.dumps(dump))
    types = json.loads((_scene_dir() / scenes.manifest()["object_types"]["path"]).read_text())
    types["Fridge"]["compatible_receptacles"] = receptacles
    (folder / "object_types_data.json").write_text(json.dumps(types))
    return folder


def test_two_sources_in_one_process_each_read_their_own_directory(tmp_path: Path) -> None:
    opened = scenes.SceneSource(_flat_copy(tmp_path / "opened", True, ["CounterTop"]))
    closed = scenes.SceneSource(_flat_copy(tmp_path / "closed", False, []))
    assert opened.load_scene("FloorPlan1")[FRIDGE]["isOpen"] is True
    assert closed.load_scene("FloorPlan1")[FRIDGE]["isOpen"] is False
    assert opened.template("FloorPlan1") is not closed.template("FloorPlan1")
    assert opened.object_types()["Fridge"]["compatible_receptacles"] == ["CounterTop"]
    assert closed.object_types()["Fridge"]["compatible_receptacles"] == []
    assert opened.scene_path("FloorPlan1").parent == tmp_path / "opened"
    assert closed.scene_path("FloorPlan1").parent == tmp_path / "closed"
    # engines on them, reset in turns, each keep to their own source
    first, second = Controller(scenes=opened), Controller(scenes=closed)
    second.reset("FloorPlan1")
    first.reset("FloorPlan1")
    fridge_of = {id(c): next(o for o in c.last_event.metadata["objects"] if o["objectId"] == FRIDGE)
                 for c in (first, second)}
    assert (fridge_of[id(first)]["isOpen"], fridge_of[id(second)]["isOpen"]) == (True, False)


def test_a_source_made_without_a_directory_keeps_the_environment_it_saw(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = _scene_dir()
    monkeypatch.setenv(scenes.ENV_VAR, str(real))
    source = scenes.SceneSource()
    monkeypatch.setenv(scenes.ENV_VAR, str(tmp_path))
    assert source.directory == real and scenes.SceneSource().directory == tmp_path
    assert len(source.load_scene("FloorPlan1")) == 77
    assert scenes.SceneSource(tmp_path / "given").directory == tmp_path / "given"  # a directory beats the variable


def test_unknown_scene_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="FloorPlan31"):
        scenes.SceneSource().load_scene("FloorPlan31")
    with pytest.raises(ValueError, match="Kitchen"):
        scenes.SceneSource().load_scene("Kitchen")


def test_override_missing_file_names_it(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"FloorPlan5_physics\.json"):
        scenes.SceneSource(tmp_path).load_scene("FloorPlan5")


def _made_up_scene() -> bytes:
    template = json.loads((_scene_dir() / scenes.manifest()["scenes"]["FloorPlan1"]["path"]).read_text())
    apple = dict(template["Apple|-00.47|+01.15|+00.48"])
    apple.update(objectId="Apple|+01.00|+01.00|+01.00", name="Apple_madeup", parentReceptacles=None)
    return json.dumps({apple["objectId"]: apple}).encode()


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """A made-up two-scene manifest whose files come from a local server; cache in tmp_path."""
    body = _made_up_scene()
    files = {"scenes/FloorPlan1_physics.json": body, "scenes/FloorPlan2_physics.json": body}
    server = FileServer(files)
    manifest = {
        "raw_url_pattern": server.base + "/{path}",
        "commit": "local",
        "object_types": {"path": "types.json", "sha256": "0" * 64},
        "scenes": {
            name: {"path": f"scenes/{name}_physics.json", "sha256": hashlib.sha256(body).hexdigest()}
            for name in ("FloorPlan1", "FloorPlan2")
        },
    }
    monkeypatch.setattr(scenes, "manifest", lambda: manifest)
    monkeypatch.delenv(scenes.ENV_VAR, raising=False)
    monkeypatch.setenv("SAB_CACHE_HOME", str(tmp_path))
    yield server, manifest, tmp_path
    server.close()


def test_download_fetches_only_the_scene_needed_then_uses_the_cache(served) -> None:
    server, _manifest, cache = served
    objects = scenes.SceneSource().load_scene("FloorPlan2")
    assert list(objects) == ["Apple|+01.00|+01.00|+01.00"]
    assert server.requests == ["scenes/FloorPlan2_physics.json"]
    assert (cache / "thor_scenes" / "scenes" / "FloorPlan2_physics.json").is_file()
    assert not (cache / "thor_scenes" / "scenes" / "FloorPlan1_physics.json").exists()
    scenes.clear_caches()  # a new process: the file now comes from the cache, no request
    scenes.SceneSource().load_scene("FloorPlan2")
    assert server.requests == ["scenes/FloorPlan2_physics.json"]


def test_checksum_mismatch_keeps_nothing(served) -> None:
    _server, manifest, cache = served
    manifest["scenes"]["FloorPlan1"]["sha256"] = "f" * 64
    with pytest.raises(UsageError, match="checksum mismatch"):
        scenes.SceneSource().load_scene("FloorPlan1")
    folder = cache / "thor_scenes" / "scenes"
    assert not folder.exists() or list(folder.iterdir()) == []
