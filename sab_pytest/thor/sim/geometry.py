"""Agent geometry: reachable grid, start pose, camera frustum, visibility and distance.

The 5.0 scene dumps hold object boxes but no walls, no navigation mesh and no agent pose, so the
engine synthesises them with fixed rules (all deterministic, all from the dump alone):

* **Floor area** = the Floor object's axis-aligned box (L-shaped rooms therefore get a few cells
  that the real scene does not have). The agent's position ``y`` is the floor top + 0.901 m (the
  value ai2thor reports for a standing agent); the camera is 0.675 m above that.
* **Obstacles** = every non-pickupable object whose box starts below 1.4 m (counters, fridges,
  tables, beds, sofas, sinks, toilets...), except the Floor, flat wall decorations and L-shaped
  counter runs (both box sides > 1.2 m: their box spans open floor; the cabinets below them block).
  An obstacle's footprint is its box's x/z rectangle, except for types whose body is round or oval
  (``ROUND_FOOTPRINT_TYPES``: the DogBed cushion), whose footprint is the ellipse inscribed in that
  rectangle: the empty box corners of a round dog bed are floor (this reopens the 0.55 m diagonal
  gap between FloorPlan301's Bed and DogBed, the only way to the Dresser). The agent is a disc of
  radius 0.2 m; a point is free when the disc stays inside the floor box and touches no obstacle
  footprint.
* **Reachable positions** = free points of a ``gridSize`` lattice aligned on multiples of the grid
  size, restricted to the largest 4-connected component (ties: the component holding the smaller
  (x, z)). **Start pose** = the reachable point nearest that component's centroid, rotation 0, horizon 0.
* **Visibility** (``visible`` and ``isInteractable``): an object is visible when one of its sample
  points (box centre, the 8 box corners and the box point nearest the camera) lies inside the camera
  frustum (vertical field of view ``fieldOfView``, horizontal from the frame's aspect ratio) and
  within ``visibilityDistance`` of the camera measured in the horizontal plane. There is no
  occlusion by other geometry except that objects inside a closed openable receptacle are hidden.
  The held object is always visible. ``isInteractable`` equals ``visible`` (no glass in this model).
* **distance** = 3-D distance from the agent's position to the object's box centre.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

AGENT_HEIGHT_ABOVE_FLOOR = 0.9009992
CAMERA_OFFSET = 0.675
AGENT_RADIUS = 0.2
OBSTACLE_MAX_BOTTOM = 1.4
L_SHAPE_MIN_SIDE = 1.2
ROUND_FOOTPRINT_TYPES = frozenset({"DogBed"})
MIN_HORIZON = -30.0  # looking up is negative in THOR
MAX_HORIZON = 60.0
NON_OBSTACLE_TYPES = frozenset(
    {"Floor", "Window", "LightSwitch", "Painting", "Poster", "Mirror", "Curtains", "Blinds", "ShowerHead",
     "Faucet", "StoveKnob", "TowelHolder", "HandTowelHolder", "ToiletPaperHanger"}
)


@dataclass
class Pose:
    """The agent's pose: position (x, y, z), yaw in degrees, camera horizon (positive = down)."""

    x: float
    y: float
    z: float
    rotation: float = 0.0
    horizon: float = 0.0
    standing: bool = True

    def camera(self) -> tuple[float, float, float]:
        return (self.x, self.y + CAMERA_OFFSET, self.z)


Rect = tuple[float, float, float, float]  # xmin, xmax, zmin, zmax


def aabb_rect(obj: dict[str, Any]) -> Rect:
    box = obj["axisAlignedBoundingBox"]
    c, s = box["center"], box["size"]
    return (c["x"] - s["x"] / 2, c["x"] + s["x"] / 2, c["z"] - s["z"] / 2, c["z"] + s["z"] / 2)


def aabb_bottom_top(obj: dict[str, Any]) -> tuple[float, float]:
    box = obj["axisAlignedBoundingBox"]
    return box["center"]["y"] - box["size"]["y"] / 2, box["center"]["y"] + box["size"]["y"] / 2


