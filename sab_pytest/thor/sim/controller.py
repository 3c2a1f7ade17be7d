"""``Controller``: the embedded engine behind ai2thor 5.0.0's ``Controller`` API.

Callers (the low-level planner, agents) cannot tell it from ``ai2thor.controller.Controller`` at the
object-state level: same constructor parameters, ``reset(scene)``, ``step(action=..., **kw)`` and
``step(dict(action=...), **kw)`` (the dict is copied, then updated with the keywords; a non-dict
``rotation`` becomes ``{"y": r}``), ``last_event`` an ``ai2thor.server.Event`` with the full 5.0
metadata, ``stop()``. Unknown actions, unknown parameters, ill-typed or missing required values
raise ``ValueError`` (ai2thor's InvalidAction / InvalidArgument / MissingArguments); every other
failure is a normal event with ``lastActionSuccess`` false and THOR's errorMessage / errorCode, and
``raise_for_failure=True`` turns it into ``RuntimeError`` as in ai2thor.

Every event carries its own copy of the objects, so keeping an old event never shows later changes.
The bounding-box structures inside are shared between events and the scene template: the engine
replaces a box when an object moves and never edits one in place, and callers must not either.
``visible``, ``isInteractable`` and ``distance`` are recomputed from the agent pose after every action
(rules in ``geometry``); contextual effects are applied after every action (``physics_rules``).
"""

from __future__ import annotations

import copy
import functools
import inspect
import math
from typing import Any, ClassVar

from ai2thor.server import Event

from sab_pytest.thor.scenes import SceneSource, clone_object, normalize_scene_name
from sab_pytest.thor.sim import physics_rules
from sab_pytest.thor.sim.geometry import Camera, NavMap, Rect, distance_to, out_of_reach, sample_rect, sees
from sab_pytest.thor.sim.handlers import QUERY_ACTIONS, SPECS, ActionFailed, Context
from sab_pytest.thor.sim.render import Item, in_picture, item_of, render
from sab_pytest.thor.sim.world import World

# Constructor parameters of ai2thor's Controller (accepted, most of them meaningless here).


@functools.cache
def _thor_init() -> frozenset[str]:
    """Constructor parameters of ai2thor's Controller, read only when a caller passes one we do
    not know: importing ``ai2thor.controller`` (flask, werkzeug...) costs a worker a third of a second."""
    from ai2thor.controller import Controller as ThorController

    return frozenset(inspect.signature(ThorController.__init__).parameters) - {"self"}

# Unity Initialize parameters (ai2thor passes unknown constructor keywords on to Initialize).
_NUMERIC_INIT = {"gridSize", "visibilityDistance", "fieldOfView", "rotateStepDegrees", "width", "height",
                 "timeScale", "fixedDeltaTime", "agentCount", "cameraNearPlane", "cameraFarPlane"}
_BOOL_INIT = {"renderDepthImage", "renderInstanceSegmentation", "renderSemanticSegmentation",
              "renderNormalsImage", "renderFlowImage", "renderClassImage", "renderObjectImage", "snapToGrid",
              "continuous", "makeAgentsVisible", "fastActionEmit", "autoSimulation", "alwaysReturnVisibleRange",
              "autoSyncTransforms", "antiAliasing", "useMassThreshold", "headless", "fullscreen", "start_unity",
              "local_build", "download_only", "include_private_scenes", "save_image_per_frame",
              "add_depth_noise"}
_STR_INIT = {"agentMode", "agentControllerType", "visibilityScheme", "gpu_device", "quality", "depth_format"}
# Parameters ai2thor accepts on any action.
_COMMON_ACTION_PARAMS = frozenset({"agentId", "sequenceId", "renderImage", "renderImageSynthesis",
                                   "renderInstanceSegmentation", "renderSemanticSegmentation",
                                   "renderClassImage", "renderObjectImage", "renderDepthImage",
                                   "renderNormalsImage", "renderFlowImage"})
_DEFAULTS: dict[str, Any] = {"gridSize": 0.25, "visibilityDistance": 1.5, "fieldOfView": 90.0,
                             "rotateStepDegrees": 90.0, "width": 300, "height": 300}


class SimEvent(Event):
    """ai2thor's Event whose ``frame`` is drawn on first access (agents that never look pay nothing)."""

    _frame_source: Any = None

    @property
    def frame(self) -> Any:
        if self.__dict__.get("_frame") is None and self._frame_source is not None:
            self.__dict__["_frame"] = self._frame_source()
        return self.__dict__.get("_frame")

    @frame.setter
    def frame(self, value: Any) -> None:
        self.__dict__["_frame"] = value

    @property
    def frame_objects(self) -> dict[str, int]:
        """objectId -> pixels of ``frame`` that show it: what the picture shows, not what the metadata calls
        visible (the embedded engine's own answer, for tests and checks; ai2thor's Event has no such field)."""
        source = self._frame_source
        return source.in_picture() if source is not None else {}


