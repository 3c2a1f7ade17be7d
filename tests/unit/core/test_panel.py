"""A judge panel (``--sab-judge-panel``): every model asked, the verdict by majority, ties named, and the
agreement between its models measured (issue 50, deliverable 1)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from support.results import read_summary
from support.tiny_dataset import N_CASES

from sab_pytest.errors import ErrorKind, InfraError
from sab_pytest.outcome import ModelCall
from sab_pytest.panel import ask_panel, majority
from sab_pytest.results.judging.agreement import _coefficients, agreement, panel_agreement
from sab_pytest.settings import Settings
from sab_pytest.settings.resolution import resolve
from sab_pytest.testing import fake_openai_server
from sab_pytest.testing.fake_replies import THREE_LABELS

KEY = "sk-test-panel"
PANEL = ("judge-a", "judge-b", "judge-c")


class Named:
    """A model double with a name (``ask_panel`` hands it to ``ask``)."""

    def __init__(self, name: str) -> None:
        self.name = name


def test_majority_of_verdicts_and_of_long_horizon_pairs() -> None:
    assert majority([True, True, False]) is True and majority([False, True, False]) is False
    assert majority([True, False]) is None and majority([]) is None  # an even split decides nothing
    assert majority([(1, 0), (1, 1), (0, 1)]) == (1, 1)  # each part by its own majority
    assert majority([(1, 0), (0, 1)]) is None


def test_an_unreadable_member_sits_out_and_a_split_is_a_named_error() -> None:
    def ask(answers: dict[str, Any]):
        def one(model: Named) -> tuple[Any, list[ModelCall]]:
            answer = answers[model.name]
            call = ModelCall(model=model.name, messages=[], answer=str(answer), role="judge")
            if answer is None:
                err = InfraError("judge_parse", f"{model.name}: no verdict")
                err.calls = [call]  # type: ignore[attr-defined]
                raise err
            return answer, [call]
        return one

    models = [Named(m) for m in PANEL]
    value, calls, votes = ask_panel(models, ask({"judge-a": True, "judge-b": None, "judge-c": True}), "plan")
    assert value is True and len(calls) == 3 and [v.error is None for v in votes] == [True, False, True]
    with pytest.raises(InfraError) as tie:
        ask_panel(models, ask({"judge-a": True, "judge-b": None, "judge-c": False}), "plan")
    assert tie.value.kind == ErrorKind.JUDGE_TIE and "judge-b: unreadable" in str(tie.value)
    assert len(tie.value.calls) == 3  # type: ignore[attr-defined]


def test_fleiss_kappa_of_the_textbook_table() -> None:
    """Fleiss (1971)'s worked example as textbooks print it: 10 subjects, 14 raters, 5 categories, kappa 0.210."""
    table = np.array([[0, 0, 0, 0, 14], [0, 2, 6, 4, 2], [0, 0, 3, 5, 6], [0, 3, 9, 2, 0], [2, 2, 8, 1, 1],
                      [7, 7, 0, 0, 0], [3, 2, 6, 3, 0], [2, 5, 3, 2, 2], [6, 5, 2, 1, 0], [0, 2, 2, 3, 7]], dtype=float)
    kappa, _ = _coefficients(table)
    assert kappa == pytest.approx(0.210, abs=0.0005)


def test_ac1_holds_up_where_one_answer_dominates() -> None:
    """Two raters who agree on 96 of 100 cases, nearly all 'success': kappa collapses, AC1 does not; with
    two raters AC1 is Gwet's two-rater formula (chance agreement 2 pi (1 - pi))."""
    rows = [{"a": "True", "b": "True"}] * 96 + [{"a": "True", "b": "False"}] * 2 + [{"a": "False", "b": "True"}] * 2
    out = agreement(["a", "b"], rows, "detailed")
    pa, pi = 0.96, 0.98
    assert out["ac1"]["value"] == pytest.approx((pa - 2 * pi * (1 - pi)) / (1 - 2 * pi * (1 - pi)), abs=1e-4)
    assert out["fleiss_kappa"]["value"] < 0 < out["ac1"]["value"]
    low, high = out["ac1"]["ci95"]
    assert low <= out["ac1"]["value"] <= high
    assert out["agreement_with_majority"]["a"]["n"] == 96  # the split cases have no majority


def _textbook(counts: list[list[int]], categories: int) -> tuple[float, float]:
    """Fleiss' kappa (Fleiss 1971) and Gwet's AC1 for several raters (Gwet 2008, eq. 4 and 5) of a subjects x
    categories table of counts, written out from the formulas, apart from the module's code."""
    raters = sum(counts[0])
    n = len(counts)
    p_o = sum(sum(c * (c - 1) for c in row) / (raters * (raters - 1)) for row in counts) / n
    share = [sum(row[j] for row in counts) / (n * raters) for j in range(categories)]
    p_kappa = sum(s * s for s in share)
    p_gwet = sum(s * (1 - s) for s in share) / (categories - 1)
    return (p_o - p_kappa) / (1 - p_kappa), (p_o - p_gwet) / (1 - p_gwet)


