"""iTHOR scene contents: which pinned file holds a scene, where it lives, and a cheap fresh copy.

The embedded engine starts every episode from the object metadata that ai2thor 5.0.0 reports right
after ``reset(scene)``. Those dumps are public pinned files (``data/thor_scenes_manifest.json``);
nothing of them is committed here. A scene file is looked up, in this order, in

1. an override directory (``configure(scenes_dir=...)``, which the ``--thor-scenes DIR`` option sets,
   else the ``SAB_THOR_SCENES`` environment variable), in either of two layouts (``LAYOUTS``): a
   checkout of the upstream repository, or one flat folder holding the 120 dumps and the
   object-types table;
2. the user cache (``fetch.cache_root()/thor_scenes``);
3. the network: the one pinned file that scene needs is downloaded, verified and cached, so a run
   touching ten scenes fetches ten files.

Parsing a 300 KB JSON costs milliseconds, resets happen per case, so each scene is parsed once per
process into a read-only template and every reset rebuilds plain dicts from it (``fresh_objects``),
which is several times cheaper than ``copy.deepcopy`` or re-parsing and keeps episodes independent.
"""

from __future__ import annotations

import json
import os
import re
import threading
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

from sab_pytest import datafiles, fetch
from sab_pytest.errors import UsageError

ENV_VAR = "SAB_THOR_SCENES"
LAYOUTS = (
    "either the upstream layout (DIR/dev/data/objects_metadata_samples/FloorPlanN_physics.json and "
    "DIR/src/rl_thor/data/object_types_data.json, as in a checkout of Kajiih/rl_ai2thor) or one flat folder "
    "(DIR/FloorPlanN_physics.json and DIR/object_types_data.json)"
)
HOW_TO_PROVIDE = (
    f"Give a directory with --thor-scenes=DIR or SAB_THOR_SCENES=DIR laid out as {LAYOUTS}, "
    "or run once with network access so they are downloaded into the user cache."
)
_UPSTREAM_MARKER = "dev/data/objects_metadata_samples"
_SCENE_RE = re.compile(r"^(FloorPlan\d+)(?:_physics)?$")

_override: Path | None = None
_lock = threading.Lock()


def configure(scenes_dir: str | os.PathLike[str] | None) -> None:
    """Set (or clear with ``None``) the override directory; takes precedence over ``SAB_THOR_SCENES``."""
    global _override
    _override = Path(scenes_dir).expanduser() if scenes_dir is not None else None
    _scene_path.cache_clear()


def override_dir() -> Path | None:
    """The directory the user pointed at, if any (explicit configuration first, then the env var)."""
    if _override is not None:
        return _override
    value = os.environ.get(ENV_VAR)
    return Path(value).expanduser() if value else None


def cache_dir() -> Path:
    return fetch.cache_root() / "thor_scenes"


@lru_cache(maxsize=1)
def manifest() -> dict[str, Any]:
    """The project's manifest: pinned commit, raw URL pattern, per-scene path/sha256/size."""
    text = datafiles.read_text("thor_scenes_manifest.json")
    return json.loads(text)


def scene_names() -> list[str]:
    """The 120 iTHOR scene names (``FloorPlan1`` ... ``FloorPlan430``), kitchens first."""
    return list(manifest()["scenes"])


def normalize_scene_name(scene: str) -> str:
    """``FloorPlan1`` / ``FloorPlan1_physics`` -> ``FloorPlan1``; anything else is a clear error."""
    match = _SCENE_RE.match(scene.strip()) if isinstance(scene, str) else None
    if match is None or match.group(1) not in manifest()["scenes"]:
        raise ValueError(
            f"unknown iTHOR scene {scene!r}: expected one of FloorPlan1-30, 201-230, 301-330, 401-430"
        )
    return match.group(1)


def _pinned(entry: dict[str, Any]) -> fetch.PinnedFile:
    url = manifest()["raw_url_pattern"].format(path=entry["path"])
    return fetch.PinnedFile(name=entry["path"], url=url, sha256=entry["sha256"])


def _flat(override: Path) -> bool:
    """An override directory without the upstream tree is read as one flat folder of dumps."""
    return not (override / _UPSTREAM_MARKER).is_dir()


def _override_name(pinned: fetch.PinnedFile, override: Path) -> fetch.PinnedFile:
    if not _flat(override):
        return pinned
    return fetch.PinnedFile(name=Path(pinned.name).name, url=pinned.url, sha256=pinned.sha256)


