"""Sample-size planning for gates: how many cases (and repeats) a run needs so that a gate decides
as it should (``sab plan``, ``sab_pytest.cli.plan``, adds the subset and the command line).

Both plans rest on the model of the gates themselves (``clustered``): cases are the unit, and the K
repeats of a case are worth ``K / (1 + (K - 1) agreement)`` samples (the design effect), where
``agreement`` is the intraclass correlation of a case's repeats (1: every case's repeats agree, a
model at temperature 0; 0: a case says nothing about its repeats). A run's summary states it
(``repeats.agreement``); without it a plan assumes 1, so that repeats are never promised power they
may not have.

``no_regression()``: the baseline succeeds with probability ``p0`` per sample, the candidate with
``p1`` (``p0 - detect`` where higher is better, ``p0 + detect`` where lower is), each run's rate over
``n`` cases with variance ``p (1 - p) deff / (n K)``, the two runs uncorrelated (whatever the cases
share only helps). The gate fails when the worse-side end of the difference's interval at
``1 - alpha`` passes 0, which, with the Wilson half-widths at the expected rates ``h0`` and ``h1``,
happens with probability ``Phi((detect - sqrt(h0**2 + h1**2)) / sigma)``, ``sigma`` the standard
deviation of the difference. The answer is the smallest ``n`` whose power reaches the target;
``bench/bench_gate_calibration.py`` checks the promise by simulation.

A fixed threshold (``rejection_rate>=0.5``, decided on the point or an end of the interval): the
smallest number of cases at which the gate decides as the expected value says (passes when the
value meets the threshold, fails when not) with probability ``power``; the run's samples counted as
``Bin(n_eff, p)`` with ``n_eff`` the cases times the samples a case is worth, and the interval as
the exact one over them, as the run's own.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from sab_pytest.errors import UsageError
from sab_pytest.results.clustered import CORRELATION_SHARE, rate_ends, wilson_ends
from sab_pytest.results.stats import CI_DECIMALS, Z95, binomial_pmf, normal_cdf, student
from sab_pytest.settings import DEFAULT_ALPHA

#: the most cases considered; beyond it the answer is "more than this"
MAX_SAMPLES = 16000


def worth(repeat: int, agreement: float) -> float:
    """The samples one case of ``repeat`` repeats is worth: ``K / (1 + (K - 1) agreement)``."""
    return repeat / (1 + (repeat - 1) * agreement)


@dataclass(frozen=True)
class RegressionSize:
    """What ``no_regression_size`` found: the cases needed, the power reached, and the assumptions."""

    metric: str
    baseline: float
    candidate: float
    alpha: float
    power: float
    repeat: int
    baseline_repeat: int
    agreement: float
    samples: int | None  # cases x repeat; None: more than MAX_SAMPLES cases
    cases: int | None  # paired cases in the metric's denominator
    achieved: float | None

    def power_at(self, cases: int) -> float:
        """The gate's power with ``cases`` paired cases (e.g. all a subset has)."""
        return regression_power(cases, self.baseline, self.candidate, alpha=self.alpha, repeat=self.repeat,
                                baseline_repeat=self.baseline_repeat, agreement=self.agreement)


def regression_power(cases: int | np.ndarray, p0: float, p1: float, *, alpha: float, repeat: int,
                     baseline_repeat: int, agreement: float) -> float:
    """The chance that ``no_regression`` fails a candidate at ``p1`` against a baseline at ``p0`` over
    ``cases`` paired cases (see the module's docstring); vectorised over ``cases``."""
    n = np.asarray(cases, dtype=float)
    if np.all(n < 2):
        return 0.0 if np.ndim(cases) == 0 else np.zeros_like(n)  # type: ignore[return-value]
    n = np.maximum(n, 2.0)
    eff0, eff1 = n * worth(baseline_repeat, agreement), n * worth(repeat, agreement)
    crit = student(1 - alpha, n - 1)
    low0, high0 = wilson_ends(np.float64(p0), eff0, crit)
    low1, high1 = wilson_ends(np.float64(p1), eff1, crit)
    # the end that decides a drop is the difference's upper one: the baseline's lower half-width with the
    # candidate's upper one (a rise: the other way round)
    h0, h1 = (p0 - low0, high1 - p1) if p1 < p0 else (high0 - p0, p1 - low1)
    sigma = np.sqrt(p0 * (1 - p0) / eff0 + p1 * (1 - p1) / eff1)
    # the correlation the gate uses: none between uncorrelated runs, but its estimate over n cases spreads
    # by 1 / sqrt(n - 1) and only its positive part counts (``clustered.used_correlation``)
    phi = CORRELATION_SHARE / np.sqrt(2 * math.pi * (n - 1))
    z = (abs(p1 - p0) - np.sqrt(np.maximum(0.0, h0 ** 2 + h1 ** 2 - 2 * phi * h0 * h1))) / sigma
    out = np.asarray(normal_cdf(np.atleast_1d(z)), dtype=float)
    out = np.where(np.atleast_1d(np.asarray(cases)) < 2, 0.0, out)
    return float(out[0]) if np.ndim(cases) == 0 else out  # type: ignore[return-value]


