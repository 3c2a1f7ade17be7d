"""The camera picture a visual agent is shown: an engine frame encoded as PNG and as a data URL."""

from __future__ import annotations

import base64
import io
import struct
import zlib
from typing import Any


def encode_png(frame: Any) -> bytes:
    """An HxWx3 uint8 frame as PNG bytes: unfiltered rows, zlib level 1.

    Written out here because it is about twice as fast as Pillow's encoder (which tries a filter per
    row) on camera-sized frames and, on the embedded engine's flat schematic frames, smaller too:
    the picture is the largest share of a visual agent's harness time per step. Other array shapes
    (a grey or RGBA frame from another engine) go through Pillow.
    """
    import numpy as np

    array = np.asarray(frame)
    if array.ndim != 3 or array.shape[2] != 3 or array.dtype != np.uint8:
        from PIL import Image

        buffer = io.BytesIO()
        Image.fromarray(array).save(buffer, format="PNG", compress_level=1)
        return buffer.getvalue()
    height, width, _ = array.shape
    rows = np.empty((height, width * 3 + 1), dtype=np.uint8)
    rows[:, 0] = 0  # filter type "None" for every row
    rows[:, 1:] = array.reshape(height, width * 3)

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)  # 8-bit RGB, no interlace
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows.tobytes(), 1))
            + chunk(b"IEND", b""))


def png_data_url(frame: Any) -> str | None:
    """The frame (HxWx3 uint8) as a ``data:image/png;base64,...`` URL; None when there is no frame."""
    if frame is None:
        return None
    return "data:image/png;base64," + base64.b64encode(encode_png(frame)).decode("ascii")


#: the pictures an episode keeps for its record (and the report): at most this many, each at most
#: ``THUMB_WIDTH`` pixels wide. A 640-pixel camera frame is 30-100 KB of base64; kept whole for
#: every step of 1050 episodes it would make a results file of gigabytes. 320 pixels keeps the
#: object labels of a 300-pixel frame (ai2thor's default camera, the embedded engine's) whole and
#: readable in the report (at 160 they were halved to 150 pixels and unreadable); a picture is then
#: 8-40 KB, so 8 of them per case keep a full visual run near 300 MB at most.
THUMB_WIDTH = 320
MAX_KEPT = 8


def thumbnail_data_url(frame: Any, width: int = THUMB_WIDTH) -> str | None:
    """The frame scaled down (every k-th pixel, no smoothing: fast, and the schematic frames stay
    sharp) to at most ``width`` pixels wide, as a PNG data URL; None when there is no frame."""
    if frame is None:
        return None
    import numpy as np

    array = np.asarray(frame)
    if array.ndim >= 2 and array.shape[1] > width:
        step = -(-array.shape[1] // width)  # ceiling division
        array = np.ascontiguousarray(array[::step, ::step])
    return "data:image/png;base64," + base64.b64encode(encode_png(array)).decode("ascii")


def keep_some(pictures: list[dict[str, Any]], most: int = MAX_KEPT) -> list[dict[str, Any]]:
    """At most ``most`` of an episode's pictures: the first and the last ones, which show where the
    agent started and how it ended; each keeps its ``step`` so that a gap shows."""
    if len(pictures) <= most:
        return list(pictures)
    head = most // 2
    return pictures[:head] + pictures[len(pictures) - (most - head):]
