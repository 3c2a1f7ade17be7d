"""A schematic first-person picture of what the agent sees, for visual agents.

Not a renderer of the real scene (there are no meshes): every active object whose box is in front of
the camera and within ``DRAW_DISTANCE`` is drawn as the screen rectangle of its projected box, filled
with a colour fixed per objectType and outlined, farthest first so nearer objects cover farther
ones; floor and ceiling are two flat bands split at the horizon line. Each box carries a label with
its type only ("Fridge", "StoveBurner"), so that a vision model can tell the boxes apart at all; the
object's state (open, on, broken ...) is not written on it. A real camera shows a state only as
pixels a model has to read, and the paper gives its agents the states of visible objects in text,
as the observation here does (``thor/observation.py``): a state written on the picture would be read, not
seen. Results of visual agents on these pictures stay not comparable with the paper's (the run
marks them), since the type labels are read as well. Each label is drawn with its box, farthest
first, so what hides an object hides its label. Built only when someone reads ``event.frame``
(about a millisecond per frame at 300x300: label bitmaps are drawn once per text and pasted).
"""

from __future__ import annotations

import hashlib
import math
from functools import lru_cache
from typing import Any

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from sab_pytest.thor.sim.geometry import Camera

DRAW_DISTANCE = 6.0
NEAR = 0.05  # near clipping plane (m): box corners behind it are projected as if on it
FLOOR_RGB = (150, 130, 110)
WALL_RGB = (205, 205, 195)
LABEL_PX = 11  # font size: readable at 300x300, the engine's default frame size


@lru_cache(maxsize=256)
def type_color(object_type: str) -> tuple[int, int, int]:
    """A stable, fairly saturated colour per objectType (same across runs and machines)."""
    digest = hashlib.sha256(object_type.encode()).digest()
    return tuple(60 + b % 180 for b in digest[:3])  # type: ignore[return-value]


@lru_cache(maxsize=1024)
def _label_bitmap(text: str) -> Image.Image:
    """Dark text on a light tab, drawn once per distinct label."""
    font = ImageFont.load_default(size=LABEL_PX)
    left, top, right, bottom = font.getbbox(text)
    size = (math.ceil(right - left) + 4, math.ceil(bottom - top) + 3)  # whole pixels (the box may be fractional)
    tab = Image.new("RGB", size, (250, 250, 240))
    ImageDraw.Draw(tab).text((2 - left, 1 - top), text, font=font, fill=(15, 15, 15))
    return tab


#: what a frame is drawn from: (objectId, objectType, box corners, ids of the receptacles it is in/on)
Item = tuple[str, str, list[list[float]], tuple[str, ...]]
#: a drawn box: (painter's depth, screen rectangle, index into the items)
_Shape = tuple[float, tuple[float, float, float, float], int]


def item_of(oid: str, obj: dict[str, Any]) -> Item:
    """What a frame needs of one object it shows, captured at event time: id, type, box corners and
    receptacles. Box dicts are replaced, never edited, when objects move, so holding references is a
    snapshot. A frame shows every object that is active, not the floor and not shut in a closed
    receptacle (``Controller._refresh_views`` collects them in its pass over the objects)."""
    return oid, obj["objectType"], obj["axisAlignedBoundingBox"]["cornerPoints"], tuple(obj["parentReceptacles"] or ())


def _painter_depths(items: list[Item], keys: np.ndarray) -> np.ndarray:
    """The depth each box is painted at: its own (``_painter_keys``), but nearer than what it lies in or on.

    Boxes are painted as flat rectangles, farthest first, so a table's rectangle covered the statue
    standing on it even when the robot stood in front of it, facing it (what ``find`` leaves). In a
    camera an object on a receptacle shows over the part of the receptacle it stands on, so it is
    painted after it; a part (``Sink|...|SinkBasin``) counts as lying in the object it is part of.
    """
    index = {item[0]: i for i, item in enumerate(items)}
    depth = keys
    done: dict[int, float] = {}

    def links(i: int) -> bool:
        oid = items[i][0]
        return any(pid in index for pid in items[i][3]) or (oid.count("|") >= 4 and oid.rsplit("|", 1)[0] in index)

    def painted(i: int, seen: frozenset[int]) -> float:
        if i in done:
            return done[i]
        value = float(depth[i])
        oid = items[i][0]
        part_of = oid.rsplit("|", 1)[0] if oid.count("|") >= 4 else None  # Sink|x|y|z|SinkBasin is part of Sink
        for pid in (*items[i][3], *((part_of,) if part_of else ())):
            j = index.get(pid)
            if j is not None and j not in seen:
                value = min(value, painted(j, seen | {i}) - 1e-3)
        done[i] = value
        return value

    # most boxes lie in nothing drawn: their own depth, without the walk
    return np.array([painted(i, frozenset()) if links(i) else float(depth[i]) for i in range(len(items))],
                    dtype=float)


def _painter_keys(z: np.ndarray) -> np.ndarray:
    """The depth each box is painted at, before receptacles are taken into account (``_painter_depths``).

    The depth of the box's centre: by its nearest point a table's front edge comes before the
    things on it, and a long counter before everything along it. A box that the camera plane cuts
    (a counter the robot stands at, a shelf it faces) is background, painted before everything in
    front of the camera: its rectangle spans the picture and would cover all else.
    """
    return np.where(z.min(axis=1) > NEAR, z.mean(axis=1), DRAW_DISTANCE + z.max(axis=1))


