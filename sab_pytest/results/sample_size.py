"""Sample-size planning for gates: how many cases (and repeats) a run needs so that a gate decides
as it should (``sab plan``, ``sab_pytest.cli.plan``, adds the subset and the command line).

``no_regression()``: the test is the gate's own (``pairing``): the one-sided exact McNemar test at
level alpha on the paired cases, each side by its per-case pass fraction (``stats.mcnemar_exact``).
The model it is computed under: the baseline run succeeds on each sample with probability ``p0`` and
the candidate with ``p1`` (``p0 - detect`` where higher is better, ``p0 + detect`` where lower is),
independently. With K repeats a case's pass fraction is ``Bin(K, p) / K`` on each side, so a case is
a regression (the baseline's fraction higher) with probability ``r`` and an improvement with ``i``
(at K = 1 the per-sample probabilities). The discordant cases number ``D ~ Bin(N, r + i)``, and given
``D`` the regressions are ``Bin(D, r / (r + i))``; the gate fails when they reach the critical count
of the exact test. Power is summed exactly over ``D``; the answer is the smallest ``N`` (cases)
whose power reaches the target. Cases that differ among themselves (a case refused in every repeat)
make repeats carry less than the model assumes, so with K > 1 the figure is a lower bound.

A fixed threshold (``rejection_rate>=0.5``, decided on the point or an end of the interval): the
smallest number of cases at which the gate decides as the expected value says (passes when the
value meets the threshold, fails when not) with probability ``power``, the K samples of a case
counted as ``Bin(N K, p)`` and the interval as Wilson's over them (the floor of the run's own
interval, ``resample.cluster_intervals``: again a lower bound with K > 1).
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from sab_pytest.errors import UsageError
from sab_pytest.results.stats import CI_DECIMALS, Z95
from sab_pytest.settings import DEFAULT_ALPHA

#: the largest number of paired samples considered; beyond it the answer is "more than this"
MAX_SAMPLES = 16000


@dataclass(frozen=True)
class RegressionSize:
    """What ``no_regression_size`` found: the samples and cases needed, the power reached, and the assumptions."""

    metric: str
    baseline: float
    candidate: float
    alpha: float
    power: float
    repeat: int
    samples: int | None  # cases x repeat; None: more than MAX_SAMPLES
    cases: int | None  # paired cases in the metric's denominator
    achieved: float | None
    regress: float  # per-case probability the candidate's pass fraction is below the baseline's
    improve: float

    def power_at(self, cases: int) -> float:
        """The gate's power with ``cases`` paired cases (e.g. all a subset has)."""
        return float(power_curve(cases, self.regress, self.improve, self.alpha)[cases]) if cases > 0 else 0.0


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


def no_regression_size(metric: str, baseline: float, detect: float, *, better: int, alpha: float = DEFAULT_ALPHA,
                       power: float = 0.8, repeat: int = 1) -> RegressionSize:
    """The samples (and cases, with ``repeat``) ``no_regression(metric)`` needs to see a worsening
    by ``detect`` from ``baseline`` with probability ``power`` at level ``alpha``."""
    if better == 0:
        raise UsageError(f"--metric: {metric!r} has no regression direction (no_regression refuses it)")
    for name, value in (("--baseline-rate", baseline), ("--sab-alpha", alpha), ("--power", power)):
        if not 0.0 < value < 1.0:
            raise UsageError(f"{name}: expected a number between 0 and 1 (exclusive), got {value}")
    if not 0.0 < detect < 1.0:
        raise UsageError(f"--detect: expected a change between 0 and 1 (exclusive), got {detect}")
    if repeat < 1:
        raise UsageError(f"--sab-repeat: expected a positive number of repeats, got {repeat}")
    p0, p1 = baseline, baseline - detect if better > 0 else baseline + detect
    if not 0.0 <= p1 <= 1.0:
        raise UsageError(f"--detect: {metric} {'dropping' if better > 0 else 'rising'} by {detect} from {baseline} "
                         f"leaves the range 0..1")
    regress, improve = case_probabilities(p0, p1, repeat, better)
    cases = achieved = None
    limit = 500
    while cases is None and limit <= MAX_SAMPLES:
        curve = power_curve(limit, regress, improve, alpha)
        reached = np.nonzero(curve >= power)[0]
        if reached.size:
            cases, achieved = int(reached[0]), float(curve[reached[0]])
        limit *= 2
    samples = cases * repeat if cases is not None else None
    return RegressionSize(metric, p0, p1, alpha, power, repeat, samples, cases, achieved, regress, improve)


