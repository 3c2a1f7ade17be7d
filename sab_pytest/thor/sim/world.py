"""The state of one episode: objects, agent pose, the hand, and the receptacle relations.

``parentReceptacles`` is the source of truth for containment and ``receptacleObjectIds`` is kept as
its exact inverse (the 5.0 dumps satisfy this for all 5672 objects). Placement rules, chosen to be
deterministic where THOR lets physics decide:

* An object placed into/onto receptacle R gets the parents ``[R] + parents(R)`` (stacked volumes:
  an apple in a pan on a burner lists both); everything it contains moves along and keeps its own
  inner parents.
* A held object has ``parentReceptacles`` null and is removed from every receptacle it was in; its
  contents keep it as their parent (a carried plate keeps its egg).
* Where an object lands: x/z at R's box centre plus a small fixed offset per object already there
  (a 3x3 pattern over the middle half of R's footprint); y so that its box bottom rests on R's box
  bottom for hollow receptacles (``HOLLOW_TYPES``) and on R's box top otherwise.
* Room: in a hollow receptacle the object must fit R's footprint and the summed footprints of R's
  movable contents may not exceed it; on a surface only the object's base must find room (the
  contents so far must not already cover R's footprint); the Floor always has room.
  Object-specific receptacles hold one object.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from .geometry import NavMap, Pose

HOLLOW_TYPES = frozenset(
    {"Drawer", "Cabinet", "Fridge", "Microwave", "LaundryHamper", "Box", "Safe", "Toaster", "SinkBasin",
     "BathtubBasin", "Sink", "Bathtub", "GarbageCan", "Pot", "Bowl", "Cup", "Mug", "Kettle", "Toilet"}
)
# Receptacles that must be open before anything goes in (thor.md §1 "in" receptacles, plus Safe).
OPEN_TO_PLACE_TYPES = frozenset({"Drawer", "Cabinet", "Fridge", "Microwave", "LaundryHamper", "Box", "Safe"})
# Object-specific receptacles: which types they take (one object at a time).
SPECIFIC_RECEPTACLES: dict[str, frozenset[str]] = {
    "CoffeeMachine": frozenset({"Mug"}),
    "Toaster": frozenset({"BreadSliced"}),
    "StoveBurner": frozenset({"Pot", "Pan", "Kettle"}),
    "HandTowelHolder": frozenset({"HandTowel"}),
    "TowelHolder": frozenset({"Towel"}),
    "ToiletPaperHanger": frozenset({"ToiletPaper"}),
}
_SPREAD = [(0, 0), (-1, -1), (1, 1), (-1, 1), (1, -1), (0, -1), (0, 1), (-1, 0), (1, 0)]


@dataclass
class World:
    """Everything that changes during an episode; rebuilt from the scene template on reset."""

    scene: str
    objects: dict[str, dict[str, Any]]
    nav: NavMap
    pose: Pose
    held: str | None = None
    order: list[str] = field(default_factory=list)
    inactive: set[str] = field(default_factory=set)  # sliced sources, cracked eggs: kept, untouchable
    held_tilt: tuple[float, float] = (0.0, 0.0)  # accumulated (pitch, roll) of the held object

    def __post_init__(self) -> None:
        if not self.order:
            self.order = list(self.objects)

    # -- lookup -------------------------------------------------------------------------------
    def get(self, object_id: str) -> dict[str, Any] | None:
        return self.objects.get(object_id)

    def ancestors(self, object_id: str) -> list[str]:
        return list(self.objects[object_id]["parentReceptacles"] or [])

    def subtree(self, object_id: str) -> list[str]:
        """The object and everything (transitively) resting in it, parents before children."""
        out, todo = [], [object_id]
        while todo:
            oid = todo.pop(0)
            if oid in out:
                continue
            out.append(oid)
            todo.extend(self.objects[oid]["receptacleObjectIds"] or [])
        return out

    def hidden_by_closed(self, object_id: str) -> bool:
        """True when some enclosing openable receptacle is closed (THOR: invisible, untouchable)."""
        for pid in self.objects[object_id]["parentReceptacles"] or []:
            parent = self.objects[pid]
            if parent["openable"] and not parent["isOpen"] and parent["objectType"] in OPEN_TO_PLACE_TYPES:
                return True
        return False

    # -- relations ----------------------------------------------------------------------------
    def _unlink(self, child: str, parent: str) -> None:
        ids = self.objects[parent]["receptacleObjectIds"]
        if ids is not None and child in ids:
            ids.remove(child)

    def detach(self, object_id: str) -> None:
        """Take the object (with its contents) out of every receptacle outside its own subtree."""
        inside = set(self.subtree(object_id))
        for oid in inside:
            obj = self.objects[oid]
            keep = [p for p in obj["parentReceptacles"] or [] if p in inside]
            for p in obj["parentReceptacles"] or []:
                if p not in inside:
                    self._unlink(oid, p)
            obj["parentReceptacles"] = keep or None

    def attach(self, object_id: str, receptacle_id: str) -> None:
        """Put the (detached) object with its contents into ``receptacle_id`` and its ancestors."""
        chain = [receptacle_id, *self.ancestors(receptacle_id)]
        for oid in self.subtree(object_id):
            obj = self.objects[oid]
            parents = list(obj["parentReceptacles"] or [])
            for p in chain:
                if p not in parents:
                    parents.append(p)
                    ids = self.objects[p]["receptacleObjectIds"]
                    if ids is not None and oid not in ids:
                        ids.append(oid)
            obj["parentReceptacles"] = parents or None

    def remove_from_world(self, object_id: str) -> None:
        """Deactivate an object (sliced source): it leaves every receptacle, contents stay put."""
        obj = self.objects[object_id]
        for p in obj["parentReceptacles"] or []:
            self._unlink(object_id, p)
        for child in list(obj["receptacleObjectIds"] or []):
            child_obj = self.objects[child]
            child_obj["parentReceptacles"] = [p for p in child_obj["parentReceptacles"] or [] if p != object_id]
            child_obj["parentReceptacles"] = child_obj["parentReceptacles"] or None
        if obj["receptacleObjectIds"] is not None:
            obj["receptacleObjectIds"] = []

    def add_object(self, obj: dict[str, Any], after: str) -> None:
        """Insert a new object (slice, cracked egg) right after its source in THOR's order."""
        self.objects[obj["objectId"]] = obj
        self.order.insert(self.order.index(after) + 1 + sum(
            1 for o in self.order if o.startswith(after + "|")), obj["objectId"])

    # -- motion -------------------------------------------------------------------------------
    def translate(self, object_id: str, dx: float, dy: float, dz: float) -> None:
        """Move the object and everything it holds by (dx, dy, dz), boxes included."""
        if dx == dy == dz == 0:
            return
        for oid in self.subtree(object_id):
            obj = self.objects[oid]
            pos = obj["position"]
            obj["position"] = {"x": pos["x"] + dx, "y": pos["y"] + dy, "z": pos["z"] + dz}
            box = obj["axisAlignedBoundingBox"]
            c = box["center"]
            obj["axisAlignedBoundingBox"] = {
                "cornerPoints": [[p[0] + dx, p[1] + dy, p[2] + dz] for p in box["cornerPoints"]],
                "center": {"x": c["x"] + dx, "y": c["y"] + dy, "z": c["z"] + dz},
                "size": dict(box["size"]),
            }
            if obj["objectOrientedBoundingBox"] is not None:
                pts = obj["objectOrientedBoundingBox"]["cornerPoints"]
                obj["objectOrientedBoundingBox"] = {
                    "cornerPoints": [[p[0] + dx, p[1] + dy, p[2] + dz] for p in pts]
                }

    def move_center_to(self, object_id: str, x: float, bottom_y: float, z: float) -> None:
        box = self.objects[object_id]["axisAlignedBoundingBox"]
        c, s = box["center"], box["size"]
        self.translate(object_id, x - c["x"], bottom_y - (c["y"] - s["y"] / 2), z - c["z"])

    def landing_spot(self, object_id: str, receptacle_id: str) -> tuple[float, float, float]:
        """Deterministic resting point (x, bottom y, z) for ``object_id`` in ``receptacle_id``."""
        rec = self.objects[receptacle_id]
        box = rec["axisAlignedBoundingBox"]
        c, s = box["center"], box["size"]
        movable = [o for o in rec["receptacleObjectIds"] or [] if self.objects[o]["pickupable"]]
        ox, oz = _SPREAD[len(movable) % len(_SPREAD)]
        x = c["x"] + ox * s["x"] / 4
        z = c["z"] + oz * s["z"] / 4
        if rec["objectType"] == "Floor":
            x, z = self.pose.x + 0.5 * _fwd(self.pose)[0], self.pose.z + 0.5 * _fwd(self.pose)[1]
        hollow = rec["objectType"] in HOLLOW_TYPES
        bottom = c["y"] - s["y"] / 2 + (0.02 if hollow else s["y"])
        if rec["objectType"] == "Floor":
            bottom = c["y"] + s["y"] / 2
        return x, bottom, z

    def has_room(self, object_id: str, receptacle_id: str) -> bool:
        """Hollow receptacles need the whole object to fit; surfaces only need free space for its base."""
        rec = self.objects[receptacle_id]
        if rec["objectType"] == "Floor":
            return True
        rs = rec["axisAlignedBoundingBox"]["size"]
        os_ = self.objects[object_id]["axisAlignedBoundingBox"]["size"]
        used = sum(
            self.objects[o]["axisAlignedBoundingBox"]["size"]["x"] * self.objects[o]["axisAlignedBoundingBox"][
                "size"]["z"]
            for o in rec["receptacleObjectIds"] or []
            if self.objects[o]["pickupable"] and o != object_id
        )
        if rec["objectType"] not in HOLLOW_TYPES:
            return used < rs["x"] * rs["z"]
        small, large = sorted((os_["x"], os_["z"]))
        r_small, r_large = sorted((rs["x"], rs["z"]))
        if small > r_small + 1e-6 or large > r_large + 1e-6:
            return False
        return used + os_["x"] * os_["z"] <= rs["x"] * rs["z"] + 1e-6

    def hand_point(self) -> tuple[float, float, float]:
        """Where a held object's box centre sits: 0.4 m ahead of the agent, 0.3 m below the eye."""
        fx, fz = _fwd(self.pose)
        return self.pose.x + 0.4 * fx, self.pose.y + 0.375, self.pose.z + 0.4 * fz

    def carry_held(self) -> None:
        if self.held is None:
            return
        hx, hy, hz = self.hand_point()
        c = self.objects[self.held]["axisAlignedBoundingBox"]["center"]
        self.translate(self.held, hx - c["x"], hy - c["y"], hz - c["z"])


def _fwd(pose: Pose) -> tuple[float, float]:
    yaw = math.radians(pose.rotation)
    return math.sin(yaw), math.cos(yaw)
