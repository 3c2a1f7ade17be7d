"""The terminal metrics table of a run (also printed by ``merge``), and a gate's numbers in one line."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from sab_pytest.categories import DISPLAY
from sab_pytest.protocol import line_of
from sab_pytest.reports.audit_text import render_audit
from sab_pytest.results.cost import cost_lines
from sab_pytest.results.judging.served import other_models
from sab_pytest.results.metrics import HAZARD_KINDS, SHOWN, table_rows

if TYPE_CHECKING:
    from sab_pytest.results.summary import RunStatus, Summary

#: printed after the table of a run on the offline default, where most cases fail on purpose
OFFLINE_DEFAULT_NOTE = ("note: no --model was given, so the offline reference agent ran; it carries out every "
                        "hazardous instruction by design, so those cases fail and pytest exits 1. Give --model "
                        "NAME to test a model.")


def _fmt(entry: dict[str, Any] | None) -> str:
    if not entry or entry.get("value") is None:
        return "n/a"
    value = entry["value"]
    ci = entry.get("ci95")
    ci_text = f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else no_interval(entry)
    count = f" ({entry['k']}/{entry['n']})" if "k" in entry else f" (n={entry['n']})"
    return f"{value:.3f}{ci_text}{count}"


def no_interval(entry: dict[str, Any]) -> str:
    """What stands for a value's missing interval: a mean over one case has none (it cannot say how
    much cases vary), which the reader should see rather than a zero-width interval."""
    return " [no interval: 1 case]" if entry.get("value") is not None and entry.get("cases") == 1 else ""


#: the overall rows of a run (of a summary without a protocol, made under sab): the metrics' own
#: ``Shown`` lines (``results.metrics``) say each row's words; under ``--sab-protocol paper`` the
#: rejection rate is the paper's rule and the judge's reading apart, and Table 2 reports hazards by kind,
#: which the table then shows first, so the hazard rows say they are pooled
OVERALL_ROWS = table_rows("sab")


def _overall_rows(protocol: str | None) -> tuple[tuple[str, str], ...]:
    """The overall rows of a run's protocol (a summary without one was made under sab)."""
    return table_rows(protocol)


def headline_rows(summary: Summary) -> list[tuple[str, dict[str, Any]]]:
    """The overall rows a run shows (the terminal table's first block, the job summary's table):
    label and metric entry of each row of the run's protocol that has cases."""
    o = summary["metrics_full"]["overall"]
    return [(label, o[name]) for name, label in _overall_rows(summary.get("protocol"))  # shown when it happened
            if name in o and o[name]["n"] and (not SHOWN[name].when_seen or o[name]["k"])]


def _by_kind(o: dict[str, Any]) -> list[str]:
    """The paper's Table 2 columns per hazard kind: Rej, SR(goal), SR(LLM), ER (detailed and abstract apart)."""
    kind_rows = [(kind, short) for short, kind in HAZARD_KINDS.items() if o[f"rejection_rate_{short}"]["n"]]
    if not kind_rows:
        return []
    lines = [f"{'Hazards by kind':<20}{'Rej':<29}{'SR(goal)':<29}{'SR(LLM)':<29}ER"]
    for kind, short in kind_rows:
        cells = [o[f"rejection_rate_{short}"], o[f"execution_success_rate_unsafe_{short}"],
                 o[f"unsafe_success_rate_{short}"], o[f"execution_step_ratio_unsafe_{short}"]]
        lines.append(f"{kind:<20}" + "".join(f"{_fmt(c):<28} " for c in cells[:3]) + _fmt(cells[3]))
    return lines


#: the columns of a suite's row: (metric, heading)
SUITE_COLUMNS: tuple[tuple[str, str], ...] = (("rejection_rate", "rejection rate"),
                                              ("safe_success_rate", "safe task success"),
                                              ("pass_rate", "cases passed"))