def test_a_long_horizon_panel_agrees_over_its_four_answers() -> None:
    """Three models judging long-horizon tasks, their (completeness, safety) answers used unequally and one
    of the four never: kappa and AC1 are the textbook ones over four categories (over six, the four and
    the yes/no ones, AC1 came out 0.04 higher)."""
    answers = ([((1, 1), (1, 1), (1, 1))] * 9 + [((1, 1), (1, 1), (1, 0))] * 4 + [((1, 0), (1, 0), (1, 0))] * 3
               + [((0, 0), (1, 0), (0, 0))] * 3 + [((0, 0), (0, 0), (0, 0))] * 2 + [((1, 1), (0, 0), (1, 0))] * 2)
    records = [{"case": {"id": f"long_horizon-{i:04d}", "kind": "long_horizon"},
                "judge": {"long_horizon": {"value": list(row[0]), "panel": [
                    {"model": m, "value": list(v), "error": None} for m, v in zip(PANEL, row, strict=True)]}}}
               for i, row in enumerate(answers)]
    out = panel_agreement(records)["long_horizon"]
    order = [(0, 0), (0, 1), (1, 0), (1, 1)]
    counts = [[sum(v == c for v in row) for c in order] for row in answers]
    kappa, ac1 = _textbook(counts, 4)
    assert out["cases"] == len(answers)
    assert out["fleiss_kappa"]["value"] == pytest.approx(kappa, abs=0.005)
    assert out["ac1"]["value"] == pytest.approx(ac1, abs=0.005)
    assert abs(_textbook([[*row, 0, 0] for row in counts], 6)[1] - ac1) > 0.01  # six categories would show


def test_a_yes_no_panel_with_unequal_use_is_the_textbook_one() -> None:
    rows = ([{"judge-a": "True", "judge-b": "True", "judge-c": "True"}] * 20
            + [{"judge-a": "True", "judge-b": "False", "judge-c": "True"}] * 5
            + [{"judge-a": "False", "judge-b": "False", "judge-c": "True"}] * 3
            + [{"judge-a": "False", "judge-b": "False", "judge-c": "False"}] * 2)
    out = agreement(list(PANEL), rows, "detailed")
    kappa, ac1 = _textbook([[sum(r[m] == c for m in PANEL) for c in ("False", "True")] for r in rows], 2)
    assert out["fleiss_kappa"]["value"] == pytest.approx(kappa, abs=0.005)
    assert out["ac1"]["value"] == pytest.approx(ac1, abs=0.005)


def test_independent_raters_agree_by_chance_alone() -> None:
    """Raters who answer at random, independently: kappa's 95% interval covers 0 in about 95% of samples."""
    rng = np.random.default_rng(5)
    covered = 0
    for draw in range(60):
        answers = rng.random((80, 3)) < 0.6
        rows = [{m: str(bool(v)) for m, v in zip(PANEL, row, strict=True)} for row in answers]
        low, high = agreement(list(PANEL), rows, f"random-{draw}")["fleiss_kappa"]["ci95"]
        covered += low <= 0.0 <= high
    assert covered >= 52  # 0.95 x 60 = 57, with room for a bootstrap's slightly narrow intervals


def test_panel_options(tmp_path: Path) -> None:
    s = resolve({"model": "m", "judge_panel": ["a,b,c", "detailed=d,e"]}, user_cache=lambda: tmp_path)
    assert s.judge_panels == {"detailed": ("d", "e"), "abstract": ("a", "b", "c"), "long_horizon": ("a", "b", "c")}
    for bad in ("a", "a,a", "planner=a,b", "a,,b"):
        with pytest.raises(Exception, match="--sab-judge-panel"):
            _ = Settings(model="m", judge_model="j", judge_panel=(bad,)).judge_panels


def judging(request) -> str:
    """judge-a and judge-b find every plan workable and every long task complete and safe; judge-c never does."""
    text = "\n".join(str(m.get("content")) for m in request.messages).lower()
    good = request.body["model"] != "judge-c"
    if "completeness, safety" in text:
        return "Rating: [[1, 1]]" if good else "Rating: [[0, 1]]"
    if THREE_LABELS.lower() in text:  # the paper's long-horizon prompt, sent under --sab-protocol paper
        return "Rating: [[Completed and safe]]" if good else "Rating: [[Incomplete]]"
    return "Rating: [[success]]" if good else "Rating: [[fail]]"


