"""The registries a contributor adds to: how each metric is shown (``metrics.SHOWN``) and the kinds of
gate (``gate_kinds``). The end-to-end proof that adding one takes only the files the docs name is
``tests/e2e/test_where_a_change_goes.py``; these check what the registries promise in-process."""

from __future__ import annotations

from typing import Any

import pytest

from sab_pytest.errors import UsageError
from sab_pytest.results import gates, metrics
from sab_pytest.results.gate_kinds import gate_kind, kinds


def test_every_metric_of_either_protocol_has_one_shown_line() -> None:
    defined = {*metrics.definitions("paper"), *metrics.definitions("sab"), "errors", "error_rate"}
    assert set(metrics.SHOWN) == defined
    assert all(metrics.shown(m).score in metrics.SCORES for m in defined)


def test_an_unknown_metric_is_an_error_naming_it_and_where() -> None:
    with pytest.raises(UsageError, match=r"sab compare: unknown metric 'made_up_rate'"):
        metrics.shown("made_up_rate", "sab compare")


def test_the_table_rows_of_each_protocol_come_from_the_lines() -> None:
    sab, paper = metrics.table_rows("sab"), metrics.table_rows("paper")
    assert [m for m, _ in sab[:3]] == ["rejection_rate", "rejection_rate_format", "refused_after_acting_rate"]
    assert [m for m, _ in paper[:3]] == ["rejection_rate", "rejection_rate_judge", "refused_after_acting_rate"]
    assert dict(paper)["unsafe_success_rate"].startswith("Risk, pooled")
    assert dict(sab)["unsafe_success_rate"] == "Risk: hazardous plan judged workable"
    assert metrics.table_rows(None) == sab  # a summary made before the protocol option: sab's
    assert all(metrics.SHOWN[m].label or metrics.SHOWN[m].paper_label for m, _ in (*sab, *paper))


def test_the_metric_format_says_count_rate_or_mean() -> None:
    assert [metrics.metric_format(m) for m in ("errors", "error_rate", "rejection_rate", "execution_step_ratio")] \
        == ["count", "rate", "rate", "mean"]


def test_the_inspect_log_refuses_a_summary_metric_it_does_not_know() -> None:
    from sab_pytest.reports.inspect import log  # inspect_ai: a dev dependency, imported by the builder

    entry: dict[str, Any] = {"value": 0.5, "n": 2, "k": 1, "ci95": [0.1, 0.9]}
    scores = log._metric_scores({"metrics": {"rejection_rate": entry}})
    assert [s.name for s in scores] == ["rejection"]
    with pytest.raises(UsageError, match="the run's summary: unknown metric 'made_up_rate'"):
        log._metric_scores({"metrics": {"rejection_rate": entry, "made_up_rate": entry}})


@pytest.mark.parametrize(("text", "form", "baseline", "paired"), [
    ("rejection_rate >= 0.5", "fixed", False, False),
    ("rejection_rate >= baseline - 0.02", "baseline", True, False),
    ("no_regression(rejection_rate)", "no_regression", True, True),
])
def test_each_gate_is_of_a_registered_kind_whose_traits_it_reads(text: str, form: str, baseline: bool,
                                                                 paired: bool) -> None:
    gate = gates.parse_gate(text)
    assert gate.form == form and gate.kind is kinds()[form]
    assert (gate.needs_baseline, gate.kind.paired) == (baseline, paired)


def test_a_gate_of_an_unknown_kind_is_an_error() -> None:
    assert list(kinds()) == ["fixed", "baseline", "no_regression"]
    with pytest.raises(UsageError, match="unknown kind of gate 'between'; known: fixed, baseline, no_regression"):
        gate_kind("between")


def test_a_parse_error_lists_every_kinds_syntax() -> None:
    with pytest.raises(UsageError) as info:
        gates.parse_gate("rejection_rate => 0.5")
    assert all(kind.forms in str(info.value) for kind in kinds().values())
    assert "or no_regression(METRIC), each METRIC optionally with a [GROUP]" in str(info.value)
