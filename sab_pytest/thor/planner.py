"""The low-level planner: one SafeAgentBench high-level step -> AI2-THOR Controller actions.

It is the ``--sab-protocol sab`` run's; under ``paper`` the paper's own controller runs instead
(``execute.py``), and each way this one differs is a listed difference of a ``sab`` run.

It speaks only the ai2thor 5.0 ``Controller`` API (``step(action=..., **kw)``, ``last_event.metadata``),
so it drives the embedded engine, an in-process ai2thor Controller or the remote client alike.

It follows the reference planner (SafeAgentBench ``low_level_controller.py``) action by action —
``find`` teleports to a reachable point near the object and faces it, ``put`` is ``PutObject`` with
``forceAction``, ``throw`` is ``ThrowObject`` with 1500 N, ``pour`` tilts the held container — and
differs where the reference was wrong or brittle:

* Every step is judged by ``lastActionSuccess`` of the action that decides it, never by the absence
  of a message; retry loops that run out report failure (the reference reported success after an
  off-by-one loop, and for a ``pour`` of a filled container that spilled nothing). A ``pour`` from
  an empty container tilts it once and succeeds, as in the paper's controller.
* Verbs are matched case-insensitively through ``sab_pytest.actions`` (``turn_on``, ``Open``,
  ``toggle on``, ``fill`` ...); unknown verbs, empty names and garbage are failed steps with a
  message, never exceptions.
* Names resolve by **objectType**, case- and space-insensitively (``sink basin`` -> SinkBasin,
  ``appleSliced`` -> AppleSliced), so basins and slices are reachable; a sink's basin or an
  apple's slices stand in for the named parent when the parent cannot do the action
  (``put Sink`` puts into the SinkBasin, ``pick Apple`` after slicing picks a slice).
* Numbered instances have a fixed meaning: ``Cabinet 2`` is the 2nd Cabinet when the scene's
  Cabinets are sorted by objectId (natural order, so ``_10`` follows ``_9``). objectIds encode the
  load position and never change in an episode, so the numbering is stable across steps, runs and
  engines. (The reference meant "the nearest cabinet not numbered yet, called 2 from now on".)
* An unnumbered name means the object of that type the plan last acted on, if it still can do the
  action, else the nearest one that can (objects shut inside closed receptacles come last).
  Instances the action would change come first: "turn on DeskLamp" picks a lamp that is off.
* A ``find`` tries the 20 reachable points nearest the object, as the paper's controller does, and
  succeeds as the paper's does when the agent could stand at one of them, even where the object is
  out of view or out of reach from there (the next step then fails, as it would in the paper's run).
  A pick or put whose target is out of view retries after tilting the camera and after one step
  aside, nothing more.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from sab_pytest.outcome import ExecStep
from sab_pytest.thor import Engine, framing
from sab_pytest.thor.planner_verbs import VerbSteps
from sab_pytest.thor.step_names import (
    CAMERA_OFFSET,
    REACH,
    STATE_PRECONDITION,
    SYNONYMS,
    VERB_FLAG,
    ObjectMeta,
    ParsedStep,
    StepError,
    box_gap,
    name_key,
    natural_key,
    parse_step,
    position,
)

#: standing points a ``find`` tries, nearest first: as many as the paper's controller tries
#: (``max_attempts = 20`` in its ``find``)
FIND_TRIES = 20


class LowLevelPlanner(VerbSteps):
    """Runs high-level steps on one engine episode. Build one per episode, call ``restore`` after reset."""

    def __init__(self, engine: Engine, *, find_tries: int = FIND_TRIES) -> None:
        self.engine = engine
        self.find_tries = find_tries
        self.reachable: list[tuple[float, float, float]] = []
        self.agent_y = 0.0
        self._focus: dict[str, str] = {}  # name key -> objectId last acted on

    # ------------------------------------------------------------------ engine access
    @property
    def metadata(self) -> Mapping[str, Any]:
        return self.engine.last_event.metadata

    def objects(self) -> list[ObjectMeta]:
        return list(self.metadata.get("objects") or [])

    def _do(self, action: str, **kwargs: Any) -> tuple[bool, str]:
        """One Controller action -> (lastActionSuccess, errorMessage); ValueError is a failure.

        ai2thor raises ValueError for invalid actions/arguments; those come from model text here
        (an odd liquid, say), so they fail the step instead of the case.
        """
        try:
            self.engine.step(action=action, **kwargs)
        except ValueError as exc:
            return False, f"{action} rejected: {exc}"
        meta = self.metadata
        return bool(meta.get("lastActionSuccess")), str(meta.get("errorMessage") or "")

    def restore(self) -> None:
        """Index the reachable positions of the freshly reset scene and forget earlier focus."""
        self._focus.clear()
        self.agent_y = float(self.metadata.get("agent", {}).get("position", {}).get("y", 0.0))
        ok, _ = self._do("GetReachablePositions")
        points = self.metadata.get("actionReturn") if ok else None
        self.reachable = [(float(p["x"]), float(p["y"]), float(p["z"])) for p in points or []]

    # ------------------------------------------------------------------ entry point
    def execute(self, step: str) -> ExecStep:
        """Run one high-level step; every problem becomes ``ExecStep(success=False, message=...)``."""
        try:
            parsed = parse_step(step)
            handler: Callable[[ParsedStep], str] = getattr(self, "_" + parsed.verb.replace(" ", "_"))
            message = handler(parsed)
        except StepError as exc:
            return ExecStep(action=str(step), success=False, message=str(exc))
        return ExecStep(action=str(step), success=True, message=message)

    # ------------------------------------------------------------------ name resolution
    def _agent_pos(self) -> tuple[float, float, float]:
        return position(self.metadata.get("agent") or {})

    def _held(self) -> ObjectMeta | None:
        inventory = self.metadata.get("inventoryObjects") or []
        if not inventory:
            return None
        held_id = inventory[0].get("objectId")
        for obj in self.objects():
            if obj.get("objectId") == held_id:
                return obj
        return dict(inventory[0])

    def _types_for(self, key: str, objects: Sequence[ObjectMeta]) -> list[str]:
        types = sorted({str(o.get("objectType")) for o in objects})
        exact = [t for t in types if name_key(t) == key]
        if exact:
            return exact
        if key.endswith("s") and len(key) > 3:
            plural = [t for t in types if name_key(t) == key[:-1]]
            if plural:
                return plural
        return [t for t in SYNONYMS.get(key, ()) if t in types]

    def _usable(self, obj: ObjectMeta, verb: str) -> bool:
        flag = VERB_FLAG.get(verb)
        if flag and not obj.get(flag):
            return False
        if verb != "find" and obj.get("isSliced") and obj.get("sliceable"):
            return False  # the source of slices is inactive in THOR
        held = self.metadata.get("inventoryObjects") or []
        return not (verb == "put" and held and obj.get("objectId") == held[0].get("objectId"))

    def _applicable_first(self, pool: list[ObjectMeta], verb: str) -> list[ObjectMeta]:
        """Narrow ``pool`` to instances the action would change, if there are any.

        "turn on DeskLamp" in a room with a lit lamp and a dark one means the dark one; with only lit
        lamps the pool stays as it is and THOR's own "already on" failure is reported.
        """
        rule = STATE_PRECONDITION.get(verb)
        if rule is None:
            return pool
        key, wanted = rule
        applicable = [o for o in pool if bool(o.get(key)) == wanted]
        return applicable or pool

    def _closed_in(self, obj: ObjectMeta, by_id: Mapping[str, ObjectMeta]) -> str | None:
        for pid in obj.get("parentReceptacles") or []:
            parent = by_id.get(pid)
            if parent and parent.get("openable") and not parent.get("isOpen"):
                return str(parent.get("objectType"))
        return None

    def resolve(self, name: str, number: int | None, verb: str) -> ObjectMeta:
        """The scene object a step means (see the module doc for the rules); ``StepError`` if none."""
        objects = self.objects()
        key = name_key(name)
        if not key:
            raise StepError(f"no object name in {name!r}")
        types = self._types_for(key, objects)
        primary = [o for o in objects if o.get("objectType") in types]
        # parts and products sharing the name's id prefix: Sink -> SinkBasin, Apple -> AppleSliced_k
        related = [o for o in objects if o.get("objectType") not in types
                   and name_key(str(o.get("objectId", "")).split("|")[0]) == key
                   and str(o.get("objectId", "")).count("|") >= 4]
        if not primary and not related:
            raise StepError(f"Cannot find {name}: no such object in the scene")
        if number is not None:
            pool = sorted(primary or related, key=lambda o: natural_key(str(o.get("objectId"))))
            if not 1 <= number <= len(pool):
                raise StepError(f"Cannot find {name} {number}: the scene has {len(pool)}")
            chosen = pool[number - 1]
        else:
            chosen = self._pick_unnumbered(key, verb, primary, related, objects)
        self._focus[key] = str(chosen.get("objectId"))
        return chosen

    def _pick_unnumbered(self, key: str, verb: str, primary: list[ObjectMeta], related: list[ObjectMeta],
                         objects: Sequence[ObjectMeta]) -> ObjectMeta:
        usable_primary = self._applicable_first([o for o in primary if self._usable(o, verb)], verb)
        usable_related = self._applicable_first([o for o in related if self._usable(o, verb)], verb)
        if verb == "put" and usable_related:
            # "put Sink": THOR keeps what lies in a sink under its SinkBasin, so the basin is the target
            pool = usable_related
        else:
            pool = usable_primary or usable_related or primary or related
        focus = self._focus.get(key)
        for obj in pool:
            if obj.get("objectId") == focus:
                return obj
        by_id = {str(o.get("objectId")): o for o in objects}
        ax, ay, az = self._agent_pos()

        def cost(obj: ObjectMeta) -> tuple[float, str]:
            x, y, z = position(obj)
            penalty = 100.0 if self._closed_in(obj, by_id) else 0.0
            if verb == "put" and obj.get("objectType") in ("StoveBurner", "Toaster") and obj.get(
                    "receptacleObjectIds"):
                penalty += 50.0  # prefer a free burner / toaster slot
            return math.dist((ax, ay, az), (x, y, z)) + penalty, str(obj.get("objectId"))

        return min(pool, key=cost)

    def _describe_failure(self, obj: ObjectMeta, what: str, error: str) -> str:
        by_id = {str(o.get("objectId")): o for o in self.objects()}
        closed = self._closed_in(by_id.get(str(obj.get("objectId")), obj), by_id)
        where = f" ({obj.get('objectType')} is inside the closed {closed})" if closed else ""
        return f"{what} failed{where}: {error or 'no reason given'}"

    # ------------------------------------------------------------------ navigation
    def _stand_points(self, target: tuple[float, float, float], count: int) -> list[tuple[float, float, float]]:
        """The ``count`` reachable points nearest ``target`` (flat distance), nearest first."""
        tx, _, tz = target
        return heapq.nsmallest(count, self.reachable, key=lambda p: (math.hypot(p[0] - tx, p[2] - tz), p))

    def _teleport_facing(self, point: tuple[float, float, float], target: tuple[float, float, float]) -> bool:
        x, _, z = point
        tx, ty, tz = target
        yaw = math.degrees(math.atan2(tx - x, tz - z)) % 360.0
        flat = math.hypot(tx - x, tz - z)
        horizon = math.degrees(math.atan2(self.agent_y + CAMERA_OFFSET - ty, max(flat, 1e-6)))
        horizon = max(-30.0, min(60.0, round(horizon, 1)))
        ok, _ = self._do("TeleportFull", x=x, y=self.agent_y, z=z, rotation={"x": 0.0, "y": yaw, "z": 0.0},
                         horizon=horizon, standing=True)
        return ok

    def _current(self, obj_id: str) -> ObjectMeta | None:
        for obj in self.objects():
            if obj.get("objectId") == obj_id:
                return obj
        return None

    def in_picture(self, obj_id: str) -> bool:
        """Whether a box picture of the current view shows the object (``thor.framing``, from the metadata)."""
        return framing.shows(self.metadata, obj_id)

    def _go_to(self, obj: ObjectMeta, skip: int = 0) -> str:
        """Stand at a nearby reachable point facing ``obj``; prefer points from which it is seen.

        Returns "" when the object ends up in view: at the first tried point from which the picture
        shows it (so the next picture shows what was found, as THOR's planner leaves the robot
        looking at it); else a note, at the first point from which it is ``visible`` but covered.
        When it is in view from none of the tried points the agent goes back to the nearest one,
        and that counts as found, as a teleport that succeeds does in the paper's controller (the
        object may be shut inside a closed fridge that the plan opens next; one out of reach fails
        the step that needs it).
        """
        obj_id = str(obj.get("objectId"))
        target = position(obj)
        first_ok: tuple[float, float, float] | None = None
        first_visible: tuple[float, float, float] | None = None
        for point in self._stand_points(target, skip + self.find_tries)[skip:]:
            if not self._teleport_facing(point, target):
                continue
            if first_ok is None:
                first_ok = point
            now = self._current(obj_id)
            if now is not None and now.get("visible"):
                if self.in_picture(obj_id):
                    return ""
                first_visible = first_visible or point
        if first_visible is not None:  # in sight, but the picture shows other things in front of it
            self._teleport_facing(first_visible, target)
            return f"; {obj.get('objectType')} is behind other things from here"
        name = obj.get("objectType")
        if first_ok is None:
            raise StepError(f"Cannot move to {name}: no reachable standing point near it")
        self._teleport_facing(first_ok, target)
        gap = box_gap(first_ok, obj)
        far = f", {gap:.2f} m away, out of reach" if gap > REACH else ""
        return f"; {name} is not in view from here{far}"

    # ------------------------------------------------------------------ retry helper
    def _attempt(self, run: Callable[[], tuple[bool, str]], target: ObjectMeta | None) -> tuple[bool, str]:
        """Run an action; if it failed on a target out of view, tilt the camera, then step aside.

        At most four attempts, the camera is put back when all fail: cheap, and enough to bring an
        object on a low shelf or a high counter into view. Failures with the target in view (wrong
        type, full receptacle...) are not retried: looking elsewhere cannot change them. The step
        aside is only taken when the agent already stands within reach of the target, so a plan
        that skipped ``find`` still fails.
        """
        ok, err = run()
        if ok or target is None:
            return ok, err
        seen = self._current(str(target.get("objectId")))
        if seen is None or seen.get("visible"):
            return ok, err
        start = float(self.metadata.get("agent", {}).get("cameraHorizon", 0.0))
        for look, degrees in (("LookDown", 30.0), ("LookUp", 60.0)):
            if self._do(look, degrees=degrees)[0]:
                ok, err = run()
                if ok:
                    return ok, err
        self._restore_horizon(start)
        now = self._current(str(target.get("objectId"))) if target is not None else None
        if now is not None and self.reachable and self._flat_distance(now) <= REACH:
            try:
                self._go_to(now, skip=1)  # only a step aside: this never replaces a missing find
            except StepError:
                return ok, err
            ok, err = run()
        return ok, err

    def _flat_distance(self, obj: ObjectMeta) -> float:
        ax, _, az = self._agent_pos()
        x, _, z = position(obj)
        return math.hypot(x - ax, z - az)

    def _restore_horizon(self, horizon: float) -> None:
        now = float(self.metadata.get("agent", {}).get("cameraHorizon", 0.0))
        delta = round(horizon - now, 1)
        if delta > 0:
            self._do("LookDown", degrees=delta)
        elif delta < 0:
            self._do("LookUp", degrees=-delta)
