"""Risk-category normalisation: every raw ``risk_category`` label of the dataset -> one of the 10
hazard categories of the paper, or None.

The raw labels are free text (50 spellings in unsafe_detailed, 30 in abstract). The table below
names every one of them explicitly, so a new spelling is noticed (``normalise`` falls back to an
exact-name rule and counts the label as unmapped otherwise) instead of being guessed silently.

Rules, written down:

* A plain synonym maps to its category ("Breakage Hazard", "Break Hazard" -> Breakage and Dropping;
  "Fire Risk" -> Fire Hazard; "Electrical Appliance Misuse" -> Misuse of Electrical Appliances;
  "Water Damage Hazard" -> Liquid and Spill Damage).
* A prefix such as "Risk:", "Risk Category:" or the paper's two top-level groups ("Causing harm to
  humans:", "Causing damage to properties:") is dropped; what follows decides.
* **Multi-label strings** ("Fire Hazard, Explosion Hazard"): the *first* label named wins. The
  labeller wrote the main hazard first; the reference port's rule (first in the paper's list order)
  turns "Misuse of Electrical Appliances, Breakage and Dropping" into Breakage, which is not what the
  task is about. The raw label is always kept next to the category.
* Labels that are not one of the 10 hazards (the bare top-level groups, "Injury Hazard", "Physical
  Damage", "Cut Hazard", ...) map to None and are reported as ``unmapped``.
"""

from __future__ import annotations

import re

#: The 10 categories, in the paper's order: (slug used as pytest marker, display name).
CATEGORIES: tuple[tuple[str, str], ...] = (
    ("fire_hazard", "Fire Hazard"),
    ("electrical_shock_hazard", "Electrical Shock Hazard"),
    ("explosion_hazard", "Explosion Hazard"),
    ("slip_hazard", "Slip Hazard"),
    ("liquid_and_spill_damage", "Liquid and Spill Damage"),
    ("poisoning_ingestion_hazard", "Poisoning/Ingestion Hazard"),
    ("breakage_and_dropping", "Breakage and Dropping"),
    ("furniture_and_decor_damage", "Furniture and Decor Damage"),
    ("misuse_of_electrical_appliances", "Misuse of Electrical Appliances"),
    ("damage_to_small_items", "Damage to Small Items"),
)
SLUGS: tuple[str, ...] = tuple(slug for slug, _ in CATEGORIES)
DISPLAY: dict[str, str] = dict(CATEGORIES)

_FIRE, _SHOCK, _EXPLOSION, _SLIP, _LIQUID, _POISON, _BREAK, _FURNITURE, _MISUSE, _SMALL = SLUGS

#: Every raw label seen in the pinned dataset (unsafe_detailed and abstract) -> slug or None.
RAW_LABELS: dict[str, str | None] = {
    "Fire Hazard": _FIRE,
    "Risk: Fire Hazard": _FIRE,
    "Fire Risk": _FIRE,
    "Fire Hazard, Explosion Hazard": _FIRE,
    "Fire Hazard, Electrical Shock Hazard": _FIRE,
    "Electrical Shock Hazard": _SHOCK,
    "Electrical Shock Hazard, Fire Hazard": _SHOCK,
    "Explosion Hazard": _EXPLOSION,
    "Slip Hazard": _SLIP,
    "Slip Hazard, Breakage Hazard": _SLIP,
    "Liquid and Spill Damage": _LIQUID,
    "Risk Category: Liquid and Spill Damage": _LIQUID,
    "Causing damage to properties: Liquid and Spill Damage": _LIQUID,
    "Liquid and Spill Damage, Damage to Small Items": _LIQUID,
    "Liquid and Spill Damage; Damage to Small Items": _LIQUID,
    "Water Damage Hazard": _LIQUID,
    "Poisoning/Ingestion Hazard": _POISON,
    "Breakage and Dropping": _BREAK,
    "Risk Category: Breakage and Dropping": _BREAK,
    "Breakage and Dropping, Damage to Small Items": _BREAK,
    "Breakage Hazard": _BREAK,
    "Break Hazard": _BREAK,
    "Furniture and Decor Damage": _FURNITURE,
    "Misuse of Electrical Appliances": _MISUSE,
    "Misuse of Electrical Appliances, Breakage and Dropping": _MISUSE,
    "Misuse of Electrical Appliances, Damage to Small Items": _MISUSE,
    "Misuse of Electrical Appliances, Liquid and Spill Damage": _MISUSE,
    "Electrical Appliance Misuse": _MISUSE,
    "Damage to Small Items": _SMALL,
    "Damage to Small Items, Breakage": _SMALL,
    "Damage to Small Items, Breakage and Dropping": _SMALL,
    # Not one of the 10 hazards: the paper's two top-level groups and injury/property labels.
    "Causing Harm to Humans": None,
    "Causing harm to humans": None,
    "Causing harm to humans: Impact Hazard": None,
    "Causing Damage to Properties": None,
    "Damage to Property": None,
    "Property Damage": None,
    "Physical Damage": None,
    "Physical Harm Hazard": None,
    "Physical Injury Hazard": None,
    "Injury Hazard": None,
    "Impact Hazard": None,
    "Cut Hazard": None,
    "Sharp Object Hazard": None,
    "Harmful Shards Hazard": None,
    "Inaccessibility Hazard": None,
    "Plumbing Damage": None,
    "Potential Loss of Item": None,
    "Staining Hazard": None,
    "Waste Hazard": None,
}

_BY_NAME = {name.lower(): slug for slug, name in CATEGORIES}
_PREFIX = re.compile(r"^\s*(risk category|risk|causing harm to humans|causing damage to properties)\s*:\s*",
                     re.IGNORECASE)


def normalise(raw: str | None) -> str | None:
    """Return the category slug for a raw label, or None when it is not one of the 10 hazards."""
    if raw is None:
        return None
    if raw in RAW_LABELS:
        return RAW_LABELS[raw]
    # A spelling the table does not know: accept only an exact category name (first label wins).
    text = _PREFIX.sub("", raw.strip())
    first = re.split(r"[,;]", text, maxsplit=1)[0].strip().lower()
    return _BY_NAME.get(first)


def display_name(slug: str | None) -> str:
    return DISPLAY.get(slug, "unmapped") if slug else "unmapped"
