"""A schematic first-person picture of what the agent sees, for visual agents.

Not a renderer of the real scene (there are no meshes): every active object whose box is in front of
the camera and within ``DRAW_DISTANCE`` is drawn as the screen rectangle of its projected box, filled
with a colour fixed per objectType and outlined, farthest first so nearer objects cover farther
ones; floor and ceiling are two flat bands split at the horizon line. Built only when someone reads
``event.frame`` (it costs about a millisecond per frame at 300x300).
"""

from __future__ import annotations

import hashlib
import math
from functools import lru_cache

import numpy as np
from PIL import Image, ImageDraw

from .geometry import Camera
from .world import World

DRAW_DISTANCE = 6.0
FLOOR_RGB = (150, 130, 110)
WALL_RGB = (205, 205, 195)


@lru_cache(maxsize=256)
def type_color(object_type: str) -> tuple[int, int, int]:
    """A stable, fairly saturated colour per objectType (same across runs and machines)."""
    digest = hashlib.sha256(object_type.encode()).digest()
    return tuple(60 + b % 180 for b in digest[:3])  # type: ignore[return-value]


def drawable(world: World) -> list[tuple[str, list[list[float]]]]:
    """What a frame needs, captured at event time: (objectType, box corners) of every shown object.

    Box dicts are replaced, never edited, when objects move, so holding references is a snapshot.
    """
    return [
        (world.objects[oid]["objectType"], world.objects[oid]["axisAlignedBoundingBox"]["cornerPoints"])
        for oid in world.order
        if oid not in world.inactive and world.objects[oid]["objectType"] != "Floor"
        and not world.hidden_by_closed(oid)
    ]


def render(items: list[tuple[str, list[list[float]]]], camera: Camera, horizon_deg: float) -> np.ndarray:
    """HxWx3 uint8 image of the agent's view."""
    w, h = camera.width, camera.height
    image = Image.new("RGB", (w, h), WALL_RGB)
    draw = ImageDraw.Draw(image)
    # horizon row: where a far point straight ahead at eye height projects
    horizon_row = int((1 - math.tan(math.radians(horizon_deg)) / camera.tan_v) / 2 * h)
    draw.rectangle([0, max(0, min(h, horizon_row)), w, h], fill=FLOOR_RGB)
    shapes = []
    for object_type, corners in items:
        pixels = [camera.to_pixel(tuple(p)) for p in corners]
        pixels = [p for p in pixels if p is not None]
        if len(pixels) < 8:
            continue
        depth = min(p[2] for p in pixels)
        if depth > DRAW_DISTANCE:
            continue
        us, vs = [p[0] for p in pixels], [p[1] for p in pixels]
        box = (max(min(us), -w), max(min(vs), -h), min(max(us), 2 * w), min(max(vs), 2 * h))
        if box[2] < 0 or box[3] < 0 or box[0] > w or box[1] > h:
            continue
        shapes.append((depth, box, type_color(object_type)))
    for _depth, box, color in sorted(shapes, key=lambda s: -s[0]):
        draw.rectangle(box, fill=color, outline=(30, 30, 30))
    return np.asarray(image, dtype=np.uint8)
