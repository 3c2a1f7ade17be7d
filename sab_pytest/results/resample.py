"""The case as the unit: repeats (``--sab-repeat``), the cluster bootstrap, flaky cases, and how
likely a gate would decide the other way.

Why a cluster bootstrap: with K repeats per case, the K verdicts of one case are not K independent
observations (a case the model always refuses stays refused), so a Wilson interval over all
samples would be too narrow. Resampling *cases* with replacement, each drawn case bringing all of
its repeats, keeps that dependence; the 2.5th and 97.5th percentiles of the resampled ratio widen
the Wilson interval over the samples (percentile cluster bootstrap; never narrower than Wilson's,
which stays the floor where few cases make the bootstrap collapse to a point). With repeats the
metric's value is the pooled ratio over the samples, which equals the mean of the per-case
fractions when every case has its K repeats (an errored repeat drops out of its case's denominator).

The same resampling answers "would this gate say the same on another draw of cases?": the share of
draws whose decision differs from the run's (``flip_probability``). For a gate decided on an end of
the interval (``--sab-gate-on lower|upper``), each draw's interval is the run's, moved with the
draw's value (the half-widths are kept; a bootstrap within each draw would cost B times more).

Everything is seeded from the group's name, so a summary is the same every time it is built.
Numbers: ``DRAWS`` draws with numpy; one draw matrix per group serves every metric of the group.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from sab_pytest.results import stats
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


def clustered(rows: Sequence[StoredRecord], members: Callable[[StoredRecord], bool],
              value: Callable[[StoredRecord], float]) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Per case (in first-seen order): the sum of ``value`` over its samples that are ``members``,
    and how many of them there are."""
    order: dict[str, int] = {}
    num: list[float] = []
    den: list[float] = []
    for r in rows:
        i = order.setdefault(r["case"]["id"], len(order))
        if i == len(num):
            num.append(0.0)
            den.append(0.0)
        if members(r):
            num[i] += value(r)
            den[i] += 1.0
    return list(order), np.array(num), np.array(den)


