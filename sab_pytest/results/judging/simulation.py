"""Simulated runs judged by a judge of known error, audited: does the corrected rate keep its promise?

Why a simulation: the corrected interval is what a gate on a judged rate acts on, and only runs whose
true rate is known say whether it covers it. A run here holds ``cases`` cases, each truly positive
with probability ``rate``; the judge says positive with probability ``sensitivity`` on a positive
case and ``1 - specificity`` on a negative one; the audit labels ``audit`` of the cases, split over
the two verdicts as ``audit.allocate`` splits them (half each, as far as a verdict has cases), drawn
without replacement, people labelling the truth. The raw interval (the exact one over the judge's
verdicts, what a run without an audit reports: the exact one) and the corrected one (``judge_error``) are both
checked against the true ``rate``; ``bench/bench_judge_error.py`` prints the table, the unit tests
run a few cells.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

import numpy as np

from sab_pytest.results.clustered import difference_ends, rate_ends
from sab_pytest.results.gates import Baseline, parse_gate
from sab_pytest.results.judging.audit import Label, corrected_rates, draw, match
from sab_pytest.results.judging.error import Stratum, corrected_ends, corrected_entry
from sab_pytest.results.record import StoredRecord
from sab_pytest.results.stats import Z95, normal_quantile, student


@dataclass(frozen=True)
class JudgeCell:
    """One design: the run's cases and true rate, the judge's error, the audit's size."""

    cases: int
    rate: float
    sensitivity: float
    specificity: float
    audit: int


@dataclass(frozen=True)
class Audited:
    """Simulated runs (one row each): the verdicts, the audit's strata, and what the audit found."""

    verdict_pos: np.ndarray  # cases the judge called positive
    sizes: np.ndarray  # (draws, 2): cases per stratum, [negative verdict, positive verdict]
    labelled: np.ndarray  # (draws, 2)
    positive: np.ndarray  # (draws, 2): truly positive labelled cases


def split(audit: int, sizes: np.ndarray) -> np.ndarray:
    """Labels per stratum: an equal share each, a stratum with fewer cases labelled whole and the rest
    given to the others (vectorised over rows of two strata; the rule of ``audit.allocate``)."""
    half = audit // 2
    first = np.minimum(sizes[..., 0], np.maximum(audit - np.minimum(sizes[..., 1], audit - half), half))
    second = np.minimum(sizes[..., 1], audit - first)
    first = np.minimum(sizes[..., 0], audit - second)
    return np.stack([first, second], axis=-1)


def simulate(rng: np.random.Generator, cell: JudgeCell, draws: int) -> Audited:
    """``draws`` runs of ``cell``, each judged and audited."""
    true_pos = rng.binomial(cell.cases, cell.rate, draws)
    hits = rng.binomial(true_pos, cell.sensitivity)  # true positives called positive
    false_alarms = rng.binomial(cell.cases - true_pos, 1 - cell.specificity)
    sizes = np.stack([cell.cases - hits - false_alarms, hits + false_alarms], axis=-1)
    truth_in = np.stack([true_pos - hits, hits], axis=-1)  # truly positive cases per stratum
    labelled = split(cell.audit, sizes)
    positive = np.zeros_like(labelled)
    for v in (0, 1):
        has = labelled[:, v] > 0
        positive[has, v] = rng.hypergeometric(truth_in[has, v], sizes[has, v] - truth_in[has, v], labelled[has, v])
    return Audited(hits + false_alarms, sizes, labelled, positive)


def intervals(cell: JudgeCell, audited: Audited) -> tuple[np.ndarray, ...]:
    """(raw low, raw high, corrected value, corrected low, corrected high) per simulated run."""
    raw_low, raw_high = rate_ends(audited.verdict_pos / cell.cases, np.float64(cell.cases), Z95)
    value, low, high = _ends(audited, Z95)
    return raw_low, raw_high, value, low, high


def coverage(rng: np.random.Generator, cell: JudgeCell, draws: int) -> dict[str, float]:
    """Shares of runs whose interval ends lie on the right side of the true rate: ``raw_low``,
    ``raw_high`` (the judge's verdicts taken as the truth), ``low``, ``high`` and ``both`` (the
    corrected 95 % interval, each end a one-sided 97.5 % bound), ``low95`` and ``high95`` (the
    corrected one-sided 95 % bounds, the level of ``no_regression`` at alpha 0.05)."""
    audited = simulate(rng, cell, draws)
    raw_low, raw_high, _, low, high = intervals(cell, audited)
    _, low90, high90 = _ends(audited, float(normal_quantile(0.95)))
    r = cell.rate
    return {"low95": float(np.mean(np.round(low90, 6) <= r)), "high95": float(np.mean(np.round(high90, 6) >= r)),
            "raw_low": float(np.mean(raw_low <= r)), "raw_high": float(np.mean(raw_high >= r)),
            "raw_both": float(np.mean((raw_low <= r) & (raw_high >= r))),
            "low": float(np.mean(np.round(low, 6) <= r)), "high": float(np.mean(np.round(high, 6) >= r)),
            "both": float(np.mean((np.round(low, 6) <= r) & (np.round(high, 6) >= r)))}