def is_obstacle(obj: dict[str, Any]) -> bool:
    if obj["pickupable"] or obj["objectType"] in NON_OBSTACLE_TYPES:
        return False
    if obj["objectType"] == "CounterTop":
        size = obj["axisAlignedBoundingBox"]["size"]
        if min(size["x"], size["z"]) > L_SHAPE_MIN_SIDE:
            return False  # an L-shaped run: its box covers open floor; the cabinets under it block
    return aabb_bottom_top(obj)[0] < OBSTACLE_MAX_BOTTOM


def _disc_touches(x: float, z: float, rect: Rect, radius: float) -> bool:
    dx = max(rect[0] - x, 0.0, x - rect[1])
    dz = max(rect[2] - z, 0.0, z - rect[3])
    return dx * dx + dz * dz < radius * radius


def _disc_touches_ellipse(x: float, z: float, rect: Rect, radius: float) -> bool:
    """Does the disc meet the ellipse inscribed in ``rect``? (centre inside, or a boundary point within reach)"""
    cx, cz = (rect[0] + rect[1]) / 2, (rect[2] + rect[3]) / 2
    ax, az = max((rect[1] - rect[0]) / 2, 1e-9), max((rect[3] - rect[2]) / 2, 1e-9)
    if ((x - cx) / ax) ** 2 + ((z - cz) / az) ** 2 <= 1.0:
        return True
    if not _disc_touches(x, z, rect, radius):
        return False
    r2 = radius * radius
    for i in range(_ELLIPSE_SAMPLES):
        t = 2 * math.pi * i / _ELLIPSE_SAMPLES
        if (cx + ax * math.cos(t) - x) ** 2 + (cz + az * math.sin(t) - z) ** 2 < r2:
            return True
    return False


_ELLIPSE_SAMPLES = 144  # 2.5 degree steps: under 1 mm of chord error on a 1 m dog bed
_CELL = 0.5  # side (m) of the buckets that index obstacle footprints
_MARGIN = 1e-6  # slack on bucket bounds: a footprint is listed wherever rounding could let the disc touch it


class _RectIndex:
    """Footprints bucketed by the ``_CELL`` squares their reach (footprint grown by the agent radius) covers.

    ``is_free`` runs for every lattice point and every landing candidate; a scan of all footprints per
    point was most of its cost. A point's bucket lists every footprint the disc around it could touch
    (the grown footprint holds every such point, and floor is monotonic), so testing only those gives
    the same answer as testing all of them.
    """

    def __init__(self, rects: list[Rect], reach: float) -> None:
        self.cells: dict[tuple[int, int], list[Rect]] = {}
        grow = reach + _MARGIN
        for rect in rects:
            i0, i1 = math.floor((rect[0] - grow) / _CELL), math.floor((rect[1] + grow) / _CELL)
            k0, k1 = math.floor((rect[2] - grow) / _CELL), math.floor((rect[3] + grow) / _CELL)
            for i in range(i0, i1 + 1):
                for k in range(k0, k1 + 1):
                    self.cells.setdefault((i, k), []).append(rect)

    def near(self, x: float, z: float) -> list[Rect]:
        return self.cells.get((math.floor(x / _CELL), math.floor(z / _CELL)), [])


