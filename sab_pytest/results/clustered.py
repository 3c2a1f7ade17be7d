"""The one statistical model of the results: cases are the unit, the repeats of a case hang together.

Every rate interval, every difference of two runs and every ``no_regression`` test comes from here,
so that they can never disagree. The data of one run is, per case (sorted by case id), its
successes ``y`` and its judged samples ``m`` in a metric's population (``m`` is 1 at K = 1).

* A rate is the pooled ratio ``sum(y) / sum(m)``. Its variance is the ratio estimator's over cases
  (the cluster-robust one), which a design effect compares with the binomial variance of as many
  independent samples: ``n_eff = sum(m) / deff`` is the number of samples the run is worth (with the
  usual small-sample factor ``(n - 1) / n`` of a variance over n cases, which kept ``@lower`` and
  ``@upper`` ends covering the true rate at 20 cases in the calibration bench). Its
  interval is the exact (Clopper-Pearson) one over ``n_eff`` samples (``rate_ends``; why exact and
  not Wilson's: ``stats``): the exact binomial interval at K = 1 (``deff`` is then exactly 1),
  and when every case's repeats agree ``n_eff`` is exactly the number of cases, so a K = 3 run of a
  deterministic model gets the K = 1 run's interval. ``n_eff`` is kept between the cases and the
  samples: repeats never count for less than one sample a case, nor for more than all of them.
* A difference B - A is Newcombe's hybrid score interval built from the two sides' Wilson intervals
  over their ``n_eff``
  (his method 10), with the correlation of the two runs' per-case residuals when the runs share
  their cases (paired), none otherwise. The correlation of a few dozen cases is a noisy estimate,
  and one that errs high narrows the interval and so raises false FAILs beyond alpha (seen in
  ``bench/bench_gate_calibration.py``), so half of a positive estimate is used and none of a
  negative one; the quantile is Student's with one degree of freedom less than the cases, as the
  design effect and the correlation are estimated from them.
* ``no_regression`` is that interval's bound: a regression is significant at level alpha exactly
  when the one-sided bound at ``1 - alpha`` lies on the worse side of 0, and its p-value is the level
  at which the bound reaches 0 (0.5 when the bound does not pass 0 even at level 0.5: no evidence that
  way, shown as "p>=0.5"). So the gate and the interval it shows agree by construction.

Deterministic: the sums over cases are integer sums (exact, in any order) for rates, ``math.fsum``
over cases sorted by id for means; the few floats are formed from them once.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from sab_pytest.results.stats import CI_DECIMALS, Z95, clip_interval, exact_ends, level_of, root, student

#: the share of a positive estimated correlation between paired runs that narrows a difference's interval
CORRELATION_SHARE = 0.5


@dataclass(frozen=True)
class Cases:
    """One run's per-case data in a metric's population: ids sorted, successes and samples per case."""

    ids: tuple[str, ...]
    y: np.ndarray  # successes per case (int)
    m: np.ndarray  # judged samples per case (int, >= 1)

    @property
    def n(self) -> int:
        return len(self.ids)

    def fractions(self) -> dict[str, float]:
        """Each case's pass fraction."""
        return {cid: float(a) / float(b) for cid, a, b in zip(self.ids, self.y, self.m, strict=True)}

    def subset(self, ids: Sequence[str]) -> Cases:
        """The cases ``ids`` (all of them among this run's), in that order."""
        where = {cid: i for i, cid in enumerate(self.ids)}
        index = np.array([where[cid] for cid in ids], dtype=np.int64)
        return Cases(tuple(ids), self.y[index], self.m[index])


def cases_of(records: Iterable[Mapping[str, Any]], members: Callable[[Any], bool],
             success: Callable[[Any], bool]) -> Cases:
    """Per case id (sorted): how many of its records are ``members`` and how many of those a ``success``."""
    counts: dict[str, list[int]] = {}
    for r in records:
        if members(r):
            c = counts.setdefault(str(r["case"]["id"]), [0, 0])
            c[0] += bool(success(r))
            c[1] += 1
    ids = tuple(sorted(counts))
    return Cases(ids, np.array([counts[i][0] for i in ids], dtype=np.int64),
                 np.array([counts[i][1] for i in ids], dtype=np.int64))


