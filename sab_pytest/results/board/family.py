"""The tests of a board: many differences of rates at once, and a correction for their number.

Each difference is the one ``clustered`` makes (Newcombe's hybrid interval over each run's effective
samples, paired on the cases both runs judged, its two-sided p-value the level at which that interval
reaches 0), computed here for a whole column of comparisons at once: a board of 20 runs compares
hundreds of pairs, and the simulation that checks the family-wise error rate draws thousands of
boards. ``tests/unit/results/test_board.py`` checks that each comparison equals
``clustered.paired_difference`` (and ``clustered.difference`` for independent runs).

A table of many comparisons marks some difference by chance unless the tests are corrected for their
number: Holm's step-down correction (the default) keeps the chance that any difference is marked when
none exists at alpha, whatever the dependence between the tests, and rejects at least what Bonferroni's
does. A mean (ER) is tested by Student's t over per-case means (paired when the runs share cases),
from ``scipy.stats``, imported when a board has such a column.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from sab_pytest.results import clustered
from sab_pytest.results.stats import CI_DECIMALS

CORRECTIONS = ("holm", "bonferroni", "none")
#: bisection steps of a p-value's level (``clustered``'s own search takes 60 between 0.5 and 1)
_STEPS = 60
#: the relative precision of a quantile found, at which the search may stop early
_PRECISION = 1e-10


@dataclass(frozen=True)
class Tested:
    """Differences B - A of a column's comparisons: value, interval ends, two-sided p (NaN: not tested)."""

    diff: np.ndarray
    low: np.ndarray
    high: np.ndarray
    p: np.ndarray
    cases: np.ndarray