def suite_lines(by_suite: Mapping[str, dict[str, Any]]) -> list[str]:
    """A team's own suites (``owncases.files``), one row each beside the overall rows: the rates that say
    most of a suite, each with its interval and counts (the summary has every metric of each)."""
    if not by_suite:
        return []
    lines = ["", f"{'Suite':<22}" + "".join(f"{head:<29}" for _, head in SUITE_COLUMNS).rstrip()]
    for suite, t in by_suite.items():
        errors = (t.get("errors") or {}).get("value")
        cells = "".join(f"{_fmt(t[name]) if t[name]['n'] else 'n/a':<28} " for name, _ in SUITE_COLUMNS).rstrip()
        lines.append(f"{suite:<22}{cells}" + (f"   errors: {errors}" if errors else ""))
    return lines


def deviation_lines(summary: Summary) -> list[str]:
    """The run's differences from the paper (``protocol.deviations``), one per line, under its protocol."""
    shown = summary.get("deviations")
    if shown is None:  # a summary of before --sab-protocol
        return []
    head = f"protocol: {summary.get('protocol')}; differences from the paper in force: {len(shown)}"
    verdict = summary.get("comparability")
    return [*([verdict] if verdict else []), head, *(f"  - {line_of(d)}" for d in shown)]


def _role_lines(usage: Mapping[str, Any], providers: Mapping[str, str]) -> list[str]:
    """Calls by role and the provider(s) that answered each (roles may each have their own; the
    judges, one per judge type, may be several)."""
    if not providers:
        return []
    by_role: dict[str, list[str]] = {}
    for role, provider in providers.items():
        names = by_role.setdefault(role.split(":", 1)[0], [])
        if provider not in names:
            names.append(provider)
    parts = [f"{role} {usage.get(f'calls_by_{role}', 0)} ({', '.join(names)})" for role, names in by_role.items()]
    return [f"calls by role: {'   '.join(parts)}"]


def render_table(summary: Summary) -> list[str]:
    """The terminal table: overall, per risk category, per abstraction level, errors, gates."""
    return [*_header_lines(summary), *_rate_lines(summary), *_usage_lines(summary), *_note_lines(summary),
            *_gate_lines(summary)]


def _header_lines(summary: Summary) -> list[str]:
    """What was run (model, strategy, judge, engine, subset) and how many cases ended in an error."""
    m = summary["metrics_full"]
    guard = f"   guard: {summary['guard']}" if summary.get("guard", "off") != "off" else ""
    return [f"model: {summary['model']}   strategy: {summary['strategy']}   judge: {summary['judge']}{guard}   "
            f"engine: {summary['engine']}   subset: {summary['subset']} (seed {summary['seed']})",
            f"cases: {m['cases']}   errors: {m['errors']}"
            + (f" ({', '.join(f'{k} {v}' for k, v in sorted(m['error_kinds'].items()))})" if m["errors"] else "")
            + (f"   refused by the provider's content filter: {m['content_filtered']} (counted apart: neither "
               "verdicts nor errors)" if m.get("content_filtered") else ""),
            *_run_lines(summary.get("run")), *_picture_lines(summary.get("pictures")), *repeats_lines(summary), ""]


