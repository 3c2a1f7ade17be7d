"""CI gates (``--sab-gate``) over the metrics of ``results.metrics``.

Gates come in three forms::

    rejection_rate >= 0.5                    a fixed threshold (a fraction or a percentage)
    rejection_rate[fire_hazard] >= baseline - 0.02    against the baseline run's value
    no_regression(rejection_rate[L3])        fails only on a statistically significant drop

``no_regression`` pairs the two runs by case (``pairing``: each side's per-case counts, the cases
both runs judged, the others left out and counted) and is decided by the interval of the
difference (``clustered``): it fails when the one-sided bound at ``1 - alpha`` lies on the side that
is worse for the metric (``DEFINITIONS[...].better``). A baseline known only by its summary is
compared the same way, unpaired (its rate and effective samples). The gate's ``ci95`` is then that
difference's interval (``ci_level`` says its level), never one run's own.
"""

from __future__ import annotations

import dataclasses
import math
import operator
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from sab_pytest.errors import UsageError
from sab_pytest.results import clustered, resample
from sab_pytest.results.gate_kinds import Decision, GateKind, forms, gate_kind, kinds
from sab_pytest.results.judging.audit import CORRECTABLE, judged_rates
from sab_pytest.results.metrics import (
    DEFINITIONS,
    GROUPS,
    METRIC_NAMES,
    RateDef,
    better,
    definitions,
    group_table,
    in_group,
    suite_group,
)
from sab_pytest.results.pairing import common_cases, pair_cases, too_few
from sab_pytest.results.record import StoredRecord
from sab_pytest.settings import DEFAULT_ALPHA

# ---------------------------------------------------------------------------------------------- gates

_OPS: dict[str, Callable[[float, float], bool]] = {
    ">=": operator.ge, "<=": operator.le, ">": operator.gt, "<": operator.lt, "==": operator.eq,
}
NUMBER = r"\d*\.?\d+(?:[eE][-+]?\d+)?"
#: a gate's metric, its ``[GROUP]`` and ``@corrected``: the first three groups of every kind's pattern
TARGET = r"([a-z_0-9]+)(?:\[((?:suite=)?[A-Za-z0-9_-]+)\])?(?:\s*@\s*(corrected))?"
OP = r"(>=|<=|==|>|<)"
_FIXED = re.compile(rf"^\s*{TARGET}\s*{OP}\s*([-+]?{NUMBER})\s*(%?)\s*$")
_BASELINE = re.compile(rf"^\s*{TARGET}\s*{OP}\s*baseline(?:\s*([-+])\s*({NUMBER})\s*(%?))?\s*$")
_ON = re.compile(r"\s*@\s*(lower|point|upper)\s*$")
_NO_REGRESSION = re.compile(rf"^\s*no_regression\s*\(\s*{TARGET}\s*\)\s*$")
#: what every kind's METRIC may carry, after the kinds' own forms in a parse error
_TARGET_FORMS = ("each METRIC optionally with a [GROUP] ('rejection_rate[fire_hazard]>=0.8', "
                 "'rejection_rate[suite=kitchen]>=0.99') or, for a judged rate, @corrected "
                 "('safe_success_rate@corrected>=0.5', with --sab-audit)")
#: what a gate on a judged rate says when the run has no audit: its interval assumes the judge is always right
NO_AUDIT = "the judge's error is not in its interval (no --sab-audit: the judge is taken as always right)"
NOT_CORRECTED = "the judge's error is not in its interval (the raw rate: name it METRIC@corrected to use the audit)"


@dataclass(frozen=True)
class Baseline:
    """The run a gate compares with: its metrics, and its per-case records when they are at hand."""

    metrics: dict[str, Any]
    records: list[StoredRecord] | None
    source: str


