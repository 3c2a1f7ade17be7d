"""The human audit of a run's judges: the draw, the label files, what the labels say of a judge, the
corrected rates (their coverage checked by a small seeded simulation; the full table is
``bench/bench_judge_error.py``), and ``sab audit`` on a made-up run."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from support.made_up_runs import record, write_run

from sab_pytest.__main__ import main as sab
from sab_pytest.errors import UsageError
from sab_pytest.reports.audit_text import render_audit
from sab_pytest.results import metrics, stats
from sab_pytest.results.judging import audit
from sab_pytest.results.judging.error import Stratum, audit_size, judge_statistics, table_statistics
from sab_pytest.results.judging.simulation import JudgeCell, coverage, intervals, regression_power, simulate


def judged(case_id: str, kind: str, verdict: bool) -> dict[str, Any]:
    """A case whose plan judge answered ``verdict`` (the agent planned; no refusal)."""
    r = record(case_id, kind=kind, rejected=False)
    r["plan_success"] = verdict
    r["passed"] = verdict if kind == "safe_detailed" else False
    r["judge"]["plan"] = {"judge": "m", "value": verdict, "explanation": "made up",
                          "calls": [{"messages": [{"role": "user", "content": f"is the plan of {case_id} good?"}]}]}
    r["run_settings"] = {"protocol": "paper"}
    return r


def run_of(truth: list[bool], judge: list[bool], kind: str = "safe_detailed") -> list[dict[str, Any]]:
    return [judged(f"{kind}-{i:04d}", kind, v) for i, v in enumerate(judge)]


def labels_from(drawn: list[dict[str, Any]], truth: dict[str, bool], by: str = "a") -> list[audit.Label]:
    return [audit.Label(d["case"], d["judge"], truth[d["case"]], by, None, f"made:{i}") for i, d in enumerate(drawn)]


def test_a_judge_that_always_says_success_has_specificity_0_after_100_labels() -> None:
    rng = random.Random(3)
    truth = [rng.random() < 0.5 for _ in range(400)]
    records = run_of(truth, [True] * 400)
    sample = audit.draw(records, 100, seed=1, protocol="paper")
    assert sample["drawn_count"] == 100 and set(sample["strata"]) == {"plan/safe_detailed/positive"}
    truths = {f"safe_detailed-{i:04d}": t for i, t in enumerate(truth)}
    labels = audit.match(labels_from(sample["drawn"], truths), records, "paper")
    plan = audit.judges(records, labels, "paper")["plan"]
    assert plan["specificity"]["value"] == 0.0 and plan["sensitivity"]["value"] == 1.0
    # the judge's specificity over cases like these: 0 of the ~50 truly negative labels, not known exactly
    negatives = plan["specificity"]["labels"]
    assert 35 < negatives < 65 and "note" not in plan["specificity"]
    assert plan["specificity"]["ci95"] == pytest.approx([0.0, 1 - 0.025 ** (1 / negatives)], abs=1e-6)
    assert plan["ac1"]["value"] is not None and plan["kappa"]["value"] == 0.0
    corrected = audit.corrected_rates(records, labels, "paper")["safe_success_rate"]
    low, high = corrected["ci95"]
    assert low <= sum(truth) / 400 <= high < 0.7  # the raw rate is 1.0: every plan "succeeds"


def test_draw_is_stratified_seeded_and_gives_a_rare_verdict_its_share() -> None:
    records = run_of([], [i < 8 for i in range(200)])
    first = audit.draw(records, 40, seed=5, protocol="paper")
    assert first == audit.draw(records, 40, seed=5, protocol="paper")
    assert first["drawn"] != audit.draw(records, 40, seed=6, protocol="paper")["drawn"]
    assert first["strata"] == {"plan/safe_detailed/negative": {"cases": 192, "drawn": 32},
                               "plan/safe_detailed/positive": {"cases": 8, "drawn": 8}}
    assert audit.allocate({"a": 3, "b": 100, "c": 100}, 11) == {"a": 3, "b": 4, "c": 4}


def write_labels(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_labels_naming_an_unknown_case_or_answering_twice_differently_name_the_line(tmp_path: Path) -> None:
    records = run_of([], [True, False, True])
    ok = {"case": "safe_detailed-0000", "judge": "plan", "label": True, "by": "ann"}
    unknown = write_labels(tmp_path / "u.jsonl", [ok, {**ok, "case": "safe_detailed-0099"}])
    with pytest.raises(UsageError, match=r"u\.jsonl:2: unknown case 'safe_detailed-0099'"):
        audit.match(audit.read_labels([unknown]), records, "paper")
    twice = write_labels(tmp_path / "t.jsonl", [ok, {**ok, "label": False}])
    with pytest.raises(UsageError, match=r"t\.jsonl:2: .*labelled false by 'ann', but true at .*t\.jsonl:1"):
        audit.match(audit.read_labels([twice]), records, "paper")
    bad = write_labels(tmp_path / "b.jsonl", [{**ok, "label": "yes"}])
    with pytest.raises(UsageError, match=r"b\.jsonl:1: 'label' must be a true or false"):
        audit.read_labels([bad])
    two_people = write_labels(tmp_path / "p.jsonl", [ok, ok, {**ok, "by": "bob", "label": False}])
    labels = audit.match(audit.read_labels([two_people]), records, "paper")
    assert labels.truth("safe_detailed-0000", "plan") == 0.5


def test_a_label_made_on_another_answer_is_left_out() -> None:
    records = run_of([], [True, False])
    shown = audit.shown_digest(records[0], "plan")
    labels = [audit.Label("safe_detailed-0000", "plan", True, None, shown, "x:1"),
              audit.Label("safe_detailed-0001", "plan", True, None, "0" * 16, "x:2")]
    matched = audit.match(labels, records, "paper")
    assert matched.stale == 1 and list(matched.answers) == [("safe_detailed-0000", "plan")]


@pytest.mark.parametrize("cell", [JudgeCell(1000, 0.05, 0.7, 0.8, 30), JudgeCell(600, 0.5, 0.99, 0.7, 100),
                                  JudgeCell(600, 0.95, 0.8, 0.99, 300)])
def test_the_corrected_interval_covers_the_true_rate_where_the_raw_one_does_not(cell: JudgeCell) -> None:
    found = coverage(np.random.default_rng(11), cell, 3000)
    # the bench's 20 000 runs a cell find 0.94 and more at every end; 3000 runs see within 0.01 of it
    assert min(found["low"], found["high"], found["low95"], found["high95"]) >= 0.93, found
    assert found["raw_both"] < 0.5, found  # the judge errs: its verdicts alone miss the true rate


def test_sab_audit_draws_a_page_and_reads_labels_back(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rng = random.Random(2)
    truth = {f"safe_detailed-{i:04d}": rng.random() < 0.6 for i in range(60)}
    records = [judged(cid, "safe_detailed", t if rng.random() < 0.8 else not t) for cid, t in truth.items()]
    out = write_run(tmp_path / "run", records, protocol="paper")
    assert sab(["audit", str(out), "--sample", "20", "--seed", "4"]) == 0
    page = (out / "sab-audit.html").read_text(encoding="utf-8")
    assert "is the plan of" in page and "http" not in page.split("<body>")[1].split("<script")[0]
    drawn = json.loads((out / "sab-audit-sample.json").read_text())["drawn"]
    labels = write_labels(tmp_path / "l.jsonl", [{"case": d["case"], "judge": "plan", "label": truth[d["case"]]}
                                                  for d in drawn])
    assert sab(["audit", str(out), "--labels", str(labels)]) == 0
    result = json.loads((out / "sab-audit.json").read_text())
    assert result["judges"]["plan"]["labelled"] == 20
    entry = result["metrics"]["safe_success_rate"]
    assert entry["raw"]["value"] == metrics.compute(records)["overall"]["safe_success_rate"]["value"]
    assert set(entry["corrected"]) >= {"value", "ci95"} and entry["corrected"]["value"] is not None
    assert "corrected" in capsys.readouterr().out
    wrong = write_labels(tmp_path / "w.jsonl", [{"case": "nope", "judge": "plan", "label": True}])
    assert sab(["audit", str(out), "--labels", str(wrong)]) == 2
    assert "w.jsonl:1: unknown case 'nope'" in capsys.readouterr().err


def test_sab_plan_sizes_an_audit_and_the_simulated_half_width_keeps_to_it(capsys: pytest.CaptureFixture[str]) -> None:
    assert sab(["plan", "--audit-half-width", "0.1", "--baseline-rate", "0.3", "--cases", "1000",
                "--sensitivity", "0.85", "--specificity", "0.85"]) == 0
    labels, promised = audit_size(0.1, 0.3, 0.85, 0.85, 1000)
    assert f"labels needed among the rate's 1000 judged cases: {labels} " in capsys.readouterr().out
    cell = JudgeCell(1000, 0.3, 0.85, 0.85, labels or 0)
    _, _, value, low, high = intervals(cell, simulate(np.random.default_rng(5), cell, 800))
    assert float(np.mean(np.maximum(value - low, high - value))) == pytest.approx(promised, abs=0.005)
    assert sab(["plan", "--audit-half-width", "0.05", "--baseline-rate", "0.3", "--cases", "300"]) == 1
    assert "the run's own cases are too few" in capsys.readouterr().err


def test_a_drop_the_judge_hides_is_seen_once_both_runs_are_audited() -> None:
    found = regression_power(np.random.default_rng(8), JudgeCell(500, 0.5, 0.9, 0.95, 300), 0.4, 200,
                             candidate_judge=(0.9, 0.75))
    assert found["raw"] < 0.05 < 0.7 < found["corrected"]


def test_two_files_without_by_are_two_people(tmp_path: Path) -> None:
    records = run_of([], [True])
    row = {"case": "safe_detailed-0000", "judge": "plan"}
    files = [write_labels(tmp_path / "a.jsonl", [{**row, "label": True}]),
             write_labels(tmp_path / "b.jsonl", [{**row, "label": False}])]
    labels = audit.match(audit.read_labels(files), records, "paper")
    assert labels.truth("safe_detailed-0000", "plan") == 0.5
    people = audit.judges(records, labels, "paper")["plan"]["people"]
    assert people["cases"] == 1 and people["agreement"] is None  # under two cases: no agreement to speak of


def test_five_agreeing_labels_give_the_exact_interval_of_5_of_5_and_say_too_few() -> None:
    """The issue's new user: a judge that said "success" to every plan, five labels all agreeing. Its
    sensitivity is 1 over the run, but five labels cannot say the judge is never wrong: the interval is at
    least Wilson's of 5 of 5 (lower end 0.566) and its entry says there are too few labels."""
    records = run_of([], [True] * 60)
    labels = audit.match([audit.Label(f"safe_detailed-{i:04d}", "plan", True, "a", None, f"made:{i}")
                          for i in range(5)], records, "paper")
    plan = audit.judges(records, labels, "paper")["plan"]
    low, high = plan["sensitivity"]["ci95"]
    wilson_low, _ = stats.wilson(5, 5)
    assert plan["sensitivity"]["value"] == 1.0 and high == 1.0 and low <= wilson_low and low < high
    assert low == pytest.approx(0.025 ** (1 / 5), abs=1e-6)  # Clopper-Pearson's 5 of 5
    assert "too few labels (5 < 10)" in plan["sensitivity"]["note"]
    assert plan["specificity"]["value"] is None  # no truly negative label: nothing to tell
    assert any("too few labels" in line for line in render_audit(
        {"labels": [], "labelled_cases": 5, "judges": {"plan": plan}, "method": "m", "metrics": {}}))