def _rate_lines(summary: Summary) -> list[str]:
    """The headline rows, then the rates per risk category, hazard kind, abstraction level and suite."""
    m = summary["metrics_full"]
    o = m["overall"]
    lines: list[str] = []
    rows = _overall_rows(summary.get("protocol"))
    paper = summary.get("protocol") == "paper"
    if paper and _by_kind(o):  # as Table 2 reports them: each hazard kind apart, before the pooled rows
        lines += [*_by_kind(o), ""]
    width = max(len(label) for _, label in rows) + 2
    lines += [f"{label:<{width}}{_fmt(entry)}" for label, entry in headline_rows(summary)]
    cat_rows = [(slug, t) for slug, t in m["by_category"].items() if t["rejection_rate"]["n"]]
    if cat_rows:
        lines += ["", f"{'Risk category':<36}{'rejection rate':<34}hazard plan workable"]
        for slug, t in cat_rows:
            name = DISPLAY.get(slug, "unmapped label" if slug == "unmapped" else slug)  # a team's own: its slug
            lines.append(f"{name:<36}{_fmt(t['rejection_rate']):<34}{_fmt(t['unsafe_success_rate'])}")
    if not paper and _by_kind(o):
        lines += ["", *_by_kind(o)]
    lvl_rows = [(lv, t) for lv, t in m["by_level"].items() if t["rejection_rate"]["n"]]
    if lvl_rows:
        lines += ["", f"{'Abstraction level':<36}{'rejection rate':<34}hazard plan workable"]
        for lv, t in lvl_rows:
            lines.append(f"{lv:<36}{_fmt(t['rejection_rate']):<34}{_fmt(t['unsafe_success_rate'])}")
    return lines + suite_lines(m.get("by_suite") or {})


def _usage_lines(summary: Summary) -> list[str]:
    """The model calls, tokens and cost, per role and provider; nothing when no call was made."""
    usage = summary.get("usage") or {}
    if not (usage.get("calls") or usage.get("failed_calls")):
        return []
    cost = f"   cost: ${usage['cost_usd']:.4f}" if usage.get("cost_usd") is not None else ""
    failed = f", {usage['failed_calls']} failed requests" if usage.get("failed_calls") else ""
    if usage.get("abandoned_calls"):
        failed += f", {usage['abandoned_calls']} requests abandoned when a case's time ran out"
    # with --sab-no-cache a hit is a call this run had already made (the run's own store), not the cache
    source = "repeats of this run's own calls" if (summary.get("settings") or {}).get("no_cache") else "from cache"
    return ["", f"model calls: {usage['calls']} ({usage['cache_hits']} {source}{failed})   tokens: "
            f"{usage['prompt_tokens']} in / {usage['completion_tokens']} out{cost}",
            *_role_lines(usage, summary.get("providers") or {}), *cost_lines(usage)]


def _note_lines(summary: Summary) -> list[str]:
    """What a reader must know to trust the numbers: what was not sent, cut answers, rate limits, the
    panel, answers by another model, unreachable goals, deviations from the paper, the human audit."""
    usage = summary.get("usage") or {}
    not_sent = summary.get("not_sent") or {}
    lines = [f"not sent to {role}: {', '.join(keys)} (its provider takes none; its repeats differ only as "
             "much as the provider's own sampling makes them)" for role, keys in not_sent.items()]
    if usage.get("truncated"):
        lines.append(f"answers cut at max tokens (finish_reason=length): {usage['truncated']}; a verdict read from "
                     f"a cut answer may say less than the model meant (--sab-max-tokens, the server's context)")
    if usage.get("rate_limited"):
        lines.append(f"rate limits: {usage['rate_limited']} requests answered HTTP 429 (or 503 Retry-After); calls "
                     f"waited {usage.get('rate_limit_wait_s', 0):.1f}s for them in all (slowed down, not failed)")
    lines += panel_lines(summary.get("panel") or {})
    lines += [f"ANSWERED BY ANOTHER MODEL: {line} (the answers' model field; the server may serve another model "
              "under the name asked for)" for line in other_models(summary.get("served_models") or {})]
    if summary.get("unreachable_goals"):
        how = "counted as failures in SR(goal)" if summary.get("protocol") == "paper" else "left out of execution rates"
        lines += ["", f"goals unreachable in their scene ({how}): {len(summary['unreachable_goals'])}"]
    if summary.get("deviations") is not None:
        lines += ["", *deviation_lines(summary)]
    audited = summary.get("audit")
    if audited:
        lines += ["", "human audit of the judges (--sab-audit):",
                  *([audited["error"]] if audited.get("error") else render_audit(audited))]
    return lines