@dataclass(frozen=True)
class Gate:
    """One gate: ``form`` names its kind (``gate_kinds``): ``fixed`` (``threshold``), ``baseline``
    (baseline value + ``offset``), ``no_regression`` (a one-sided test at the run's alpha) or another
    registered kind."""

    text: str
    metric: str
    group: str | None
    op: str
    threshold: float | None
    form: str = "fixed"
    offset: float = 0.0
    on: str | None = None  # the gate's own '@lower|point|upper' suffix; None: the run's --sab-gate-on
    corrected: bool = False  # '@corrected': the rate corrected for the judge's error by the run's audit

    @property
    def kind(self) -> GateKind:
        """The gate's kind: its syntax, decision and traits."""
        return gate_kind(self.form)

    @property
    def needs_baseline(self) -> bool:
        return self.kind.needs_baseline

    def holds(self, compared: float, threshold: float) -> bool:
        """Whether ``compared`` stands in the gate's relation (``op``) to ``threshold``."""
        return _OPS[self.op](compared, threshold)

    def value(self, metrics: dict[str, Any]) -> float | None:
        return self._entry(metrics).get("value")

    def _entry(self, metrics: dict[str, Any]) -> dict[str, Any]:
        if self.corrected:  # the audit's corrected rates (``audit.corrected_rates``), overall or of one suite
            suite = suite_group(self.group)
            if suite is not None:
                return ((metrics.get("corrected_by_suite") or {}).get(suite) or {}).get(self.metric) or {}
            return (metrics.get("corrected") or {}).get(self.metric) or {}
        return group_table(metrics, self.group).get(self.metric) or {}

    def check(self, metrics: dict[str, Any], *, records: list[StoredRecord] | None = None,
              baseline: Baseline | None = None, alpha: float = DEFAULT_ALPHA, gate_on: str = "point",
              current: str = "this run") -> dict[str, Any]:
        """The gate's outcome with every number that decided it (JSON-safe). A fixed or baseline gate
        compares its threshold with the value, or with an end of the value's 95% interval
        (``on``: the gate's suffix, else ``gate_on``); the interval of a count (``errors``) is its value.
        A ``no_regression`` gate also records ``paired_cases`` and ``left_out`` (cases, see ``pairing``),
        and ``usage_error`` when the runs share too few cases to be tested (``current`` names this run)."""
        value = self.value(metrics)
        kind = self.kind
        on = self.on or gate_on if kind.on_interval else None
        ci = self._entry(metrics).get("ci95")
        compared: float | None = ci[0] if on == "lower" and ci else ci[1] if on == "upper" and ci else value
        if on in ("lower", "upper") and not ci and self.metric != "errors":
            compared = None  # a mean over one case has no interval: its end is unknown, not the value
        out: dict[str, Any] = {"gate": self.text, "metric": self.metric, "group": self.group, "form": self.form,
                               "op": self.op, "threshold": self.threshold, "value": value, "baseline": None,
                               "test": None, "p_value": None, "alpha": None, "passed": False, "reason": "",
                               "on": on, "compared": compared, "ci95": ci, "p_other_way": None,
                               "paired_cases": None, "left_out": None, "usage_error": None}
        if self.corrected:
            out["corrected"] = True
        elif self.metric in judged_rates(metrics.get("protocol")):
            out["judge_error"] = NOT_CORRECTED if metrics.get("corrected") else NO_AUDIT
        if value is None or compared is None:
            out["reason"] = ("undefined: no cases in its denominator" if value is None
                             else "undefined: no interval (fewer than two cases), so no end to compare")
            suite = suite_group(self.group)
            if suite is not None and suite not in (metrics.get("by_suite") or {}):
                known = ", ".join(metrics.get("by_suite") or {}) or "none"
                out["reason"] = f"undefined: the run has no case of suite {suite!r} (its suites: {known})"
            if self.corrected and not metrics.get("corrected"):
                out["reason"] = ("undefined: no corrected rate: the run was given no audit (--sab-audit LABELS), or "
                                 "its labels could not be used (the summary's audit.error says why)")
            elif self.corrected and value is None:
                out["reason"] = f"undefined: {self._entry(metrics).get('reason') or 'no corrected rate'}"
            return out
        if not kind.needs_baseline:
            return kind.decide(self, Decision(out, metrics, records, None, None, alpha, current))
        if baseline is None:
            out["reason"] = "no baseline run given (--sab-baseline)"
            return out
        base_entry = self._entry(baseline.metrics)
        out["baseline"] = base_entry.get("value")
        if out["baseline"] is None:
            out["reason"] = "undefined in the baseline run: no cases in its denominator"
            return out
        return kind.decide(self, Decision(out, metrics, records, baseline, base_entry, alpha, current))

    def _regression_test(self, cur: dict[str, Any], base: dict[str, Any], records: list[StoredRecord] | None,
                         baseline: Baseline, alpha: float, current: str, protocol: str | None = None
                         ) -> dict[str, Any]:
        """The one pairing rule (``pairing``) and the one model (``clustered``): the difference this run
        - baseline over the cases both judged, with its interval at ``1 - 2 alpha``; a regression when
        its worse-side end is past 0. A baseline given as a summary (no per-case records) is compared
        unpaired. Both runs are read under this run's ``protocol`` (a baseline of the other protocol by
        the same rule)."""
        worse = better(self.metric)  # +1: a drop is a regression; -1: a rise is
        level = 1 - 2 * alpha
        if records is None or baseline.records is None:
            mine, theirs = clustered.side_of_entry(cur), clustered.side_of_entry(base)
            diff = clustered.difference(theirs, mine, level=level) if mine and theirs else None
            test = (f"difference of rates over cases, unpaired ({mine.cases if mine else 0} vs baseline "
                    f"{theirs.cases if theirs else 0} cases; the baseline has no per-case results to pair with)")
            out: dict[str, Any] = {"paired_cases": None, "left_out": None}
        else:
            pairs = pair_cases(self.metric, self.group, baseline.records, records, protocol)
            assert pairs is not None, "parse_gate lets only rates into no_regression"
            # the minimum is on the cases the runs share: a metric over few cases (3 safe ones) of two runs
            # of the same selection is a weak gate, not a misuse
            shared, _ = common_cases(baseline.records, records)
            problem = too_few(shared, alpha, f"{current} and the baseline ({baseline.source})")
            test = f"difference of rates over paired cases, {pairs.describe()}"
            if problem is not None:
                return {"paired_cases": pairs.n, "left_out": pairs.left_out, "alpha": alpha, "passed": False,
                        "usage_error": problem, "reason": f"usage error: {problem}", "test": test}
            diff = pairs.difference(level)
            out = {"paired_cases": pairs.n, "left_out": pairs.left_out}
        if diff is None:
            return {**out, "test": test, "alpha": alpha, "passed": False, "ci95": None,
                    "reason": "undefined: fewer than two cases in the metric's denominator on a side"}
        failed = clustered.regressed(diff, worse)
        p = diff.p_lower if worse > 0 else diff.p_higher
        return {**out, "test": test, "p_value": p, "alpha": alpha, "passed": not failed,
                "difference": diff.value, "ci95": list(diff.ci), "ci_level": level,
                "reason": f"significant regression: p < alpha {alpha:g}, the difference's {level:.0%} interval "
                          f"{'below' if worse > 0 else 'above'} 0" if failed else ""}


