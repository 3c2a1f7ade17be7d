"""The one model of rates, differences and ``no_regression`` (``results.clustered``), on known answers."""

from __future__ import annotations

import numpy as np
import pytest

from sab_pytest.results import clustered, stats


def _cases(pairs: list[tuple[int, int]]) -> clustered.Cases:
    ids = tuple(f"c{i:03d}" for i in range(len(pairs)))
    return clustered.Cases(ids, np.array([y for y, _ in pairs]), np.array([m for _, m in pairs]))


def test_one_sample_a_case_is_the_exact_binomial_interval() -> None:
    entry = clustered.rate_entry(_cases([(1, 1)] * 8 + [(0, 1)] * 2))
    assert entry["n_eff"] == 10.0 and entry["method"] == "exact"
    assert entry["ci95"] == list(stats.exact(8, 10))
    # Clopper and Pearson's interval of 8 of 10, as tables print it
    assert entry["ci95"] == pytest.approx([0.4439, 0.9748], abs=1e-4)


def test_the_effective_samples_lie_between_cases_and_samples() -> None:
    # every case's 3 repeats agree: worth its 10 cases, the interval of 8 of 10
    agree = clustered.rate_entry(_cases([(3, 3)] * 8 + [(0, 3)] * 2))
    assert agree["n_eff"] == 10.0 and agree["ci95"] == list(stats.exact(8, 10))
    # by hand, cases of 2 samples passing 2, 1, 1, 2, 0, 0: Y = 6, M = 12, residuals M y - Y m = 12 y - 12
    # = 12, 0, 0, 12, -12, -12, squares 576; n_eff = M**2 Y (M - Y) / 576 * (n - 1) / n = 9 * 5 / 6
    assert clustered.rate_entry(_cases([(2, 2), (1, 2), (1, 2), (2, 2), (0, 2), (0, 2)]))["n_eff"] == 7.5
    # every case 1 of 2: less spread than independent samples would show, kept at the 12 samples
    assert clustered.rate_entry(_cases([(1, 2)] * 6))["n_eff"] == 12.0


def test_the_difference_is_newcombes_published_example_with_many_cases() -> None:
    # Newcombe (1998), independent proportions, 56/70 vs 48/80: difference 0.2, interval 0.0524 .. 0.3339;
    # with very many cases the Student quantile is the normal one
    d = clustered.difference(clustered.Side(48 / 80, 80, 10 ** 9), clustered.Side(56 / 70, 70, 10 ** 9))
    assert d is not None and d.value == pytest.approx(0.2)
    assert d.ci == pytest.approx((0.0524, 0.3339), abs=1e-4)
    assert clustered.difference(clustered.Side(0.5, 1, 1), clustered.Side(0.5, 10, 10)) is None


def test_the_p_value_is_where_the_interval_reaches_zero() -> None:
    a = _cases([(1, 1)] * 30 + [(0, 1)] * 10)
    b = _cases([(1, 1)] * 22 + [(0, 1)] * 18)
    d = clustered.paired_difference(a, b)
    assert d is not None and 0.001 < d.p_lower < 0.2
    for alpha in (d.p_lower * 0.99, d.p_lower * 1.01):
        at = clustered.paired_difference(a, b, level=1 - 2 * alpha)
        assert at is not None and clustered.regressed(at, worse=+1) == (d.p_lower < alpha)
    # two-sided: significant at 0.05 exactly when the 95% interval excludes 0
    assert (d.p_two_sided < 0.05) == (d.ci[1] < 0 or d.ci[0] > 0)


def test_student_quantiles() -> None:
    # the printed table's quantiles, df = 1 included (12.706, where an expansion gave 9.71)
    for level, df, table in ((0.975, 1, 12.706), (0.975, 2, 4.303), (0.95, 3, 2.353), (0.975, 10, 2.228),
                             (0.95, 30, 1.697)):
        assert float(stats.student(level, df)) == pytest.approx(table, abs=0.001)


def test_agreement_of_repeats() -> None:
    assert clustered.agreement(_cases([(3, 3)] * 5 + [(0, 3)] * 5)) == 1.0
    rng = np.random.default_rng(5)
    independent = _cases([(int(y), 3) for y in rng.binomial(3, 0.5, size=4000)])
    assert clustered.agreement(independent) == pytest.approx(0.0, abs=0.03)
    assert clustered.agreement(_cases([(1, 1)] * 5)) is None
