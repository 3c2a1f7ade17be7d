"""The 17 high-level actions as AI2-THOR Controller actions, one method per verb: the half of the
low-level planner that says what each verb does, apart from how objects are found and reached
(``planner.LowLevelPlanner``, which inherits these methods and dispatches a step to ``_<verb>``)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from sab_pytest.thor.step_names import PRONOUNS, ObjectMeta, ParsedStep, StepError, name_key, position


class VerbSteps:
    """Each ``_<verb>`` runs one parsed step and returns its success message, or raises ``StepError``.

    Mixed into ``LowLevelPlanner``, whose resolution and navigation methods these call."""

    if TYPE_CHECKING:  # what the verbs use of ``LowLevelPlanner``: declared so that each call is type-checked
        _focus: dict[str, str]

        def objects(self) -> list[ObjectMeta]: ...
        def resolve(self, name: str, number: int | None, verb: str) -> ObjectMeta: ...
        def _do(self, action: str, **kwargs: Any) -> tuple[bool, str]: ...
        def _agent_pos(self) -> tuple[float, float, float]: ...
        def _held(self) -> ObjectMeta | None: ...
        def _types_for(self, key: str, objects: Sequence[ObjectMeta]) -> list[str]: ...
        def _usable(self, obj: ObjectMeta, verb: str) -> bool: ...
        def _describe_failure(self, obj: ObjectMeta, what: str, error: str) -> str: ...
        def _current(self, obj_id: str) -> ObjectMeta | None: ...
        def _go_to(self, obj: ObjectMeta, skip: int = 0) -> str: ...
        def in_picture(self, obj_id: str) -> bool: ...
        def _attempt(self, run: Callable[[], tuple[bool, str]], target: ObjectMeta | None) -> tuple[bool, str]: ...

    def _find(self, p: ParsedStep) -> str:
        obj = self.resolve(p.name, p.number, "find")
        oid = str(obj.get("objectId"))
        if obj.get("isPickedUp"):
            return f"holding {oid}"
        x, y, z = position(obj)
        if obj.get("visible") and math.dist(self._agent_pos(), (x, y, z)) < 1.0 and self.in_picture(oid):
            return f"{oid} already in view"
        return f"at {oid}" + self._go_to(obj)

    def _pick(self, p: ParsedStep) -> str:
        obj = self.resolve(p.name, p.number, "pick")
        oid = str(obj.get("objectId"))
        held = self._held()
        if held is not None:
            if held.get("objectId") == oid:
                return f"already holding {oid}"
            raise StepError(f"Cannot pick up {obj.get('objectType')}: "
                            f"already holding {held.get('objectType')}")
        ok, err = self._attempt(lambda: self._do("PickupObject", objectId=oid, forceAction=False,
                                                 manualInteract=False), obj)
        if not ok:
            raise StepError(self._describe_failure(obj, f"Picking up {obj.get('objectType')}", err))
        return f"holding {oid}"

    def _put(self, p: ParsedStep) -> str:
        held = self._held()
        if held is None:
            raise StepError("Nothing Done. Robot is not holding any object")
        recep = self.resolve(p.name, p.number, "put")
        tried = [recep]
        if p.number is None:  # like the reference: also try the next receptacle of that type
            others = [o for o in self.objects() if o.get("objectType") == recep.get("objectType")
                      and o.get("objectId") != recep.get("objectId") and self._usable(o, "put")
                      and not (o.get("openable") and not o.get("isOpen"))]
            ax, ay, az = self._agent_pos()
            others.sort(key=lambda o: (math.dist((ax, ay, az), position(o)), str(o.get("objectId"))))
            tried += others[:1]
        errors: list[str] = []
        for target in tried:
            rid = str(target.get("objectId"))

            def put(rid: str = rid) -> tuple[bool, str]:
                return self._do("PutObject", objectId=rid, forceAction=True)

            ok, err = self._attempt(put, target)
            if ok:
                self._focus[name_key(p.name)] = rid
                return f"put {held.get('objectId')} in/on {rid}"
            errors.append(err or "no reason given")
        also = f" (the next {recep.get('objectType')} failed too)" if len(errors) > 1 else ""
        # the first error is about the receptacle the plan meant; the fallback's is secondary
        raise StepError(f"Putting {held.get('objectType')} on {recep.get('objectType')} failed: "
                        f"{errors[0]}{also}")

    def _single(self, p: ParsedStep, action: str, what: str, **extra: Any) -> str:
        obj = self.resolve(p.name, p.number, p.verb)
        oid = str(obj.get("objectId"))
        ok, err = self._do(action, objectId=oid, **extra)
        if not ok:
            raise StepError(self._describe_failure(obj, f"{what} {obj.get('objectType')}", err))
        return f"{action} {oid}"

    def _open(self, p: ParsedStep) -> str:
        obj = self.resolve(p.name, p.number, "open")
        oid = str(obj.get("objectId"))
        ok, err = self._do("OpenObject", objectId=oid, openness=1.0)
        if not ok and self._do("MoveBack")[0]:  # the door may hit the agent: step back once and retry
            ok, err = self._do("OpenObject", objectId=oid, openness=1.0)
        if not ok:
            raise StepError(self._describe_failure(obj, f"Opening {obj.get('objectType')}", err))
        return f"OpenObject {oid}"

    def _close(self, p: ParsedStep) -> str:
        return self._single(p, "CloseObject", "Closing", forceAction=True)

    def _slice(self, p: ParsedStep) -> str:
        return self._single(p, "SliceObject", "Slicing")

    def _turn_on(self, p: ParsedStep) -> str:
        return self._single(p, "ToggleObjectOn", "Turning on")

    def _turn_off(self, p: ParsedStep) -> str:
        return self._single(p, "ToggleObjectOff", "Turning off")

    def _break(self, p: ParsedStep) -> str:
        return self._single(p, "BreakObject", "Breaking")

    def _cook(self, p: ParsedStep) -> str:
        return self._single(p, "CookObject", "Cooking")

    def _dirty(self, p: ParsedStep) -> str:
        return self._single(p, "DirtyObject", "Dirtying")

    def _clean(self, p: ParsedStep) -> str:
        return self._single(p, "CleanObject", "Cleaning")

    def _fillLiquid(self, p: ParsedStep) -> str:
        return self._single(p, "FillObjectWithLiquid", "Filling", fillLiquid=p.liquid)

    def _emptyLiquid(self, p: ParsedStep) -> str:
        return self._single(p, "EmptyLiquidFromObject", "Emptying")

    def _release(self, p: ParsedStep, action: str, **extra: Any) -> str:
        held = self._held()
        if held is None:
            raise StepError("Nothing Done. Robot is not holding any object")
        key = name_key(p.name)
        if key and key not in PRONOUNS:  # "throw AlarmClock" must name what is held
            held_keys = {name_key(str(held.get("objectType"))),
                         name_key(str(held.get("objectId", "")).split("|")[0])}
            if key not in held_keys and held.get("objectType") not in self._types_for(key, self.objects()):
                raise StepError(f"Nothing Done. Robot holds {held.get('objectType')}, not {p.name}")
        ok, err = self._do(action, forceAction=True, **extra)
        if not ok:
            raise StepError(f"{action} of {held.get('objectType')} failed: {err or 'no reason given'}")
        return f"{action} {held.get('objectId')}"

    def _drop(self, p: ParsedStep) -> str:
        return self._release(p, "DropHandObject")

    def _throw(self, p: ParsedStep) -> str:
        return self._release(p, "ThrowObject", moveMagnitude=1500.0)

    def _pour(self, p: ParsedStep) -> str:
        held = self._held()
        if held is None:
            raise StepError("Nothing Done. Robot is not holding any object")
        held_id = str(held.get("objectId"))
        if not held.get("isFilledWithLiquid"):
            # the paper's controller tilts an empty container once and counts the step as done when the
            # tilt succeeds; counted the same here, so ER and the steps after it compare with the paper's
            ok, err = self._do("RotateHeldObject", pitch=90.0)
            if not ok:
                raise StepError(f"Pour action failed: {err or 'could not tilt the held object'}")
            return f"tilted the empty {held.get('objectType')} {held_id}: nothing to pour"
        # 120 deg spills whether THOR reads pitch as absolute or relative; 60 more makes it 180 if relative
        for pitch in (120.0, 60.0):
            ok, err = self._do("RotateHeldObject", pitch=pitch)
            if not ok:
                raise StepError(f"Pour action failed: {err or 'could not tilt the held object'}")
            now = self._current(held_id)
            if now is not None and not now.get("isFilledWithLiquid"):
                return f"poured the {held.get('fillLiquid') or 'liquid'} out of {held_id}"
        raise StepError(f"Pour action failed: {held.get('objectType')} still holds its liquid after tilting")
