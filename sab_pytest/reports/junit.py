"""What a run's JUnit file says: each case's facts as text (its ``system-out``, which every reader
shows), its scalar verdict fields as properties (only in the legacy family, ``xunit1``, the one whose
testcases may carry ``<properties>``), and the suite's metrics and gates as suite properties."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, cast

from sab_pytest.protocol import comparability, line_of
from sab_pytest.reports.table import estimate_text
from sab_pytest.results.gate_kinds import gate_kind
from sab_pytest.results.judging.served import other_models
from sab_pytest.results.metrics import group_table
from sab_pytest.results.record import filtered

if TYPE_CHECKING:
    from sab_pytest.results.record import StoredRecord
    from sab_pytest.results.summary import Summary


#: characters XML 1.0 does not allow (a model's answer may hold them); pytest's writer drops them too
_NOT_XML = re.compile("[^\u0009\u000a\u000d\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def xml_text(text: str) -> str:
    """``text`` with the characters XML cannot hold replaced by ``?``."""
    return _NOT_XML.sub("?", text)


#: the JUnit families whose testcases may have properties, ``file`` and ``line`` (pytest's ``legacy`` is ``xunit1``)
LEGACY_FAMILIES = ("legacy", "xunit1")


def case_facts(record: StoredRecord) -> str:
    """A case's facts a person needs, one ``name: value`` per line: the ``system-out`` of its
    testcase. The strict schema (``junit-10.xsd``, pytest's default family ``xunit2``) has no
    testcase properties, and GitLab, dorny/test-reporter and mikepenz/action-junit-report show
    only names, failures, skips and the output, so the verdict goes where they all look."""
    case = record["case"]
    level = case["abstraction_level"]
    verdict = ("content filter" if filtered(record) else "error" if record.get("error")
               else "passed" if record["passed"] else "failed")
    usage = record.get("usage") or {}
    lines = [f"case: {case['id']}", f"kind: {case['kind']}", f"category: {case['risk_category'] or '-'}",
             f"level: {'-' if level is None else f'L{level}'}", f"scene: {case['scene']}",
             f"verdict: {verdict}", f"reason: {record.get('message') or '-'}"]
    if record.get("repeat"):
        lines.append(f"repeat: {record['repeat']}")
    for key in ("rejected", "plan_success", "exec_success", "safety", "completeness"):
        if record.get(key) is not None:
            lines.append(f"{key.replace('_', ' ')}: {record[key]}")
    lines += [f"model calls: {usage.get('calls', 0)} ({usage.get('cache_hits', 0)} from the cache)",
              f"tokens: {usage.get('prompt_tokens', 0)} in, {usage.get('completion_tokens', 0)} out"]
    return "\n".join(lines)


def failure_message(record: StoredRecord) -> str:
    """A wrong behaviour's one line (the JUnit ``<failure message=...>``, pytest's short summary):
    the case, the verdict's reason, then the facts a reader sorts failures by, last, where a
    narrow terminal may cut them."""
    case = record["case"]
    level = case["abstraction_level"]
    facts = [case["kind"], *([f"category {case['risk_category']}"] if case["risk_category"] else []),
             *([f"level L{level}"] if level is not None else []),
             f"{(record.get('usage') or {}).get('calls', 0)} model call(s)"]
    return f"{case['id']}: {record['message']} ({', '.join(facts)})"


def junit_case_properties(record: StoredRecord) -> list[tuple[str, Any]]:
    """Scalar per-case properties for JUnit XML (no prompts, no answers: they can be large)."""
    case = record["case"]
    props: list[tuple[str, Any]] = [
        ("sab_id", case["id"]), ("sab_kind", case["kind"]),
        ("sab_category", case["risk_category"] or ""), ("sab_level", "" if case["abstraction_level"] is None
                                                         else f"L{case['abstraction_level']}"),
        ("sab_scene", case["scene"]), ("sab_passed", record["passed"]),
    ]
    if record.get("repeat"):
        props.append(("sab_repeat", record["repeat"]))
    for key in ("rejected", "rejected_format", "refused_after_acting", "plan_success", "completeness", "safety",
                "exec_success", "exec_step_ratio", "unreachable_goal", "error"):
        value = record.get(key)
        if value is not None:
            props.append((f"sab_{key}", value))
    agent = record.get("agent") or {}
    if agent:
        props.append(("sab_agent", agent.get("agent", "")))
        props.append(("sab_steps", len(agent.get("steps") or [])))
        if agent.get("executed"):
            props.append(("sab_actions", len(agent["executed"])))
        if agent.get("episode"):
            props.append(("sab_episode_end", agent["episode"].get("end", "")))
    usage = record.get("usage") or {}
    props += [("sab_model_calls", usage.get("calls", 0)), ("sab_cache_hits", usage.get("cache_hits", 0)),
              ("sab_tokens_in", usage.get("prompt_tokens", 0)), ("sab_tokens_out", usage.get("completion_tokens", 0))]
    return props


def junit_suite_properties(summary: Summary) -> list[tuple[str, str]]:
    """The suite's properties, in the order a reader meets them: what ran, who judged it and how it
    compares with the paper, what it cost, how the run ended, the metrics, the gates."""
    return [*_run_properties(summary), *_judging_properties(summary), *_usage_properties(summary),
            *_state_properties(summary), *_metric_properties(summary), *_gate_properties(summary)]


def _run_properties(summary: Summary) -> list[tuple[str, str]]:
    """What ran: model, judge, strategy, cases, and the pictures a visual strategy saw."""
    props = [("sab_model", summary["model"]), ("sab_judge", summary["judge"]),
             ("sab_strategy", summary["strategy"]), ("sab_subset", summary["subset"]),
             ("sab_seed", str(summary["seed"])), ("sab_cases", str(summary["cases"])),
             ("sab_errors", str(summary["errors"]))]
    shown = summary.get("pictures")
    if shown:  # a visual strategy: which pictures it saw, and whether that compares with the paper
        props += [("sab_pictures", str(shown["kind"])),
                  ("sab_comparable_with_paper", "true" if shown["comparable_with_paper"] else "false")]
    return props


def _judging_properties(summary: Summary) -> list[tuple[str, str]]:
    """Who judged and where: each judge's model, the prompts, the endpoints, answers served by another
    model, a panel's agreement, and the protocol's differences from the paper."""
    props: list[tuple[str, str]] = []
    for judge, entry in (summary.get("judges") or {}).items():
        props.append((f"sab_judge_{judge}", f"{entry['model']} T={entry['temperature']:g}"))
    prompts = summary.get("judge_prompts")
    if prompts:
        props.append(("sab_judge_prompts", prompts))
    props += [(f"sab_endpoint_{role}", url) for role, url in (summary.get("endpoints") or {}).items()]
    props += [("sab_answered_by_another_model", line) for line in other_models(summary.get("served_models") or {})]
    for judge, panel in (summary.get("panel") or {}).items():  # a judge panel's agreement, as the table says it
        props += [(f"sab_panel_{judge}_{key}", estimate_text(panel.get(key))) for key in ("fleiss_kappa", "ac1")]
        props += [(f"sab_panel_{judge}_agreement {model}", estimate_text(a))
                  for model, a in panel["agreement_with_majority"].items()]
    if summary.get("deviations") is not None:  # the run's protocol and its differences from the paper, in one line
        props += [("sab_protocol", str(summary.get("protocol"))),
                  ("sab_comparability", str(summary.get("comparability") or comparability(summary["deviations"]))),
                  ("sab_deviations", " | ".join(line_of(d) for d in summary["deviations"]))]
    return props


def _usage_properties(summary: Summary) -> list[tuple[str, str]]:
    """What the run cost, in all and per role and model (batched calls apart), and the prices used."""
    props: list[tuple[str, str]] = []
    usage = cast(dict[str, Any], summary).get("usage") or {}
    if usage.get("cost_usd") is not None:
        props.append(("sab_cost_usd", f"{usage['cost_usd']:.6f}"))
    for row in usage.get("by_model") or []:
        name = f"{row['role']} {row['model']}"
        props += [(f"sab_tokens_in {name}", str(row["prompt_tokens"])),
                  (f"sab_tokens_out {name}", str(row["completion_tokens"])),
                  (f"sab_cache_hits {name}", str(row["cache_hits"])),
                  (f"sab_cost_usd {name}", "not priced" if row["cost_usd"] is None else f"{row['cost_usd']:.6f}")]
        if row.get("batched_calls"):  # --sab-batch: of them, those a batch answered, at the batch price
            batched = row.get("batched_cost_usd")
            props += [(f"sab_batched_calls {name}", str(row["batched_calls"])),
                      (f"sab_batched_tokens_in {name}", str(row["batched_prompt_tokens"])),
                      (f"sab_batched_tokens_out {name}", str(row["batched_completion_tokens"])),
                      (f"sab_batched_cost_usd {name}", "not priced" if batched is None else f"{batched:.6f}")]
    if usage.get("prices") and usage.get("by_model"):
        props.append(("sab_prices", str(usage["prices"])))
    return props


def _state_properties(summary: Summary) -> list[tuple[str, str]]:
    """How the run went: batched and live usage apart (``--sab-batch``), whether it ended or stopped,
    and its repeats' flaky cases."""
    batch = cast(dict[str, Any], summary).get("batch") or {}
    props = [(f"sab_batch_{key}", str(value)) for key, value in batch.items() if value is not None]
    run = summary.get("run") or {}
    if run:
        props += [("sab_run_status", str(run["status"])), ("sab_not_run", str(run["not_run"]))]
    rep = summary.get("repeats")
    if rep:
        props += [("sab_repeats", str(rep["k"])), ("sab_flaky_cases", str(len(rep["flaky_cases"]))),
                  ("sab_flaky_case_ids", " ".join(rep["flaky_cases"]))]
        if rep.get("agreement") is not None:
            props.append(("sab_repeat_agreement", f"{rep['agreement']:.4g}"))
    return props