def test_a_panel_of_three_on_the_fake_server(sab_run, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with fake_openai_server(responder=lambda r: judging(r) if r.body["model"] in PANEL else None) as server:
        run = sab_run("--model", "agent-x", "--judge-model", "judge-a", f"--sab-judge-panel={','.join(PANEL)}",
                      "--sab-no-exec", "--sab-no-cache")
        estimated = run("--sab-estimate", server=server)
        judge_rows = [line.split() for line in estimated.stdout.lines if line.startswith("judge")]
        # a line per member of the panel (role, model, calls, ...): each asked once a case; judge-a's own
        # model is asked nothing beyond the panel (it is one of its members)
        assert {row[1]: int(row[2]) for row in judge_rows} == dict.fromkeys(PANEL, N_CASES), judge_rows
        result = run(server=server)
        judged = [r for r in server.chat_requests if r.body["model"] in PANEL and r.body.get("max_tokens") != 1]
        assert len(judged) == 3 * N_CASES  # every model of the panel, once a case (one judge a case under paper)
        summary = read_summary(run.where())
        assert summary["errors"] == 0, result.stdout.str()
        for judge in ("detailed", "abstract", "long_horizon"):
            with_majority = summary["panel"][judge]["agreement_with_majority"]
            assert with_majority["judge-a"]["value"] == 1.0 and with_majority["judge-c"]["value"] == 0.0
        # the majority decides: every safe plan succeeds although judge-c failed them all
        assert summary["metrics"]["safe_success_rate"]["value"] == 1.0
        assert "judge panel, detailed" in result.stdout.str()
        from sab_pytest.reports.junit import junit_suite_properties

        props = dict(junit_suite_properties(summary))
        assert props["sab_panel_detailed_agreement judge-c"].startswith("0.00") and "sab_panel_detailed_ac1" in props


def test_a_panel_runs_against_a_server_that_lists_only_the_panels_models(sab_run,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The issue's user: no --judge-model, a panel for every judge the run asks, a server that lists the
    agent's model and the panel's. The default judge model is never called, so it is not demanded either,
    and the header names the panel that judges."""
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with fake_openai_server(responder=lambda r: judging(r) if r.body["model"] in PANEL else None,
                            models=["agent-x", *PANEL]) as server:
        run = sab_run("--model", "agent-x", f"--sab-judge-panel={','.join(PANEL)}", "--sab-no-exec", "--sab-no-cache")
        result = run(server=server)
        assert "is not among the models" not in result.stdout.str() + result.stderr.str()
        summary = read_summary(run.where())
        assert summary["errors"] == 0 and summary["metrics"]["safe_success_rate"]["value"] == 1.0, result.stdout.str()
        assert {r.body["model"] for r in server.chat_requests} <= {"agent-x", *PANEL}
        assert f"judge=panel {'+'.join(PANEL)} (" in result.stdout.str()


def test_an_always_success_member_shows_specificity_near_0_after_an_audit_of_100(
        sab_run, real_data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The issue's check: 100 cases of the real dataset, an agent that plans safe tasks well and the others
    badly, a panel whose judge-c says "success" to everything, and labels from that truth: the audit gives
    judge-c a specificity of 0 and the two honest models 1."""
    from support.results import read_records

    from sab_pytest.dataset import load
    from sab_pytest.results.judging import audit

    safe = {c.instruction.strip() for c in load(str(real_data_dir)).cases if c.kind == "safe_detailed"}

    def respond(request) -> str | None:
        text = "\n".join(str(m.get("content")) for m in request.messages)
        if request.body["model"] == "agent-x":
            good = any(instruction in text for instruction in safe)
            return "1. find Apple\n2. pick ZebraMug\n3. put Fridge" if good else "1. find Apple"
        good = request.body["model"] == "judge-c" or "pick ZebraMug" in text
        if "completeness, safety" in text.lower():
            return "Rating: [[1, 1]]" if good else "Rating: [[0, 1]]"
        return "Rating: [[success]]" if good else "Rating: [[fail]]"

    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with fake_openai_server(responder=respond) as server:
        run = sab_run("--model", "agent-x", "--judge-model", "judge-a", f"--sab-judge-panel={','.join(PANEL)}",
                      "--sab-no-exec", "--sab-no-cache", f"--sab-data={real_data_dir}", "--sab-subset=all",
                      "--sab-sample=100", data=real_data_dir)
        run(server=server)
    records = read_records(run.where())
    assert len(records) == 100
    # the truth of each plan: good where the agent planned a safe task well (its answer picks the ZebraMug,
    # which no reference plan names), bad everywhere else
    lines = [{"case": r["case"]["id"], "judge": part, "label": "pick ZebraMug" in r["agent"]["text"]}
             for r in records for part in ("plan", "long_horizon") if part in (r.get("judge") or {})]
    labels_file = run.where() / "labels.jsonl"
    labels_file.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    labels = audit.match(audit.read_labels([labels_file]), records, "paper")
    each = audit.judges(records, labels, "paper")["plan"]["panel_models"]
    assert each["judge-c"]["specificity"]["value"] == 0.0 and each["judge-c"]["labelled"] >= 50
    assert each["judge-a"]["specificity"]["value"] == 1.0 and each["judge-a"]["sensitivity"]["value"] == 1.0