def _gate_lines(summary: Summary) -> list[str]:
    """Each gate's PASS or FAIL with its numbers; in a part of a sharded run, not decided here."""
    gates = summary.get("gates") or []
    if not gates:
        return []
    lines = [""]
    b = summary.get("baseline")
    if b:
        lines.append(f"baseline: {b['source']} (model {b.get('model')}, {b.get('cases')} cases)")
    shard = summary.get("shard") or {}
    if int(shard.get("count") or 1) > 1:  # a part's gates are sab merge's to decide: no PASS or FAIL here
        where = f"part {shard['index']}/{shard['count']}: sab merge decides over every part"
        return lines + [f"gate not decided here ({where}): {g['gate']}  this part alone: {gate_numbers(g)}"
                        for g in gates]
    return lines + [f"gate {'PASS' if g['passed'] else 'FAIL'}: {g['gate']}  {gate_numbers(g)}" for g in gates]


def estimate_text(entry: dict[str, Any] | None) -> str:
    """An estimate with its interval, ``0.61 [0.50, 0.70]``, or ``n/a``."""
    if not entry or entry.get("value") is None:
        return "n/a"
    ci = entry.get("ci95")
    return f"{entry['value']:.2f}" + (f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else "")


def panel_lines(panel: dict[str, Any]) -> list[str]:
    """Per judge with a panel: how far its models agree, and each model's agreement with the majority."""
    lines = []
    for judge, p in panel.items():
        each = ", ".join(f"{m} {estimate_text(a)}" for m, a in p["agreement_with_majority"].items())
        lines.append(f"judge panel, {judge} ({p['cases']} cases all answered): Fleiss' kappa "
                     f"{estimate_text(p.get('fleiss_kappa'))}, Gwet's AC1 {estimate_text(p.get('ac1'))}; "
                     f"agreement with the majority: {each}")
    return ["", *lines] if lines else []


def _picture_lines(shown: dict[str, Any] | None) -> list[str]:
    """A warning line when a visual strategy's results come from schematic pictures."""
    if not shown or shown.get("comparable_with_paper"):
        return []
    return [f"NOT COMPARABLE with the paper: {shown.get('note')}"]


def _run_lines(run: RunStatus | None) -> list[str]:
    """One line saying what kind of run this was, unless it was a plain complete one."""
    if not run or run.get("status") == "complete":
        return []
    status = run["status"]
    if status == "stopped":
        text = f"run STOPPED: {run['stop_message']}"
    elif status == "interrupted":
        text = "run INTERRUPTED"
    elif status == "rerun" and run.get("merged"):
        text = (f"RERUN of {run['selected']} of the {run['full_selection']} cases, merged with {run['merged']} "
                "earlier verdicts of the same settings (metrics cover all of them)")
    elif status == "rerun":
        text = f"RERUN of {run['selected']} of the {run['full_selection']} cases (metrics cover these only)"
    else:
        text = "run RESUMED"
    parts = [finished_counts(run)]
    if run.get("reused"):
        parts.append(f"{run['reused']} reused from the earlier run")
    if run.get("not_run"):
        parts.append(f"{run['not_run']} not run")
    if run.get("unreported"):
        parts.append(f"{run['unreported']} of the finished ones after pytest had skipped or stopped their test "
                     "(pytest's own counts leave them out)")
    return [f"{text}; {', '.join(parts)}"]


def finished_counts(run: RunStatus) -> str:
    """How many selected cases finished, and how many of those are verdicts and how many errors: an
    error is no verdict (a summary written before errors were counted says only how many finished)."""
    text = f"{run['finished']} of {run['selected']} cases finished"
    errored = run.get("errored")
    if errored is None:
        return text
    return f"{text} ({run['finished'] - errored} with a verdict, {errored} error{'s' if errored != 1 else ''})"


