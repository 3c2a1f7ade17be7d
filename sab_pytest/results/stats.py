"""Small interval helpers in plain Python (no scipy): Wilson's score interval, the clipping of an
interval of rates, a Welch interval for two means. The model of the results (cases the unit,
repeats by how much they agree), on which every rate, difference and test rests, is ``clustered``.

Why Wilson: the benchmark's metrics are proportions of a few hundred cases at most, often near 0 or
1, where the normal ("Wald") interval misbehaves.
"""

from __future__ import annotations

import math

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


def mean_diff_interval(xs: list[float], ys: list[float], z: float = Z95) -> tuple[float, float] | None:
    """Normal-approximation (Welch) 95% interval for mean(xs) - mean(ys); None with fewer than 2 each."""
    if len(xs) < 2 or len(ys) < 2:
        return None
    mx, my = math.fsum(xs) / len(xs), math.fsum(ys) / len(ys)
    vx = math.fsum((x - mx) ** 2 for x in xs) / (len(xs) - 1)
    vy = math.fsum((y - my) ** 2 for y in ys) / (len(ys) - 1)
    half = z * math.sqrt(vx / len(xs) + vy / len(ys))
    return (mx - my - half, mx - my + half)
