"""The state of one episode: objects, agent pose, the hand, and the receptacle relations.

``parentReceptacles`` is the source of truth for containment and ``receptacleObjectIds`` is kept as
its exact inverse (the 5.0 dumps satisfy this for all 5672 objects). Placement rules, chosen to be
deterministic where THOR lets physics decide:

* An object placed into/onto receptacle R gets the parents ``[R] + parents(R)`` (stacked volumes:
  an apple in a pan on a burner lists both); everything it contains moves along and keeps its own
  inner parents.
* A held object has ``parentReceptacles`` null and is removed from every receptacle it was in; its
  contents keep it as their parent (a carried plate keeps its egg).
* Where an object lands (Floor aside: 0.5 m ahead of the agent): like THOR's PutObject, which tries
  the receptacle's spawn points the agent can see, nearest first, the object goes to the free point
  of R's footprint nearest the agent. Candidates are a 5 cm lattice over R's footprint inset by half
  the object's footprint (R's centre when the object is wider than R); a candidate is free when the
  object's footprint there overlaps no pickupable object already in R. A candidate is over open
  floor when the agent could stand there (the part of an L-shaped counter's box with no counter
  under it, see ``geometry``).
  Order of preference: free and in the camera's view (frustum and visibility distance, the point
  taken on R's surface), then free, then any; within each tier points not over open floor first,
  then nearest the agent, ties to the smaller (x, z). y: the object's box bottom rests on R's box
  bottom for hollow receptacles (``HOLLOW_TYPES``), on the seat of seats (``SEAT_HEIGHTS``: the box
  top of a sofa or bed is its back or headboard) and on R's box top otherwise.
* Room. An object's size is its three box edges from ``objectOrientedBoundingBox`` (rotation-free;
  the axis-aligned box grows with the object's rotation), sorted; its *smallest footprint* is the
  product of the two smallest. The Floor always has room; object-specific receptacles hold one
  object. On a surface only the contents so far must not already cover R's footprint. Open-top
  containers (``OPEN_TOP_TYPES``: cups, mugs, bowls, pots, garbage cans, sinks, basins, toilets;
  pans and plates are surfaces) take an object standing on its smallest footprint and sticking out above the rim:
  that footprint's sides must fit R's horizontal sides within ``FIT_TOLERANCE``. Closed "in"
  receptacles (``OPEN_TO_PLACE_TYPES``: Drawer, Cabinet, Fridge, Microwave, Safe, Box,
  LaundryHamper) need the whole object inside in some axis-aligned orientation: each sorted edge
  within ``FIT_TOLERANCE`` of R's sorted box sides. In every hollow receptacle the smallest
  footprints of R's pickupable contents plus the new object's may not exceed R's footprint area.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from sab_pytest.thor.facts import OPEN_TO_PLACE_TYPES
from sab_pytest.thor.sim.geometry import Camera, NavMap, Pose, aabb_bottom_top

HOLLOW_TYPES = frozenset(
    {"Drawer", "Cabinet", "Fridge", "Microwave", "LaundryHamper", "Box", "Safe", "Toaster", "SinkBasin",
     "BathtubBasin", "Sink", "Bathtub", "GarbageCan", "Pot", "Bowl", "Cup", "Mug", "Kettle", "Toilet"}
)
# Hollow receptacles with an open top: an object may stand upright in them and stick out above the rim.
OPEN_TOP_TYPES = HOLLOW_TYPES - OPEN_TO_PLACE_TYPES
# Relative slack on fit tests: boxes are the meshes' outer hulls (rims, handles, door frames), so a
# 10% overshoot of a box side still leaves the object's body inside.
FIT_TOLERANCE = 0.10
# Seats: how far above their box bottom things rest (median over the objects lying on each type in
# the 120 5.0 scene dumps; Chair, which only has objects overlapping tables there, takes the sofa's).
SEAT_HEIGHTS = {"Sofa": 0.47, "ArmChair": 0.44, "Chair": 0.47, "Bed": 0.61}
LANDING_STEP = 0.05  # lattice step (m) of candidate landing points on a receptacle


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
    # (fieldOfView, width, height, visibilityDistance) for "can the agent see this point"; None: no view test
    view: tuple[float, int, int, float] | None = None

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
        if rec["objectType"] == "Floor":
            fx, fz = _fwd(self.pose)
            return self.pose.x + 0.5 * fx, c["y"] + s["y"] / 2, self.pose.z + 0.5 * fz
        bottom = surface_y(rec)
        x, z = self._nearest_free_point(object_id, rec, bottom)
        return x, bottom, z

    def _nearest_free_point(self, object_id: str, rec: dict[str, Any], surface_y: float) -> tuple[float, float]:
        """Landing x/z on ``rec``: free and in view, then free, then any; nearest the agent first; within
        each tier a point over the receptacle (not over open floor) first."""
        c, s = rec["axisAlignedBoundingBox"]["center"], rec["axisAlignedBoundingBox"]["size"]
        osz = self.objects[object_id]["axisAlignedBoundingBox"]["size"]
        axes = []
        for k in ("x", "z"):
            half = max((s[k] - osz[k]) / 2, 0.0)
            n = int(half / LANDING_STEP + 1e-9)
            axes.append([c[k] + i * LANDING_STEP for i in range(-n, n + 1)])
        cands = sorted(((x, z) for x in axes[0] for z in axes[1]),
                       key=lambda p: (round((p[0] - self.pose.x) ** 2 + (p[1] - self.pose.z) ** 2, 9), p))
        others = [_rect(self.objects[o]) for o in rec["receptacleObjectIds"] or []
                  if o != object_id and self.objects[o]["pickupable"]]
        hx, hz = osz["x"] / 2, osz["z"] / 2

        def free(x: float, z: float) -> bool:
            return not any(_overlap((x - hx, x + hx, z - hz, z + hz), r) for r in others)

        cam = Camera(self.pose, *self.view[:3]) if self.view is not None else None
        reach = self.view[3] if self.view is not None else 0.0

        def in_sight(x: float, z: float) -> bool:
            if cam is None:
                return True
            ex, _, ez = cam.origin
            return (x - ex) ** 2 + (z - ez) ** 2 <= reach * reach and cam.in_view((x, surface_y, z))

        # nearest first, the flags worked out only as far as needed: in the usual case the nearest point
        # is free, in sight and over the receptacle, and none of the others is looked at
        first_seen = None
        for x, z in cands:
            if free(x, z) and in_sight(x, z):
                if not self.nav.is_free(x, z):  # not over open floor
                    return x, z
                if first_seen is None:
                    first_seen = (x, z)
        if first_seen is not None:
            return first_seen
        for tier in ([p for p in cands if free(*p)], cands):
            solid = next((p for p in tier if not self.nav.is_free(*p)), None)
            if solid is not None or tier:
                return solid if solid is not None else tier[0]
        return c["x"], c["z"]

    def has_room(self, object_id: str, receptacle_id: str) -> bool:
        """Room rules of the module docstring: surfaces, open-top containers, closed "in" receptacles."""
        rec = self.objects[receptacle_id]
        if rec["objectType"] == "Floor":
            return True
        rs = rec["axisAlignedBoundingBox"]["size"]
        area = rs["x"] * rs["z"]
        contents = [o for o in rec["receptacleObjectIds"] or [] if self.objects[o]["pickupable"] and o != object_id]
        if rec["objectType"] not in HOLLOW_TYPES:
            used = sum(self.objects[o]["axisAlignedBoundingBox"]["size"]["x"]
                       * self.objects[o]["axisAlignedBoundingBox"]["size"]["z"] for o in contents)
            return used < area
        edges = box_edges(self.objects[object_id])
        slack = 1.0 + FIT_TOLERANCE
        if rec["objectType"] in OPEN_TO_PLACE_TYPES:
            sides = sorted((rs["x"], rs["y"], rs["z"]))
            fits = all(e <= r * slack for e, r in zip(edges, sides, strict=True))
        else:  # open top: stand on the smallest footprint, overhang above the rim
            sides = sorted((rs["x"], rs["z"]))
            fits = all(e <= r * slack for e, r in zip(edges[:2], sides, strict=True))
        if not fits:
            return False
        used = sum(_footprint(self.objects[o]) for o in contents)
        return used + edges[0] * edges[1] <= area * slack

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


def surface_y(rec: dict[str, Any]) -> float:
    """Height at which things rest in or on receptacle ``rec``.

    The box bottom (plus 2 cm) for hollow receptacles, the seat for seats (whose box top is the
    backrest or headboard), else the box top.
    """
    bottom, top = aabb_bottom_top(rec)
    if rec["objectType"] in HOLLOW_TYPES:
        return bottom + 0.02
    return min(top, bottom + SEAT_HEIGHTS.get(rec["objectType"], top - bottom))


def box_edges(obj: dict[str, Any]) -> list[float]:
    """The object's three box edge lengths, smallest first, independent of how it is rotated.

    Taken from ``objectOrientedBoundingBox``: of the seven vectors from its first corner to the
    others, the three edges are those that are not the sum of two others (face and space diagonals
    are). Falls back to the axis-aligned box size when there is no oriented box.
    """
    oobb = obj.get("objectOrientedBoundingBox")
    size = obj["axisAlignedBoundingBox"]["size"]
    fallback = sorted((size["x"], size["y"], size["z"]))
    if not oobb or len(oobb.get("cornerPoints") or []) != 8:
        return fallback
    p0, *rest = oobb["cornerPoints"]
    vecs = [(p[0] - p0[0], p[1] - p0[1], p[2] - p0[2]) for p in rest]

    def is_sum(v: tuple[float, float, float]) -> bool:
        return any(max(abs(v[k] - a[k] - b[k]) for k in range(3)) < 1e-3
                   for i, a in enumerate(vecs) for b in vecs[i + 1:] if a is not v and b is not v)

    edges = sorted(math.sqrt(v[0] ** 2 + v[1] ** 2 + v[2] ** 2) for v in vecs if not is_sum(v))
    return edges if len(edges) == 3 else fallback


def _footprint(obj: dict[str, Any]) -> float:
    edges = box_edges(obj)
    return edges[0] * edges[1]


def _rect(obj: dict[str, Any]) -> tuple[float, float, float, float]:
    box = obj["axisAlignedBoundingBox"]
    c, s = box["center"], box["size"]
    return (c["x"] - s["x"] / 2, c["x"] + s["x"] / 2, c["z"] - s["z"] / 2, c["z"] + s["z"] / 2)


def _overlap(a: tuple[float, float, float, float], b: tuple[float, float, float, float]) -> bool:
    return a[0] < b[1] - 1e-6 and b[0] < a[1] - 1e-6 and a[2] < b[3] - 1e-6 and b[2] < a[3] - 1e-6


def _fwd(pose: Pose) -> tuple[float, float]:
    yaw = math.radians(pose.rotation)
    return math.sin(yaw), math.cos(yaw)