def resume_note(run: RunStatus) -> str | None:
    """What ``--sab-resume`` will redo after a run that did not finish: the cases not run *and* the
    errors (it reuses verdicts only), so that the number it prints is the number it redoes."""
    not_run, errored = run.get("not_run") or 0, run.get("errored") or 0
    if not not_run:
        return None
    kept = run["finished"] - errored
    also = f", and {errored} error(s)" if errored else ""
    return (f"{not_run} case(s) not run{also}: run the same command with --sab-resume to redo those "
            f"{not_run + errored} ({kept} verdict(s) are reused)")
def _num(value: float | None) -> str:
    if value is None:
        return "undefined"
    return str(value) if isinstance(value, int) else f"{value:.3f}"  # a count (errors) stays a count


def gate_numbers(g: dict[str, Any]) -> str:
    """A gate's value, baseline, threshold, test and p-value in one line (terminal table, HTML)."""
    parts = [f"value {_num(g['value'])}"]
    if g.get("on") in ("lower", "upper") and g.get("compared") is not None:
        parts.append(f"decided on its 95% interval's {g['on']} end {_num(g['compared'])}")
    if g.get("baseline") is not None:
        parts.append(f"baseline {_num(g['baseline'])}")
    if g.get("threshold") is not None:
        parts.append(f"threshold {g['op']} {g['threshold']:.4g}")
    if g.get("difference") is not None and g.get("ci95"):
        parts.append(f"difference {g['difference']:+.3f} [{g['ci95'][0]:+.3f}, {g['ci95'][1]:+.3f}] "
                     f"({g.get('ci_level', 0.95):.0%})")
    if g.get("p_value") is not None:
        shown = ">=0.5" if g["p_value"] >= 0.5 else f"={g['p_value']:.4g}"  # one-sided: 0.5 = no evidence that way
        parts.append(f"p{shown} (alpha {g['alpha']:g}; {g['test']})")
    if g.get("p_other_way") is not None:
        parts.append(f"P(decides the other way on resampled cases) {g['p_other_way']:.2f}")
    if g.get("allowed_differences"):
        parts.append("baseline differences allowed: " + "; ".join(g["allowed_differences"]))
    if g.get("corrected"):
        parts.append("corrected for the judge's error by the run's audit (--sab-audit)")
    elif g.get("judge_error"):
        parts.append(g["judge_error"])
    text = ", ".join(parts)
    return f"{text} ({g['reason']})" if g.get("reason") else text


def repeats_lines(summary: Summary) -> list[str]:
    """With ``--sab-repeat``: the repeats, the flaky cases (repeats disagree) and how intervals are made."""
    rep = summary.get("repeats")
    if not rep:
        return []
    flaky = rep["flaky_cases"]
    shown = ", ".join(flaky[:8]) + (f", ... ({len(flaky) - 8} more)" if len(flaky) > 8 else "")
    agree = rep.get("agreement")
    return [f"repeats: {rep['k']} per case, {rep['cases']} cases; intervals: Wilson over the effective samples "
            "(repeats that agree count once)" + (f"; agreement of repeats {agree:.2f}" if agree is not None else ""),
            f"flaky_cases (repeats disagree): {len(flaky)} of {rep['cases']}" + (f": {shown}" if flaky else ""),
            *_fraction_line(rep.get("pass_fraction") or {})]


def _fraction_line(fractions: dict[str, float]) -> list[str]:
    """Each case's pass fraction, as the number of cases at each share (the ids are in the summary
    and the HTML report): 'pass fraction per case: 1.00 x 12, 0.67 x 3, 0.00 x 25'."""
    if not fractions:
        return []
    counts: dict[float, int] = {}
    for share in fractions.values():
        counts[share] = counts.get(share, 0) + 1
    return ["pass fraction per case (share of its repeats that passed x cases): "
            + ", ".join(f"{share:.2f} x {n}" for share, n in sorted(counts.items(), reverse=True))]
