"""What the THOR server and its client agree on: paths, error names, and the metadata delta.

Plain Python with no HTTP library, imported by both ``server.py`` and ``remote.py``.

Why a delta: an event's metadata is 100-160 kB of JSON (77 objects of 42 keys in FloorPlan1, most
of it bounding boxes), and encoding plus decoding it costs ~4 ms, eight times the embedded engine's
own step. After one action only a few keys of a few objects change (``distance`` and ``visible`` of
many, everything of one), so a step answer carries, per object, only the keys that changed since
the answer the client already has. Each answer is numbered (``seq``); a delta names the answer it
builds on (``base``), and the client applies it only on top of exactly that one, else it asks for
the full metadata. The same number makes a retried step safe: the server answers a repeated
``seq`` from its record instead of running the action twice.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

PROTOCOL = 1
DEFAULT_PORT = 9100
TOKEN_ENV = "SAB_THOR_TOKEN"
URL_ENV = "SAB_THOR_URL"

# error "type" values in JSON error bodies (HTTP status in brackets)
INVALID_ACTION = "invalid_action"  # [400] ai2thor's ValueError: re-raised as ValueError by the client
INVALID_CALL = "invalid_call"  # [400] a TypeError (an unknown initialization parameter): re-raised as TypeError
BAD_REQUEST = "bad_request"  # [400] malformed JSON or fields
UNAUTHORIZED = "unauthorized"  # [401] token missing or wrong
UNKNOWN_LEASE = "unknown_lease"  # [404] never leased, released, reclaimed, or the server restarted
NO_FREE_ENGINE = "no_free_engine"  # [503] every engine is leased
EPISODE_LOST = "episode_lost"  # [409] the engine crashed and was restarted, or no reset yet
ENGINE_FAILED = "engine_failed"  # [502] the engine failed now (it is being restarted)
STALE_FRAME = "stale_frame"  # [409] the frame asked for belongs to an earlier event


def encode_objects(objects: Sequence[Mapping[str, Any]], base: Mapping[str, Mapping[str, Any]] | None
                   ) -> list[dict[str, Any]]:
    """Objects as a list of entries, in order: ``{"o": obj}`` (whole) or ``{"id": oid, "d": changed}``.

    ``base`` maps objectId -> the object as the client has it; None sends every object whole.
    """
    out: list[dict[str, Any]] = []
    for obj in objects:
        oid = obj.get("objectId")
        old = base.get(oid) if base is not None and isinstance(oid, str) else None
        if old is not None and len(old) == len(obj):  # same size: a key set change shows as a KeyError
            if old == obj:  # most objects after most actions (compared in C, stops at the first difference)
                out.append({"id": oid, "d": {}})
                continue
            try:
                out.append({"id": oid, "d": {k: v for k, v in obj.items() if not (old[k] is v or old[k] == v)}})
                continue
            except KeyError:
                pass
        out.append({"o": obj})
    return out


def decode_objects(entries: Sequence[Mapping[str, Any]], base: Mapping[str, Mapping[str, Any]]
                   ) -> list[dict[str, Any]]:
    """Inverse of ``encode_objects``: rebuild the full object list on top of ``base``.

    Raises KeyError when a delta names an object the base lacks (the caller then fetches in full).
    """
    objects: list[dict[str, Any]] = []
    for entry in entries:
        whole = entry.get("o")
        if whole is not None:
            objects.append(dict(whole))
        else:
            obj = dict(base[entry["id"]])
            obj.update(entry["d"])
            objects.append(obj)
    return objects


def index_objects(objects: Sequence[Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    return {o["objectId"]: o for o in objects if isinstance(o.get("objectId"), str)}
