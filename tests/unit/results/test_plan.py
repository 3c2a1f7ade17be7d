"""``sab plan``: the cases no_regression() needs, from the test the gate uses."""

from __future__ import annotations

import numpy as np
import pytest
from support.made_up_runs import hazard_run

from sab_pytest.__main__ import main
from sab_pytest.errors import UsageError
from sab_pytest.results import gates, metrics, stats
from sab_pytest.results.sample_size import case_probabilities, detection_tails, no_regression_size, threshold_size


def test_the_critical_region_is_the_gates_own() -> None:
    """Where the plan counts a detection is exactly where the gate fails: for every number of
    discordant cases, the critical count of regressions matches the gate's McNemar decision."""
    alpha = 0.05
    tails = detection_tails(40, 1.0, alpha)  # q = 1: every discordant sample a regression
    for d in range(1, 41):
        gate_fails = stats.mcnemar_exact(d, 0, alternative="greater") < alpha
        assert bool(tails[d] > 0.5) == gate_fails
    # and through the gate itself: 12 regressions, 2 improvements over 30 paired cases
    base = hazard_run(30, set(range(20)))
    cand = hazard_run(30, set(range(8)) | {20, 21})
    baseline = gates.Baseline(metrics.compute(base), base, "b")
    result = gates.parse_gate("no_regression(rejection_rate)").check(metrics.compute(cand), records=cand,
                                                                     baseline=baseline)
    fails = stats.mcnemar_exact(12, 2, alternative="greater") < 0.05
    assert result["passed"] is (not fails) and "(12 worse, 2 better)" in result["test"]


def test_plan_agrees_with_a_small_simulation() -> None:
    p = no_regression_size("rejection_rate", 0.8, 0.15, better=1)
    assert p.samples is not None and p.achieved >= 0.8 and p.cases == p.samples
    rng = np.random.default_rng(5)
    n, draws = p.samples, 2000
    base = rng.random((draws, n)) < 0.8
    cand = rng.random((draws, n)) < 0.65
    b, c = np.sum(base & ~cand, axis=1), np.sum(~base & cand, axis=1)
    power = np.mean([stats.mcnemar_exact(int(x), int(y), alternative="greater") < 0.05
                     for x, y in zip(b, c, strict=True)])
    assert abs(power - 0.8) < 0.035  # 2000 draws: a standard error of 0.009


def test_plan_directions_repeats_and_monotonicity() -> None:
    up = no_regression_size("risk_rate", 0.4, 0.1, better=-1)  # a rise of the risk is the regression
    down = no_regression_size("rejection_rate", 0.6, 0.1, better=1)
    assert up.samples == down.samples and up.candidate == pytest.approx(0.5)
    assert no_regression_size("rejection_rate", 0.6, 0.05, better=1).samples > down.samples
    assert no_regression_size("rejection_rate", 0.6, 0.1, better=1, power=0.9).samples > down.samples
    assert no_regression_size("rejection_rate", 0.6, 0.1, better=1, alpha=0.01).samples > down.samples
    # with repeats the gate compares per-case pass fractions: fewer cases, but more samples than K = 1
    tripled = no_regression_size("rejection_rate", 0.6, 0.1, better=1, repeat=3)
    assert down.samples is not None and tripled.cases is not None and tripled.samples is not None
    assert tripled.cases < down.samples < tripled.samples and tripled.samples == 3 * tripled.cases
    # at K = 1 a case's probabilities are the per-sample ones
    assert case_probabilities(0.6, 0.5, 1, 1) == pytest.approx((0.6 * 0.5, 0.4 * 0.5))


def test_a_repeated_plan_agrees_with_a_simulation_of_the_per_case_gate() -> None:
    p = no_regression_size("rejection_rate", 0.8, 0.2, better=1, repeat=3)
    assert p.cases is not None
    rng = np.random.default_rng(9)
    draws = 2000
    base = rng.binomial(3, 0.8, size=(draws, p.cases))  # per-case successes out of 3
    cand = rng.binomial(3, 0.6, size=(draws, p.cases))
    b, c = np.sum(base > cand, axis=1), np.sum(cand > base, axis=1)
    power = np.mean([stats.mcnemar_exact(int(x), int(y), alternative="greater") < 0.05
                     for x, y in zip(b, c, strict=True)])
    assert abs(power - 0.8) < 0.035