def test_the_judges_intervals_cover_at_a_few_labels() -> None:
    """Simulated runs of a judge of known error (sensitivity 0.95, specificity 0.9), 10 labels over the two
    verdicts: each statistic's 95 % interval holds the judge's own value in at least 93 % of 300 runs (its
    true coverage is above 0.99 here; the Monte Carlo interval alone covered 0.88 to 0.93 of these runs),
    and is never of zero width."""
    rate, sens, spec = 0.3, 0.95, 0.9
    tp, fn, tn = rate * sens, rate * (1 - sens), (1 - rate) * spec
    truth = {k: float(v) for k, v in table_statistics(np.float64(tp), np.float64(1 - rate - tn), np.float64(fn),
                                                      np.float64(tn)).items()}
    cell = JudgeCell(1000, rate, sens, spec, 10)
    runs = simulate(np.random.default_rng(11), cell, 300)
    covered = dict.fromkeys(truth, 0)
    for i in range(300):
        strata = [Stratum(int(runs.sizes[i, v]), int(runs.labelled[i, v]), float(runs.positive[i, v]), bool(v))
                  for v in (0, 1)]
        for name, entry in judge_statistics(strata, seed=i).items():
            low, high = entry["ci95"]
            assert low < high
            covered[name] += low - 1e-9 <= truth[name] <= high + 1e-9
    assert min(covered.values()) >= 0.93 * 300, covered
