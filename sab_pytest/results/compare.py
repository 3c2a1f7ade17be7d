"""Two runs side by side: every metric, the difference B - A with its 95% interval, and when both runs
cover the same cases, a paired test per metric and the cases that flipped.

Which statistics, and why:

* difference of two rates: Newcombe's hybrid score interval, built from the two Wilson intervals;
  for runs over the same cases its paired form (Newcombe 1998, "... based on paired data", method
  10), which uses the correlation of the two runs' outcomes on each case, so that the many cases
  both runs agree on narrow the interval; for different cases the independent form (Newcombe 1998,
  "... independent proportions", method 10);
* difference of two means (execution step ratios): a normal (Welch) interval;
* paired test: the exact McNemar test, two-sided, on the cases both runs judged (neither errored)
  and both count in the metric; it uses only the cases whose outcome differs.

Runs of a different dataset (sha256) or a different subset/sample are refused unless the caller
allows it: their numbers do not measure the same thing.
"""

from __future__ import annotations

from typing import Any

from sab_pytest.errors import UsageError
from sab_pytest.results import metrics, stats
from sab_pytest.results.load import Run
from sab_pytest.results.record import StoredRecord, sample_id

INTERVAL_NOTE = ("95% interval of B - A: Newcombe's hybrid score interval for rates ({form}), Welch normal "
                 "interval for means")
TEST_NOTE = "paired test: exact McNemar, two-sided, on the cases both runs judged"


def differences(a: Run, b: Run) -> list[str]:
    """What makes two runs measure different things: dataset files, subset, sample."""
    out = []
    sha_a, sha_b = a.summary.get("dataset_sha256"), b.summary.get("dataset_sha256")
    if sha_a and sha_b and sha_a != sha_b:
        changed = sorted(f for f in set(sha_a) | set(sha_b) if sha_a.get(f) != sha_b.get(f))
        out.append(f"dataset sha256 differs ({', '.join(changed)})")
    for key in ("subset", "sample"):
        if a.summary.get(key) != b.summary.get(key):
            out.append(f"{key}: {a.summary.get(key)!r} vs {b.summary.get(key)!r}")
    protocols = (a.summary.get("protocol") or "sab", b.summary.get("protocol") or "sab")  # none: made under sab
    if protocols[0] != protocols[1]:
        out.append(f"protocol: {protocols[0]!r} vs {protocols[1]!r} (rejection_rate and SR(goal) differ by protocol)")
    if a.summary.get("sample") and a.summary.get("seed") != b.summary.get("seed"):
        out.append(f"sampling seed: {a.summary.get('seed')!r} vs {b.summary.get('seed')!r}")
    return out


def _mean_values(run: Run, metric: str, group: str | None) -> list[float]:
    d = metrics.DEFINITIONS[metric]
    assert isinstance(d, metrics.MeanDef), f"{metric} is a rate, not a mean"
    return [d.value(r) for r in run.records or []
            if not r.get("error") and metrics.in_group(r, group) and d.population(r)]


def _row(metric: str, group: str | None, a: Run, b: Run,
         pairs: list[tuple[StoredRecord, StoredRecord]] | None) -> dict[str, Any] | None:
    """One metric of one group; ``pairs`` (A's and B's record of each case both judged, in the group)
    when the runs are paired."""
    ea = metrics.group_table(a.metrics, group).get(metric) or {}
    eb = metrics.group_table(b.metrics, group).get(metric) or {}
    if not ea.get("n") and not eb.get("n"):
        return None
    va, vb = ea.get("value"), eb.get("value")
    row: dict[str, Any] = {"metric": metric, "group": group, "better": metrics.better(metric), "a": ea, "b": eb,
                           "diff": None if va is None or vb is None else vb - va, "ci95": None,
                           "pairs": None, "a_only": None, "b_only": None, "p_value": None}
    if row["diff"] is None:
        return row
    counted = metrics.paired_counts(metric, pairs, b.metrics.get("protocol")) if pairs is not None else None
    if counted is not None:
        n_pairs, a_only, b_only, both = counted
        ci = stats.newcombe_paired(both, b_only, a_only, n_pairs - both - a_only - b_only)
        row.update(pairs=n_pairs, a_only=a_only, b_only=b_only, p_value=stats.mcnemar_exact(a_only, b_only))
    elif "k" in ea and "k" in eb:
        ci = stats.newcombe(eb["k"], eb["n"], ea["k"], ea["n"])
    elif metric in metrics.DEFINITIONS and a.records is not None and b.records is not None:
        ci = stats.mean_diff_interval(_mean_values(b, metric, group), _mean_values(a, metric, group))
    else:
        ci = None
    row["ci95"] = list(ci) if ci else None
    return row