class NavMap:
    """Floor box, obstacle footprints and the reachable lattice of one scene."""

    def __init__(self, objects: Iterable[dict[str, Any]], grid_size: float) -> None:
        objects = list(objects)
        floor = next((o for o in objects if o["objectType"] == "Floor"), None)
        if floor is None:  # never in iTHOR; keep going with the union of all boxes
            rects = [aabb_rect(o) for o in objects]
            self.floor_rect: Rect = (min(r[0] for r in rects), max(r[1] for r in rects),
                                     min(r[2] for r in rects), max(r[3] for r in rects))
            floor_top = 0.0
        else:
            self.floor_rect = aabb_rect(floor)
            floor_top = aabb_bottom_top(floor)[1]
        self.agent_y = round(floor_top + AGENT_HEIGHT_ABOVE_FLOOR, 4)
        blocking = [o for o in objects if is_obstacle(o)]
        self.obstacles = [aabb_rect(o) for o in blocking if o["objectType"] not in ROUND_FOOTPRINT_TYPES]
        self.round_obstacles = [aabb_rect(o) for o in blocking if o["objectType"] in ROUND_FOOTPRINT_TYPES]
        self._index = _RectIndex(self.obstacles, AGENT_RADIUS)
        self.grid_size = grid_size
        self.reachable = self._lattice()

    def is_free(self, x: float, z: float) -> bool:
        fx0, fx1, fz0, fz1 = self.floor_rect
        r = AGENT_RADIUS
        if not (fx0 + r <= x <= fx1 - r and fz0 + r <= z <= fz1 - r):
            return False
        if any(_disc_touches(x, z, rect, r) for rect in self._index.near(x, z)):
            return False
        return not any(_disc_touches_ellipse(x, z, rect, r) for rect in self.round_obstacles)

    def _lattice(self) -> list[tuple[float, float]]:
        g = self.grid_size
        fx0, fx1, fz0, fz1 = self.floor_rect
        i0, i1 = math.ceil(fx0 / g), math.floor(fx1 / g)
        k0, k1 = math.ceil(fz0 / g), math.floor(fz1 / g)
        free = {(i, k) for i in range(i0, i1 + 1) for k in range(k0, k1 + 1) if self.is_free(i * g, k * g)}
        best: list[tuple[int, int]] = []
        seen: set[tuple[int, int]] = set()
        for cell in sorted(free):
            if cell in seen:
                continue
            comp, todo = [], [cell]
            seen.add(cell)
            while todo:
                ci, ck = todo.pop()
                comp.append((ci, ck))
                for nb in ((ci + 1, ck), (ci - 1, ck), (ci, ck + 1), (ci, ck - 1)):
                    if nb in free and nb not in seen:
                        seen.add(nb)
                        todo.append(nb)
            if len(comp) > len(best):
                best = comp
        return [(round(i * g, 4), round(k * g, 4)) for i, k in sorted(best)]

    def start_pose(self) -> Pose:
        """A new Pose at the start point (found once: every reset of the scene asks for it)."""
        return Pose(*self._start)

    @functools.cached_property
    def _start(self) -> tuple[float, float, float]:
        if not self.reachable:  # degenerate scene: stand in the middle of the floor
            fx0, fx1, fz0, fz1 = self.floor_rect
            return (fx0 + fx1) / 2, self.agent_y, (fz0 + fz1) / 2
        cx = sum(p[0] for p in self.reachable) / len(self.reachable)
        cz = sum(p[1] for p in self.reachable) / len(self.reachable)
        x, z = min(self.reachable, key=lambda p: ((p[0] - cx) ** 2 + (p[1] - cz) ** 2, p))
        return x, self.agent_y, z


def _sub(a: tuple[float, float, float], b: tuple[float, float, float]) -> tuple[float, float, float]:
    return (a[0] - b[0], a[1] - b[1], a[2] - b[2])


class Camera:
    """A pinhole camera at the agent's eye: projects world points, tests the frustum."""

    def __init__(self, pose: Pose, fov_deg: float, width: int, height: int) -> None:
        self.origin = pose.camera()
        yaw, pitch = math.radians(pose.rotation), math.radians(pose.horizon)
        self.forward = (math.sin(yaw) * math.cos(pitch), -math.sin(pitch), math.cos(yaw) * math.cos(pitch))
        self.right = (math.cos(yaw), 0.0, -math.sin(yaw))
        f, r = self.forward, self.right
        self.up = (r[1] * f[2] - r[2] * f[1], r[2] * f[0] - r[0] * f[2], r[0] * f[1] - r[1] * f[0])
        self.tan_v = math.tan(math.radians(fov_deg) / 2)
        self.tan_h = self.tan_v * width / height
        self.width, self.height = width, height

    def local(self, p: tuple[float, float, float]) -> tuple[float, float, float]:
        d = _sub(p, self.origin)
        dot = lambda u: d[0] * u[0] + d[1] * u[1] + d[2] * u[2]  # noqa: E731 - tiny local helper
        return dot(self.right), dot(self.up), dot(self.forward)

    def in_view(self, p: tuple[float, float, float]) -> bool:
        x, y, z = self.local(p)
        return z > 1e-6 and abs(x) <= z * self.tan_h and abs(y) <= z * self.tan_v

    def to_pixel(self, p: tuple[float, float, float]) -> tuple[float, float, float] | None:
        """Pixel coordinates (column, row) and depth of ``p``, or None behind the camera."""
        x, y, z = self.local(p)
        if z <= 1e-3:
            return None
        u = (x / (z * self.tan_h) + 1) / 2 * self.width
        v = (1 - y / (z * self.tan_v)) / 2 * self.height
        return u, v, z