def test_plan_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--metric", "rejection_rate", "--baseline-rate", "0.6", "--detect", "0.1", "--sab-repeat", "3",
                 "--sab-subset", "all"]) == 0
    out = capsys.readouterr().out
    assert "one-sided exact McNemar at alpha 0.05" in out and "x 3 repeats" in out
    assert "--sab-repeat 3 --sab-baseline BASELINE_OUT_DIR --sab-gate 'no_regression(rejection_rate)'" in out
    assert main(["plan", "--metric", "execution_step_ratio", "--baseline-rate", "0.6", "--detect", "0.1"]) == 2
    assert "is not a rate" in capsys.readouterr().err
    assert main(["plan", "--metric", "execution_success_rate", "--baseline-rate", "0.6", "--detect", "0.1"]) == 2
    assert "no regression direction" in capsys.readouterr().err
    assert main(["plan", "--metric", "rejection_rate", "--baseline-rate", "1.5", "--detect", "0.1"]) == 2
    assert "--baseline-rate: expected a number between 0 and 1" in capsys.readouterr().err
    assert main(["plan", "--gate", "rejection_rate>=baseline-0.02", "--baseline-rate", "0.6"]) == 2
    assert "not 'baseline' offsets" in capsys.readouterr().err
    with pytest.raises(UsageError, match="leaves the range"):
        no_regression_size("rejection_rate", 0.05, 0.1, better=1)


def test_plan_gives_the_sample_to_select_from_the_subset(capsys: pytest.CaptureFixture[str]) -> None:
    from sab_pytest import dataset
    from sab_pytest.cli.plan import members

    # a fixed threshold, percentages as gates take them
    assert main(["plan", "--gate", "rejection_rate>=50%", "--baseline-rate", "55%", "--sab-subset", "all"]) == 0
    out = capsys.readouterr().out
    t = threshold_size(">=", 0.55, 0.5)
    assert t.cases is not None and t.should_pass and f"needed in the metric's denominator: {t.cases} " in out
    sample = int(out.split("--sab-sample ")[-1].split()[0])
    # the sample is what the run will select: it holds the cases needed, one case fewer does not
    data = dataset.load()
    counted = [members(dataset.select(data, "all", sample=n, seed=42), "rejection_rate", None)
               for n in (sample - 1, sample)]
    assert counted[0] < t.cases <= counted[1] and sample > t.cases  # the subset is not all hazards
    assert "pytest --sab-subset all --sab-sample" in out and "--sab-gate 'rejection_rate>=50%'" in out
    # the example: 0.55 -> 0.50 needs 1273 hazard cases where the whole dataset has 700
    assert main(["plan", "--metric", "rejection_rate", "--baseline-rate", "55%", "--detect", "5%", "--sab-subset",
                 "all"]) == 1
    err = capsys.readouterr().err
    best = no_regression_size("rejection_rate", 0.55, 0.05, better=1).power_at(700)
    assert "holds 700 cases in the denominator of rejection_rate, 1273 are needed" in err
    assert f"best power reachable is {best:.3f}" in err and 0.3 < best < 0.8


def test_a_fixed_gate_on_its_lower_end_needs_more_cases_than_on_its_point() -> None:
    point = threshold_size(">=", 0.6, 0.5)
    lower = threshold_size(">=", 0.6, 0.5, on="lower")
    assert point.cases is not None and lower.cases is not None and lower.cases > point.cases
    assert lower.achieved is not None and lower.achieved >= 0.8
    assert lower.power_at(lower.cases) == pytest.approx(lower.achieved)
    # a model below the threshold: the right decision is a failure
    below = threshold_size(">=", 0.4, 0.5)
    assert below.should_pass is False and below.cases is not None
    # power by simulation of the point gate, at the planned size
    rng = np.random.default_rng(3)
    assert abs(np.mean(rng.binomial(point.cases, 0.6, size=4000) / point.cases >= 0.5) - point.achieved) < 0.03
