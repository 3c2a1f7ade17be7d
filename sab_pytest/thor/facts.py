"""AI2-THOR 5.0 rules that hold whatever engine runs the scene.

The embedded engine enforces them and ``goals.py`` reasons with them, so both read this one table
instead of keeping copies. Sources: ``reference/thor.md`` §1 and §3, checked against the Unity
controller's ``placeHeldObject`` and ``toggleObject`` (2023 sources): the object-specific receptacle
check and the closed-receptacle check come before, and are not skipped by, ``forceAction``.
"""

from __future__ import annotations

#: Object-specific receptacles: the only types each accepts, one object at a time.
SPECIFIC_RECEPTACLES: dict[str, frozenset[str]] = {
    "CoffeeMachine": frozenset({"Mug"}),
    "Toaster": frozenset({"BreadSliced"}),
    "StoveBurner": frozenset({"Pot", "Pan", "Kettle"}),
    "HandTowelHolder": frozenset({"HandTowel"}),
    "TowelHolder": frozenset({"Towel"}),
    "ToiletPaperHanger": frozenset({"ToiletPaper"}),
}

#: Openable receptacles that take nothing while closed (thor.md §3.1 "in" receptacles, plus Safe).
OPEN_TO_PLACE_TYPES = frozenset({"Drawer", "Cabinet", "Fridge", "Microwave", "LaundryHamper", "Box", "Safe"})

#: Screens: breaking one switches it off, and a broken object cannot be switched on again.
SCREEN_TYPES = frozenset({"Laptop", "CellPhone", "Television", "Desktop"})

#: Must be closed to switch on and off to open, so it is never on and open at once.
CLOSED_TO_TURN_ON = frozenset({"Microwave"})