def case_probabilities(p0: float, p1: float, repeat: int, better: int) -> tuple[float, float]:
    """(regression, improvement) probability of one paired case: the candidate's pass fraction over
    ``repeat`` samples below (above) the baseline's, where higher is better (``better`` +1)."""
    lf = _log_factorials(repeat)
    base, cand = _binom_pmf(repeat, p0, lf), _binom_pmf(repeat, p1, lf)
    joint = np.outer(base, cand)  # [baseline successes, candidate successes]
    base_higher, cand_higher = float(np.tril(joint, -1).sum()), float(np.triu(joint, 1).sum())
    return (base_higher, cand_higher) if better > 0 else (cand_higher, base_higher)


# ----------------------------------------------------------------------------------- fixed thresholds

@dataclass(frozen=True)
class ThresholdSize:
    """What ``threshold_size`` found for a fixed gate such as ``rejection_rate>=0.5@lower``."""

    op: str
    expected: float
    threshold: float
    on: str
    power: float
    repeat: int
    should_pass: bool  # what the gate should say at the expected value
    cases: int | None  # in the metric's denominator; None: not within ``limit`` cases
    achieved: float | None
    limit: int

    def power_at(self, cases: int) -> float:
        return threshold_power(cases, self.expected, self.threshold, self.op, self.on, self.repeat)


_HOLDS: dict[str, Callable[[float, float], bool]] = {
    ">=": operator.ge, "<=": operator.le, ">": operator.gt, "<": operator.lt, "==": operator.eq,
}


_ARRAY_OPS: dict[str, np.ufunc] = {
    ">=": np.greater_equal, "<=": np.less_equal, ">": np.greater, "<": np.less, "==": np.equal,
}


def threshold_power(cases: int, expected: float, threshold: float, op: str, on: str, repeat: int) -> float:
    """The chance that a fixed gate over ``cases`` cases (K = ``repeat`` samples each, a success with
    probability ``expected``) decides as it does at the expected value itself."""
    n = cases * repeat
    if n <= 0:
        return 0.0
    wanted = _HOLDS[op](expected, threshold)
    pmf = _binom_pmf(n, expected, _log_factorials(n))
    decided = _ARRAY_OPS[op](_compared(n, on), threshold)
    return float(pmf[decided == wanted].sum())


def _compared(n: int, on: str) -> np.ndarray:
    """What the gate compares with k = 0..n successes of n samples: the value, or an end of Wilson's
    interval (``stats.wilson``, vectorised: the search asks for every n up to the subset's size)."""
    p = np.arange(n + 1) / n
    if on == "point":
        return p
    z = Z95
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    end = centre - half if on == "lower" else centre + half
    return np.round(np.clip(end, 0.0, 1.0), CI_DECIMALS)


def threshold_size(op: str, expected: float, threshold: float, *, on: str = "point", power: float = 0.8,
                   repeat: int = 1, limit: int = 2000) -> ThresholdSize:
    """The cases (in the metric's denominator) a fixed gate ``value OP threshold`` needs to decide
    with probability ``power`` as the ``expected`` value says, searched up to ``limit`` cases."""
    for name, value in (("--baseline-rate", expected), ("--power", power)):
        if not 0.0 < value < 1.0:
            raise UsageError(f"{name}: expected a number between 0 and 1 (exclusive), got {value}")
    if repeat < 1:
        raise UsageError(f"--sab-repeat: expected a positive number of repeats, got {repeat}")
    if expected == threshold or op == "==":
        raise UsageError(f"--baseline-rate {expected:g} against {op} {threshold:g}: no number of cases decides such a "
                         f"gate reliably")
    found = achieved = None
    for cases in range(1, limit + 1):
        got = threshold_power(cases, expected, threshold, op, on, repeat)
        if got >= power:
            found, achieved = cases, got
            break
    return ThresholdSize(op, expected, threshold, on, power, repeat, _HOLDS[op](expected, threshold), found,
                         achieved, limit)


def render(p: RegressionSize) -> list[str]:
    """The sample size of ``no_regression`` as numbers (``sab plan`` adds the run's command)."""
    head = (f"no_regression({p.metric}): baseline {p.baseline:g}, a regression to {p.candidate:g}, "
            f"one-sided exact McNemar at alpha {p.alpha:g} on paired cases, power {p.power:g}")
    if p.samples is None or p.cases is None:
        return [head, f"more than {MAX_SAMPLES} paired cases would be needed: detect a larger change"]
    per = f" x {p.repeat} repeats = {p.samples} samples" if p.repeat > 1 else ""
    lines = [head,
             f"cases needed in the metric's denominator: {p.cases}{per} (power reached {p.achieved:.3f})",
             f"assumed: samples independent (a case a regression with probability {p.regress:.3f}, an "
             f"improvement with {p.improve:.3f})"]
    if p.repeat > 1:
        lines.append("repeats counted as independent draws of a case: with cases that differ among themselves "
                     "this is a lower bound")
    return lines