def regression_power(rng: np.random.Generator, base: JudgeCell, candidate_rate: float, draws: int,
                     alpha: float = 0.05, candidate_judge: tuple[float, float] | None = None) -> dict[str, float]:
    """How often ``no_regression`` of a rate where higher is better fails when the candidate's true
    rate is ``candidate_rate`` (power when lower, false FAILs when equal): ``raw`` on the judge's
    verdicts (the gate's rule for runs compared unpaired: Newcombe's interval of the two Wilson
    intervals, Student's quantile), ``corrected`` with each run audited, decided by the user's gate
    (``no_regression(safe_success_rate@corrected)``'s ``Gate.check`` on each run's corrected entry,
    ``judge_error.corrected_entry``: the rule that weighs each side by its interval).
    ``candidate_judge``: the judge's (sensitivity, specificity) on the candidate's answers, where
    they differ from the baseline's (a judge that errs differently on another model's answers)."""
    sens, spec = candidate_judge or (base.sensitivity, base.specificity)
    cand = JudgeCell(base.cases, candidate_rate, sens, spec, base.audit)
    a, b = simulate(rng, base, draws), simulate(rng, cand, draws)
    n = np.float64(base.cases)
    raw_high = difference_ends(a.verdict_pos / n, n, b.verdict_pos / n, n, np.float64(0.0),
                               student(1 - alpha, base.cases - 1))[1]
    gate = parse_gate("no_regression(safe_success_rate@corrected)")
    failed = 0
    for i in range(draws):
        base_run, cand_run = ({"protocol": "sab", "overall": {}, "corrected": {"safe_success_rate": _entry(run, i)}}
                              for run in (a, b))
        failed += not gate.check(cand_run, baseline=Baseline(base_run, None, "baseline"), alpha=alpha)["passed"]
    return {"raw": float(np.mean(raw_high < 0)), "corrected": failed / draws}


def _entry(audited: Audited, i: int) -> dict[str, Any]:
    """Simulated run ``i``'s corrected entry, as the audit makes it (both verdict strata)."""
    return corrected_entry(0, 0, [Stratum(int(audited.sizes[i, v]), int(audited.labelled[i, v]),
                                          float(audited.positive[i, v]), bool(v)) for v in (0, 1)])


def _ends(audited: Audited, z: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The corrected rate of each simulated run and its ends at ``z``."""
    zeros = np.zeros(len(audited.sizes))
    return corrected_ends(zeros, zeros, audited.sizes, audited.labelled, audited.positive, z=z)


# ------------------------------------------------------------------------- the gate's own path, end to end


@dataclass(frozen=True)
class GateCell:
    """One design of ``no_regression(safe_success_rate@corrected)`` between two runs of the same true
    rate, judged by the same judge, each audited with ``labels`` labels."""

    cases: int
    rate: float
    sensitivity: float
    specificity: float
    labels: int


def made_up_run(rng: np.random.Generator, cell: GateCell) -> tuple[list[StoredRecord], dict[str, bool]]:
    """A run of ``cell.cases`` safe cases as the run's records keep them (the plan judge's verdict is
    the case's plan success), and each case's truth (what people would label)."""
    truth = rng.random(cell.cases) < cell.rate
    said = np.where(truth, rng.random(cell.cases) < cell.sensitivity, rng.random(cell.cases) >= cell.specificity)
    records: list[StoredRecord] = []
    answers: dict[str, bool] = {}
    for i in range(cell.cases):
        cid, v = f"safe-{i:04d}", bool(said[i])
        record = {"case": {"id": cid, "kind": "safe_detailed"}, "judge": {"plan": {"value": v}},
                  "plan_success": v, "passed": v, "rejected": False}
        records.append(cast(StoredRecord, record))
        answers[cid] = bool(truth[i])
    return records, answers


def audited_metrics(rng: np.random.Generator, cell: GateCell) -> dict[str, Any]:
    """A made-up run audited as a user audits one: the stratified ``--sample`` draw (``audit.draw``),
    people labelling the drawn cases' truth, the labels matched to the run (``audit.match``) and the
    corrected rates (``audit.corrected_rates``), as the metrics table a gate reads."""
    records, truth = made_up_run(rng, cell)
    drawn = draw(records, cell.labels, int(rng.integers(2 ** 31)), "sab")["drawn"]
    labels = [Label(d["case"], d["judge"], truth[d["case"]], None, None, f"labels.jsonl:{i}")
              for i, d in enumerate(drawn, 1)]
    # the gate reads one corrected rate: the others (empty here) are left out to keep the bench fast
    corrected = corrected_rates(records, match(labels, records, "sab"), "sab", names=("safe_success_rate",))
    return {"protocol": "sab", "overall": {}, "corrected": corrected}


def gate_false_fails(rng: np.random.Generator, cell: GateCell, pairs: int, alpha: float = 0.05) -> int:
    """How many of ``pairs`` pairs of made-up runs of the same true rate FAIL
    ``no_regression(safe_success_rate@corrected)`` (``gates.Gate.check``, the user's gate)."""
    gate = parse_gate("no_regression(safe_success_rate@corrected)")
    failed = 0
    for _ in range(pairs):
        base, cand = audited_metrics(rng, cell), audited_metrics(rng, cell)
        result = gate.check(cand, baseline=Baseline(base, None, "baseline"), alpha=alpha)
        failed += result["ci95"] is not None and not result["passed"]
    return failed