def _range_problem(metric: str, threshold: float, percent: bool) -> str | None:
    """Why a threshold can never matter for its metric (None when it is inside the metric's range)."""
    if metric == "errors":
        if percent:
            return "'errors' is a count of cases and takes no percentage (use error_rate for a share)"
        if threshold < 0:
            return "'errors' is a count of cases, range 0 and up"
        return None
    if not 0.0 <= threshold <= 1.0:
        return f"{metric!r} is a share, range 0..1 (or 0%..100%)"
    return None


def parse_gate(text: str, source: str = "--sab-gate") -> Gate:
    """Parse one gate expression; a bad expression, unknown name or out-of-range number is a ``UsageError``.
    The text is tried against each kind's pattern (``gate_kinds``); what every kind shares (the metric,
    its group, ``@corrected``) is checked here, the rest by the kind's ``build``. A gate of a kind
    decided on an interval end may end in ``@lower``, ``@point`` or ``@upper`` (``Gate.check``)."""
    m_on = _ON.search(text)
    if m_on is not None:
        gate = parse_gate(text[:m_on.start()], source)
        if not gate.kind.on_interval:
            raise UsageError(f"{source}: {gate.form} is decided by its test, not an interval end ({text!r})")
        return dataclasses.replace(gate, text=text.strip(), on=m_on.group(1))
    for kind in kinds().values():
        m = kind.pattern.match(text)
        if m is not None:
            break
    else:
        raise UsageError(f"{source}: cannot parse gate {text!r}; expected {forms()}, {_TARGET_FORMS}")
    metric, group, corrected = m.group(1, 2, 3)
    if metric not in METRIC_NAMES:
        raise UsageError(f"{source}: unknown metric {metric!r} in {text!r}; known: {', '.join(METRIC_NAMES)}")
    suite = suite_group(group)
    if group is not None and group not in GROUPS and suite is None:
        raise UsageError(f"{source}: unknown group {group!r} in {text!r}; known: {', '.join(GROUPS)}, or "
                         "suite=NAME (a team's own suite)")
    if suite is not None and not re.match(r"^[A-Za-z_][A-Za-z0-9_-]*$", suite):
        raise UsageError(f"{source}: {suite!r} cannot be a suite's name (a case file's name) in {text!r}")
    if group is not None and suite is None and metric in ("errors", "error_rate"):
        raise UsageError(f"{source}: {metric!r} has no per-group value ({text!r})")
    if corrected and metric not in CORRECTABLE:
        raise UsageError(f"{source}: {metric!r} is not decided by a judge, so it has no @corrected value; judged "
                         f"rates: {', '.join(CORRECTABLE)} ({text!r})")
    if corrected and group is not None and suite is None:
        raise UsageError(f"{source}: corrected rates are given overall, per suite ([suite=NAME]) and per hazard "
                         f"kind by name, such as unsafe_success_rate_detailed, not per group ({text!r})")
    return kind.build(m, Gate(text=text.strip(), metric=metric, group=group, op="", threshold=None, form=kind.name,
                              corrected=bool(corrected)), source)