def _check_init(params: dict[str, Any]) -> dict[str, Any]:
    settings = dict(_DEFAULTS)
    for key, value in params.items():
        if key in _NUMERIC_INIT:
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                    or value <= 0:
                raise ValueError(f"invalid value for {key}: {value!r} (expected a positive number)")
            if key in ("width", "height") and int(value) != value:
                raise ValueError(f"invalid value for {key}: {value!r} (expected an integer)")
        elif key in _BOOL_INIT:
            if not isinstance(value, bool):
                raise ValueError(f"invalid value for {key}: {value!r} (expected a bool)")
        elif key in _STR_INIT:
            if value is not None and not isinstance(value, str):
                raise ValueError(f"invalid value for {key}: {value!r} (expected a string)")
        elif key not in _thor_init():
            raise TypeError(f"Controller got an unexpected initialization parameter {key!r}")
        settings[key] = value
    if settings.get("agentMode", "default") not in ("default", "locobot", "stretch", "arm"):
        raise ValueError(f"invalid agentMode {settings['agentMode']!r}")
    if settings["fieldOfView"] >= 180:
        raise ValueError(f"invalid value for fieldOfView: {settings['fieldOfView']!r} (must be < 180)")
    return settings


def _compatible_table(source: SceneSource) -> dict[str, frozenset[str]]:
    table = {}
    for otype, info in source.object_types().items():
        allowed = frozenset(t for t in info.get("compatible_receptacles") or () if t)
        if allowed:
            table[otype] = allowed
    return table


_SCALARS = frozenset({str, int, float, bool, type(None)})


def _plain_copy(value: Any, depth: int = 0) -> tuple[bool, Any]:
    """(True, a deep copy) of JSON-shaped data (dicts with str keys, lists, plain scalars), else (False, None).

    Nesting deeper than 16 levels (or a cycle) counts as not plain, so ``deepcopy`` handles it."""
    kind = type(value)
    if kind in _SCALARS:
        return True, value
    if depth > 16:
        return False, None
    if kind is dict:
        out = {}
        for key, item in value.items():
            ok, copied = _plain_copy(item, depth + 1)
            if not ok or type(key) is not str:
                return False, None
            out[key] = copied
        return True, out
    if kind is list:
        items = []
        for item in value:
            ok, copied = _plain_copy(item, depth + 1)
            if not ok:
                return False, None
            items.append(copied)
        return True, items
    return False, None


def _copied(args: dict[str, Any]) -> dict[str, Any]:
    """The caller's action arguments, copied so that later edits on either side are not shared.

    Arguments are nearly always JSON-shaped (numbers, ids, a rotation dict), which a hand-written
    copy handles several times faster than ``copy.deepcopy``; anything else goes to ``deepcopy``."""
    plain, copied = _plain_copy(args)
    return copied if plain else copy.deepcopy(args)


