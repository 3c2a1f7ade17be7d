"""The embedded engine's actions: the table of each AI2-THOR action's handler and parameters.

The handlers live by kind (``holding``, ``state_changes``, ``motion``, on ``action_base``).
Each handler checks everything before it changes anything, so a failed action leaves the scene as
it was (THOR's rule). ``ActionFailed`` carries THOR's errorMessage and errorCode. ``SPECS`` lists
each action's parameters and their types; the controller rejects unknown names, unknown parameters
and ill-typed values with ``ValueError`` exactly where ai2thor raises it.

Choices where THOR leaves things to physics or where 5.0 was not verifiable (see also
``physics_rules`` and ``world``):

* Slice counts: Apple 6, Bread 7, Lettuce 7, Potato 7, Tomato 7 pieces (``<id>|AppleSliced_0..5`` ...);
  Egg gives one ``<id>|EggCracked_0``. Slices are spread along the source's longer horizontal side,
  inherit its receptacles, temperature and cooked state. The source stays in the metadata with
  ``isSliced`` (or, for a broken egg, ``isBroken``) true and can no longer be seen or touched.
  Slicing or breaking twice fails.
* ThrowObject: the object flies along the camera's horizontal heading ``min(2, moveMagnitude/500)``
  metres (at least 0.5) and lands on the Floor, stopping at the floor's edge.
* DropHandObject: the object falls straight down from the hand onto the highest resting surface
  below the hand (open ones only for openables), else the Floor. THOR lists as parents whatever
  receptacle volumes an object rests in, without the type checks of PutObject, so a fork dropped
  onto a toaster is in the toaster. Whether it breaks: ``physics_rules.breaks_on_drop``.
* FillObjectWithLiquid on an already filled object replaces the liquid (succeeds).
* PutObject's object-specific checks (CoffeeMachine takes one Mug...) hold even with forceAction.
* Movement succeeds when the destination disc is free (see ``geometry``); TeleportFull also checks
  the horizon limits [-30, 60].
"""

from __future__ import annotations

from sab_pytest.thor.sim.action_base import NUMBER, ActionFailed, Context, Handler, Param, obj_params
from sab_pytest.thor.sim.holding import drop, pickup, place_at_point, put, rotate_held, spawn_coordinates, throw
from sab_pytest.thor.sim.motion import _look, _mover, _noop, _rotate, _teleport, reachable
from sab_pytest.thor.sim.state_changes import (
    break_object,
    clean_object,
    close_object,
    cook,
    dirty_object,
    empty_liquid,
    fill_liquid,
    open_object,
    slice_object,
    toggle_off,
    toggle_on,
    use_up,
)

__all__ = ["QUERY_ACTIONS", "SPECS", "ActionFailed", "Context"]

_MOVE = {"moveMagnitude": Param(NUMBER), "forceAction": Param((bool,))}
_TURN = {"degrees": Param(NUMBER), "forceAction": Param((bool,))}
_POSE = {
    "x": Param(NUMBER), "y": Param(NUMBER), "z": Param(NUMBER), "position": Param((dict,)),
    "rotation": Param((dict,)), "horizon": Param(NUMBER), "standing": Param((bool,)),
    "forceAction": Param((bool,)),
}

# action name -> (handler, parameters)
SPECS: dict[str, tuple[Handler, dict[str, Param]]] = {
    "PickupObject": (pickup, obj_params(manualInteract=Param((bool,)))),
    "PutObject": (put, obj_params(placeStationary=Param((bool,)))),
    "DropHandObject": (drop, {"forceAction": Param((bool,))}),
    "ThrowObject": (throw, {"moveMagnitude": Param(NUMBER, required=True), "forceAction": Param((bool,))}),
    "OpenObject": (open_object, obj_params(openness=Param(NUMBER))),
    "CloseObject": (close_object, obj_params()),
    "ToggleObjectOn": (toggle_on, obj_params()),
    "ToggleObjectOff": (toggle_off, obj_params()),
    "SliceObject": (slice_object, obj_params()),
    "BreakObject": (break_object, obj_params()),
    "CookObject": (cook, obj_params()),
    "DirtyObject": (dirty_object, obj_params()),
    "CleanObject": (clean_object, obj_params()),
    "FillObjectWithLiquid": (fill_liquid, obj_params(fillLiquid=Param((str,), required=True))),
    "EmptyLiquidFromObject": (empty_liquid, obj_params()),
    "UseUpObject": (use_up, obj_params()),
    "RotateHeldObject": (rotate_held, {"pitch": Param(NUMBER), "yaw": Param(NUMBER), "roll": Param(NUMBER),
                                       "rotation": Param((dict,)), "forceAction": Param((bool,))}),
    "PlaceObjectAtPoint": (place_at_point, obj_params(position=Param((dict,), required=True))),
    "GetSpawnCoordinatesAboveReceptacle": (spawn_coordinates, obj_params(anywhere=Param((bool,)))),
    "GetReachablePositions": (reachable, {}),
    "TeleportFull": (_teleport, _POSE),
    "Teleport": (_teleport, _POSE),
    "MoveAhead": (_mover(0.0), _MOVE),
    "MoveBack": (_mover(180.0), _MOVE),
    "MoveLeft": (_mover(-90.0), _MOVE),
    "MoveRight": (_mover(90.0), _MOVE),
    "RotateLeft": (lambda w, c, a: _rotate(w, c, a, -1.0), _TURN),
    "RotateRight": (lambda w, c, a: _rotate(w, c, a, 1.0), _TURN),
    "LookUp": (lambda w, c, a: _look(w, c, a, -1.0), _TURN),
    "LookDown": (lambda w, c, a: _look(w, c, a, 1.0), _TURN),
    "Done": (_noop, {}),
    "Pass": (_noop, {}),
}
# Actions whose effects can change what contextual rules see (everything except pure queries).
QUERY_ACTIONS = frozenset({"GetReachablePositions", "GetSpawnCoordinatesAboveReceptacle", "Done", "Pass"})
