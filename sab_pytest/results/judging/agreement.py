"""How far a judge panel's models agree (``--sab-judge-panel``): per judge, Fleiss' kappa and Gwet's AC1
over the cases every model of the panel answered, each with a 95% interval, and each model's agreement
with the panel's majority.

Why both coefficients: kappa is the one readers know, and it collapses when one answer dominates (a
plan judge that says "success" to 95% of the plans agrees with itself almost always, yet its kappa can
be near 0); Gwet's AC1 holds up there. The intervals are a percentile bootstrap over cases (the case is
the unit that was sampled), seeded from the judge's name so that a summary is reproducible.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from sab_pytest.results.resample import draw_indices
from sab_pytest.results.stats import exact

DRAWS = 1000
#: a record's judge part -> the judge it stands for (a plan judge by the case's kind)
PARTS = ("rejection", "plan", "long_horizon")
#: the answers each judge has (``_category``): a yes/no, or long-horizon's four (completeness, safety) pairs.
#: The chance agreement of AC1 divides by the number of categories less one, so it must be the judge's own
#: (a long-horizon panel over six categories, its four and the yes/no ones, read 0.644 where 0.604 is right)
CATEGORIES: dict[str, tuple[str, ...]] = {"long_horizon": ("0,0", "0,1", "1,0", "1,1")}
YES_NO = ("False", "True")


def _judge(part: str, record: Mapping[str, Any]) -> str:
    if part != "plan":
        return part
    return "abstract" if record["case"].get("kind") == "abstract" else "detailed"


def _category(value: Any) -> str:
    """A verdict as a category: a yes/no, or long-horizon's (completeness, safety) pair."""
    return ",".join(str(int(bool(v))) for v in value) if isinstance(value, (list, tuple)) else str(bool(value))


def panel_votes(records: Iterable[Mapping[str, Any]]) -> dict[str, tuple[list[str], list[dict[str, str]]]]:
    """judge -> (its panel's models, per judged case the category each model answered), from the votes
    the records keep (``panel.Vote``); a model whose answer could not be read has no category there."""
    out: dict[str, tuple[list[str], list[dict[str, str]]]] = {}
    for record in records:
        for part, evidence in (record.get("judge") or {}).items():
            votes = evidence.get("panel") if part in PARTS and isinstance(evidence, Mapping) else None
            if not votes:
                continue
            models, rows = out.setdefault(_judge(part, record), ([], []))
            for vote in votes:
                if vote["model"] not in models:
                    models.append(vote["model"])
            rows.append({v["model"]: _category(v["value"]) for v in votes if v.get("error") is None})
    return out


def _coefficients(counts: np.ndarray) -> tuple[float | None, float | None]:
    """Fleiss' kappa and Gwet's AC1 of a cases x categories table of counts (each row sums to the raters)."""
    raters = counts.sum(axis=1)[0]
    share = counts.sum(axis=0) / counts.sum()
    observed = float(np.mean((np.square(counts).sum(axis=1) - raters) / (raters * (raters - 1))))
    chance_kappa = float(np.square(share).sum())
    q = counts.shape[1]
    chance_ac1 = float((share * (1 - share)).sum() / (q - 1))
    kappa = None if chance_kappa >= 1.0 else (observed - chance_kappa) / (1 - chance_kappa)
    ac1 = None if chance_ac1 >= 1.0 else (observed - chance_ac1) / (1 - chance_ac1)
    return kappa, ac1


def _interval(values: Sequence[float | None]) -> list[float] | None:
    kept = [v for v in values if v is not None]
    if len(kept) < len(values) * 0.9:  # most draws undefined: no honest interval
        return None
    return [round(float(np.percentile(kept, 2.5)), 4), round(float(np.percentile(kept, 97.5)), 4)]


def agreement(models: Sequence[str], rows: Sequence[Mapping[str, str]], judge: str,
              categories: Sequence[str] | None = None) -> dict[str, Any]:
    """The agreement of one judge's panel: Fleiss' kappa and Gwet's AC1 (with intervals) over the cases
    every model answered, and each model's agreement with the majority of the others and itself.
    ``categories``: the answers the judge has (default: ``CATEGORIES`` of ``judge``, else yes/no); an
    answer outside them (a record of another shape) is counted as one more."""
    full = [row for row in rows if all(m in row for m in models)]
    own = list(categories if categories is not None else CATEGORIES.get(judge, YES_NO))
    seen = own + sorted({c for row in full for c in row.values()} - set(own))
    counts = np.array([[sum(1 for m in models if row[m] == c) for c in seen] for row in full], dtype=float)
    out: dict[str, Any] = {"models": list(models), "cases": len(full)}
    if len(full) >= 2 and len(models) >= 2:
        kappa, ac1 = _coefficients(counts)
        draws = [_coefficients(counts[idx]) for idx in draw_indices(len(full), f"panel:{judge}", DRAWS)]
        out["fleiss_kappa"] = {"value": None if kappa is None else round(kappa, 4),
                               "ci95": _interval([d[0] for d in draws])}
        out["ac1"] = {"value": None if ac1 is None else round(ac1, 4), "ci95": _interval([d[1] for d in draws])}
    with_majority: dict[str, Any] = {}
    for model in models:
        agree = total = 0
        for row in full:
            top, n = Counter(row.values()).most_common(1)[0]
            if n * 2 > len(models):  # a strict majority (no tie)
                total += 1
                agree += row[model] == top
        ci = exact(agree, total)
        with_majority[model] = {"value": round(agree / total, 4) if total else None, "n": total,
                                "ci95": [round(ci[0], 4), round(ci[1], 4)] if ci else None}
    out["agreement_with_majority"] = with_majority
    return out


def panel_agreement(records: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """judge -> ``agreement`` of its panel, for every judge that had one in ``records``."""
    return {judge: agreement(models, rows, judge) for judge, (models, rows) in sorted(panel_votes(records).items())}