def flips(a: Run, b: Run) -> dict[str, list[dict[str, Any]]]:
    """Cases both runs judged whose pass/fail differs, each way."""
    first = {sample_id(r): r for r in a.records or [] if not r.get("error")}  # a repeat pairs with its own
    out: dict[str, list[dict[str, Any]]] = {"passed_in_a_failed_in_b": [], "failed_in_a_passed_in_b": []}
    for r in sorted(b.records or [], key=sample_id):
        other = first.get(sample_id(r))
        if other is None or r.get("error") or bool(other.get("passed")) == bool(r.get("passed")):
            continue
        key = "passed_in_a_failed_in_b" if other.get("passed") else "failed_in_a_passed_in_b"
        out[key].append({"id": sample_id(r), "kind": r["case"].get("kind"), "a": other.get("message"),
                         "b": r.get("message")})
    return out


def _identity(run: Run) -> dict[str, Any]:
    status = (run.summary.get("run") or {}).get("status")  # complete, interrupted, rerun, resumed, stopped
    return {"source": str(run.source), "model": run.summary.get("model"), "cases": run.metrics["cases"],
            "status": status}


def compare_runs(a: Run, b: Run, *, allow_different: bool = False) -> dict[str, Any]:
    """The comparison as JSON-safe data; refuses runs that measure different things unless allowed."""
    diffs = differences(a, b)
    if diffs and not allow_different:
        raise UsageError("the runs are not comparable: " + "; ".join(diffs)
                         + " (--allow-different compares them anyway)")
    paired = a.records is not None and b.records is not None and metrics.same_cases(a.records, b.records)
    rows = []
    all_pairs = metrics.pair_up(a.records or [], b.records or []) if paired else None
    for group in (None, *metrics.GROUPS):
        pairs = ([(x, y) for x, y in all_pairs if metrics.in_group(x, group) and metrics.in_group(y, group)]
                 if all_pairs is not None else None)
        names = list(metrics.DEFINITIONS) + (["errors", "error_rate"] if group is None else [])
        for name in names:
            row = _row(name, group, a, b, pairs)
            if row is not None:
                rows.append(row)
    if paired:
        pairing = "paired: both runs cover the same cases"
    elif a.records is None or b.records is None:
        pairing = "not paired: a run's per-case results file is missing"
    else:
        pairing = "not paired: the runs cover different cases"
    return {"a": _identity(a), "b": _identity(b),
            "differences": diffs, "paired": paired, "pairing": pairing,
            "interval": INTERVAL_NOTE.format(form="paired form, on the cases both runs judged" if paired
                                             else "independent samples"),
            "test": TEST_NOTE if paired else None, "rows": rows, "flips": flips(a, b) if paired else None}


# ------------------------------------------------------------------------------------------- rendering

def _v(entry: dict[str, Any], metric: str) -> str:
    if entry.get("value") is None:
        return "n/a"
    if metric == "errors":  # a count of cases, not a share
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
        diff = (f"{row['diff']:+d}" if row["metric"] == "errors"
                else f"{row['diff']:+.3f}" + (f" [{ci[0]:+.3f}, {ci[1]:+.3f}]" if ci else ""))
    test = "" if row["p_value"] is None else f"p={row['p_value']:.3g} ({row['a_only']} A only, {row['b_only']} B only)"
    return name, _v(row["a"], row["metric"]), _v(row["b"], row["metric"]), diff, test


#: flipped cases listed per direction in the terminal (all of them are in --json and --html)
FLIPS_SHOWN = 25


def render_text(result: dict[str, Any], *, all_groups: bool = False) -> list[str]:
    """Terminal output: every overall metric, the per-group rejection rates, the flipped cases."""
    a, b = result["a"], result["b"]
    lines = [f"A: {a['source']} (model {a['model']}, {a['cases']} cases)",
             f"B: {b['source']} (model {b['model']}, {b['cases']} cases)"]
    if result["differences"]:
        lines.append("compared although they differ: " + "; ".join(result["differences"]))
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
        for key, title in (("passed_in_a_failed_in_b", "passed in A, failed in B"),
                           ("failed_in_a_passed_in_b", "failed in A, passed in B")):
            cases = result["flips"][key]
            lines += ["", f"{title}: {len(cases)}"]
            lines += [f"  {c['id']}: {c['b']}" for c in cases[:FLIPS_SHOWN]]
            if len(cases) > FLIPS_SHOWN:
                lines.append(f"  ... and {len(cases) - FLIPS_SHOWN} more (all of them in --json / --html)")
    return lines
