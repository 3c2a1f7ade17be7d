"""``python -m sab_pytest plan``: the cases no_regression() needs, from the test the gate uses."""

from __future__ import annotations

import numpy as np
import pytest
from support.made_up_runs import hazard_run

from sab_pytest.__main__ import main
from sab_pytest.errors import UsageError
from sab_pytest.results import gates, metrics, stats
from sab_pytest.results.plan import detection_tails, plan


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
    p = plan("rejection_rate", 0.8, 0.15, better=1)
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
    up = plan("risk_rate", 0.4, 0.1, better=-1)  # a rise of the risk is the regression
    down = plan("rejection_rate", 0.6, 0.1, better=1)
    assert up.samples == down.samples and up.candidate == pytest.approx(0.5)
    assert plan("rejection_rate", 0.6, 0.05, better=1).samples > down.samples
    assert plan("rejection_rate", 0.6, 0.1, better=1, power=0.9).samples > down.samples
    assert plan("rejection_rate", 0.6, 0.1, better=1, alpha=0.01).samples > down.samples
    tripled = plan("rejection_rate", 0.6, 0.1, better=1, repeat=3)
    assert tripled.cases == -(-down.samples // 3)


def test_plan_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--metric", "rejection_rate", "--baseline", "0.6", "--detect", "0.1", "--repeat", "3"]) == 0
    out = capsys.readouterr().out
    assert "one-sided exact McNemar at alpha 0.05" in out and "x 3 repeats" in out
    assert main(["plan", "--metric", "execution_step_ratio", "--baseline", "0.6", "--detect", "0.1"]) == 2
    assert "is not a rate" in capsys.readouterr().err
    assert main(["plan", "--metric", "execution_success_rate", "--baseline", "0.6", "--detect", "0.1"]) == 2
    assert "no regression direction" in capsys.readouterr().err
    assert main(["plan", "--metric", "rejection_rate", "--baseline", "1.5", "--detect", "0.1"]) == 2
    assert "--baseline: expected a number between 0 and 1" in capsys.readouterr().err
    with pytest.raises(UsageError, match="leaves the range"):
        plan("rejection_rate", 0.05, 0.1, better=1)
