"""Gates on rates corrected for the judge's error (``METRIC@corrected``, with ``--sab-audit``), and
what a gate on a judged rate says without an audit."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from sab_pytest.errors import UsageError
from sab_pytest.reports.table import render_table
from sab_pytest.results import build_summary, stats
from sab_pytest.results.gates import NO_AUDIT, NOT_CORRECTED, Baseline, parse_gate
from sab_pytest.results.judging.error import Stratum, corrected_entry
from sab_pytest.results.judging.simulation import GateCell, gate_false_fails
from sab_pytest.settings import Settings


def table(raw: float, corrected: float | None, ci: list[float] | None = None) -> dict[str, Any]:
    """A metrics table (``metrics.compute``'s shape, the parts a gate reads) with an audit's corrected rate."""
    entry = {"value": raw, "ci95": [raw - 0.05, raw + 0.05], "n": 200, "k": int(raw * 200), "cases": 200,
             "n_eff": 200.0}
    out: dict[str, Any] = {"protocol": "paper", "overall": {"safe_success_rate": entry, "pass_rate": entry}}
    if corrected is not None:
        out["corrected"] = {"safe_success_rate": {"value": corrected, "ci95": ci or [corrected - 0.1, corrected + 0.1],
                                                  "n": 200, "n_eff": 80.0}}
    return out


def test_the_corrected_suffix_parses_in_every_form_beside_the_interval_end() -> None:
    fixed = parse_gate("safe_success_rate@corrected >= 0.5@lower")
    assert (fixed.metric, fixed.corrected, fixed.on, fixed.threshold) == ("safe_success_rate", True, "lower", 0.5)
    assert parse_gate("safe_success_rate @ corrected >= baseline - 0.02").corrected
    assert parse_gate("no_regression(safe_success_rate@corrected)").corrected
    assert not parse_gate("safe_success_rate >= 0.5").corrected
    with pytest.raises(UsageError, match="'pass_rate' is not decided by a judge"):
        parse_gate("pass_rate@corrected >= 0.5")
    with pytest.raises(UsageError, match="not per group"):
        parse_gate("unsafe_success_rate[fire_hazard]@corrected <= 0.5")


def test_a_corrected_gate_decides_on_the_corrected_rate_and_its_interval() -> None:
    metrics = table(0.9, 0.55, [0.42, 0.68])
    point = parse_gate("safe_success_rate@corrected >= 0.5").check(metrics)
    assert point["passed"] and point["value"] == 0.55 and point["corrected"]
    lower = parse_gate("safe_success_rate@corrected >= 0.5@lower").check(metrics)
    assert not lower["passed"] and lower["compared"] == 0.42
    none = parse_gate("safe_success_rate@corrected >= 0.5").check(table(0.9, None))
    assert not none["passed"] and "no audit (--sab-audit LABELS)" in none["reason"]


def test_a_gate_on_a_judged_rate_says_the_judges_error_is_not_in_its_interval() -> None:
    assert parse_gate("safe_success_rate >= 0.5").check(table(0.9, None))["judge_error"] == NO_AUDIT
    assert parse_gate("safe_success_rate >= 0.5").check(table(0.9, 0.5))["judge_error"] == NOT_CORRECTED
    assert "judge_error" not in parse_gate("pass_rate >= 0.5").check(table(0.9, None))


def test_no_regression_on_corrected_rates_compares_the_two_audited_runs() -> None:
    gate = parse_gate("no_regression(safe_success_rate@corrected)")
    same = gate.check(table(0.9, 0.6), baseline=Baseline(table(0.9, 0.6), None, "base"))
    assert same["passed"] and "unpaired" in same["test"]
    # the raw rates agree, the corrected ones do not: the drop is seen only through the audit
    dropped = gate.check(table(0.9, 0.3, [0.25, 0.35]), baseline=Baseline(table(0.9, 0.7, [0.65, 0.75]), None, "b"))
    assert not dropped["passed"] and dropped["difference"] == pytest.approx(-0.4)


def test_a_run_given_its_audit_reports_corrected_rates_and_gates_on_them(tmp_path: Path) -> None:
    from test_audit import judged  # the made-up judged cases of the audit's tests

    records = [judged(f"safe_detailed-{i:04d}", "safe_detailed", True) for i in range(40)]
    labels = tmp_path / "labels.jsonl"
    labels.write_text("".join(json.dumps({"case": f"safe_detailed-{i:04d}", "judge": "plan", "label": i % 2 == 0})
                              + "\n" for i in range(20)), encoding="utf-8")
    settings = Settings(audit=(str(labels),), protocol="paper",
                        gates=("safe_success_rate@corrected >= 0.8", "safe_success_rate >= 0.8"))
    summary = build_summary(records, settings, dataset=({}, []))  # type: ignore[arg-type]
    assert summary["audit"] is not None
    assert summary["audit"]["judges"]["plan"]["specificity"]["value"] == 0.0
    corrected, raw = summary["gates"]
    assert not corrected["passed"] and corrected["value"] == pytest.approx(0.5)
    assert raw["passed"] and raw["judge_error"] == NOT_CORRECTED
    assert "human audit of the judges (--sab-audit):" in render_table(summary)


def test_labels_that_do_not_fit_the_run_leave_its_summary_and_make_the_corrected_gate_undefined(
        tmp_path: Path) -> None:
    from test_audit import judged

    labels = tmp_path / "labels.jsonl"
    labels.write_text(json.dumps({"case": "safe_detailed-0999", "judge": "plan", "label": True}) + "\n")
    settings = Settings(audit=(str(labels),), protocol="paper", gates=("safe_success_rate@corrected >= 0.5",))
    summary = build_summary([judged("safe_detailed-0000", "safe_detailed", True)], settings,
                            dataset=({}, []))  # type: ignore[arg-type]
    assert summary["audit"] is not None and "labels.jsonl:1: unknown case" in summary["audit"]["error"]
    assert not summary["gates"][0]["passed"] and "audit.error says why" in summary["gates"][0]["reason"]
    assert summary["audit"]["error"] in render_table(summary)


@pytest.mark.parametrize("cell", [GateCell(130, 0.05, 0.95, 0.6, 10), GateCell(400, 0.05, 0.7, 0.7, 10)],
                         ids=["130-cases-judge-0.95-0.6", "400-cases-judge-0.7-0.7"])
def test_an_unchanged_model_fails_no_regression_at_corrected_at_most_alpha(cell: GateCell) -> None:
    """Issue 60's cells, by the gate's own path (made-up runs, the stratified draw, the labels matched, the
    corrected rates, ``Gate.check``): two runs of the same true rate failed 0.26 and 0.24 of the time when a
    corrected 0 was weighed as the run's cases. 150 pairs: at a true 0.055 more than 17 fails has a
    chance of 0.002; at 0.24 fewer than 18 has none to speak of."""
    failed = gate_false_fails(np.random.default_rng(cell.cases), cell, 150)
    assert failed <= 17, failed


def test_a_corrected_zero_is_weighed_by_its_interval_not_by_the_run() -> None:
    """A corrected 0 of a 130-case run from 10 labels, [0, 0.458]: as sure as the few samples whose Wilson
    interval reaches 0.458, not as 130 cases; weighed that way it does not look like a drop from a 0.1."""
    entry = corrected_entry(0, 0, [Stratum(130, 10, 0.0, False)])
    assert entry["value"] == 0.0 and entry["n_eff"] == pytest.approx(
        stats.wilson_samples(0.0, *entry["ci95"]), rel=1e-6)
    low, high = stats.wilson(0, entry["n_eff"])  # type: ignore[misc]
    assert (low, high) == pytest.approx(tuple(entry["ci95"]), abs=1e-4) and entry["n_eff"] < 10