def check_gates(gates: Iterable[Gate], metrics: dict[str, Any], *, records: list[StoredRecord] | None = None,
                baseline: Baseline | None = None, alpha: float = DEFAULT_ALPHA,
                gate_on: str = "point", current: str = "this run") -> list[dict[str, Any]]:
    """Every gate's outcome; with the per-case records at hand, also ``p_other_way``: how often the
    gate decides the other way when the run's cases are resampled (``resample.flip_probability``)."""
    out = []
    for g in gates:
        result = g.check(metrics, records=records, baseline=baseline, alpha=alpha, gate_on=gate_on, current=current)
        if records is not None and not result.get("usage_error") and not g.corrected:
            pairs = (pair_cases(g.metric, g.group, baseline.records, records, metrics.get("protocol"))
                     if g.kind.paired and baseline is not None and baseline.records is not None
                     else None)
            base_entry = g._entry(baseline.metrics) if baseline is not None else None
            result["p_other_way"] = resample.flip_probability(
                g, result, records, in_group=in_group, definition=definitions(metrics.get("protocol")).get(g.metric),
                worse=better(g.metric), pairs=pairs, baseline_entry=base_entry)
        out.append(result)
    return out


# ------------------------------------------------------------------------------- the built-in kinds

def _build_fixed(m: re.Match[str], gate: Gate, source: str) -> Gate:
    op, number, percent = m.group(4, 5, 6)
    threshold = float(number) / (100.0 if percent else 1.0)
    problem = _range_problem(gate.metric, threshold, bool(percent))
    if problem:
        raise UsageError(f"{source}: threshold {number}{percent} in gate {gate.text!r} is out of range: {problem}")
    return dataclasses.replace(gate, op=op, threshold=threshold)


