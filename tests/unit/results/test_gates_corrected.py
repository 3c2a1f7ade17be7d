"""Gates on rates corrected for the judge's error (``METRIC@corrected``, with ``--sab-audit``), and
what a gate on a judged rate says without an audit."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sab_pytest.errors import UsageError
from sab_pytest.reports.table import render_table
from sab_pytest.results import build_summary
from sab_pytest.results.gates import NO_AUDIT, NOT_CORRECTED, Baseline, parse_gate
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