def sample_points(obj: dict[str, Any], eye: tuple[float, float, float]) -> list[tuple[float, float, float]]:
    box = obj["axisAlignedBoundingBox"]
    c, s = box["center"], box["size"]
    cx, cy, cz, sx, sy, sz = c["x"], c["y"], c["z"], s["x"], s["y"], s["z"]
    nearest = (min(max(eye[0], cx - sx / 2), cx + sx / 2), min(max(eye[1], cy - sy / 2), cy + sy / 2),
               min(max(eye[2], cz - sz / 2), cz + sz / 2))
    pts = [(cx, cy, cz), nearest]
    pts.extend(tuple(p) for p in box["cornerPoints"])
    return pts


def sample_rect(obj: dict[str, Any]) -> Rect:
    """The x/z rectangle that holds every point ``sample_points`` can return for ``obj``, from any eye.

    The nearest point is clamped into the box's centre +- half size, computed as there; the corners are
    the dump's own, which need not agree with that to the last bit, so both count.
    """
    box = obj["axisAlignedBoundingBox"]
    c, s = box["center"], box["size"]
    xs = [c["x"] - s["x"] / 2, c["x"] + s["x"] / 2, c["x"], *(p[0] for p in box["cornerPoints"])]
    zs = [c["z"] - s["z"] / 2, c["z"] + s["z"] / 2, c["z"], *(p[2] for p in box["cornerPoints"])]
    return min(xs), max(xs), min(zs), max(zs)


def out_of_reach(eye: tuple[float, float, float], rect: Rect, visibility_distance: float) -> bool:
    """True when no point of ``rect`` lies within ``visibility_distance`` of ``eye`` in the horizontal
    plane, with a margin far above rounding: ``sees`` would then find no sample point close enough."""
    dx = max(rect[0] - eye[0], 0.0, eye[0] - rect[1])
    dz = max(rect[2] - eye[2], 0.0, eye[2] - rect[3])
    return dx * dx + dz * dz > visibility_distance * visibility_distance + _MARGIN


def sees(camera: Camera, obj: dict[str, Any], visibility_distance: float) -> bool:
    """Is one of ``sample_points(obj, eye)`` within reach and inside the frustum?

    The same arithmetic as ``sample_points``, ``Camera.local`` and ``Camera.in_view``, written out in
    one loop because it runs for every object near the agent after every action."""
    eye = camera.origin
    ex, ey, ez = eye
    limit = visibility_distance * visibility_distance
    (rx, ry, rz), (ux, uy, uz), (fx, fy, fz) = camera.right, camera.up, camera.forward
    tan_h, tan_v = camera.tan_h, camera.tan_v
    for px, py, pz in sample_points(obj, eye):
        dx, dz = px - ex, pz - ez
        if dx * dx + dz * dz <= limit:
            dy = py - ey
            z = dx * fx + dy * fy + dz * fz
            if z > 1e-6 and abs(dx * rx + dy * ry + dz * rz) <= z * tan_h \
                    and abs(dx * ux + dy * uy + dz * uz) <= z * tan_v:
                return True
    return False


def distance_to(pose: Pose, obj: dict[str, Any]) -> float:
    c = obj["axisAlignedBoundingBox"]["center"]
    return math.sqrt((c["x"] - pose.x) ** 2 + (c["y"] - pose.y) ** 2 + (c["z"] - pose.z) ** 2)
