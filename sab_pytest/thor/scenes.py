"""iTHOR scene contents: which pinned file holds a scene, where it lives, and a cheap fresh copy.

The embedded engine starts every episode from the object metadata that ai2thor 5.0.0 reports right
after ``reset(scene)``. Those dumps are public pinned files (``data/thor_scenes_manifest.json``);
nothing of them is committed here. A ``SceneSource`` says where one run reads them from, in this order:

1. its directory (``--thor-scenes DIR``, else the ``SAB_THOR_SCENES`` environment variable read when
   the source is made), in either of two layouts (``LAYOUTS``): a checkout of the upstream
   repository, or one flat folder holding the 120 dumps and the object-types table;
2. the user cache (``fetch.cache_root()/thor_scenes``);
3. the network: the one pinned file that scene needs is downloaded, verified and cached, so a run
   touching ten scenes fetches ten files.

The source is handed to whoever reads scenes (the engine, the paper framing of a text planner, the
preflight check) rather than set once for the process, so two runs in one process (tests, a server)
with different directories each read their own files.

Parsing a 300 KB JSON costs milliseconds, resets happen per case, so each scene is parsed once per
process and directory into a read-only template and every reset rebuilds plain dicts from it
(``fresh_objects``), which is several times cheaper than ``copy.deepcopy`` or re-parsing and keeps
episodes independent. The caches are keyed by the source's directory, so sources never share files.
"""

from __future__ import annotations

import json
import os
import re
import threading
from dataclasses import dataclass
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

_lock = threading.Lock()


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


def _entry(key: str) -> dict[str, Any]:
    return manifest()["object_types"] if key == "<object_types>" else manifest()["scenes"][key]


def _flat(directory: Path) -> bool:
    """A directory without the upstream tree is read as one flat folder of dumps."""
    return not (directory / _UPSTREAM_MARKER).is_dir()


def _named_in(pinned: fetch.PinnedFile, directory: Path) -> fetch.PinnedFile:
    """``pinned`` as it is named inside ``directory`` (a flat folder drops the upstream path)."""
    if not _flat(directory):
        return pinned
    return fetch.PinnedFile(name=Path(pinned.name).name, url=pinned.url, sha256=pinned.sha256)


@cache
def _resolve(directory: Path | None, key: str) -> Path:
    """Local path of the pinned file ``key`` for a source reading ``directory`` (found once per process)."""
    pinned = _pinned(_entry(key))
    if directory is not None:
        pinned = _named_in(pinned, directory)
    found = fetch.resolve(
        [pinned],
        override=directory,
        cache_dir=cache_dir(),
        what=f"iTHOR scene data ({key})",
        how_to_provide=HOW_TO_PROVIDE,
    )
    return found[pinned.name]


@cache
def _object_types(directory: Path | None) -> dict[str, dict[str, Any]]:
    return json.loads(_resolve(directory, "<object_types>").read_text("utf-8"))


_templates: dict[tuple[Path | None, str], SceneTemplate] = {}


@dataclass(frozen=True)
class SceneSource:
    """Where scene dumps are read from: ``directory``, or with none the user cache and then the pinned
    download. Made without a directory it takes ``SAB_THOR_SCENES`` as it is at that moment, and
    never changes after: what a run reads is fixed when the run hands out its source."""

    directory: Path | None

    def __init__(self, directory: str | os.PathLike[str] | None = None) -> None:
        chosen = directory if directory else os.environ.get(ENV_VAR)
        object.__setattr__(self, "directory", Path(chosen).expanduser() if chosen else None)

    def scene_path(self, scene: str) -> Path:
        """Local path of the pinned dump of ``scene`` (downloaded and verified on first use)."""
        return _resolve(self.directory, normalize_scene_name(scene))

    def object_types(self) -> dict[str, dict[str, Any]]:
        """The official "Object Types" table (per type: actionable properties, compatible receptacles)."""
        return _object_types(self.directory)

    def template(self, scene: str) -> SceneTemplate:
        """The parsed, pristine template of ``scene`` (parsed at most once per process and directory)."""
        key = (self.directory, normalize_scene_name(scene))
        cached = _templates.get(key)
        if cached is not None:
            return cached
        with _lock:
            cached = _templates.get(key)
            if cached is None:
                path = self.scene_path(key[1])
                try:
                    data = json.loads(path.read_text("utf-8"))
                except (OSError, ValueError) as exc:
                    raise UsageError(f"iTHOR scene data for {key[1]} at {path} cannot be read: {exc}") from exc
                cached = _templates[key] = SceneTemplate(key[1], data)
        return cached

    def load_scene(self, scene: str) -> dict[str, dict[str, Any]]:
        """objectId -> full 5.0 metadata of every object of ``scene`` at reset (a fresh, mutable copy)."""
        return self.template(scene).fresh_objects()

    def check_available(self, scenes: list[str]) -> None:
        """Find (or download) the dumps of ``scenes`` and the object-types table now, so that a missing
        directory or file is one error before the run instead of one per case."""
        directory = self.directory
        if directory is not None:
            self._check_directory(directory, scenes)
        self.object_types()
        for scene in scenes:
            self.scene_path(scene)

    @staticmethod
    def _check_directory(directory: Path, scenes: list[str]) -> None:
        """The directory exists and holds every file the run needs, else one error naming the layout."""
        if not directory.is_dir():
            what = "is not a directory" if directory.exists() else "does not exist"
            raise UsageError(f"iTHOR scenes directory {directory} (from --thor-scenes/SAB_THOR_SCENES) {what}; "
                             f"expected {LAYOUTS}")
        keys = ["<object_types>", *(normalize_scene_name(s) for s in scenes)]
        missing = [_named_in(_pinned(_entry(k)), directory).name for k in keys]
        missing = [name for name in missing if not (directory / name).is_file()]
        if missing:
            layout = "flat folder" if _flat(directory) else "upstream layout"
            raise UsageError(
                f"iTHOR scenes directory {directory} (from --thor-scenes/SAB_THOR_SCENES, read as the {layout}) "
                f"lacks {len(missing)} file(s) the run needs, e.g. {', '.join(missing[:3])}; expected {LAYOUTS}")


def clear_caches() -> None:
    """Forget parsed templates and resolved paths of every source (tests; files changed on disk)."""
    with _lock:
        _templates.clear()
    _resolve.cache_clear()
    _object_types.cache_clear()
