"""Sample-size planning for ``no_regression()``: how many cases (and repeats) a run needs so that
the gate sees a regression of a given size (``python -m sab_pytest plan``).

The test is the one the gate uses when both runs cover the same cases: the one-sided exact McNemar
test at level alpha on the paired samples (``stats.mcnemar_exact``). The model it is planned under:
the baseline run succeeds on each sample with probability ``p0`` and the candidate with ``p1``
(``p0 - detect`` where higher is better, ``p0 + detect`` where lower is), independently of each
other. So a sample is a regression (worse in the candidate) with probability ``r`` and an
improvement with probability ``i``; the discordant samples number ``D ~ Bin(N, r + i)``, and given
``D`` the regressions are ``Bin(D, r / (r + i))``. The gate fails (sees the regression) when the
regressions reach the critical count of the exact test. Power is summed exactly over ``D``; the
answer is the smallest ``N`` whose power reaches the target.

With ``--repeat K`` every case gives K paired samples (repeat i of the baseline against repeat i
of the candidate, as the gate pairs them), and the cases needed are ``ceil(N / K)``. That holds when
the repeats of a case are independent draws; when cases differ among themselves (a case refused in
every repeat), repeats carry less than new cases, and the figure is a lower bound.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from sab_pytest.errors import UsageError
from sab_pytest.settings import DEFAULT_ALPHA

#: the largest number of paired samples planned for; beyond it the answer is "more than this"
MAX_SAMPLES = 16000


@dataclass(frozen=True)
class Plan:
    """What ``plan`` found: the samples and cases needed, the power reached, and the assumptions."""

    metric: str
    baseline: float
    candidate: float
    alpha: float
    power: float
    repeat: int
    samples: int | None  # None: more than MAX_SAMPLES
    cases: int | None
    achieved: float | None
    regress: float  # per-sample probability the candidate is worse than the baseline
    improve: float


def _log_factorials(n: int) -> np.ndarray:
    return np.concatenate([[0.0], np.cumsum(np.log(np.arange(1, n + 1, dtype=float)))])


def _binom_pmf(n: int, p: float, lf: np.ndarray) -> np.ndarray:
    """P(X = k) for k = 0..n, X ~ Bin(n, p), from the log-factorial table ``lf``."""
    k = np.arange(n + 1)
    if p <= 0.0 or p >= 1.0:
        out = np.zeros(n + 1)
        out[0 if p <= 0.0 else n] = 1.0
        return out
    return np.exp(lf[n] - lf[k] - lf[n - k] + k * math.log(p) + (n - k) * math.log1p(-p))


def detection_tails(max_d: int, q: float, alpha: float) -> np.ndarray:
    """For D = 0..max_d discordant samples: the probability that the one-sided exact McNemar test
    rejects at ``alpha`` when each discordant sample is a regression with probability ``q``."""
    lf = _log_factorials(max_d)
    out = np.zeros(max_d + 1)
    for d in range(1, max_d + 1):
        null = _binom_pmf(d, 0.5, lf)
        tail = np.cumsum(null[::-1])[::-1]  # P(X >= b) under the null
        below = np.nonzero(tail < alpha)[0]
        if below.size:
            out[d] = _binom_pmf(d, q, lf)[below[0]:].sum()
    return out


def power_curve(max_n: int, regress: float, improve: float, alpha: float) -> np.ndarray:
    """The gate's power for N = 0..max_n paired samples (exact under the planning model)."""
    tails = detection_tails(max_n, regress / (regress + improve), alpha)
    lf = _log_factorials(max_n)
    pd = regress + improve
    return np.array([float(_binom_pmf(n, pd, lf) @ tails[:n + 1]) for n in range(max_n + 1)])


def plan(metric: str, baseline: float, detect: float, *, better: int, alpha: float = DEFAULT_ALPHA, power: float = 0.8,
         repeat: int = 1) -> Plan:
    """The samples (and cases, with ``repeat``) ``no_regression(metric)`` needs to see a worsening
    by ``detect`` from ``baseline`` with probability ``power`` at level ``alpha``."""
    if better == 0:
        raise UsageError(f"--metric: {metric!r} has no regression direction (no_regression refuses it)")
    for name, value in (("--baseline", baseline), ("--alpha", alpha), ("--power", power)):
        if not 0.0 < value < 1.0:
            raise UsageError(f"{name}: expected a number between 0 and 1 (exclusive), got {value}")
    if not 0.0 < detect < 1.0:
        raise UsageError(f"--detect: expected a change between 0 and 1 (exclusive), got {detect}")
    if repeat < 1:
        raise UsageError(f"--repeat: expected a positive number of repeats, got {repeat}")
    p0, p1 = baseline, baseline - detect if better > 0 else baseline + detect
    if not 0.0 <= p1 <= 1.0:
        raise UsageError(f"--detect: {metric} {'dropping' if better > 0 else 'rising'} by {detect} from {baseline} "
                         f"leaves the range 0..1")
    # higher is better: a regression is a sample the baseline got right and the candidate not
    regress, improve = (p0 * (1 - p1), (1 - p0) * p1) if better > 0 else ((1 - p0) * p1, p0 * (1 - p1))
    samples = achieved = None
    limit = 500
    while samples is None and limit <= MAX_SAMPLES:
        curve = power_curve(limit, regress, improve, alpha)
        reached = np.nonzero(curve >= power)[0]
        if reached.size:
            samples, achieved = int(reached[0]), float(curve[reached[0]])
        limit *= 2
    cases = math.ceil(samples / repeat) if samples is not None else None
    return Plan(metric, p0, p1, alpha, power, repeat, samples, cases, achieved, regress, improve)


def render(p: Plan) -> list[str]:
    """The plan as the command prints it."""
    head = (f"no_regression({p.metric}): baseline {p.baseline:g}, a regression to {p.candidate:g}, "
            f"one-sided exact McNemar at alpha {p.alpha:g}, power {p.power:g}")
    if p.samples is None or p.cases is None:
        return [head, f"more than {MAX_SAMPLES} paired samples would be needed: detect a larger change"]
    per = f" x {p.repeat} repeats = {p.cases * p.repeat} samples" if p.repeat > 1 else ""
    lines = [head,
             f"cases needed: {p.cases}{per} (power reached {p.achieved:.3f}) in the metric's denominator",
             f"assumed: the runs independent per sample (regression {p.regress:.3f}, improvement {p.improve:.3f} "
             f"of samples)"]
    if p.repeat > 1:
        lines.append("repeats counted as independent samples: with cases that differ among themselves this is a "
                     "lower bound")
    return lines
