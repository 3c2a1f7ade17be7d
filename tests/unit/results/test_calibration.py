"""Gates against a known truth, on simulated runs (``results.calibration``): a few cells of the
calibration bench (``bench/bench_gate_calibration.py``) at a smaller scale."""

from __future__ import annotations

import numpy as np
import pytest

from sab_pytest.results import stats
from sab_pytest.results.calibration import Cell, coverage, fail_share
from sab_pytest.results.clustered import rate_ends
from sab_pytest.results.judging.simulation import JudgeCell
from sab_pytest.results.judging.simulation import coverage as judged_coverage


@pytest.mark.parametrize(("k_base", "k_cand", "rate"), [(1, 3, 0.7), (3, 1, 0.3), (1, 5, 0.9)])
def test_an_unchanged_model_fails_no_regression_at_most_alpha_of_the_time(k_base: int, k_cand: int,
                                                                         rate: float) -> None:
    # the designs where a sign test on per-case pass fractions failed 16-22% of unchanged models (57 cases
    # whose rates differ): whatever the repeats on each side, false FAILs stay within alpha
    cell = Cell(k_base, k_cand, 57, rate, rate, agreement=0.3)
    share = fail_share(np.random.default_rng(k_base * 10 + k_cand), cell, 1500, alpha=0.05, shared=True)
    assert share <= 0.05 + 3 * (0.05 * 0.95 / 1500) ** 0.5  # alpha plus three standard errors


def test_a_real_drop_is_seen_whatever_the_repeats() -> None:
    # 0.70 -> 0.50 over 57 cases: seen most of the time, with a K = 3 baseline and a K = 1 candidate too
    cell = Cell(3, 1, 57, 0.7, 0.5, agreement=0.3)
    assert fail_share(np.random.default_rng(2), cell, 1000, alpha=0.05, shared=False) > 0.6


@pytest.mark.parametrize(("k", "rate"), [(1, 0.5), (3, 0.9), (5, 0.3)])
def test_one_sided_interval_ends_cover_the_true_rate(k: int, rate: float) -> None:
    low, high = coverage(np.random.default_rng(k), rate, k, 20, 0.3, 4000)
    assert low >= 0.94 and high >= 0.94  # nominal 0.975 each; 4000 draws: a standard error of 0.003


def test_a_rates_one_sided_bounds_cover_at_every_n_from_10() -> None:
    """The ends of a run's interval (``clustered.rate_ends``), each a one-sided bound at 97.5 %, and at 95 %
    (the level of ``no_regression`` at alpha 0.05): their exact coverage, summed over the binomial, at
    every n from 10 to 130 and true rates 0.02 to 0.98. Wilson's lower end covered 0.925 at n 20, rate 0.05."""
    rates = np.round(np.arange(0.02, 0.985, 0.02), 2)
    for n in range(10, 131, 3):
        k = np.arange(n + 1)
        for level, z in ((0.975, stats.Z95), (0.95, float(stats.normal_quantile(0.95)))):
            low, high = rate_ends(k / n, np.float64(n), z)
            for p in rates:
                pmf = stats.binomial_pmf(n, float(p))
                assert pmf[low <= p].sum() >= level - 1e-9 and pmf[high >= p].sum() >= level - 1e-9, (n, p, level)


def test_every_case_labelled_the_corrected_interval_covers_at_40_cases() -> None:
    """A small run labelled whole: the corrected interval is then the run's own, and its coverage is that
    interval's (Wilson's gave 0.928 two-sided at 40 cases and rate 0.2); 4000 runs see it within 0.01."""
    found = judged_coverage(np.random.default_rng(40), JudgeCell(40, 0.2, 0.7, 0.7, 40), 4000)
    assert found["both"] >= 0.94 and min(found["low95"], found["high95"]) >= 0.94, found
