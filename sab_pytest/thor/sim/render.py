"""A schematic first-person picture of what the agent sees, for visual agents.

Not a renderer of the real scene (there are no meshes): every active object whose box is in front of
the camera and within ``DRAW_DISTANCE`` is drawn as the screen rectangle of its projected box, filled
with a colour fixed per objectType and outlined, farthest first so nearer objects cover farther
ones; floor and ceiling are two flat bands split at the horizon line. Each box carries a label with
its type only ("Fridge", "StoveBurner"), so that a vision model can tell the boxes apart at all; the
object's state (open, on, broken ...) is not written on it. A real camera shows a state only as
pixels a model has to read, and the paper gives its agents the states of visible objects in text,
as the observation here does (``thor/view.py``): a state written on the picture would be read, not
seen. Results of visual agents on these pictures stay not comparable with the paper's (the run
marks them), since the type labels are read as well. Each label is drawn with its box, farthest
first, so what hides an object hides its label. Built only when someone reads ``event.frame``
(about a millisecond per frame at 300x300: label bitmaps are drawn once per text and pasted).
"""

from __future__ import annotations

import hashlib
import math
from functools import lru_cache

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from sab_pytest.thor.sim.geometry import Camera
from sab_pytest.thor.sim.world import World

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


def drawable(world: World) -> list[tuple[str, list[list[float]]]]:
    """What a frame needs, captured at event time: (objectType, box corners) of every shown object.

    Box dicts are replaced, never edited, when objects move, so holding references is a snapshot.
    """
    objects = world.objects
    return [
        (objects[oid]["objectType"], objects[oid]["axisAlignedBoundingBox"]["cornerPoints"])
        for oid in world.order
        if oid not in world.inactive and objects[oid]["objectType"] != "Floor" and not world.hidden_by_closed(oid)
    ]


def render(items: list[tuple[str, list[list[float]]]], camera: Camera, horizon_deg: float) -> np.ndarray:
    """HxWx3 uint8 image of the agent's view.

    All box corners are projected at once (numpy). A box that reaches behind the camera (the robot
    stands right at the fridge it just found) is clipped at a near plane instead of dropped, so the
    object it stands at fills its side of the picture, as it would in a camera.
    """
    w, h = camera.width, camera.height
    image = Image.new("RGB", (w, h), WALL_RGB)
    draw = ImageDraw.Draw(image)
    # horizon row: where a far point straight ahead at eye height projects
    horizon_row = int((1 - math.tan(math.radians(horizon_deg)) / camera.tan_v) / 2 * h)
    draw.rectangle([0, max(0, min(h, horizon_row)), w, h], fill=FLOOR_RGB)
    shapes = []
    if items:
        corners = np.array([c for _, c in items], dtype=float).reshape(len(items), 8, 3)
        basis = np.array([camera.right, camera.up, camera.forward], dtype=float)
        local = (corners - np.array(camera.origin, dtype=float)) @ basis.T  # (N, 8, [x, y, z])
        z = local[..., 2]
        front = z.max(axis=1) > NEAR
        zc = np.maximum(z, NEAR)
        us = (local[..., 0] / (zc * camera.tan_h) + 1) / 2 * w
        vs = (1 - local[..., 1] / (zc * camera.tan_v)) / 2 * h
        depth = zc.min(axis=1)
        boxes = np.stack([np.maximum(us.min(axis=1), -w), np.maximum(vs.min(axis=1), -h),
                          np.minimum(us.max(axis=1), 2 * w), np.minimum(vs.max(axis=1), 2 * h)], axis=1)
        shown = front & (depth <= DRAW_DISTANCE) & (boxes[:, 2] >= 0) & (boxes[:, 3] >= 0) \
            & (boxes[:, 0] <= w) & (boxes[:, 1] <= h)
        for i in np.flatnonzero(shown):
            object_type = items[i][0]
            shapes.append((float(depth[i]), tuple(float(v) for v in boxes[i]), type_color(object_type),
                           object_type))
    shapes.sort(key=lambda s: -s[0])
    for _depth, box, color, text in shapes:  # a nearer box hides a farther object's label, as it hides the object
        draw.rectangle(box, fill=color, outline=(30, 30, 30))
        tab = _label_bitmap(text)
        x = int(min(max(box[0] + 2, 0), w - tab.width))
        y = int(min(max(box[1] + 2, 0), h - tab.height))
        image.paste(tab, (max(x, 0), max(y, 0)))
    return np.asarray(image, dtype=np.uint8)
