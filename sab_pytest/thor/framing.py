"""Which objects a box picture of the current view shows, read from ai2thor metadata alone.

The low-level planner's ``find`` prefers a standing point from which the found object is not only
``visible`` but in the picture, so that the next picture shows what was found, as THOR's planner
leaves the robot looking at it. THOR's own ``visible`` already checks that a ray from the camera
reaches the object; the embedded engine's does not look for occluders, and its pictures are boxes.
Computed from the metadata (boxes, receptacles, pose), the answer is the same on every engine that
serves the embedded one (in process, behind ai2thor's client, on a THOR server), so they stay
interchangeable; on Unity THOR it only orders the points that ``visible`` already accepts.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sab_pytest.thor.facts import OPEN_TO_PLACE_TYPES
from sab_pytest.thor.sim.geometry import Camera, Pose
from sab_pytest.thor.sim.render import Item, in_picture
from sab_pytest.thor.sim.render import shows as render_shows


def _shut_in(obj: Mapping[str, Any], by_id: Mapping[str, Mapping[str, Any]]) -> bool:
    for pid in obj.get("parentReceptacles") or ():
        parent = by_id.get(pid)
        if parent and parent.get("openable") and not parent.get("isOpen") and \
                parent.get("objectType") in OPEN_TO_PLACE_TYPES:
            return True
    return False


def _gone(obj: Mapping[str, Any]) -> bool:
    """A sliced or cracked source: THOR keeps it in the metadata, but it is no longer drawn."""
    return bool((obj.get("sliceable") and obj.get("isSliced")) or (obj.get("objectType") == "Egg"
                                                                     and obj.get("isBroken")))


def _view(metadata: Mapping[str, Any]) -> tuple[list[Item], Camera]:
    """The boxes a picture of the current view draws, and its camera."""
    objects = list(metadata.get("objects") or [])
    by_id = {str(o.get("objectId")): o for o in objects}
    items: list[Item] = [
        (str(o["objectId"]), str(o.get("objectType")), o["axisAlignedBoundingBox"]["cornerPoints"],
         tuple(o.get("parentReceptacles") or ()))
        for o in objects
        if o.get("objectType") != "Floor" and not _gone(o) and not _shut_in(o, by_id)
        and (o.get("axisAlignedBoundingBox") or {}).get("cornerPoints")
    ]
    agent = metadata.get("agent") or {}
    where = agent.get("position") or {}
    pose = Pose(x=float(where.get("x", 0.0)), y=float(where.get("y", 0.0)), z=float(where.get("z", 0.0)),
                rotation=float((agent.get("rotation") or {}).get("y", 0.0)),
                horizon=float(agent.get("cameraHorizon", 0.0)))
    camera = Camera(pose, float(metadata.get("fov") or 90.0), int(metadata.get("screenWidth") or 300),
                    int(metadata.get("screenHeight") or 300))
    return items, camera


def shown(metadata: Mapping[str, Any]) -> dict[str, int]:
    """objectId -> pixels of a box picture of the current view that show it (absent: not shown)."""
    return in_picture(*_view(metadata))


def shows(metadata: Mapping[str, Any], object_id: str) -> bool:
    """``object_id in shown(metadata)``, at a fraction of the cost (the planner asks it at every point it tries)."""
    items, camera = _view(metadata)
    return render_shows(items, camera, object_id)
