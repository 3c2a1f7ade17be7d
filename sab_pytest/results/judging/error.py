"""A judge's error measured against people's labels, and a judged rate corrected for it.

The data: a run's judged cases fall into strata, one per verdict of the judge (and per case kind,
as ``audit`` draws them); a random sample of each stratum was labelled by people (``Stratum``:
its size ``size``, its labelled cases ``labelled``, how many of those people found positive
``positive``, fractional where two people disagree).

**The corrected rate** is prediction-powered inference with the rectifier fitted per stratum of the
judge's verdict, which is what the audit's stratified draw calls for: the rate is the judge's
verdicts plus, per verdict stratum, the mean of (truth - verdict) over its labelled cases, weighted
by the stratum's share of the run. Inside a stratum the verdict is a constant, so the rectified
estimate is ``sum(share_v * truth_share_v)`` whatever power-tuning factor PPI++ would choose: the
factor cancels, and the estimator is the classical two-phase (double sampling) one. It is unbiased
because each stratum's labelled cases are a random sample of it; no assumption about the judge is
made (its error may differ between kinds of case, which is why kinds are strata of their own).

**Its interval** adds two sources of uncertainty by the method of variance estimates recovery
(Zou and Donner's MOVER, the construction Newcombe's interval of a difference rests on, used in
``clustered`` already): the run's own sampling of cases (the exact interval over its cases, as the
raw rate has) and, per stratum, the audit's (the exact, Clopper-Pearson, interval of the stratum's
truth share over its labelled cases, at the level of Student's quantile over them, the labelled
share of a small stratum counted through the finite-population factor: a stratum labelled whole is
known exactly). Exact ends keep the interval
inside [0, 1], away from zero width where a stratum's labels all agree (where a normal, delta-method,
interval collapses), and each at least at its level where Wilson's dip (at a few labels of the rarer
answer, and where every case is labelled, the run's own interval alone);
``bench/bench_corrected_gate.py`` and ``bench/bench_judge_error.py`` check its coverage by simulation.
A comparison weighs the corrected rate by its interval (``n_eff``, ``stats.wilson_samples``), never by
the run's cases: a corrected 0 from ten labels is as unsure as its interval says.

**Sensitivity, specificity and agreement** with people (Cohen's kappa, Gwet's AC1, which stays
meaningful where one answer dominates) are read from the run's 2x2 table of verdict x truth as the
strata estimate it (the labelled sample itself over-represents the rarer verdict). Their intervals
are the judge's on cases like the run's, and hold at a handful of labels: at each end the wider of
the 2.5 and 97.5 percentiles over draws of each stratum's truth share from its Jeffreys posterior
(a seeded Monte Carlo) and the exact interval on the labelled counts, weighted by their strata
(``judge_statistics``); below ``MIN_LABELS`` labels an entry says "too few labels". A judge with one
verdict only has a specificity of exactly 0 over the run (or a sensitivity of 0), its interval still
as wide as its labels leave it: no division by zero, nothing undefined but what the data cannot tell.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from sab_pytest.results.stats import (
    CI_DECIMALS,
    Z95,
    clip_interval,
    exact_ends,
    level_of,
    normal_cdf,
    student,
    wilson_samples,
)

#: Monte Carlo draws behind the intervals of sensitivity, specificity and agreement
DRAWS = 4000
#: below this many labels a judge's sensitivity, specificity, kappa or AC1 says "too few labels": fewer
#: cannot tell a judge right 9 times in 10 from one right 6 times in 10 (the exact interval of 10 of
#: 10 reaches down to 0.69)
MIN_LABELS = 10


@dataclass(frozen=True)
class Stratum:
    """One verdict stratum of a judge's cases: its cases in the run (``size``), how many were
    labelled, how much of the labelled were positive (people's answers, averaged per case), and the
    judge's ``verdict`` there."""

    size: int
    labelled: int
    positive: float
    verdict: bool


def _stratum_ends(k: np.ndarray, n: np.ndarray, size: np.ndarray, z: float) -> tuple[np.ndarray, ...]:
    """A stratum's truth share and its exact (Clopper-Pearson) ends over its labels, the sampling
    fraction taken in through the finite-population factor ``(N - 1) / (N - n)`` (a sample of the
    whole stratum has no sampling error left): ``n`` labels of a stratum of ``N`` are worth
    ``n (N - 1) / (N - n)`` independent ones."""
    n_f, size_f = n.astype(float), size.astype(float)
    with np.errstate(invalid="ignore", divide="ignore"):
        q = np.where(n_f > 0, k / np.where(n_f > 0, n_f, 1.0), np.nan)
        factor = (size_f - 1) / np.maximum(size_f - n_f, 1.0)
    whole = size_f <= n_f
    n_eff = np.where(whole, 1.0, np.maximum(n_f * np.maximum(factor, 1.0), 1e-9))
    # each stratum's end at the level of Student's quantile over its labels (as a variance estimated from
    # them would take): MOVER adds the strata's half-widths in quadrature, which falls short where two
    # strata of a few labels each sit at a rare count at once (5 labels a verdict, a rate of 0.05: the
    # one-sided 95 % bound covered 0.94 with the normal's level)
    level = normal_cdf(student(level_of(z), n_f - 1))
    low, high = exact_ends(np.nan_to_num(q) * n_eff, n_eff, level)
    # a stratum labelled whole: its share is known, its ends are the share itself
    low, high = np.where(whole, q, low), np.where(whole, q, high)
    return q, np.where(np.isnan(q), np.nan, low), np.where(np.isnan(q), np.nan, high)


def corrected_ends(fixed_k: np.ndarray, fixed_n: np.ndarray, sizes: np.ndarray, labelled: np.ndarray,
                   positive: np.ndarray, complement: bool = False, z: float = Z95
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The corrected rate and its ends, vectorised (last axis: strata; leading axes: simulated runs).

    ``fixed_k`` of ``fixed_n`` members of the rate's population are not decided by the judge (a
    refused hazard has no plan to judge); each stratum holds ``sizes`` judged members, ``labelled``
    of them labelled, ``positive`` of those truly positive (the judge's positive answer); ``complement``:
    the rate counts the negative answer (the risk rate, of the rejection judge), so each stratum's
    share counted is ``1 - positive share``. NaN where a stratum with cases has no label."""
    sizes_f = sizes.astype(float)
    total = fixed_n + sizes_f.sum(-1)
    q, low, high = _stratum_ends(positive, labelled, sizes, z)
    if complement:
        q, low, high = 1 - q, 1 - high, 1 - low
    used = sizes_f > 0
    with np.errstate(invalid="ignore", divide="ignore"):
        weight = sizes_f / total[..., None]
        value = (fixed_k + np.where(used, sizes_f * np.nan_to_num(q, nan=0.0), 0.0).sum(-1)) / total
        value = np.where((used & np.isnan(q)).any(-1), np.nan, value)
        run_low, run_high = exact_ends(np.nan_to_num(value) * total, total, level_of(z))
        below = (value - run_low) ** 2 + (np.where(used, weight * (q - low), 0.0) ** 2).sum(-1)
        above = (run_high - value) ** 2 + (np.where(used, weight * (high - q), 0.0) ** 2).sum(-1)
    return value, value - np.sqrt(below), value + np.sqrt(above)


def corrected_entry(fixed_k: float, fixed_n: int, strata: Sequence[Stratum], *, counts: bool = True,
                    z: float = Z95) -> dict[str, Any]:
    """A corrected rate as a metric entry: ``value``, ``ci95`` and ``n_eff`` (the samples a plain
    proportion with that interval would hold: how a comparison with another run weighs it), the
    cases (``n``) and labels behind it; ``value`` None, with ``reason``, when a stratum with cases
    has no label (nothing says how often the judge errs there) or the population is empty.
    ``counts``: whether the judge's positive answer is the rate's success (False: a complement)."""
    sizes = np.array([s.size for s in strata], dtype=np.int64)
    labelled = np.array([s.labelled for s in strata], dtype=np.int64)
    positive = np.array([s.positive for s in strata], dtype=float)
    total = int(fixed_n + sizes.sum())
    out: dict[str, Any] = {"value": None, "ci95": None, "n": total, "judged": int(sizes.sum()),
                           "labels": int(labelled.sum()), "n_eff": None, "method": "ppi-stratified"}
    if total == 0:
        out["reason"] = "no cases in its denominator"
        return out
    value, low, high = (float(x) for x in corrected_ends(np.float64(fixed_k), np.float64(fixed_n), sizes, labelled,
                                                         positive, not counts, z))
    if math.isnan(value):
        out["reason"] = "a verdict of the judge among its cases has no labelled case: its error there is unknown"
        return out
    ci = clip_interval(low, high)
    # what a comparison weighs the rate by is its interval (``stats.wilson_samples``), never the run's
    # cases: at a corrected 0 or 1 the labels, not the cases, say how sure it is
    n_eff = wilson_samples(value, ci[0], ci[1], z)
    out.update(value=round(value, CI_DECIMALS), ci95=list(ci), n_eff=round(min(n_eff, float(total)), CI_DECIMALS))
    return out


# ------------------------------------------------------------------------------ the judge's 2x2 table


def _cells(strata: Sequence[Stratum], q: np.ndarray) -> tuple[np.ndarray, ...]:
    """The run's shares (judge positive & true, judge positive & false, judge negative & true,
    judge negative & false) for truth shares ``q`` per stratum (last axis)."""
    sizes = np.array([s.size for s in strata], dtype=float)
    pos = np.array([s.verdict for s in strata], dtype=bool)
    weight = sizes / sizes.sum()
    tp = (weight * q * pos).sum(-1)
    fp = (weight * (1 - q) * pos).sum(-1)
    fn = (weight * q * ~pos).sum(-1)
    tn = (weight * (1 - q) * ~pos).sum(-1)
    return tp, fp, fn, tn


def _ratio(top: np.ndarray, bottom: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(bottom > 0, top / np.where(bottom > 0, bottom, 1.0), np.nan)


def table_statistics(tp: np.ndarray, fp: np.ndarray, fn: np.ndarray, tn: np.ndarray) -> dict[str, np.ndarray]:
    """Sensitivity, specificity, Cohen's kappa and Gwet's AC1 of a 2x2 table of shares (judge x people)."""
    observed = tp + tn
    judge_pos, people_pos = tp + fp, tp + fn
    chance = judge_pos * people_pos + (1 - judge_pos) * (1 - people_pos)
    mean_pos = (judge_pos + people_pos) / 2
    gwet_chance = 2 * mean_pos * (1 - mean_pos)
    return {"sensitivity": _ratio(tp, tp + fn), "specificity": _ratio(tn, tn + fp),
            "kappa": _ratio(observed - chance, 1 - chance), "ac1": _ratio(observed - gwet_chance, 1 - gwet_chance)}


def _summarise(point: float, draws: np.ndarray, exact_ci: tuple[float, float] | None = None,
               labels: float | None = None) -> dict[str, Any]:
    """A statistic's ``{"value", "ci95"}`` from its point estimate, its Monte Carlo draws and its exact
    interval on the labelled counts (``exact_ci``): the interval is the wider of the two at each end,
    so that it neither collapses where every label agrees (the draws then all land on the point) nor
    drops the spread of the strata's weights the draws carry. ``labels``: the labels the statistic
    rests on; below ``MIN_LABELS`` the entry says so (``note``)."""
    if math.isnan(point):
        return {"value": None, "ci95": None}
    kept = draws[~np.isnan(draws)]
    out: dict[str, Any] = {"value": round(point, CI_DECIMALS) + 0.0, "ci95": None}
    if labels is not None:
        out["labels"] = round(labels, CI_DECIMALS)
        if labels < MIN_LABELS:
            out["note"] = f"too few labels ({labels:g} < {MIN_LABELS}): the interval is wide, the value a rough guide"
    if kept.size == 0 and exact_ci is None:
        return out
    low, high = np.percentile(kept, [2.5, 97.5]) if kept.size else (point, point)
    low, high = min(float(low), point), max(float(high), point)
    if exact_ci is not None:
        low, high = min(low, exact_ci[0]), max(high, exact_ci[1])
    # + 0.0: a draw of -1e-17 is 0, not "-0.000" in a report
    out["ci95"] = [round(low, CI_DECIMALS) + 0.0, round(high, CI_DECIMALS) + 0.0]
    return out


def _kish(weights: np.ndarray, counts: np.ndarray) -> float:
    """Kish's effective number of labels: ``counts`` labels per stratum, each standing for ``weights``
    cases of the run, are worth ``(sum w)^2 / sum w^2`` equally weighted ones (all of them when the
    weights are equal)."""
    top = float((weights * counts).sum())
    bottom = float((weights * weights * counts).sum())
    return top * top / bottom if bottom > 0 else 0.0


def _exact_share(share: float, effective: float) -> tuple[float, float] | None:
    """The exact 95 % interval of a share measured on ``effective`` (Kish) labels; None without any."""
    if effective <= 0 or math.isnan(share):
        return None
    low, high = exact_ends(share * effective, effective, level_of(Z95))
    return float(low), float(high)


def _through(ends: tuple[float, float] | None, chance: float) -> tuple[float, float] | None:
    """A chance-corrected coefficient's ends (kappa's, AC1's) from the observed agreement's ends, the
    chance agreement held at its estimate: ``(p - chance) / (1 - chance)`` rises with ``p``."""
    if ends is None or not chance < 1.0:
        return None
    return (ends[0] - chance) / (1 - chance), (ends[1] - chance) / (1 - chance)


def judge_statistics(strata: Sequence[Stratum], seed: int = 0) -> dict[str, dict[str, Any]]:
    """Sensitivity, specificity, kappa and AC1 of one judge against people, estimated over the run's
    cases, each ``{"value", "ci95"}`` (None where the data cannot tell: no labelled case in a stratum
    with cases, or no truly negative case for a specificity), with the labels it rests on and a
    ``note`` below ``MIN_LABELS`` of them.

    The interval is for the judge on cases like the run's (what a reader wants of a judge's error), so
    it is never of zero width: a judge that answered "positive" to every case has a sensitivity of 1
    over the run, yet five agreeing labels say only that it is above 0.48 (the exact interval of 5 of 5).
    Each statistic's interval is the wider, at each end, of the Monte Carlo one (each stratum's truth
    share drawn from its Jeffreys posterior) and the exact (Clopper-Pearson) one on the labelled counts
    it is a share of, weighted by their strata (Kish's effective size): the labelled truly positive cases
    for the sensitivity, the truly negative ones for the specificity, all labels for the observed
    agreement behind kappa and AC1 (their chance agreement held at its estimate)."""
    strata = [s for s in strata if s.size > 0]
    names = ("sensitivity", "specificity", "kappa", "ac1")
    if not strata or any(s.labelled == 0 for s in strata):
        return {name: {"value": None, "ci95": None} for name in names}
    q = np.array([s.positive / s.labelled for s in strata])
    point = table_statistics(*_cells(strata, q))
    rng = np.random.default_rng(seed)
    drawn = np.stack([rng.beta(s.positive + 0.5, s.labelled - s.positive + 0.5, DRAWS) for s in strata], axis=-1)
    sampled = table_statistics(*_cells(strata, drawn))
    weight = np.array([s.size / s.labelled for s in strata])
    positive = np.array([s.positive for s in strata], dtype=float)
    negative = np.array([s.labelled for s in strata], dtype=float) - positive
    agree = np.where([s.verdict for s in strata], positive, negative)
    labelled = positive + negative
    observed = float((weight * agree).sum() / (weight * labelled).sum())
    tp, fp, fn, _ = (float(x) for x in _cells(strata, q))
    judge_pos, people_pos = tp + fp, tp + fn
    mean_pos = (judge_pos + people_pos) / 2
    chance = {"kappa": judge_pos * people_pos + (1 - judge_pos) * (1 - people_pos),
              "ac1": 2 * mean_pos * (1 - mean_pos)}
    agreement_ci = _exact_share(observed, _kish(weight, labelled))
    exact_ci = {"sensitivity": _exact_share(float(point["sensitivity"]), _kish(weight, positive)),
                "specificity": _exact_share(float(point["specificity"]), _kish(weight, negative)),
                "kappa": _through(agreement_ci, chance["kappa"]), "ac1": _through(agreement_ci, chance["ac1"])}
    counts = {"sensitivity": float(positive.sum()), "specificity": float(negative.sum()),
              "kappa": float(labelled.sum()), "ac1": float(labelled.sum())}
    return {name: _summarise(float(point[name]), sampled[name], exact_ci[name], counts[name]) for name in names}


def pair_statistics(first: Sequence[bool], second: Sequence[bool], seed: int = 0) -> dict[str, Any]:
    """Agreement of two people over the cases both labelled: the share agreeing, kappa and AC1, their
    intervals the wider of a seeded bootstrap over the cases and the exact one of the share agreeing;
    None under two cases."""
    n = len(first)
    out: dict[str, Any] = {"cases": n, "agreement": None, "kappa": {"value": None, "ci95": None},
                           "ac1": {"value": None, "ci95": None}}
    if n < 2:
        return out
    a, b = np.array(first, dtype=bool), np.array(second, dtype=bool)

    def stats(x: np.ndarray, y: np.ndarray) -> dict[str, np.ndarray]:
        return table_statistics((x & y).mean(-1), (x & ~y).mean(-1), (~x & y).mean(-1), (~x & ~y).mean(-1))

    point = stats(a, b)
    index = np.random.default_rng(seed).integers(0, n, (DRAWS, n))
    sampled = stats(a[index], b[index])
    observed = float((a == b).mean())
    out["agreement"] = round(observed, CI_DECIMALS)
    # as a judge's (``judge_statistics``): the bootstrap collapses where every pair agrees, so the exact
    # interval of the observed agreement, through each coefficient's chance agreement, widens it
    share = (float(a.mean()) + float(b.mean())) / 2
    chance = {"kappa": float(a.mean() * b.mean() + (1 - a.mean()) * (1 - b.mean())), "ac1": 2 * share * (1 - share)}
    for name in ("kappa", "ac1"):
        out[name] = _summarise(float(point[name]), sampled[name], _through(_exact_share(observed, n), chance[name]), n)
    return out


# ------------------------------------------------------------------------------------- sizing an audit


def expected_half_width(labels: int, rate: float, sensitivity: float, specificity: float, cases: int,
                        z: float = Z95) -> float:
    """The corrected interval's half-width (the larger side) expected of an audit of ``labels`` cases
    of a rate over ``cases`` judged cases whose true value is ``rate``, the judge of that sensitivity and
    specificity, the labels split over the two verdicts as ``audit.allocate`` splits them."""
    positive_share = rate * sensitivity + (1 - rate) * (1 - specificity)
    sizes = np.array([cases * (1 - positive_share), cases * positive_share])
    first = min(sizes[0], max(labels - min(sizes[1], labels - labels // 2), labels // 2))
    labelled = np.array([first, min(sizes[1], labels - first)])
    truth = np.array([rate * (1 - sensitivity) / max(1 - positive_share, 1e-12),
                      rate * sensitivity / max(positive_share, 1e-12)])
    value, low, high = corrected_ends(np.float64(0), np.float64(0), sizes, labelled, truth * labelled, z=z)
    return float(max(value - low, high - value))


def audit_size(half_width: float, rate: float, sensitivity: float, specificity: float, cases: int
               ) -> tuple[int | None, float]:
    """The fewest labels for a corrected interval of at most ``half_width`` (each side) as expected
    (``expected_half_width``), and the half-width they give; (None, the half-width of labelling every
    case) when even that is wider: the run's own cases are then too few, not the labels."""
    whole = expected_half_width(cases, rate, sensitivity, specificity, cases)
    if whole > half_width:
        return None, whole
    low, high = 2, cases
    while low < high:
        mid = (low + high) // 2
        if expected_half_width(mid, rate, sensitivity, specificity, cases) <= half_width:
            high = mid
        else:
            low = mid + 1
    return low, expected_half_width(low, rate, sensitivity, specificity, cases)