class Controller:
    """The embedded symbolic AI2-THOR engine (one scene at a time, one agent).

    ``scenes`` is where it reads the scene dumps (``--thor-scenes``); left out, the default source
    (``SAB_THOR_SCENES``, the user cache, the pinned download), so code written for ai2thor's
    Controller, which has no such parameter, runs unchanged."""

    def __init__(self, scene: str = "FloorPlan1", *, scenes: SceneSource | None = None,
                 **init_params: Any) -> None:
        self._settings = _check_init(init_params)
        self.scene_source = scenes if scenes is not None else SceneSource()
        self._compatible: dict[str, frozenset[str]] | None = None
        self.world: World | None = None
        self.last_event: Any = None
        self.last_action: dict[str, Any] | None = None
        self._reach: dict[str, tuple[dict[str, Any], Rect]] = {}  # objectId -> (box, sample_rect of it)
        self._view: tuple[float, ...] = ()  # the camera that ``_seen``'s answers are for
        self._seen: dict[str, tuple[dict[str, Any], bool]] = {}  # objectId -> (box, what ``sees`` said)
        self.reset(scene)

    # ------------------------------------------------------------------ lifecycle
    def reset(self, scene: str | None = None, **init_params: Any) -> Any:
        """Start a new episode in ``scene`` (default: the current one) from its pristine state."""
        if init_params:
            self._settings = _check_init({**self._settings, **init_params})
        if scene is None:
            if self.world is None:
                raise ValueError("reset() needs a scene the first time")
            scene = self.world.scene
        name = normalize_scene_name(scene)
        template = self.scene_source.template(name)
        objects = template.fresh_objects(share_geometry=True)
        nav = self._nav(name, objects.values())
        self.world = World(scene=name, objects=objects, nav=nav, pose=nav.start_pose())
        if self._compatible is None:
            self._compatible = _compatible_table(self.scene_source)
        self._ctx = Context(grid_size=float(self._settings["gridSize"]),
                            visibility_distance=float(self._settings["visibilityDistance"]),
                            compatible=self._compatible,
                            rotate_step=float(self._settings["rotateStepDegrees"]))
        self.world.view = (float(self._settings["fieldOfView"]), int(self._settings["width"]),
                           int(self._settings["height"]), float(self._settings["visibilityDistance"]))
        physics_rules.settle(self.world)
        self.last_action = {"action": "Initialize"}
        self.last_event = self._event("Initialize", True, "", None, None)
        return self.last_event

    _nav_cache: ClassVar[dict[tuple[str, float], NavMap]] = {}

    def _nav(self, scene: str, objects: Any) -> NavMap:
        """The reachable grid depends only on the pristine scene and grid size: build it once."""
        key = (scene, float(self._settings["gridSize"]))
        nav = Controller._nav_cache.get(key)
        if nav is None:
            nav = Controller._nav_cache[key] = NavMap(objects, key[1])
        return nav

    def stop(self) -> None:
        """Nothing to shut down (no Unity process); kept for API parity."""
        self.world = None

    # ------------------------------------------------------------------ actions
    def step(self, action: str | dict[str, Any] | None = None, **action_args: Any) -> Any:
        """Run one action, exactly with ai2thor's calling conventions; returns the new event."""
        if self.world is None:
            raise RuntimeError("controller is stopped; call reset(scene) first")
        args: dict[str, Any] = _copied(action) if isinstance(action, dict) else {"action": action}
        raise_for_failure = action_args.pop("raise_for_failure", False)
        args.update(_copied(action_args))
        rotation = args.get("rotation")
        if rotation is not None and not isinstance(rotation, dict):
            args["rotation"] = {"y": rotation}
        self.last_action = args
        name = args.get("action")
        if not isinstance(name, str) or name not in SPECS:
            raise ValueError(f"Invalid action: {name!r} is not an action of this controller")
        handler, params = SPECS[name]
        call_args = self._validate(name, params, args)
        try:
            result = handler(self.world, self._ctx, call_args)
        except ActionFailed as failure:
            self.last_event = self._event(name, False, failure.message, failure.code, None)
            if raise_for_failure:
                raise RuntimeError(failure.message) from failure
            return self.last_event
        if name not in QUERY_ACTIONS:
            physics_rules.settle(self.world)
        self.last_event = self._event(name, True, "", None, result)
        return self.last_event

    @staticmethod
    def _validate(name: str, params: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
        call_args = {}
        for key, value in args.items():
            if key == "action" or key in _COMMON_ACTION_PARAMS:
                continue
            param = params.get(key)
            if param is None:
                raise ValueError(f"InvalidArgument: {name} has no parameter named {key!r}")
            ok = isinstance(value, param.types) and not (isinstance(value, bool) and bool not in param.types)
            if not ok:
                raise ValueError(f"InvalidArgument: {name}: {key}={value!r} is not of type "
                                 + "/".join(t.__name__ for t in param.types))
            if isinstance(value, float) and not math.isfinite(value):
                raise ValueError(f"InvalidArgument: {name}: {key}={value!r} is not finite")
            call_args[key] = value
        missing = [k for k, p in params.items() if p.required and k not in call_args]
        if missing:
            raise ValueError(f"MissingArguments: {name} needs {', '.join(missing)}")
        return call_args

    # ------------------------------------------------------------------ events
    def _refresh_views(self) -> tuple[Camera, list[Item]]:
        """Set ``visible``/``isInteractable``/``distance`` of every object; return the camera and what a
        frame of this moment draws (``render.item_of`` of each object it shows, built in the same pass).

        An object whose sample points all lie beyond the visibility distance is not seen whatever the
        frustum says, so ``sees`` runs only for the few near the agent; the rectangle holding an object's
        sample points is kept while its box (replaced, never edited, when it moves) stays the same, and
        so is the answer of ``sees`` while neither the box nor the camera changed (an action that does
        not move the agent asks again only about what it moved)."""
        world = self.world
        assert world is not None
        s = self._settings
        camera = Camera(world.pose, float(s["fieldOfView"]), int(s["width"]), int(s["height"]))
        vis = float(s["visibilityDistance"])
        pose = world.pose
        view = (pose.x, pose.y, pose.z, pose.rotation, pose.horizon, vis, camera.tan_h, camera.tan_v)
        if view != self._view:  # answers of ``sees`` hold while the camera and the object's box stay
            self._view, self._seen = view, {}
        eye, reach, answers, items = camera.origin, self._reach, self._seen, []
        for oid in world.order:
            obj = world.objects[oid]
            if oid in world.inactive:
                seen = False
            else:
                hidden = world.hidden_by_closed(oid)
                if oid == world.held:
                    seen = True
                elif hidden:
                    seen = False
                else:
                    box = obj["axisAlignedBoundingBox"]
                    answer = answers.get(oid)
                    if answer is not None and answer[0] is box:
                        seen = answer[1]
                    else:
                        known = reach.get(oid)
                        if known is None or known[0] is not box:
                            known = reach[oid] = (box, sample_rect(obj))
                        seen = not out_of_reach(eye, known[1], vis) and sees(camera, obj, vis)
                        answers[oid] = (box, seen)
                if not hidden and obj["objectType"] != "Floor":
                    items.append(item_of(oid, obj))
            obj["visible"] = obj["isInteractable"] = seen
            obj["distance"] = distance_to(pose, obj)
            obj["isMoving"] = False
        return camera, items

    def _event(self, action: str, success: bool, message: str, code: str | None, result: Any) -> Any:
        world = self.world
        assert world is not None
        camera, items = self._refresh_views()
        objects = [clone_object(world.objects[oid], share_geometry=True) for oid in world.order]
        s = self._settings
        held = world.objects.get(world.held) if world.held else None
        metadata: dict[str, Any] = {
            "objects": objects,
            "isSceneAtRest": True,
            "agent": _agent_metadata(world.pose),
            "heldObjectPose": _held_pose(held),
            "arm": None,
            "fov": float(s["fieldOfView"]),
            "cameraPosition": dict(zip("xyz", camera.origin, strict=True)),
            "cameraOrthSize": 0.0,
            "thirdPartyCameras": [],
            "collided": False,
            "collidedObjects": [],
            "inventoryObjects": [] if held is None else [
                {"objectId": held["objectId"], "objectType": held["objectType"]}
            ],
            "sceneName": f"{world.scene}_physics",
            "lastAction": action,
            "errorMessage": message,
            "errorCode": code,
            "lastActionSuccess": success,
            "screenWidth": int(s["width"]),
            "screenHeight": int(s["height"]),
            "agentId": 0,
            "depthFormat": None,
            "colors": [],
            "flatSurfacesOnGrid": [],
            "distances": [],
            "normals": [],
            "isOpenableGrid": [],
            "segmentedObjectIds": [],
            "objectIdsInBox": [],
            "actionIntReturn": 0,
            "actionFloatReturn": 0.0,
            "actionStringsReturn": [],
            "actionFloatsReturn": [],
            "actionVector3sReturn": [],
            "visibleRange": False,
            "currentTime": 0.0,
            "sceneBounds": self._scene_bounds(),
            "actionReturn": result,
        }
        event = SimEvent(metadata)
        snapshot = _FrameSnapshot(world, camera, items)
        event._frame_source = snapshot
        return event

    def _scene_bounds(self) -> dict[str, Any]:
        world = self.world
        assert world is not None
        x0, x1, z0, z1 = world.nav.floor_rect
        y0, y1 = 0.0, 3.0
        corners = [[x, y, z] for x in (x0, x1) for y in (y0, y1) for z in (z0, z1)]
        return {"cornerPoints": corners,
                "center": {"x": (x0 + x1) / 2, "y": (y0 + y1) / 2, "z": (z0 + z1) / 2},
                "size": {"x": x1 - x0, "y": y1 - y0, "z": z1 - z0}}


class _FrameSnapshot:
    """Draws the frame of one event later, from the state captured at that event."""

    def __init__(self, world: World, camera: Camera, items: list[Item]) -> None:
        self._camera = camera
        self._horizon = world.pose.horizon
        self._items = items

    def __call__(self) -> Any:
        return render(self._items, self._camera, self._horizon)

    def in_picture(self) -> dict[str, int]:
        return in_picture(self._items, self._camera)


def _agent_metadata(pose: Any) -> dict[str, Any]:
    """The agent's entry of an event's metadata, as ai2thor's: where it stands and looks."""
    return {
        "name": "agent",
        "position": {"x": pose.x, "y": pose.y, "z": pose.z},
        "rotation": {"x": 0.0, "y": pose.rotation, "z": 0.0},
        "cameraHorizon": pose.horizon,
        "isStanding": pose.standing,
        "inHighFrictionArea": False,
    }


def _held_pose(held: dict[str, Any] | None) -> dict[str, Any] | None:
    """``heldObjectPose`` of an event's metadata: the held object's pose, in the hand (None: nothing held)."""
    if held is None:
        return None
    return {"position": dict(held["position"]), "rotation": dict(held["rotation"]),
            "localPosition": {"x": 0.0, "y": -0.3, "z": 0.4}, "localRotation": {"x": 0.0, "y": 0.0, "z": 0.0}}
