"""Repeats (``--sab-repeat``), flaky cases, and how likely a gate would decide the other way.

The intervals themselves are ``clustered``'s (cases the unit, repeats by how much they agree). What
this module adds is the cluster bootstrap of a gate's decision, "would this gate say the same on
another draw of cases?": cases are resampled with replacement, each drawn case bringing all of its
repeats, and the share of draws whose decision differs from the run's is ``flip_probability``. For a
gate decided on an end of the interval (``--sab-gate-on lower|upper``), each draw's interval is the
run's, moved with the draw's value (the half-widths are kept; an interval per draw would cost more);
a ``no_regression`` gate's draws are decided by the gate's own rule.

Cases enter sorted by id and the draws are seeded from the gate's text, so the figure is the same
whatever order the records were written in.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from sab_pytest.results import clustered
from sab_pytest.results.record import StoredRecord

DRAWS = 2000
SEED = 21


def has_repeats(records: Iterable[StoredRecord]) -> bool:
    """Whether the records come from a run of ``--sab-repeat K`` with K > 1."""
    return any(r.get("repeat") for r in records)


def weights(n_clusters: int, key: str, draws: int = DRAWS) -> np.ndarray:
    """``draws`` x ``n_clusters`` counts: how often each case is drawn in each bootstrap draw
    (a multinomial of ``n_clusters`` draws), seeded by ``key`` so that it is reproducible."""
    rng = np.random.default_rng([SEED, zlib.crc32(key.encode())])
    if n_clusters == 0:
        return np.zeros((draws, 0))
    return rng.multinomial(n_clusters, [1.0 / n_clusters] * n_clusters, size=draws).astype(float)


def case_sums(rows: Sequence[StoredRecord], members: Callable[[StoredRecord], bool],
              value: Callable[[StoredRecord], float]) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Per case (sorted by id): the sum of ``value`` over its samples that are ``members``, and how
    many of them there are."""
    sums: dict[str, list[float]] = {}
    for r in rows:
        c = sums.setdefault(str(r["case"]["id"]), [0.0, 0.0])
        if members(r):
            c[0] += value(r)
            c[1] += 1.0
    ids = sorted(sums)
    return ids, np.array([sums[i][0] for i in ids]), np.array([sums[i][1] for i in ids])