def padded(columns: Sequence[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """Per-case (successes, samples) of several comparisons' sides as two arrays of one width: a case
    of no samples adds nothing to any sum of ``clustered``'s kernel, so the shorter sides are padded
    with them."""
    width = max((len(y) for y, _ in columns), default=0)
    ys, ms = np.zeros((len(columns), width), np.int64), np.zeros((len(columns), width), np.int64)
    for i, (y, m) in enumerate(columns):
        ys[i, :len(y)], ms[i, :len(m)] = y, m
    return ys, ms


def rate_differences(ya: np.ndarray, ma: np.ndarray, yb: np.ndarray, mb: np.ndarray, *, paired: bool,
                     level: float = 0.95) -> Tested:
    """B - A for every row (leading axes; last axis: cases, padded with ``m = 0``), as
    ``clustered.paired_difference`` (``paired``: both sides on the same cases, in the same order) or
    ``clustered.difference`` of independent samples makes each: NaN where a side has fewer than two
    cases."""
    ya, ma, yb, mb = (np.asarray(v, dtype=np.int64) for v in (ya, ma, yb, mb))
    with np.errstate(invalid="ignore", divide="ignore"):
        pa, pb = ya.sum(-1) / ma.sum(-1), yb.sum(-1) / mb.sum(-1)
    na, nb = clustered.effective_samples(ya, ma), clustered.effective_samples(yb, mb)
    cases = np.minimum((ma > 0).sum(-1), (mb > 0).sum(-1))
    phi = clustered.used_correlation(clustered.correlation(ya, ma, yb, mb)) if paired else np.zeros_like(pa)
    df = np.maximum(cases - 1, 1)

    from scipy import stats  # a board's verb alone needs it

    def ends(crit: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return clustered.difference_ends(pa, na, pb, nb, phi, crit)

    low, high = ends(np.asarray(stats.t.ppf(1 - (1 - level) / 2, df)))
    # each side's p-value: the level at which its end of the interval reaches 0, found on the quantile (the
    # interval widens as it grows) and read back as a level through Student's distribution; both sides in
    # one search: row 0 the upper end (evidence of a drop), row 1 the lower end (of a rise)
    top = np.broadcast_to(np.asarray(stats.t.ppf(1.0 - 1e-12, df)), (2, *pa.shape))

    def bounds(crit: np.ndarray) -> np.ndarray:
        lo_end, hi_end = ends(crit)
        return np.stack([hi_end[0], -lo_end[1]])

    one_sided = stats.t.sf(_crossing(bounds, top), df)
    p = np.minimum(1.0, 2 * one_sided.min(axis=0))
    ok = cases >= 2
    nan = np.full(pa.shape, np.nan)
    return Tested(np.where(ok, pb - pa, nan), np.where(ok, np.round(np.maximum(-1.0, low), CI_DECIMALS), nan),
                  np.where(ok, np.round(np.minimum(1.0, high), CI_DECIMALS), nan), np.where(ok, p, nan), cases)


def _crossing(bound: Callable[[np.ndarray], np.ndarray], top: np.ndarray) -> np.ndarray:
    """For every row at once, the quantile between 0 (level 0.5) and ``top`` at which ``bound`` (negative
    while the interval excludes 0 that way) reaches 0, bisected as ``clustered`` bisects the level: 0
    where it does not exclude 0 even at level 0.5 (a p-value of 0.5), ``top`` where it still does there."""
    lo, hi = np.zeros(top.shape), np.array(top, dtype=float)
    at_lo, at_hi = bound(lo), bound(hi)
    settled = (at_lo >= 0) | (at_hi < 0)  # no crossing inside: their p-value is known already
    for _ in range(_STEPS):
        mid = (lo + hi) / 2
        below = bound(mid) < 0
        lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
        if np.all(settled | (hi - lo <= _PRECISION * hi)):  # found closely enough: no p-value shown would change
            break
    return np.where(at_lo >= 0, 0.0, np.where(at_hi < 0, top, hi))


def mean_difference(a: Sequence[float], b: Sequence[float], *, paired: bool,
                    level: float = 0.95) -> tuple[float, float, float, float] | None:
    """mean(b) - mean(a) of per-case means, its interval and two-sided p-value from Student's t (paired:
    the same cases in the same order); None with fewer than two cases a side."""
    if len(a) < 2 or len(b) < 2:
        return None
    from scipy import stats  # only a board with a mean column needs it

    xa, xb = np.asarray(a, float), np.asarray(b, float)
    diff = float(xb.mean() - xa.mean())
    if paired:
        d = xb - xa
        se, df = float(d.std(ddof=1) / math.sqrt(len(d))), float(len(d) - 1)
    else:
        va, vb = xa.var(ddof=1) / len(xa), xb.var(ddof=1) / len(xb)
        se = float(math.sqrt(va + vb))
        df = float((va + vb) ** 2 / (va ** 2 / (len(xa) - 1) + vb ** 2 / (len(xb) - 1))) if se else 1.0
    if se == 0:  # every case moved by the same amount (or none did): no variance to test against
        return diff, diff, diff, 1.0 if diff == 0 else 0.0
    half = float(stats.t.ppf(1 - (1 - level) / 2, df)) * se
    p = float(2 * stats.t.sf(abs(diff) / se, df))
    return diff, diff - half, diff + half, p


def adjust(p_values: Sequence[float], method: str = "holm") -> list[float]:
    """Adjusted p-values of a family of tests (NaN: a cell not tested, outside the family): Holm's
    step-down, Bonferroni's, or none. A test is marked when its adjusted p-value is below alpha."""
    if method not in CORRECTIONS:
        raise ValueError(f"unknown correction {method!r} (one of {', '.join(CORRECTIONS)})")
    p = np.asarray(p_values, dtype=float)
    tested = np.flatnonzero(~np.isnan(p))
    out = np.full(p.shape, np.nan)
    m = len(tested)
    if method == "none" or m == 0:
        out[tested] = p[tested]
    elif method == "bonferroni":
        out[tested] = np.minimum(1.0, p[tested] * m)
    else:
        order = tested[np.argsort(p[tested], kind="stable")]
        steps = np.minimum(1.0, p[order] * (m - np.arange(m)))
        out[order] = np.maximum.accumulate(steps)
    return [float(v) for v in out]
