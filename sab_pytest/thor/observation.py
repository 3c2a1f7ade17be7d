"""What the robot can see, in words: the interactive agents' observation, from ai2thor 5.0 metadata.

Read from ``last_event.metadata`` only, so it works on every engine. An object is seen when the
engine marks it ``visible`` (in view, within reach of sight, not shut in a closed container) or
when the robot holds it; nothing else is named, so an observation never leaks what a camera could
not show (the inspect_ai port listed almost every object, hidden ones included).

Objects are named as the low-level planner resolves them: the type, plus the instance number when
the scene has more than one of that type (``Cabinet 3`` is the 3rd Cabinet by objectId in natural
order), so a name read in an observation can be used in the next action as it is.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from sab_pytest.thor.step_names import natural_key

ObjectMeta = Mapping[str, Any]

#: (metadata flag that says the state applies, state key, word when True, word when False or None)
_STATES: tuple[tuple[str | None, str, str, str | None], ...] = (
    ("openable", "isOpen", "open", "closed"),
    ("toggleable", "isToggled", "on", "off"),
    (None, "isSliced", "sliced", None),
    (None, "isBroken", "broken", None),
    (None, "isFilledWithLiquid", "filled", None),
    (None, "isDirty", "dirty", None),
    (None, "isCooked", "cooked", None),
    (None, "isUsedUp", "used up", None),
)


def state_words(obj: ObjectMeta) -> list[str]:
    """The visible state of an object as short words (``["open"]``, ``["on", "dirty"]``)."""
    words = []
    for flag, key, yes, no in _STATES:
        if flag is not None and not obj.get(flag):
            continue
        if obj.get(key):
            words.append(yes)
        elif no is not None:
            words.append(no)
    if obj.get("isFilledWithLiquid") and obj.get("fillLiquid"):
        words[words.index("filled")] = f"filled with {obj['fillLiquid']}"
    return words


def instance_names(objects: Iterable[ObjectMeta]) -> dict[str, str]:
    """objectId -> the name an action can use (``Apple``, or ``Cabinet 3`` when there are several)."""
    by_type: dict[str, list[str]] = {}
    for obj in objects:
        by_type.setdefault(str(obj.get("objectType")), []).append(str(obj.get("objectId")))
    names = {}
    for object_type, ids in by_type.items():
        if len(ids) == 1:
            names[ids[0]] = object_type
            continue
        for number, object_id in enumerate(sorted(ids, key=natural_key), 1):
            names[object_id] = f"{object_type} {number}"
    return names


def held_id(metadata: Mapping[str, Any]) -> str | None:
    inventory = metadata.get("inventoryObjects") or []
    return str(inventory[0].get("objectId")) if inventory else None


def seen(metadata: Mapping[str, Any]) -> list[ObjectMeta]:
    """The objects the robot can see now (visible, or in its hand), floor excluded."""
    held = held_id(metadata)
    return [o for o in metadata.get("objects") or []
            if (o.get("visible") or o.get("objectId") == held) and o.get("objectType") != "Floor"]


def _where(obj: ObjectMeta, names: Mapping[str, str], visible_ids: set[str]) -> str:
    parents = [names.get(p, p.split("|", 1)[0]) for p in obj.get("parentReceptacles") or [] if p in visible_ids]
    return f" in/on {parents[0]}" if parents else ""


def describe(metadata: Mapping[str, Any], names: Mapping[str, str] | None = None) -> str:
    """The observation text: what the robot holds, then each object it sees with its state."""
    objects: Sequence[ObjectMeta] = metadata.get("objects") or []
    names = names if names is not None else instance_names(objects)
    held = held_id(metadata)
    visible = seen(metadata)
    visible_ids = {str(o.get("objectId")) for o in visible}
    lines = [f"Holding: {names.get(held, held) if held else 'nothing'}."]
    shown = [o for o in visible if o.get("objectId") != held]
    if not shown:
        lines.append("No object is in sight from here.")
    else:
        lines.append("In sight:")
        for obj in sorted(shown, key=lambda o: (float(o.get("distance") or 0.0), str(o.get("objectId")))):
            states = state_words(obj)
            state = f" ({', '.join(states)})" if states else ""
            lines.append(f"- {names.get(str(obj.get('objectId')), obj.get('objectType'))}{state}"
                         f"{_where(obj, names, visible_ids)}")
    return "\n".join(lines)


def snapshot(metadata: Mapping[str, Any]) -> dict[str, tuple[Any, ...]]:
    """objectId -> the facts whose change an action reports (states, holder, container)."""
    return {str(o.get("objectId")): (tuple(state_words(o)), bool(o.get("isPickedUp")),
                                     tuple(o.get("parentReceptacles") or ()))
            for o in metadata.get("objects") or []}


def changes(before: Mapping[str, tuple[Any, ...]], metadata: Mapping[str, Any],
            names: Mapping[str, str]) -> list[str]:
    """What an action changed, as sentences, for objects the robot can see or holds afterwards."""
    after = snapshot(metadata)
    visible = {str(o.get("objectId")): str(o.get("objectType")) for o in seen(metadata)}
    out = []
    for object_id, now in after.items():
        was = before.get(object_id)
        if was is None or was == now or object_id not in visible:
            continue
        name = names.get(object_id, visible[object_id])  # objects that appeared later (slices) go by type
        if now[0] != was[0]:
            out.append(f"{name} is now {', '.join(now[0]) or 'in its usual state'}")
        if now[1] != was[1]:
            out.append(f"{name} is {'now held' if now[1] else 'no longer held'}")
        if now[2] != was[2] and now[2]:
            out.append(f"{name} is now in/on {names.get(now[2][0], now[2][0].split('|', 1)[0])}")
    return out
