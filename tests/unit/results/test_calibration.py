"""Gates against a known truth, on simulated runs (``results.calibration``): a few cells of the
calibration bench (``bench/bench_gate_calibration.py``) at a smaller scale."""

from __future__ import annotations

import numpy as np
import pytest

from sab_pytest.results.calibration import Cell, coverage, fail_share


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
