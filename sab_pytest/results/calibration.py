"""Simulated runs with a known truth: the check that gates keep their promises (false FAILs at most
alpha, the power ``sab plan`` promises, intervals that cover the true rate).

Why a simulation and not the shape of the output: a gate is what CI acts on, and only runs whose
true rates are known say whether it decides rightly. The runs here are the ones teams make: cases
that differ in difficulty (each case's rate drawn from a Beta distribution around the mean, its
``agreement`` being the intraclass correlation of a case's repeats), K repeats per case on each
side, decided by the gate's own rule (``clustered.regression_fails``) and intervals made by the
run's own (``clustered.effective_samples`` with ``clustered.rate_ends``). ``bench/bench_gate_calibration.py``
prints the full table; the unit tests run a few cells.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sab_pytest.results.clustered import effective_samples, rate_ends, regression_fails
from sab_pytest.results.stats import Z95


@dataclass(frozen=True)
class Cell:
    """One design: baseline and candidate repeats, the cases, the baseline's mean rate, and the
    candidate's (equal to it: no change)."""

    k_base: int
    k_cand: int
    cases: int
    rate: float
    candidate: float
    agreement: float


def case_rates(rng: np.random.Generator, mean: float, agreement: float, shape: tuple[int, int]) -> np.ndarray:
    """Per-case rates from the Beta distribution of mean ``mean`` whose intraclass correlation is
    ``agreement`` (``1 / (a + b + 1)``); every case at ``mean`` when ``agreement`` is 0."""
    if agreement <= 0:
        return np.full(shape, mean)
    total = 1 / agreement - 1
    if total <= 0:  # every case's repeats agree: a case passes always or never
        return (rng.random(shape) < mean).astype(float)
    return rng.beta(mean * total, (1 - mean) * total, size=shape)


def fail_share(rng: np.random.Generator, cell: Cell, draws: int, alpha: float, *, shared: bool) -> float:
    """The share of ``draws`` simulated pairs of runs in which ``no_regression`` (higher is better)
    fails. ``shared``: the candidate is the same model on the same cases (each case's rate the same
    in both runs, the no-change case); otherwise its case rates are drawn apart around its own mean."""
    base = case_rates(rng, cell.rate, cell.agreement, (draws, cell.cases))
    cand = base if shared else case_rates(rng, cell.candidate, cell.agreement, (draws, cell.cases))
    ya, yb = rng.binomial(cell.k_base, base), rng.binomial(cell.k_cand, cand)
    ma, mb = np.full_like(ya, cell.k_base), np.full_like(yb, cell.k_cand)
    return float(np.mean(regression_fails(ya, ma, yb, mb, alpha, worse=+1)))


def coverage(rng: np.random.Generator, rate: float, k: int, cases: int, agreement: float,
             draws: int) -> tuple[float, float]:
    """(share of runs whose interval's lower end is at most the true rate, share whose upper end is at
    least it): a one-sided ``@lower`` / ``@upper`` gate's chance of not overstating the model."""
    y = rng.binomial(k, case_rates(rng, rate, agreement, (draws, cases)))
    m = np.full_like(y, k)
    n_eff = effective_samples(y, m)
    low, high = rate_ends(y.sum(-1) / m.sum(-1), n_eff, Z95)
    return float(np.mean(np.round(low, 6) <= rate)), float(np.mean(np.round(high, 6) >= rate))
