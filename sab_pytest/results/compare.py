"""Two runs side by side: every metric, the difference B - A with its 95% interval, and when both runs
cover the same cases, a paired test per metric and the cases that flipped.

Which statistics, and why (``clustered``, the one model of gates and reports):

* difference of two rates: Newcombe's hybrid score interval built from each run's Wilson interval
  over its effective samples (cases the unit; repeats count by how much they agree); for runs over
  the same cases, with the correlation of the two runs over the paired cases, so the cases both runs
  agree on narrow it; for different cases, without;
* paired test: the two-sided p-value read off that same interval (the level at which it reaches 0),
  so a difference is significant at 0.05 exactly when its 95% interval excludes 0;
* difference of two means (execution step ratios): a normal (Welch) interval over the per-case means;
* pairing: the one rule of ``pairing`` (shared with ``no_regression``): by case id, the cases only
  one run judged left out and counted; runs that share too few cases are a usage error unless
  ``--allow-different`` (then independent).

Runs of a different dataset (sha256), subset, sample or protocol, or made with other settings that
change verdicts (the check a gate's baseline gets), are refused unless the caller allows it, naming
each difference on a line of its own: their numbers do not measure the same thing.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from sab_pytest.errors import UsageError
from sab_pytest.results import clustered, metrics, stats
from sab_pytest.results.load import Run, setting_differences
from sab_pytest.results.pairing import common_cases, pair_cases, too_few
from sab_pytest.results.record import StoredRecord
from sab_pytest.settings import DEFAULT_ALPHA

INTERVAL_NOTE = ("95% interval of B - A: over cases, each run's repeats counted by how much they agree; for rates "
                 "Newcombe's hybrid score interval ({form}), for means a Welch interval over per-case means")
TEST_NOTE = ("paired test: two-sided, read off the same interval (significant at 0.05 exactly when the 95% "
             "interval excludes 0); 'worse'/'better' count the cases whose pass fraction dropped/rose in B")


def differences(a: Run, b: Run) -> list[str]:
    """What makes two runs measure different things, one line each: dataset files, subset, sample and
    its seed, protocol (``case_differences``), and every setting that changes verdicts
    (``load.setting_differences``, the check a gate's baseline gets: judge models, strategy,
    temperature...; the model under test may differ). Settings are compared only where both summaries
    hold them (a run known by its results file alone does not)."""
    out = case_differences(a, b)
    if a.summary.get("settings") and b.summary.get("settings"):
        # the protocol has its own line above, saying what it changes
        out += [line for line in setting_differences(b.settings, a.settings, ("A", "B"))
                if not line.startswith("protocol:")]
    return out


def case_differences(a: Run, b: Run) -> list[str]:
    """Whether two runs judged the same cases by the same protocol, one line per difference: dataset
    files (sha256), subset, sample and its seed, protocol; what every comparison of runs checks."""
    out = []
    sha_a, sha_b = a.summary.get("dataset_sha256"), b.summary.get("dataset_sha256")
    if sha_a and sha_b and sha_a != sha_b:
        changed = sorted(f for f in set(sha_a) | set(sha_b) if sha_a.get(f) != sha_b.get(f))
        out.append(f"dataset sha256 differs ({', '.join(changed)})")
    for key in ("subset", "sample"):
        if a.summary.get(key) != b.summary.get(key):
            out.append(f"{key}: {a.summary.get(key)!r} vs {b.summary.get(key)!r}")
    protocols = (a.summary["protocol"], b.summary["protocol"])
    if protocols[0] != protocols[1]:
        out.append(f"protocol: {protocols[0]!r} vs {protocols[1]!r} (rejection_rate and SR(goal) differ by protocol)")
    if a.summary.get("sample") and a.summary.get("seed") != b.summary.get("seed"):
        out.append(f"sampling seed: {a.summary.get('seed')!r} vs {b.summary.get('seed')!r}")
    return out


def case_means(records: Iterable[StoredRecord] | None, d: metrics.MeanDef, group: str | None) -> dict[str, float]:
    """Per case (sorted by id): the mean of its values of the mean ``d`` in ``group``, errors left out
    (``sab compare``'s and ``sab board``'s paired means)."""
    per_case: dict[str, list[float]] = {}
    for r in records or []:
        if not r.get("error") and metrics.in_group(r, group) and d.population(r):
            per_case.setdefault(str(r["case"]["id"]), []).append(float(d.value(r)))
    return {cid: math.fsum(v) / len(v) for cid, v in sorted(per_case.items())}


def _mean_values(run: Run, metric: str, group: str | None) -> list[float]:
    """Per case (sorted by id): the mean of its values of ``metric`` in ``group``."""
    d = metrics.DEFINITIONS[metric]
    assert isinstance(d, metrics.MeanDef), f"{metric} is a rate, not a mean"
    return list(case_means(run.records, d, group).values())


def _row(metric: str, group: str | None, a: Run, b: Run, paired: bool) -> dict[str, Any] | None:
    """One metric of one group; when the runs are ``paired``, the paired interval and test over the
    cases both judged (``pairing``: by case id, each side's per-case pass fraction)."""
    ea = metrics.group_table(a.metrics, group).get(metric) or {}
    eb = metrics.group_table(b.metrics, group).get(metric) or {}
    if not ea.get("n") and not eb.get("n"):
        return None
    va, vb = ea.get("value"), eb.get("value")
    row: dict[str, Any] = {"metric": metric, "group": group, "better": metrics.better(metric), "a": ea, "b": eb,
                           "diff": None if va is None or vb is None else vb - va, "ci95": None,
                           "pairs": None, "a_only": None, "b_only": None, "p_value": None, "left_out": None}
    if row["diff"] is None:
        return row
    pairs = (pair_cases(metric, group, a.records or [], b.records or [], b.metrics.get("protocol"))
             if paired and metric != "error_rate" else None)
    ci: tuple[float, float] | None
    if pairs is not None and pairs.n:
        diff = pairs.difference()
        fa, fb = pairs.first.y * pairs.second.m, pairs.second.y * pairs.first.m  # fractions, cross-multiplied
        row.update(pairs=pairs.n, left_out=pairs.left_out, a_only=int((fa > fb).sum()), b_only=int((fb > fa).sum()),
                   p_value=diff.p_two_sided if diff else None)
        ci = diff.ci if diff else None
    elif "k" in ea and "k" in eb:
        sa, sb = clustered.side_of_entry(ea), clustered.side_of_entry(eb)
        diff = clustered.difference(sa, sb) if sa and sb else None
        ci = diff.ci if diff else None
    elif metric in metrics.DEFINITIONS and a.records is not None and b.records is not None:
        ci = stats.mean_diff_interval(_mean_values(b, metric, group), _mean_values(a, metric, group))
    else:
        ci = None
    row["ci95"] = list(ci) if ci else None
    return row


def _case_passes(records: list[StoredRecord]) -> dict[str, tuple[int, int, StoredRecord]]:
    """Per case id: its judged samples that passed, how many were judged, and the judged record of
    its highest repeat (a fixed choice, whatever order the records were written in)."""
    counts: dict[str, list[Any]] = {}
    for r in records:
        if not r.get("error"):
            c = counts.setdefault(str(r["case"]["id"]), [0, 0, r])
            c[0] += bool(r.get("passed"))
            c[1] += 1
            if int(r.get("repeat") or 0) >= int(c[2].get("repeat") or 0):
                c[2] = r
    return {cid: (k, n, last) for cid, (k, n, last) in counts.items()}


def flips(a: Run, b: Run) -> dict[str, list[dict[str, Any]]]:
    """Cases both runs judged whose pass fraction differs (pass/fail at K = 1), each way, with both
    runs' pass fractions (passed samples of judged samples)."""
    first, second = _case_passes(a.records or []), _case_passes(b.records or [])
    out: dict[str, list[dict[str, Any]]] = {"passed_in_a_failed_in_b": [], "failed_in_a_passed_in_b": []}
    for cid in sorted(set(first) & set(second)):
        (ka, na, ra), (kb, nb, rb) = first[cid], second[cid]
        if ka * nb == kb * na:
            continue
        key = "passed_in_a_failed_in_b" if ka * nb > kb * na else "failed_in_a_passed_in_b"
        out[key].append({"id": cid, "kind": rb["case"].get("kind"), "a": ra.get("message"), "b": rb.get("message"),
                         "a_pass_fraction": round(ka / na, 6), "b_pass_fraction": round(kb / nb, 6),
                         "a_passed": f"{ka}/{na}", "b_passed": f"{kb}/{nb}"})
    return out


def made_under(run: Run) -> str:
    """The protocol a run's metrics were made under (a run that names none is the project's own, ``sab``)."""
    return str(run.metrics.get("protocol") or run.summary.get("protocol") or "sab")


def read_as(run: Run, protocol: str) -> Run:
    """``run`` under ``protocol``'s definitions, so that a row's difference, interval and test (``sab
    compare``'s, ``sab board``'s) compare one definition: from its records when at hand, else its
    summary's table carried over (``metrics.as_protocol``)."""
    made = made_under(run)
    if made == protocol:
        return run
    table = (metrics.compute(run.records, protocol) if run.records is not None
             else metrics.as_protocol({**run.metrics, "protocol": made}, protocol))
    return replace(run, summary={**run.summary, "metrics_full": table})


def _identity(run: Run) -> dict[str, Any]:
    status = (run.summary.get("run") or {}).get("status")  # complete, interrupted, rerun, resumed, stopped
    return {"source": str(run.source), "model": run.summary.get("model"), "cases": run.metrics["cases"],
            "status": status}


def compare_runs(a: Run, b: Run, *, allow_different: bool = False) -> dict[str, Any]:
    """The comparison as JSON-safe data; refuses runs that measure different things unless allowed."""
    diffs = differences(a, b)
    if diffs and not allow_different:
        raise UsageError("the runs are not comparable (--allow-different compares them anyway):"
                         + "".join(f"\n  {d}" for d in diffs))
    have_records = a.records is not None and b.records is not None
    common, left_out = common_cases(a.records or [], b.records or []) if have_records else (0, 0)
    runs = f"run A ({a.source}) and run B ({b.source})"
    problem = too_few(common, DEFAULT_ALPHA, runs) if have_records else None
    if problem is not None and not allow_different:
        raise UsageError(f"the runs cannot be paired: {problem} (--allow-different compares them as independent "
                         f"samples)")
    paired = have_records and problem is None
    a = read_as(a, made_under(b))
    rows = []
    suites = sorted(set(a.metrics.get("by_suite") or {}) & set(b.metrics.get("by_suite") or {}))  # own suites of both
    for group in (None, *metrics.GROUPS, *(f"{metrics.SUITE_GROUP}{suite}" for suite in suites)):
        names = list(metrics.DEFINITIONS) + (["errors", "error_rate"] if group is None else [])
        for name in names:
            row = _row(name, group, a, b, paired)
            if row is not None:
                rows.append(row)
    if paired:
        k_note = _repeat_note(a, b)
        pairing = f"paired by case: {common} cases both runs judged, {left_out} left out{k_note}"
    elif not have_records:
        pairing = "not paired: a run's per-case results file is missing"
    else:
        pairing = f"not paired: the runs share only {common} judged cases"
    return {"a": _identity(a), "b": _identity(b),
            "differences": diffs, "paired": paired, "pairing": pairing, "paired_cases": common if paired else None,
            "left_out": left_out if paired else None,
            "interval": INTERVAL_NOTE.format(form="paired form, on the cases both runs judged" if paired
                                             else "independent samples"),
            "test": TEST_NOTE if paired else None, "rows": rows, "flips": flips(a, b) if paired else None}


def _repeat_note(a: Run, b: Run) -> str:
    """How each side counts when a run has repeats: its per-case pass fraction."""
    ks = [max((int(r.get("repeat") or 1) for r in run.records or []), default=1) for run in (a, b)]
    return "" if ks == [1, 1] else f"; repeats K={ks[0]} vs K={ks[1]}, each case by its pass fraction"


# ------------------------------------------------------------------------------------------- rendering

def _v(entry: dict[str, Any], metric: str) -> str:
    if entry.get("value") is None:
        return "n/a"
    if metrics.metric_format(metric) == "count":  # a count of cases, not a share
        return f"{entry['value']} of {entry['n']}"
    count = f" ({entry['k']}/{entry['n']})" if "k" in entry else f" (n={entry['n']})"
    return f"{entry['value']:.3f}{count}"


def row_cells(row: dict[str, Any]) -> tuple[str, str, str, str, str]:
    """(name, A, B, B-A [interval], paired test) as text."""
    name = row["metric"] + (f"[{row['group']}]" if row["group"] else "")
    if row["diff"] is None:
        diff = "n/a"
    else:
        ci = row["ci95"]
        diff = (f"{row['diff']:+d}" if metrics.metric_format(row["metric"]) == "count"
                else f"{row['diff']:+.3f}" + (f" [{ci[0]:+.3f}, {ci[1]:+.3f}]" if ci else ""))
    test = "" if row["p_value"] is None else f"p={row['p_value']:.3g} ({row['b_only']} cases better in B, " \
                                              f"{row['a_only']} worse)"
    return name, _v(row["a"], row["metric"]), _v(row["b"], row["metric"]), diff, test


def flip_titles(result: dict[str, Any]) -> tuple[tuple[str, str], tuple[str, str]]:
    """The headings of the flipped cases: pass/fail at K = 1 on both sides, pass fractions otherwise."""
    if "repeats" in result.get("pairing", ""):
        return (("passed_in_a_failed_in_b", "lower pass fraction in B than in A (passed samples of judged)"),
                ("failed_in_a_passed_in_b", "higher pass fraction in B than in A (passed samples of judged)"))
    return (("passed_in_a_failed_in_b", "passed in A, failed in B"),
            ("failed_in_a_passed_in_b", "failed in A, passed in B"))


#: flipped cases listed per direction in the terminal (all of them are in --json and --html)
FLIPS_SHOWN = 25


def render_text(result: dict[str, Any], *, all_groups: bool = False) -> list[str]:
    """Terminal output: every overall metric, the per-group rejection rates, the flipped cases."""
    a, b = result["a"], result["b"]
    lines = [f"A: {a['source']} (model {a['model']}, {a['cases']} cases)",
             f"B: {b['source']} (model {b['model']}, {b['cases']} cases)"]
    if result["differences"]:
        lines += ["compared although they differ:"] + [f"  {d}" for d in result["differences"]]
    for side in ("a", "b"):
        status = result[side].get("status")
        if status in ("interrupted", "stopped", "rerun"):
            lines.append(f"note: run {side.upper()} is {status}: its numbers cover only part of its selection")
    lines += [result["pairing"], result["interval"]] + ([result["test"]] if result["test"] else []) + [""]
    shown = [r for r in result["rows"] if r["group"] is None or all_groups or r["metric"] == "rejection_rate"]
    cells = [row_cells(r) for r in shown]
    head = ("metric", "A", "B", "B - A [95% interval]", "paired test")
    widths = [max(len(c[i]) for c in [*cells, head]) for i in range(4)]
    lines.append("  ".join(h.ljust(w) for h, w in zip(head, [*widths, 0], strict=True)).rstrip())
    lines += ["  ".join(c.ljust(w) for c, w in zip(cell, [*widths, 0], strict=True)).rstrip() for cell in cells]
    if result["flips"] is not None:
        for key, title in flip_titles(result):
            cases = result["flips"][key]
            lines += ["", f"{title}: {len(cases)}"]
            lines += [f"  {c['id']}: A passed {c.get('a_passed', c['a_pass_fraction'])}, "
                      f"B passed {c.get('b_passed', c['b_pass_fraction'])}" for c in cases[:FLIPS_SHOWN]]
            if len(cases) > FLIPS_SHOWN:
                lines.append(f"  ... and {len(cases) - FLIPS_SHOWN} more (all of them in --json / --html)")
    return lines