# ------------------------------------------------------------------------- vectorised kernel (last axis: cases)

def effective_samples(y: np.ndarray, m: np.ndarray) -> np.ndarray:
    """``n_eff`` of each row of per-case counts: ``sum(m)**2 * Y (M - Y) / sum((M y - Y m)**2)`` times
    ``(n - 1) / n``, the samples over the design effect, from integer sums (so exact and order-free);
    kept within [cases, samples], so one sample a case is exactly its cases (the binomial's interval)."""
    y, m = np.asarray(y, dtype=np.int64), np.asarray(m, dtype=np.int64)
    big_y, big_m = y.sum(-1), m.sum(-1)
    spread = ((big_m[..., None] * y - big_y[..., None] * m) ** 2).sum(-1)
    cases = (m > 0).sum(-1).astype(float)
    # the variance over cases carries the usual small-sample factor n / (n - 1): fewer effective samples
    top = big_m.astype(float) ** 2 * big_y.astype(float) * (big_m - big_y).astype(float) * (cases - 1) / cases
    with np.errstate(invalid="ignore", divide="ignore"):
        # no spread at all: a rate of 0 or 1 (every case agrees, worth its cases), or every case at the
        # same share strictly inside (no case effect, worth every sample)
        raw = np.where(spread > 0, top / np.where(spread > 0, spread, 1).astype(float),
                       np.where(top > 0, big_m.astype(float), cases))
    return np.clip(raw, cases, big_m.astype(float))