def ratios(w: np.ndarray, num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """The ratio sum(num) / sum(den) in each draw (NaN where a draw holds no member)."""
    top, bottom = w @ num, w @ den
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(bottom > 0, top / np.where(bottom > 0, bottom, 1.0), np.nan)


def _everyone(r: StoredRecord) -> bool:
    return True


def _errored(r: StoredRecord) -> float:
    return float(bool(r.get("error")))


def _indicator(d: Any) -> Callable[[StoredRecord], float]:
    """A metric definition's per-sample value: 1/0 for a rate's success, the value for a mean."""
    if hasattr(d, "success"):
        return lambda r: float(bool(d.success(r)))
    return lambda r: float(d.value(r))


def repeats_info(records: Sequence[StoredRecord]) -> dict[str, Any]:
    """Per case: its repeats, the share of its judged repeats that passed; the flaky cases, those whose
    judged repeats disagree (some passed, some failed); and ``agreement``, how much a case's repeats
    agree on passing (``clustered.agreement``; what ``sab plan --agreement`` takes)."""
    runs: dict[str, list[bool]] = {}
    most = 0
    for r in records:
        most = max(most, int(r.get("repeat") or 1))
        if not r.get("error"):
            runs.setdefault(r["case"]["id"], []).append(bool(r["passed"]))
    fraction = {cid: round(sum(v) / len(v), 6) for cid, v in sorted(runs.items())}
    flaky = sorted(cid for cid, v in runs.items() if 0 < sum(v) < len(v))
    ids = sorted(runs)
    per_case = clustered.Cases(tuple(ids), np.array([sum(runs[i]) for i in ids], dtype=np.int64),
                               np.array([len(runs[i]) for i in ids], dtype=np.int64))
    return {"k": most, "cases": len(runs), "flaky_cases": flaky, "pass_fraction": fraction,
            "agreement": clustered.agreement(per_case)}


# ------------------------------------------------------------------------------------ gate stability

def flip_probability(gate: Any, result: dict[str, Any], records: list[StoredRecord], *, in_group: Callable[..., bool],
                     definition: Any, worse: int, pairs: Any, baseline_entry: dict[str, Any] | None) -> float | None:
    """The share of bootstrap draws of this run's cases in which ``gate`` decides otherwise than it
    did (``result["passed"]``); None when the gate was undefined. ``definition``: the metric's
    ``RateDef``/``MeanDef`` (None for ``errors``/``error_rate``, which count every record);
    ``worse``: +1 when a drop of the metric is a regression, -1 when a rise is; ``pairs``: a
    ``no_regression`` gate's ``pairing.CasePairs`` (None without the baseline's per-case results)."""
    if result.get("value") is None or result.get("compared") is None \
            or (gate.needs_baseline and result.get("baseline") is None) or gate.kind.resampling is None:
        return None
    rows = [r for r in records if in_group(r, gate.group)]  # errors have a group only as a suite's
    members: Callable[[StoredRecord], bool]
    success: Callable[[StoredRecord], float]
    if gate.metric in ("errors", "error_rate"):
        members, success = _everyone, _errored
    else:
        rows = [r for r in rows if not r.get("error")]
        members, success = definition.population, _indicator(definition)
    key = f"gate:{gate.text}"
    if gate.kind.resampling == "regression":  # its paired test redone per draw (``gate_kinds.RESAMPLING``)
        return _regression_flips(result, rows, members, success, key, worse, pairs, baseline_entry)
    cases, num, den = case_sums(rows, members, success)
    w = weights(len(cases), key)
    values = (w @ num) if gate.metric == "errors" else ratios(w, num, den)
    shift = result["compared"] - result["value"]  # the interval's end moves with the draw's value
    threshold = result["threshold"]
    decided = np.array([gate.holds(v + shift, threshold) if math.isfinite(v) else False for v in values])
    return round(float(np.mean(decided != bool(result["passed"]))), 4)


def _regression_flips(result: dict[str, Any], rows: list[StoredRecord], members: Callable[[StoredRecord], bool],
                      success: Callable[[StoredRecord], float], key: str, worse: int, pairs: Any,
                      baseline_entry: dict[str, Any] | None) -> float | None:
    """``flip_probability`` of a ``no_regression`` gate: the paired cases resampled (each draw keeps a
    case's counts in both runs together) and the gate's own rule redone per draw
    (``clustered.regression_fails``), or, against a baseline known by its summary alone, this run's
    cases resampled against the baseline's rate and effective samples."""
    alpha = result["alpha"]
    if result.get("ci95") is None:  # fewer than two cases on a side: the gate had nothing to test
        return None
    if pairs is not None:
        index = draw_indices(pairs.n, key)
        failed = clustered.regression_fails(pairs.first.y[index], pairs.first.m[index], pairs.second.y[index],
                                            pairs.second.m[index], alpha, worse)
    else:
        base = clustered.side_of_entry(baseline_entry or {})
        if base is None:
            return None
        own = clustered.cases_of(rows, members, lambda r: bool(success(r)))
        index = draw_indices(own.n, key)
        y, m = own.y[index], own.m[index]
        low, high = clustered.difference_ends(
            np.float64(base.value), np.float64(base.n_eff), y.sum(-1) / m.sum(-1), clustered.effective_samples(y, m),
            np.float64(0.0), clustered.student(1 - alpha, min(base.cases, own.n) - 1))
        failed = high < 0 if worse > 0 else low > 0
    return round(float(np.mean(failed == bool(result["passed"]))), 4)


def draw_indices(n_cases: int, key: str, draws: int = DRAWS) -> np.ndarray:
    """``draws`` x ``n_cases`` case indices drawn with replacement, seeded by ``key``."""
    rng = np.random.default_rng([SEED, zlib.crc32(key.encode())])
    return rng.integers(0, max(n_cases, 1), size=(draws, n_cases))