def _metric_properties(summary: Summary) -> list[tuple[str, str]]:
    """Each metric with a value, overall and for a team's own suites (``sab_<metric>[suite=NAME]``)."""
    props = [(f"sab_{name}", f"{entry['value']:.4f}") for name, entry in summary["metrics"].items()
             if entry["value"] is not None and name != "errors"]  # the count is sab_errors
    for suite, table in (summary.get("suites") or {}).items():
        props += [(f"sab_{name}[suite={suite}]", f"{entry['value']:.0f}" if name == "errors" else
                   f"{entry['value']:.4f}") for name, entry in table.items() if entry.get("value") is not None]
    return props


def _gate_properties(summary: Summary) -> list[tuple[str, str]]:
    """Each gate's verdict and the numbers that decided it."""
    props: list[tuple[str, str]] = []
    for g in summary.get("gates") or []:
        props.append((f"sab_gate {g['gate']}", "pass" if g["passed"] else "fail"))
        for key in ("value", "baseline", "threshold", "p_value", "compared", "p_other_way"):
            if g.get(key) is not None:
                props.append((f"sab_gate {g['gate']} {key}", f"{g[key]:.4g}"))
        if g.get("test"):
            props.append((f"sab_gate {g['gate']} test", g["test"]))
    return props


#: JUnit classname of the gates' testcases (their name is the gate as the user wrote it)
GATES_CLASSNAME = "sab_gates"
#: paired counts a gate entry may carry (``no_regression`` against a baseline), shown when present
_PAIRED_KEYS = ("paired_cases", "left_out", "unpaired_cases")


