"""The one statistics module: every distribution the results use comes from ``scipy.stats`` through
here (Student's t, the normal, the beta behind exact binomial bounds, the binomial), and the
interval helpers built on them: the exact (Clopper-Pearson) interval of a rate, Wilson's score
interval (kept where an interval is combined with others, see below), the clipping of an interval
of rates, a Welch interval for two means, and the root-finding of a level. The model of the
results (cases the unit, repeats by how much they agree), on which every rate, difference and
test rests, is ``clustered``.

Why exact (Clopper-Pearson) for a rate's own interval: a gate on ``@lower``/``@upper`` acts on one
end, and that end must not overstate the model at any size or rate. The exact interval's ends each
cover at least their nominal level for every n and every true rate (the binomial's tails, inverted
through the beta distribution); Wilson's and Jeffreys' ends cover on average but oscillate below
(Wilson's lower 97.5 % end covers 0.925 at 20 cases and a rate of 0.05, see docs/ci-and-gates.md),
most near 0 and 1, where the benchmark's safety rates live. Exact ends are wider, by about one
success's worth at a few dozen cases: a gate that errs toward "not shown yet" is the price.

Why Wilson's score interval remains for a difference (``clustered.difference_ends``): Newcombe's
hybrid interval combines the two sides' Wilson ends, and it holds alpha for ``no_regression``
(``bench/bench_gate_calibration.py``); exact ends there would only make the test more conservative.

scipy is imported on first use, never at import: the plugin's inert start-up and the summary's
readers that need no distribution do not pay for it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

Z95 = 1.959963984540054
CI_DECIMALS = 6


def _scipy_stats() -> Any:
    """``scipy.stats``, imported on first use (see the module's docstring)."""
    from scipy import stats as scipy_stats

    return scipy_stats


def normal_quantile(level: float | np.ndarray) -> Any:
    """The standard normal's quantile at ``level``."""
    return _scipy_stats().norm.ppf(level)


def normal_cdf(x: float | np.ndarray) -> Any:
    """The standard normal's distribution function at ``x``."""
    return _scipy_stats().norm.cdf(x)


def student(level: float, df: np.ndarray | float) -> np.ndarray:
    """Student's t quantile at ``level`` with ``df`` degrees of freedom (at least 1; the normal's at
    infinite df), exact (scipy)."""
    v = np.maximum(np.asarray(df, dtype=float), 1.0)
    return np.asarray(_scipy_stats().t.ppf(level, v))


def binomial_pmf(n: int, p: float) -> np.ndarray:
    """P(X = k) for k = 0..n, X ~ Bin(n, p)."""
    return np.asarray(_scipy_stats().binom.pmf(np.arange(n + 1), n, p))


def exact_ends(k: np.ndarray | float, n: np.ndarray | float, level: float | np.ndarray
               ) -> tuple[np.ndarray, np.ndarray]:
    """The exact (Clopper-Pearson) bounds of a rate from ``k`` successes of ``n`` samples, each end a
    one-sided bound at ``level`` (a two-sided interval at ``2 level - 1``): the lower end is 0 at
    ``k = 0`` and the upper 1 at ``k = n``. ``k`` and ``n`` may be fractional (a rate over effective
    samples, ``k = p n_eff``): the beta quantiles are then the continuous extension of the binomial
    tails. NaN where ``n`` is not positive."""
    k, n = np.asarray(k, dtype=float), np.asarray(n, dtype=float)
    beta = _scipy_stats().beta
    with np.errstate(invalid="ignore", divide="ignore"):
        valid = n > 0
        k = np.clip(k, 0.0, np.where(valid, n, 0.0))
        safe_n = np.where(valid, n, 1.0)
        low = np.where(k > 0, beta.ppf(1 - level, np.maximum(k, 1e-12), safe_n - k + 1), 0.0)
        high = np.where(k < safe_n, beta.ppf(level, k + 1, np.maximum(safe_n - k, 1e-12)), 1.0)
    return np.where(valid, low, np.nan), np.where(valid, high, np.nan)


def exact(k: float, n: float, level: float = 0.975) -> tuple[float, float] | None:
    """The exact interval of ``k`` of ``n`` (each end at ``level``: 95 % two-sided by default), clipped
    and rounded as reports show it; None when n == 0."""
    if n <= 0:
        return None
    low, high = exact_ends(k, n, level)
    return clip_interval(float(low), float(high))


def level_of(z: float) -> float:
    """The one-sided level whose normal quantile is ``z`` (1.96 -> 0.975)."""
    return float(normal_cdf(z))


def wilson(k: float, n: float, z: float = Z95) -> tuple[float, float] | None:
    """Wilson score interval for k successes out of n (None when n == 0)."""
    if n == 0:
        return None
    p = k / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return clip_interval(centre - half, centre + half)


def wilson_samples(p: float, low: float, high: float, z: float = Z95) -> float:
    """The samples ``n`` whose Wilson interval at ``z`` around the rate ``p`` is as wide as
    ``[low, high]``: what a plain proportion with that interval would hold. Defined at ``p`` 0 or 1
    too (Wilson's interval there is ``[0, z^2 / (n + z^2)]``), so that a rate at an edge is weighed
    by its interval and not by its cases. Wilson's width falls as ``n`` grows, so the root is one."""
    width = high - low
    if width <= 0:
        return math.inf

    def gap(log_n: float) -> float:
        n = math.exp(log_n)
        denom = 1 + z * z / n
        return 2 * z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom - width

    if gap(math.log(1e-6)) < 0:  # wider than Wilson's at any size: the fewest samples
        return 1e-6
    if gap(math.log(1e12)) > 0:
        return 1e12
    return math.exp(root(gap, math.log(1e-6), math.log(1e12)))


def root(f: Callable[[float], float], low: float, high: float) -> float:
    """The root of ``f`` between ``low`` and ``high`` (where ``f`` changes sign), by scipy's Brent."""
    from scipy.optimize import brentq

    return float(brentq(f, low, high, xtol=1e-12))


def clip_interval(low: float, high: float) -> tuple[float, float]:
    """An interval of rates clipped to [0, 1] and rounded to 6 decimals: float noise (6.9e-18 for 0,
    0.9999999999999999 for 1) is no information, and reports show it verbatim."""
    return (round(min(1.0, max(0.0, low)), CI_DECIMALS), round(min(1.0, max(0.0, high)), CI_DECIMALS))


def mean_diff_interval(xs: list[float], ys: list[float], z: float = Z95) -> tuple[float, float] | None:
    """Normal-approximation (Welch) 95% interval for mean(xs) - mean(ys); None with fewer than 2 each."""
    if len(xs) < 2 or len(ys) < 2:
        return None
    mx, my = math.fsum(xs) / len(xs), math.fsum(ys) / len(ys)
    vx = math.fsum((x - mx) ** 2 for x in xs) / (len(xs) - 1)
    vy = math.fsum((y - my) ** 2 for y in ys) / (len(ys) - 1)
    half = z * math.sqrt(vx / len(xs) + vy / len(ys))
    return (mx - my - half, mx - my + half)