def check_available(scenes: list[str]) -> None:
    """Find (or download) the dumps of ``scenes`` and the object-types table now, so that a missing
    directory or file is one error before the run instead of one per case."""
    override = override_dir()
    if override is not None and not override.is_dir():
        what = "is not a directory" if override.exists() else "does not exist"
        raise UsageError(f"iTHOR scenes directory {override} (from --thor-scenes/SAB_THOR_SCENES) {what}; "
                         f"expected {LAYOUTS}")
    if override is not None:
        keys = ["<object_types>", *(normalize_scene_name(s) for s in scenes)]
        missing = [_override_name(_pinned(_entry(k)), override).name for k in keys]
        missing = [name for name in missing if not (override / name).is_file()]
        if missing:
            layout = "flat folder" if _flat(override) else "upstream layout"
            raise UsageError(
                f"iTHOR scenes directory {override} (from --thor-scenes/SAB_THOR_SCENES, read as the {layout}) "
                f"lacks {len(missing)} file(s) the run needs, e.g. {', '.join(missing[:3])}; expected {LAYOUTS}")
    object_types()
    for scene in scenes:
        scene_path(scene)


def _entry(key: str) -> dict[str, Any]:
    return manifest()["object_types"] if key == "<object_types>" else manifest()["scenes"][key]


@cache
def _scene_path(key: str) -> Path:
    pinned = _pinned(_entry(key))
    override = override_dir()
    if override is not None:
        pinned = _override_name(pinned, override)
    found = fetch.resolve(
        [pinned],
        override=override,
        cache_dir=cache_dir(),
        what=f"iTHOR scene data ({key})",
        how_to_provide=HOW_TO_PROVIDE,
    )
    return found[pinned.name]


def scene_path(scene: str) -> Path:
    """Local path of the pinned dump of ``scene`` (downloaded and verified on first use)."""
    return _scene_path(normalize_scene_name(scene))


class SceneTemplate:
    """One scene parsed once: objects in THOR's order, never handed out, only copied."""

    __slots__ = ("name", "objects")

    def __init__(self, name: str, objects: dict[str, dict[str, Any]]) -> None:
        self.name = name
        self.objects = tuple(objects.values())

    def fresh_objects(self, share_geometry: bool = False) -> dict[str, dict[str, Any]]:
        """Copies of every object (objectId -> metadata), in the dump's order.

        With ``share_geometry`` the bounding-box structures are shared with the template (three
        times cheaper); the engine may do that because it replaces boxes, never edits them.
        """
        return {obj["objectId"]: clone_object(obj, share_geometry) for obj in self.objects}


def _clone_points(points: list[list[float]]) -> list[list[float]]:
    return [list(p) for p in points]


def clone_object(obj: dict[str, Any], share_geometry: bool = False) -> dict[str, Any]:
    """Copy one object's metadata knowing its schema (about 10x faster than ``copy.deepcopy``).

    ``share_geometry`` keeps the (read-only by convention) bounding boxes instead of copying them.
    """
    out = dict(obj)
    out["position"] = dict(obj["position"])
    out["rotation"] = dict(obj["rotation"])
    for key in ("receptacleObjectIds", "parentReceptacles", "controlledObjects", "salientMaterials"):
        value = obj[key]
        if value is not None:
            out[key] = list(value)
    if share_geometry:
        return out
    aabb = obj["axisAlignedBoundingBox"]
    out["axisAlignedBoundingBox"] = {
        "cornerPoints": _clone_points(aabb["cornerPoints"]),
        "center": dict(aabb["center"]),
        "size": dict(aabb["size"]),
    }
    oobb = obj["objectOrientedBoundingBox"]
    if oobb is not None:
        out["objectOrientedBoundingBox"] = {"cornerPoints": _clone_points(oobb["cornerPoints"])}
    return out


_templates: dict[str, SceneTemplate] = {}


def template(scene: str) -> SceneTemplate:
    """The parsed, pristine template of ``scene`` (parsed at most once per process)."""
    name = normalize_scene_name(scene)
    cached = _templates.get(name)
    if cached is not None:
        return cached
    with _lock:
        cached = _templates.get(name)
        if cached is None:
            path = scene_path(name)
            try:
                data = json.loads(path.read_text("utf-8"))
            except (OSError, ValueError) as exc:
                raise UsageError(f"iTHOR scene data for {name} at {path} cannot be read: {exc}") from exc
            cached = _templates[name] = SceneTemplate(name, data)
    return cached


def load_scene(scene: str) -> dict[str, dict[str, Any]]:
    """objectId -> full 5.0 metadata of every object of ``scene`` at reset (a fresh, mutable copy)."""
    return template(scene).fresh_objects()


@lru_cache(maxsize=1)
def object_types() -> dict[str, dict[str, Any]]:
    """The official "Object Types" table (per type: actionable properties, compatible receptacles)."""
    path = _scene_path("<object_types>")
    return json.loads(path.read_text("utf-8"))


def clear_caches() -> None:
    """Forget parsed templates and resolved paths (tests; a changed override directory)."""
    _templates.clear()
    _scene_path.cache_clear()
    object_types.cache_clear()
