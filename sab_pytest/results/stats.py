"""Interval estimates and tests for proportions, in plain Python (no scipy).

Why these: the benchmark's metrics are proportions of a few hundred cases at most, often near 0 or
1, where the normal ("Wald") interval misbehaves. So a single rate gets the Wilson score interval,
a difference of two independent rates gets Newcombe's hybrid score interval (his method 10, built
from the two Wilson intervals), two runs over the same cases get the exact McNemar test (a binomial
test on the discordant cases), and two runs over different cases get the pooled two-proportion z
test.
"""

from __future__ import annotations

import math
from functools import cache

Z95 = 1.959963984540054


def wilson(k: float, n: float, z: float = Z95) -> tuple[float, float] | None:
    """Wilson score interval for k successes out of n (None when n == 0)."""
    if n == 0:
        return None
    p = k / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return clip_interval(centre - half, centre + half)


CI_DECIMALS = 6


def clip_interval(low: float, high: float) -> tuple[float, float]:
    """An interval of rates clipped to [0, 1] and rounded to 6 decimals: float noise (6.9e-18 for 0,
    0.9999999999999999 for 1) is no information, and reports show it verbatim."""
    return (round(min(1.0, max(0.0, low)), CI_DECIMALS), round(min(1.0, max(0.0, high)), CI_DECIMALS))


def newcombe(k1: int, n1: int, k2: int, n2: int, z: float = Z95) -> tuple[float, float] | None:
    """Newcombe's hybrid score interval for p1 - p2 of two independent proportions (None if n1 or n2 is 0)."""
    a, b = wilson(k1, n1, z), wilson(k2, n2, z)
    if a is None or b is None:
        return None
    p1, p2 = k1 / n1, k2 / n2
    d = p1 - p2
    lower = d - math.sqrt((p1 - a[0]) ** 2 + (b[1] - p2) ** 2)
    upper = d + math.sqrt((a[1] - p1) ** 2 + (p2 - b[0]) ** 2)
    return (max(-1.0, lower), min(1.0, upper))


def newcombe_paired(both: float, first_only: float, second_only: float, neither: float,
                    z: float = Z95) -> tuple[float, float] | None:
    """Newcombe's hybrid score interval for p1 - p2 of two proportions measured on the same cases.

    Method 10 of Newcombe (1998, "Improved confidence intervals for the difference between binomial
    proportions based on paired data"): the two Wilson intervals combined with the phi correlation of
    the 2x2 table, so that concordant cases narrow the interval as they should. With phi = 0 it is
    ``newcombe`` of the two margins. None when there are no cases.
    """
    n = both + first_only + second_only + neither
    if n == 0:
        return None
    k1, k2 = both + first_only, both + second_only
    p1, p2 = k1 / n, k2 / n
    l1, u1 = wilson(k1, n, z)  # type: ignore[misc]
    l2, u2 = wilson(k2, n, z)  # type: ignore[misc]
    margins = (k1 * (n - k1) * k2 * (n - k2))
    phi = (both * neither - first_only * second_only) / math.sqrt(margins) if margins else 0.0
    d = p1 - p2
    lower = d - math.sqrt(max(0.0, (p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2))
    upper = d + math.sqrt(max(0.0, (u1 - p1) ** 2 - 2 * phi * (u1 - p1) * (p2 - l2) + (p2 - l2) ** 2))
    return (max(-1.0, lower), min(1.0, upper))


def _binom_cdf_half(k: int, n: int) -> float:
    """P(X <= k) for X ~ Binomial(n, 1/2), exact (log-space sums, fine for n in the thousands)."""
    if k < 0:
        return 0.0
    if k >= n:
        return 1.0
    log_half_n = -n * math.log(2)
    total = 0.0
    for i in range(k + 1):
        total += math.exp(math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) + log_half_n)
    return min(1.0, total)


@cache  # the bootstrap of a gate's decision asks the same few counts thousands of times
def mcnemar_exact(b: int, c: int, *, alternative: str = "two-sided") -> float:
    """Exact McNemar p-value from the discordant counts (the project's one McNemar test: gates,
    compare, their bootstrap, plan).

    ``b``: cases a success in the first run and a failure in the second; ``c``: the reverse.
    ``alternative="greater"`` tests whether b exceeds c (the first run did better), one-sided.
    """
    n = b + c
    if n == 0:
        return 1.0
    if alternative == "greater":
        return _binom_cdf_half(n - b, n)  # P(X >= b) = P(X <= n - b) by symmetry
    if alternative != "two-sided":
        raise ValueError(f"alternative must be 'two-sided' or 'greater', not {alternative!r}")
    return min(1.0, 2.0 * _binom_cdf_half(min(b, c), n))


def _normal_sf(z: float) -> float:
    """P(Z > z) for a standard normal Z."""
    return 0.5 * math.erfc(z / math.sqrt(2))


def two_proportion_test(k1: int, n1: int, k2: int, n2: int, *, alternative: str = "two-sided") -> float | None:
    """Pooled two-proportion z test p-value (None when a side is empty).

    ``alternative="greater"`` tests whether p1 exceeds p2, one-sided.
    """
    if n1 == 0 or n2 == 0:
        return None
    pooled = (k1 + k2) / (n1 + n2)
    se = math.sqrt(pooled * (1 - pooled) * (1 / n1 + 1 / n2))
    diff = k1 / n1 - k2 / n2
    if se == 0:  # both at 0 or both at 1: no evidence of any difference
        return 1.0
    z = diff / se
    if alternative == "greater":
        return _normal_sf(z)
    if alternative != "two-sided":
        raise ValueError(f"alternative must be 'two-sided' or 'greater', not {alternative!r}")
    return min(1.0, 2 * _normal_sf(abs(z)))


def regression_p(k_cur: int, n_cur: int, k_base: int, n_base: int, worse: int) -> float | None:
    """One-sided p-value of a regression from the baseline's k/n to the current run's (pooled
    two-proportion z test): ``worse`` +1 when a drop of the rate is a regression, -1 when a rise is."""
    if worse > 0:
        return two_proportion_test(k_base, n_base, k_cur, n_cur, alternative="greater")
    return two_proportion_test(k_cur, n_cur, k_base, n_base, alternative="greater")


def mean_diff_interval(xs: list[float], ys: list[float], z: float = Z95) -> tuple[float, float] | None:
    """Normal-approximation (Welch) 95% interval for mean(xs) - mean(ys); None with fewer than 2 each."""
    if len(xs) < 2 or len(ys) < 2:
        return None
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    vx = sum((x - mx) ** 2 for x in xs) / (len(xs) - 1)
    vy = sum((y - my) ** 2 for y in ys) / (len(ys) - 1)
    half = z * math.sqrt(vx / len(xs) + vy / len(ys))
    return (mx - my - half, mx - my + half)