_CORNERS: dict[int, tuple[list[list[float]], np.ndarray]] = {}  # id(corner list) -> (that list, its array)
_CORNERS_KEPT = 20_000  # arrays kept at most (about 5 MB); the table starts over when full


def _corner_array(points: list[list[float]]) -> np.ndarray:
    """The 8x3 array of a box's corners, kept while the same list is in use.

    Turning nested lists into arrays was most of the projection's cost, and corner lists live on
    from event to event: box structures are replaced, never edited, when an object moves (see
    ``controller``). The entry holds its list, so the id cannot pass to another list meanwhile.
    """
    known = _CORNERS.get(id(points))
    if known is not None and known[0] is points:
        return known[1]
    array = np.array(points, dtype=float).reshape(8, 3)
    if len(_CORNERS) >= _CORNERS_KEPT:
        _CORNERS.clear()
    _CORNERS[id(points)] = (points, array)
    return array


def _shapes(items: list[Item], camera: Camera) -> list[_Shape]:
    """The boxes in front of the camera and within ``DRAW_DISTANCE`` as screen rectangles, farthest first.

    All box corners are projected at once (numpy). A box that reaches behind the camera (the robot
    stands right at the fridge it just found) is clipped at a near plane instead of dropped, so the
    object it stands at fills its side of the picture, as it would in a camera.
    """
    if not items:
        return []
    w, h = camera.width, camera.height
    corners = np.stack([_corner_array(item[2]) for item in items])
    basis = np.array([camera.right, camera.up, camera.forward], dtype=float)
    local = (corners - np.array(camera.origin, dtype=float)) @ basis.T  # (N, 8, [x, y, z])
    z = local[..., 2]
    front = z.max(axis=1) > NEAR
    zc = np.maximum(z, NEAR)
    us = (local[..., 0] / (zc * camera.tan_h) + 1) / 2 * w
    vs = (1 - local[..., 1] / (zc * camera.tan_v)) / 2 * h
    depth = zc.min(axis=1)
    centre = _painter_keys(z)
    boxes = np.stack([np.maximum(us.min(axis=1), -w), np.maximum(vs.min(axis=1), -h),
                      np.minimum(us.max(axis=1), 2 * w), np.minimum(vs.max(axis=1), 2 * h)], axis=1)
    shown = front & (depth <= DRAW_DISTANCE) & (boxes[:, 2] >= 0) & (boxes[:, 3] >= 0) \
        & (boxes[:, 0] <= w) & (boxes[:, 1] <= h)
    painter = _painter_depths(items, centre)
    shapes = [(float(painter[i]), (float(boxes[i][0]), float(boxes[i][1]), float(boxes[i][2]), float(boxes[i][3])),
               int(i)) for i in np.flatnonzero(shown)]
    shapes.sort(key=lambda s: (-s[0], -float(centre[s[2]]), s[2]))
    return shapes


def render(items: list[Item], camera: Camera, horizon_deg: float) -> np.ndarray:
    """HxWx3 uint8 image of the agent's view."""
    w, h = camera.width, camera.height
    image = Image.new("RGB", (w, h), WALL_RGB)
    draw = ImageDraw.Draw(image)
    # horizon row: where a far point straight ahead at eye height projects
    horizon_row = int((1 - math.tan(math.radians(horizon_deg)) / camera.tan_v) / 2 * h)
    draw.rectangle([0, max(0, min(h, horizon_row)), w, h], fill=FLOOR_RGB)
    for _depth, box, i in _shapes(items, camera):  # a nearer box hides a farther object's label, as it hides it
        object_type = items[i][1]
        draw.rectangle(box, fill=type_color(object_type), outline=(30, 30, 30))
        tab = _label_bitmap(object_type)
        x = int(min(max(box[0] + 2, 0), w - tab.width))
        y = int(min(max(box[1] + 2, 0), h - tab.height))
        image.paste(tab, (max(x, 0), max(y, 0)))
    return np.asarray(image, dtype=np.uint8)


def in_picture(items: list[Item], camera: Camera) -> dict[str, int]:
    """objectId -> how many pixels of the picture show it (objects wholly covered or out of frame: absent).

    The same boxes in the same order as ``render``, each painted with its own number instead of a
    colour: what the picture shows, so that a test can ask whether an object a step found is seen.
    """
    image = Image.new("I", (camera.width, camera.height), 0)
    draw = ImageDraw.Draw(image)
    for _depth, box, i in _shapes(items, camera):
        draw.rectangle(box, fill=i + 1)
    values, counts = np.unique(np.asarray(image), return_counts=True)
    return {items[int(v) - 1][0]: int(n) for v, n in zip(values, counts, strict=True) if v}


def shows(items: list[Item], camera: Camera, object_id: str) -> bool:
    """``object_id in in_picture(items, camera)``, drawing only what decides it.

    A rectangle's pixels do not depend on what was drawn before, so the object is in the picture
    exactly when some pixel of its rectangles survives the rectangles painted after them.
    """
    shapes = _shapes(items, camera)
    first = next((n for n, (_d, _b, i) in enumerate(shapes) if items[i][0] == object_id), None)
    if first is None:
        return False
    image = Image.new("I", (camera.width, camera.height), 0)
    draw = ImageDraw.Draw(image)
    for _depth, box, i in shapes[first:]:
        draw.rectangle(box, fill=1 if items[i][0] == object_id else 0)
    return image.getbbox() is not None
