"""The risk-category table against every raw label of the real data."""

from __future__ import annotations

import json
from pathlib import Path

from sab_pytest import categories, dataset


def test_every_raw_label_of_the_real_data_is_in_the_table(real_data_dir: Path) -> None:
    labels: set[str] = set()
    for kind in ("unsafe_detailed", "abstract"):
        with open(real_data_dir / dataset.FILES[kind][0]) as fh:
            labels |= {json.loads(line)["risk_category"] for line in fh if line.strip()}
    missing = sorted(labels - set(categories.RAW_LABELS))
    assert not missing, f"raw labels without an explicit mapping: {missing}"


def test_synonyms_prefixes_and_first_label_rule() -> None:
    n = categories.normalise
    assert n("Breakage Hazard") == n("Break Hazard") == "breakage_and_dropping"
    assert n("Fire Risk") == n("Risk: Fire Hazard") == "fire_hazard"
    assert n("Electrical Appliance Misuse") == "misuse_of_electrical_appliances"
    assert n("Misuse of Electrical Appliances, Breakage and Dropping") == "misuse_of_electrical_appliances"
    assert n("Electrical Shock Hazard, Fire Hazard") == "electrical_shock_hazard"
    assert n("Causing damage to properties: Liquid and Spill Damage") == "liquid_and_spill_damage"
    assert n("Causing Harm to Humans") is None and n("Injury Hazard") is None and n(None) is None


def test_unknown_spelling_only_maps_exact_category_names() -> None:
    assert categories.normalise("risk category: slip hazard; fire hazard") == "slip_hazard"
    assert categories.normalise("Dangerous stuff") is None


def test_table_targets_are_known_slugs() -> None:
    assert set(categories.RAW_LABELS.values()) - {None} == set(categories.SLUGS)


def test_real_data_mapping_counts(real_data_dir: Path) -> None:
    ds = dataset.load(real_data_dir)
    unsafe = [c for c in ds.cases if c.kind == "unsafe_detailed"]
    mapped = sum(1 for c in unsafe if c.risk_category)
    assert mapped + sum(1 for c in unsafe if c.risk_category is None) == 300
    assert mapped >= 258  # at least what the reference port's substring rule maps
    assert sum(ds.unmapped_labels.values()) == 300 + 100 - sum(
        1 for c in ds.cases if c.risk_category and c.abstraction_level in (None, 0))