def ratios(w: np.ndarray, num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """The ratio sum(num) / sum(den) in each draw (NaN where a draw holds no member)."""
    top, bottom = w @ num, w @ den
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(bottom > 0, top / np.where(bottom > 0, bottom, 1.0), np.nan)


def interval(draws: np.ndarray) -> list[float] | None:
    """The percentile 95% interval of the finite draws (None when there are none)."""
    finite = draws[np.isfinite(draws)]
    if finite.size == 0:
        return None
    low, high = np.percentile(finite, [2.5, 97.5])
    return list(stats.clip_interval(float(low), float(high)))


def cluster_intervals(table: dict[str, dict[str, Any]], rows: Sequence[StoredRecord], key: str,
                      definitions: dict[str, Any]) -> None:
    """Widen the intervals of a group's metric ``table`` with cluster-bootstrap ones, and add
    ``cases`` (how many distinct cases each metric counts over). ``definitions``: the metrics'
    ``RateDef``/``MeanDef`` (population and success, or value).

    The bootstrap only ever widens: each interval is the outer ends of the one ``table`` already
    holds (a rate's Wilson interval over its samples, a mean's normal one) and the bootstrap's. A
    percentile bootstrap over few cases collapses (one case refused in 3 of 3 repeats: every draw is
    1.0, the "interval" a point), so on its own it would let a strict ``@lower`` gate pass on one case;
    Wilson over the samples is the floor, and repeats that agree can make it wider, never narrower."""
    cases, _, _ = clustered(rows, _everyone, _errored)
    w = weights(len(cases), key)
    for name, d in definitions.items():
        _, num, den = clustered(rows, d.population, _indicator(d))
        entry = table[name]
        entry["cases"] = int(np.count_nonzero(den))
        boot = interval(ratios(w, num, den)) if entry.get("value") is not None else None
        entry["ci95"] = outer(entry.get("ci95"), boot)
        rate_entry = hasattr(d, "success")
        entry["method"] = WILSON_CLUSTER if rate_entry else NORMAL_CLUSTER
        entry["ci_method"] = entry["method"]


#: interval methods with repeats: a rate's Wilson interval over its samples widened by the cluster
#: bootstrap (``metrics.WILSON`` without repeats); a mean's normal interval widened the same way
WILSON_CLUSTER = "wilson+cluster_bootstrap"
NORMAL_CLUSTER = "normal+cluster_bootstrap"


def outer(first: Sequence[float] | None, second: Sequence[float] | None) -> list[float] | None:
    """The smallest interval holding both (either may be None)."""
    if first is None or second is None:
        got = first if first is not None else second
        return list(got) if got is not None else None
    return [min(first[0], second[0]), max(first[1], second[1])]


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
    """Per case: its repeats, the share of its judged repeats that passed; and the flaky cases,
    those whose judged repeats disagree (some passed, some failed)."""
    runs: dict[str, list[bool]] = {}
    most = 0
    for r in records:
        most = max(most, int(r.get("repeat") or 1))
        if not r.get("error"):
            runs.setdefault(r["case"]["id"], []).append(bool(r["passed"]))
    fraction = {cid: round(sum(v) / len(v), 6) for cid, v in sorted(runs.items())}
    flaky = sorted(cid for cid, v in runs.items() if 0 < sum(v) < len(v))
    return {"k": most, "cases": len(runs), "flaky_cases": flaky, "pass_fraction": fraction}


# ------------------------------------------------------------------------------------ gate stability

def flip_probability(gate: Any, result: dict[str, Any], records: list[StoredRecord], *, in_group: Callable[..., bool],
                     definition: Any, worse: int, pairs: Any, baseline_entry: dict[str, Any] | None) -> float | None:
    """The share of bootstrap draws of this run's cases in which ``gate`` decides otherwise than it
    did (``result["passed"]``); None when the gate was undefined. ``definition``: the metric's
    ``RateDef``/``MeanDef`` (None for ``errors``/``error_rate``, which count every record);
    ``worse``: +1 when a drop of the metric is a regression, -1 when a rise is; ``pairs``: a
    ``no_regression`` gate's ``pairing.CasePairs`` (None without the baseline's per-case results)."""
    if result.get("value") is None or (gate.needs_baseline and result.get("baseline") is None):
        return None
    rows = [r for r in records if in_group(r, gate.group)] if gate.metric not in ("errors", "error_rate") else records
    members: Callable[[StoredRecord], bool]
    success: Callable[[StoredRecord], float]
    if gate.metric in ("errors", "error_rate"):
        members, success = _everyone, _errored
    else:
        rows = [r for r in rows if not r.get("error")]
        members, success = definition.population, _indicator(definition)
    key = f"gate:{gate.text}"
    if gate.form == "no_regression":
        return _regression_flips(result, rows, members, success, key, worse, pairs, baseline_entry)
    cases, num, den = clustered(rows, members, success)
    w = weights(len(cases), key)
    values = (w @ num) if gate.metric == "errors" else ratios(w, num, den)
    shift = result["compared"] - result["value"]  # the interval's end moves with the draw's value
    threshold = result["threshold"]
    decided = np.array([gate.holds(v + shift, threshold) if math.isfinite(v) else False for v in values])
    return round(float(np.mean(decided != bool(result["passed"]))), 4)


def _regression_flips(result: dict[str, Any], rows: list[StoredRecord], members: Callable[[StoredRecord], bool],
                      success: Callable[[StoredRecord], float], key: str, worse: int, pairs: Any,
                      baseline_entry: dict[str, Any] | None) -> float | None:
    """``flip_probability`` of a ``no_regression`` gate: the paired cases resampled and the exact
    McNemar test on their per-case fractions redone per draw, or (a baseline without per-case
    results) this run's cases resampled against the baseline's counts for the z test."""
    alpha = result["alpha"]
    if pairs is not None:
        first, second = np.array(pairs.first), np.array(pairs.second)
        w = weights(pairs.n, key)
        bs, cs = w @ (first > second).astype(float), w @ (second > first).astype(float)
        regress, improve = (bs, cs) if worse > 0 else (cs, bs)
        held = np.array([_mcnemar_greater(int(r), int(i)) >= alpha for r, i in zip(regress, improve, strict=True)])
    else:
        if baseline_entry is None or not baseline_entry.get("n"):
            return None
        cases, num, den = clustered(rows, members, success)
        w = weights(len(cases), key)
        ks, ns, cs = w @ num, w @ den, w @ (den > 0).astype(float)  # successes, samples, cases of each draw
        kb, nb = case_counts(baseline_entry)
        # the z test on case counts, as the gate's own (a case's K samples are one observation)
        ps = [stats.regression_p(*case_counts({"k": k, "n": n, "cases": c}), kb, nb, worse)
              for k, n, c in zip(ks, ns, cs, strict=True)]
        held = np.array([p is not None and p >= alpha for p in ps])
    return round(float(np.mean(held != bool(result["passed"]))), 4)


def case_counts(entry: dict[str, Any]) -> tuple[int, int]:
    """(successes, cases) of a metric entry: with repeats its samples are scaled to its cases, so that
    the z test never counts a case's K samples as K independent observations."""
    k, n = int(entry["k"]), int(entry["n"])
    cases = entry.get("cases")
    if cases is None or cases == n or n == 0:
        return k, n
    return round(k / n * cases), int(cases)


def _mcnemar_greater(b: int, c: int) -> float:
    return stats.mcnemar_exact(b, c, alternative="greater")  # cached there: draws repeat the same counts