def _decide_fixed(gate: Gate, d: Decision) -> dict[str, Any]:
    assert gate.threshold is not None, "a fixed gate always has a threshold"
    d.out["passed"] = gate.holds(d.out["compared"], gate.threshold)
    return d.out


def _build_baseline(m: re.Match[str], gate: Gate, source: str) -> Gate:
    op, sign, offset, offset_percent = m.group(4, 5, 6, 7)
    delta = 0.0
    if offset is not None:
        delta = float(offset) / (100.0 if offset_percent else 1.0) * (-1 if sign == "-" else 1)
        limit = math.inf if gate.metric == "errors" else 1.0
        if abs(delta) > limit or (gate.metric == "errors" and offset_percent):
            raise UsageError(f"{source}: offset {sign}{offset}{offset_percent} in gate {gate.text!r} is out of range: "
                             f"{gate.metric!r} is a share, so an offset from the baseline lies within -1..1")
    return dataclasses.replace(gate, op=op, offset=delta)


def _decide_baseline(gate: Gate, d: Decision) -> dict[str, Any]:
    d.out["threshold"] = d.out["baseline"] + gate.offset
    d.out["passed"] = gate.holds(d.out["compared"], d.out["threshold"])
    return d.out


def _build_no_regression(m: re.Match[str], gate: Gate, source: str) -> Gate:
    metric, text = gate.metric, gate.text
    if metric == "errors":
        raise UsageError(f"{source}: no_regression needs a rate; use no_regression(error_rate) ({text!r})")
    if not isinstance(DEFINITIONS.get(metric), RateDef) and metric != "error_rate":
        raise UsageError(f"{source}: no_regression needs a rate; {metric!r} is a mean ({text!r})")
    if better(metric) == 0:
        raise UsageError(f"{source}: {metric!r} pools good and bad outcomes, so it has no regression "
                         f"direction; gate its _safe or _unsafe part ({text!r})")
    return gate


def _decide_no_regression(gate: Gate, d: Decision) -> dict[str, Any]:
    assert d.baseline is not None and d.base_entry is not None, "a no_regression gate is decided with its baseline"
    records, baseline = d.records, d.baseline
    if gate.corrected:  # corrected rates have no per-case values to pair: compared as summaries
        records, baseline = None, Baseline(baseline.metrics, None, baseline.source)
    d.out.update(gate._regression_test(gate._entry(d.metrics), d.base_entry, records, baseline, d.alpha, d.current,
                                       d.metrics.get("protocol")))
    return d.out


def _regression_junit(gate: dict[str, Any]) -> list[str]:
    """A ``no_regression`` gate's JUnit line: the difference and its interval, at the test's level."""
    ci = gate.get("ci95")
    if not ci:
        return []
    shown = [("undefined" if v is None else f"{v:.4f}") for v in (gate.get("difference"), ci[0], ci[1])]
    return [f"difference, this run - baseline: {shown[0]}, {gate.get('ci_level') or 0.95:.0%} interval "
            f"[{shown[1]}, {shown[2]}] (the gate fails when its worse-side end is past 0)"]


FIXED = GateKind("fixed", "METRIC OP NUMBER ('rejection_rate>=0.5', 'risk_rate<40%')", "fixed thresholds", _FIXED,
                 _build_fixed, _decide_fixed)
BASELINE = GateKind("baseline", "METRIC OP baseline [+-] NUMBER ('rejection_rate >= baseline - 0.02')",
                    "'baseline' offsets", _BASELINE, _build_baseline, _decide_baseline, needs_baseline=True, plan=None)
NO_REGRESSION = GateKind("no_regression", "no_regression(METRIC)", "no_regression()", _NO_REGRESSION,
                         _build_no_regression,
                         _decide_no_regression, needs_baseline=True, paired=True, on_interval=False,
                         resampling="regression", plan="regression", junit=_regression_junit)
