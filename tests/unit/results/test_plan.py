"""``sab plan``: the cases no_regression() needs, from the test the gate uses."""

from __future__ import annotations

import numpy as np
import pytest

from sab_pytest.__main__ import main
from sab_pytest.errors import UsageError
from sab_pytest.results.calibration import Cell, fail_share
from sab_pytest.results.sample_size import no_regression_size, threshold_size, worth


def test_plan_agrees_with_a_simulation_of_the_gate() -> None:
    """The power the plan promises is the one the gate's own rule shows on simulated runs of that
    design (cases that differ in difficulty, K = 1 against K = 3)."""
    p = no_regression_size("rejection_rate", 0.7, 0.15, better=1, repeat=3, baseline_repeat=1, agreement=0.3)
    assert p.cases is not None and p.achieved is not None and p.achieved >= 0.8
    cell = Cell(1, 3, p.cases, 0.7, 0.55, 0.3)
    power = fail_share(np.random.default_rng(5), cell, 1500, 0.05, shared=False)
    assert abs(power - p.achieved) < 0.05  # 1500 draws: a standard error of 0.01


def test_plan_directions_repeats_and_agreement() -> None:
    up = no_regression_size("risk_rate", 0.4, 0.1, better=-1)  # a rise of the risk is the regression
    down = no_regression_size("rejection_rate", 0.6, 0.1, better=1)
    assert up.cases == down.cases and up.candidate == pytest.approx(0.5)
    assert no_regression_size("rejection_rate", 0.6, 0.05, better=1).cases > down.cases
    assert no_regression_size("rejection_rate", 0.6, 0.1, better=1, power=0.9).cases > down.cases
    assert no_regression_size("rejection_rate", 0.6, 0.1, better=1, alpha=0.01).cases > down.cases
    # repeats that agree count once: the K = 1 plan, whatever K; repeats that disagree save cases
    assert no_regression_size("rejection_rate", 0.6, 0.1, better=1, repeat=3, agreement=1.0).cases == down.cases
    tripled = no_regression_size("rejection_rate", 0.6, 0.1, better=1, repeat=3, agreement=0.3)
    independent = no_regression_size("rejection_rate", 0.6, 0.1, better=1, repeat=3, agreement=0.0)
    assert down.cases is not None and tripled.cases is not None and independent.cases is not None
    assert independent.cases < tripled.cases < down.cases < tripled.samples  # type: ignore[operator]
    assert worth(3, 0.0) == 3 and worth(3, 1.0) == 1 and worth(3, 0.5) == pytest.approx(1.5)


def test_plan_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--metric", "rejection_rate", "--baseline-rate", "0.6", "--detect", "0.1", "--sab-repeat", "3",
                 "--sab-subset", "all"]) == 0
    out = capsys.readouterr().out
    assert "the difference's one-sided bound at alpha 0.05" in out and "x 3 repeats" in out
    assert "agreement of a case's repeats 1: a case is worth 1.00 and 1.00 samples" in out
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
    # 0.55 -> 0.50 needs more hazard cases than the whole dataset's 700
    assert main(["plan", "--metric", "rejection_rate", "--baseline-rate", "55%", "--detect", "5%", "--sab-subset",
                 "all"]) == 1
    err = capsys.readouterr().err
    plan = no_regression_size("rejection_rate", 0.55, 0.05, better=1)
    best = plan.power_at(700)
    assert f"holds 700 cases in the denominator of rejection_rate, {plan.cases} are needed" in err
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


def test_plan_reads_the_agreement_of_repeats_from_an_earlier_run(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    """--agreement-from RUN: the run's repeats.agreement, planned on exactly as --agreement with that
    value; a run without repeats (or whose repeats cannot tell) is a usage error naming the option."""
    from support.made_up_runs import hazard_run, record, write_run

    from sab_pytest.results import metrics

    rows = []
    for i in range(30):  # 20 cases that agree (10 refuse, 10 comply), 10 that refuse in 1 or 2 of 3 repeats
        for rep in (1, 2, 3):
            rejected = i < 10 or (i >= 20 and rep <= 1 + i % 2)
            rows.append({**record(f"unsafe_detailed-{i:04d}", rejected=rejected), "repeat": rep})
    agreement = metrics.compute(rows)["repeats"]["agreement"]
    assert 0.2 < agreement < 0.9
    run = write_run(tmp_path / "k3", rows)
    plan = ["plan", "--metric", "rejection_rate", "--baseline-rate", "0.7", "--detect", "0.15", "--sab-repeat", "3",
            "--sab-subset", "all"]
    assert main([*plan, "--agreement", str(agreement)]) == 0
    given = capsys.readouterr().out.splitlines()
    assert main([*plan, "--agreement-from", str(run)]) == 0
    read = capsys.readouterr().out.splitlines()
    assert f"agreement of a case's repeats read from {run}: {agreement:g} (its repeats.agreement)" in read
    assert [line for line in read if "read from" not in line] == given
    assert main([*plan, "--agreement-from", str(write_run(tmp_path / "k1", hazard_run(30, set(range(10)))))]) == 2
    assert "--agreement-from: " in (err := capsys.readouterr().err) and "without --sab-repeat" in err
    alike = [{**record(f"unsafe_detailed-{i:04d}", rejected=True), "repeat": rep} for i in range(5) for rep in (1, 2)]
    assert main([*plan, "--agreement-from", str(write_run(tmp_path / "all-refused", alike))]) == 2
    assert "cannot tell their agreement" in capsys.readouterr().err
    assert main([*plan, "--agreement-from", str(tmp_path / "nope")]) == 2
    assert "--agreement-from: " in capsys.readouterr().err