def no_regression_size(metric: str, baseline: float, detect: float, *, better: int, alpha: float = DEFAULT_ALPHA,
                       power: float = 0.8, repeat: int = 1, baseline_repeat: int | None = None,
                       agreement: float = 1.0) -> RegressionSize:
    """The cases (and samples, with ``repeat``) ``no_regression(metric)`` needs to see a worsening by
    ``detect`` from ``baseline`` with probability ``power`` at level ``alpha``, the baseline run made
    with ``baseline_repeat`` repeats (default: the same as this run's), repeats agreeing by ``agreement``.

    Parameters: one for each of ``sab plan``'s options (and the metric's direction), each checked here
    and named by that option in its error; the returned ``RegressionSize`` keeps them as the assumptions
    the plan prints, so a record of them passed in would only be that record's twin."""
    if better == 0:
        raise UsageError(f"--metric: {metric!r} has no regression direction (no_regression refuses it)")
    for name, value in (("--baseline-rate", baseline), ("--sab-alpha", alpha), ("--power", power)):
        if not 0.0 < value < 1.0:
            raise UsageError(f"{name}: expected a number between 0 and 1 (exclusive), got {value}")
    if not 0.0 < detect < 1.0:
        raise UsageError(f"--detect: expected a change between 0 and 1 (exclusive), got {detect}")
    if not 0.0 <= agreement <= 1.0:
        raise UsageError(f"--agreement: expected a number between 0 and 1, got {agreement}")
    base_k = repeat if baseline_repeat is None else baseline_repeat
    if repeat < 1 or base_k < 1:
        raise UsageError(f"--sab-repeat: expected a positive number of repeats, got {min(repeat, base_k)}")
    p0, p1 = baseline, baseline - detect if better > 0 else baseline + detect
    if not 0.0 <= p1 <= 1.0:
        raise UsageError(f"--detect: {metric} {'dropping' if better > 0 else 'rising'} by {detect} from {baseline} "
                         f"leaves the range 0..1")
    sizes = np.arange(MAX_SAMPLES + 1)
    curve = regression_power(sizes, p0, p1, alpha=alpha, repeat=repeat, baseline_repeat=base_k, agreement=agreement)
    reached = np.nonzero(np.asarray(curve) >= power)[0]
    cases = int(reached[0]) if reached.size else None
    achieved = float(np.asarray(curve)[cases]) if cases is not None else None
    samples = cases * repeat if cases is not None else None
    return RegressionSize(metric, p0, p1, alpha, power, repeat, base_k, agreement, samples, cases, achieved)


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

    agreement: float = 1.0

    def power_at(self, cases: int) -> float:
        return threshold_power(cases, self.expected, self.threshold, self.op, self.on, self.repeat, self.agreement)


_HOLDS: dict[str, Callable[[float, float], bool]] = {
    ">=": operator.ge, "<=": operator.le, ">": operator.gt, "<": operator.lt, "==": operator.eq,
}


_ARRAY_OPS: dict[str, np.ufunc] = {
    ">=": np.greater_equal, "<=": np.less_equal, ">": np.greater, "<": np.less, "==": np.equal,
}


def threshold_power(cases: int, expected: float, threshold: float, op: str, on: str, repeat: int,
                    agreement: float = 1.0) -> float:
    """The chance that a fixed gate over ``cases`` cases (K = ``repeat`` samples each, a success with
    probability ``expected``, repeats agreeing by ``agreement``) decides as it does at the expected
    value itself; the run counted as its effective samples (rounded down)."""
    n = math.floor(cases * worth(repeat, agreement) + 1e-9)
    if n <= 0:
        return 0.0
    wanted = _HOLDS[op](expected, threshold)
    pmf = binomial_pmf(n, expected)
    decided = _ARRAY_OPS[op](_compared(n, on), threshold)
    return float(pmf[decided == wanted].sum())


def _compared(n: int, on: str) -> np.ndarray:
    """What the gate compares with k = 0..n successes of n samples: the value, or an end of the run's
    own interval (``clustered.rate_ends``, vectorised: the search asks for every n up to the subset's size)."""
    p = np.arange(n + 1) / n
    if on == "point":
        return p
    low, high = rate_ends(p, np.float64(n), Z95)
    return np.round(np.clip(low if on == "lower" else high, 0.0, 1.0), CI_DECIMALS)


def threshold_size(op: str, expected: float, threshold: float, *, on: str = "point", power: float = 0.8,
                   repeat: int = 1, limit: int = 2000, agreement: float = 1.0) -> ThresholdSize:
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
        got = threshold_power(cases, expected, threshold, op, on, repeat, agreement)
        if got >= power:
            found, achieved = cases, got
            break
    return ThresholdSize(op, expected, threshold, on, power, repeat, _HOLDS[op](expected, threshold), found,
                         achieved, limit, agreement)


def render(p: RegressionSize) -> list[str]:
    """The sample size of ``no_regression`` as numbers (``sab plan`` adds the run's command)."""
    head = (f"no_regression({p.metric}): baseline {p.baseline:g}, a regression to {p.candidate:g}, "
            f"the difference's one-sided bound at alpha {p.alpha:g} over paired cases, power {p.power:g}")
    if p.samples is None or p.cases is None:
        return [head, f"more than {MAX_SAMPLES} paired cases would be needed: detect a larger change"]
    per = f" x {p.repeat} repeats = {p.samples} samples" if p.repeat > 1 else ""
    lines = [head, f"cases needed in the metric's denominator: {p.cases}{per} (power reached {p.achieved:.3f})"]
    if p.repeat > 1 or p.baseline_repeat > 1:
        lines.append(f"assumed: repeats K={p.baseline_repeat} (baseline) and K={p.repeat}, agreement of a case's "
                     f"repeats {p.agreement:g}: a case is worth {worth(p.baseline_repeat, p.agreement):.2f} and "
                     f"{worth(p.repeat, p.agreement):.2f} samples"
                     + (" (repeats that agree count once; give --agreement, or --agreement-from an earlier run)"
                        if p.agreement == 1.0 else ""))
    lines.append("assumed: the two runs' cases uncorrelated (cases both runs find hard or easy only add power)")
    return lines