def interval_method(summary: Summary, gate: dict[str, Any]) -> str:
    """How the gate's metric's interval was made: the metric entry's ``method`` ("exact",
    "exact_design_effect"; "wilson" and "wilson_design_effect" in summaries before issue 60); Wilson
    where the summary predates the key."""
    try:  # the per-group tables are in ``metrics_full`` (``metrics`` is the flat overall one)
        entry = group_table(summary.get("metrics_full") or {}, gate.get("group")).get(gate["metric"]) or {}
    except (KeyError, TypeError):
        entry = {}
    return str(entry.get("method") or "wilson")


def gate_lines(summary: Summary, gate: dict[str, Any]) -> list[str]:
    """Every number that decided a gate, one per line: the body of its JUnit ``<failure>`` (the
    message is the terminal's one-line ``gate_numbers``)."""
    lines = [f"gate: {gate['gate']}", f"verdict: {'pass' if gate['passed'] else 'fail'}"]
    if gate.get("reason"):
        lines.append(f"reason: {gate['reason']}")
    lines.append(f"value: {_shown(gate.get('value'))}")
    ci = gate.get("ci95")
    decided = gate_kind(gate["form"]).junit if gate.get("form") else None  # its kind's words for how it decided
    if decided is not None:
        lines += decided(gate)
    elif ci:
        lines.append(f"95% interval: [{_shown(ci[0])}, {_shown(ci[1])}] ({interval_method(summary, gate)})")
    if gate.get("on") in ("lower", "upper"):
        lines.append(f"compared: the interval's {gate['on']} end, {_shown(gate.get('compared'))}")
    if gate.get("baseline") is not None:
        lines.append(f"baseline: {_shown(gate['baseline'])}")
    if gate.get("threshold") is not None:
        lines.append(f"threshold: {gate['op']} {_shown(gate['threshold'])}")
    if gate.get("test"):
        lines.append(f"test: {gate['test']}")
    if gate.get("p_value") is not None:
        shown = "0.5 or more" if gate["p_value"] >= 0.5 else f"{gate['p_value']:.4g}"
        lines.append(f"p: {shown} (alpha {gate.get('alpha')})")
    for key in _PAIRED_KEYS:
        if gate.get(key) is not None:
            lines.append(f"{key.replace('_', ' ')}: {gate[key]}")
    if gate.get("p_other_way") is not None:
        lines.append(f"P(decides the other way on resampled cases): {gate['p_other_way']:.2f}")
    lines += [f"baseline difference allowed: {d}" for d in gate.get("allowed_differences") or []]
    return lines


def gate_properties(gate: dict[str, Any]) -> list[tuple[str, str]]:
    """A gate testcase's properties: its numbers, as CI tools list them beside the testcase."""
    props = [("sab_gate_passed", "true" if gate["passed"] else "false")]
    for key in ("value", "compared", "threshold", "baseline", "difference", "p_value", "p_other_way"):
        if gate.get(key) is not None:
            props.append((f"sab_gate_{key}", f"{gate[key]:.4g}"))
    if gate.get("ci95"):  # of a no_regression gate: the difference's, at ci_level (1 - 2 alpha)
        props.append(("sab_gate_ci95", f"{gate['ci95'][0]:.4g} {gate['ci95'][1]:.4g}"))
        if gate.get("ci_level") is not None:
            props.append(("sab_gate_ci_level", f"{gate['ci_level']:.4g}"))
    for key in _PAIRED_KEYS:
        if gate.get(key) is not None:
            props.append((f"sab_gate_{key}", str(gate[key])))
    if gate.get("allowed_differences"):
        props.append(("sab_gate_allowed_differences", "; ".join(gate["allowed_differences"])))
    return props


def _shown(value: Any) -> str:
    if value is None:
        return "undefined"
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else f"{value:.4f}"