def wilson_ends(p: np.ndarray, n: np.ndarray, z: float | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Wilson's score interval for a share ``p`` of ``n`` (possibly fractional) samples, unclipped."""
    with np.errstate(invalid="ignore", divide="ignore"):
        denom = 1 + z * z / n
        centre = (p + z * z / (2 * n)) / denom
        half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return centre - half, centre + half


def correlation(ya: np.ndarray, ma: np.ndarray, yb: np.ndarray, mb: np.ndarray) -> np.ndarray:
    """The correlation of the two runs' per-case residuals ``M y - Y m`` over the paired cases (0 when a
    side has none: a rate of 0 or 1), from integer sums."""
    ya, ma, yb, mb = (np.asarray(v, dtype=np.int64) for v in (ya, ma, yb, mb))
    ra = ma.sum(-1)[..., None] * ya - ya.sum(-1)[..., None] * ma
    rb = mb.sum(-1)[..., None] * yb - yb.sum(-1)[..., None] * mb
    saa, sbb, sab = (ra * ra).sum(-1), (rb * rb).sum(-1), (ra * rb).sum(-1)
    both = (saa > 0) & (sbb > 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(both, sab / np.sqrt(np.where(both, saa, 1).astype(float) * np.where(both, sbb, 1)), 0.0)


def difference_ends(pa: np.ndarray, na: np.ndarray, pb: np.ndarray, nb: np.ndarray, phi: np.ndarray,
                    crit: np.ndarray | float) -> tuple[np.ndarray, np.ndarray]:
    """Newcombe's hybrid interval for ``pb - pa`` at the quantile ``crit``, from the two sides' rates and
    effective samples and the correlation ``phi`` used (see the module's docstring)."""
    la, ua = wilson_ends(pa, na, crit)
    lb, ub = wilson_ends(pb, nb, crit)
    d = pb - pa
    low = d - np.sqrt(np.maximum(0.0, (pb - lb) ** 2 - 2 * phi * (pb - lb) * (ua - pa) + (ua - pa) ** 2))
    high = d + np.sqrt(np.maximum(0.0, (ub - pb) ** 2 - 2 * phi * (ub - pb) * (pa - la) + (pa - la) ** 2))
    return low, high


def used_correlation(raw: np.ndarray) -> np.ndarray:
    """The share of an estimated correlation a difference's interval relies on (``CORRELATION_SHARE``)."""
    return np.clip(raw, 0.0, 1.0) * CORRELATION_SHARE


def regression_fails(ya: np.ndarray, ma: np.ndarray, yb: np.ndarray, mb: np.ndarray, alpha: float,
                     worse: int) -> np.ndarray:
    """Vectorised ``no_regression`` of paired rows (baseline A, candidate B): True where B is worse than
    A at level ``alpha`` (the bench and the bootstrap of a gate's decision call the gate's own rule)."""
    pa, pb = ya.sum(-1) / ma.sum(-1), yb.sum(-1) / mb.sum(-1)
    na, nb = effective_samples(ya, ma), effective_samples(yb, mb)
    phi = used_correlation(correlation(ya, ma, yb, mb))
    low, high = difference_ends(pa, na, pb, nb, phi, student(1 - alpha, ya.shape[-1] - 1))
    return np.asarray(high < 0 if worse > 0 else low > 0)


# ------------------------------------------------------------------------------------------ one run

@dataclass(frozen=True)
class Side:
    """What a difference needs of one run's rate: the rate, its effective samples and its cases."""

    value: float
    n_eff: float
    cases: int


def rate_ends(p: np.ndarray, n_eff: np.ndarray, z: float = Z95) -> tuple[np.ndarray, np.ndarray]:
    """A rate's own interval: the exact (Clopper-Pearson) ends of the share ``p`` of ``n_eff``
    (effective) samples, each end a one-sided bound at the level of ``z`` (``stats.exact_ends``; why
    exact: ``stats``). At K = 1 it is the exact binomial interval of ``k`` of ``n``."""
    return exact_ends(np.asarray(p) * np.asarray(n_eff), n_eff, level_of(z))


def rate_entry(c: Cases, z: float = Z95) -> dict[str, Any]:
    """A rate's metric entry: value, successes ``k`` of samples ``n``, ``cases``, ``n_eff`` and the
    exact interval over ``n_eff`` (``rate_ends``; ``method`` says whether repeats entered it)."""
    k, n = int(c.y.sum()), int(c.m.sum())
    if n == 0:
        return {"value": None, "k": 0, "n": 0, "cases": 0, "n_eff": 0.0, "ci95": None, "method": EXACT}
    # one sample a case (no repeats): worth exactly its cases, as ``effective_samples`` finds at length
    n_eff = float(c.n) if n == c.n else float(effective_samples(c.y, c.m))
    low, high = rate_ends(np.float64(k / n), np.float64(n_eff), z)
    return {"value": k / n, "k": k, "n": n, "cases": c.n, "n_eff": round(n_eff, CI_DECIMALS),
            "ci95": list(clip_interval(float(low), float(high))),
            "method": EXACT if n == c.n else EXACT_DESIGN}


def mean_entry(ids: Sequence[str], sums: Sequence[float], counts: Sequence[int], z: float = Z95) -> dict[str, Any]:
    """A mean's metric entry from per-case sums of values in [0, 1] and their counts (cases sorted by
    id): the pooled mean, and the ratio estimator's normal interval over cases; no interval over fewer
    than two cases (one case says nothing about how much cases vary)."""
    total = sum(counts)
    if total == 0:
        return {"value": None, "n": 0, "cases": 0, "ci95": None, "method": NORMAL}
    value = math.fsum(sums) / total
    out: dict[str, Any] = {"value": value, "n": total, "cases": len(ids), "ci95": None, "method": NORMAL}
    if len(ids) >= 2:
        spread = math.fsum((s - value * k) ** 2 for s, k in zip(sums, counts, strict=True))
        half = z * math.sqrt(spread * len(ids) / (len(ids) - 1)) / total
        out["ci95"] = list(clip_interval(value - half, value + half))
    return out


def agreement(c: Cases) -> float | None:
    """How much a case's repeats agree, 0..1 (the intraclass correlation: the share of a sample's
    variance that lies between cases): 1 when every case's repeats agree, about 0 when a case tells
    nothing about its repeats. None without a case of two samples or a rate strictly inside (0, 1)."""
    k, n = int(c.y.sum()), int(c.m.sum())
    several = c.m >= 2
    if not several.any() or k in (0, n):
        return None
    p = k / n
    within = math.fsum(float(y * (m - y)) / (m * (m - 1)) for y, m in zip(c.y[several], c.m[several], strict=True))
    share = within / int(several.sum()) / (p * (1 - p))
    return round(min(1.0, max(0.0, 1.0 - share)), 4)


# ---------------------------------------------------------------------------------------- two runs

@dataclass(frozen=True)
class Difference:
    """B - A of a rate with its interval at ``level`` (two-sided), and the p-values of each one-sided
    test, all from the same interval: ``p_lower`` is the level at which the upper end reaches 0
    (evidence that B is lower), ``p_higher`` the one at which the lower end does."""

    value: float
    ci: tuple[float, float]
    p_lower: float
    p_higher: float
    paired: bool
    cases: int
    correlation: float  # the correlation used (0 unpaired)

    @property
    def p_two_sided(self) -> float:
        return min(1.0, 2 * min(self.p_lower, self.p_higher))


def side_of(c: Cases) -> Side:
    k, n = int(c.y.sum()), int(c.m.sum())
    return Side(k / n if n else math.nan, float(effective_samples(c.y, c.m)) if n else 0.0, c.n)


def side_of_entry(entry: Mapping[str, Any]) -> Side | None:
    """A run known only by its summary: its rate, ``n_eff`` (its samples when an older summary lacks
    it, its cases when it has those) and cases; None without a value."""
    if entry.get("value") is None or not entry.get("n"):
        return None
    cases = int(entry.get("cases") or entry["n"])
    n_eff = entry.get("n_eff")
    return Side(float(entry["value"]), float(n_eff) if n_eff else float(cases), cases)


def difference(a: Side, b: Side, *, raw_correlation: float = 0.0, paired: bool = False,
               level: float = 0.95) -> Difference | None:
    """B - A with its two-sided interval at ``level`` and both one-sided p-values; None with fewer than
    two cases on a side (no variance to speak of)."""
    cases = min(a.cases, b.cases)
    if cases < 2:
        return None
    phi = float(used_correlation(np.float64(raw_correlation))) if paired else 0.0
    args = (np.float64(a.value), np.float64(a.n_eff), np.float64(b.value), np.float64(b.n_eff), np.float64(phi))

    def ends(lvl: float) -> tuple[float, float]:
        low, high = difference_ends(*args, student(lvl, cases - 1))
        return float(low), float(high)

    low, high = ends(1 - (1 - level) / 2)
    return Difference(b.value - a.value, (round(max(-1.0, low), CI_DECIMALS), round(min(1.0, high), CI_DECIMALS)),
                      _crossing(lambda lv: ends(lv)[1]), _crossing(lambda lv: -ends(lv)[0]), paired, cases, phi)


def paired_difference(a: Cases, b: Cases, level: float = 0.95) -> Difference | None:
    """B - A over the cases both runs hold (``a`` and ``b`` already on the same ids)."""
    corr = float(correlation(a.y, a.m, b.y, b.m)) if a.n else 0.0
    return difference(side_of(a), side_of(b), raw_correlation=corr, paired=True, level=level)


def _crossing(bound: Callable[[float], float]) -> float:
    """The one-sided p-value of a side: one minus the level at which that side's end of the interval
    (``bound(level)``, negative while it excludes 0, and rising toward 0 as the level rises) reaches 0
    (scipy's root-finding); 0.5 when it does not exclude 0 even at level 0.5 (no evidence that way)."""
    lo, hi = 0.5, 1.0 - 1e-12
    if bound(lo) >= 0:
        return 0.5
    if bound(hi) < 0:
        return 1e-12
    return 1.0 - root(bound, lo, hi)


def regressed(d: Difference, worse: int) -> bool:
    """Whether the interval ``d`` (at ``1 - 2 alpha``, its one-sided ends at ``1 - alpha``) shows a
    regression: its end on the worse side is past 0. ``worse`` +1 when a drop is a regression, -1
    when a rise is. Decided on the interval as shown (rounded), so the two never disagree."""
    return d.ci[1] < 0 if worse > 0 else d.ci[0] > 0


#: a rate's interval: the exact (Clopper-Pearson) one (``rate_ends``); summaries before it said "wilson"
EXACT = "exact"
#: a rate's interval with repeats: the exact one over the effective samples (``effective_samples``)
EXACT_DESIGN = "exact_design_effect"
#: a mean's interval: normal, with the ratio estimator's variance over cases
NORMAL = "normal_over_cases"
