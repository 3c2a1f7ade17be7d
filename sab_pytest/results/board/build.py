"""A board: N finished runs in one table, each cell a metric's value with its 95% interval and n, and
which differences between the runs are real, corrected for how many the table tests.

* Comparable runs only: every run is checked against the reference (``--against``, else the first
  run) for what makes its numbers another measurement (``measures.board_differences``: dataset
  sha256, subset, sample, protocol, judges, whether and in which engine plans ran); the agent's
  settings (model, strategy, sampling, guard ...) may differ, since they are what a board compares. A
  run that differs is refused, each reason on a line naming the run, unless the caller allows it, and
  then marked with its reasons.
* Comparisons: each run against the reference, or every pair; paired by case where the two runs share
  enough judged cases (``pairing``'s rule), as independent samples otherwise (and said so).
* Every comparison of every column is one test of one family: Holm's correction by default
  (``family.adjust``), so that a table of identical models marks a difference with chance alpha at most.
* Rows are named by what differs between the runs (model, strategy, guard, judge ...), not by folder;
  runs alike in all of those, by any other setting of the run key in which they differ (``max_tokens=4096``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from sab_pytest.errors import UsageError
from sab_pytest.results import clustered, metrics
from sab_pytest.results.board.family import CORRECTIONS, Tested, adjust, mean_difference, padded, rate_differences
from sab_pytest.results.board.layouts import DEFAULT_LAYOUT, LAYOUTS, Column
from sab_pytest.results.board.measures import board_differences
from sab_pytest.results.compare import case_means, made_under, read_as
from sab_pytest.results.load import Run
from sab_pytest.results.metrics import MeanDef, RateDef, definitions, in_group
from sab_pytest.results.pairing import judged_cases, too_few
from sab_pytest.settings import DEFAULT_ALPHA, run_setting_sides

#: what a row may be named by, in this order: the first keys whose values differ between the runs
NAMING_KEYS = ("model", "strategy", "guard", "judge_model", "judge_panel", "protocol", "judge_prompts",
               "temperature", "safety_hint", "action_format", "repeat", "engine")
INTERVAL_NOTE = ("95% interval of each rate: Wilson's over the run's effective samples (cases the unit); of each "
                 "mean (ER): normal over cases")
TEST_NOTE = ("{what}: a rate's difference by Newcombe's hybrid interval, two-sided (as sab compare); a mean's by "
             "Student's t over per-case means; {m} tests in the table, corrected by {correction} at alpha {alpha:g}")


def _entry(run: Run, column: Column) -> dict[str, Any] | None:
    entry = metrics.group_table(run.metrics, column.group).get(column.metric)
    return entry if entry and entry.get("n") else None


def _shown(value: Any) -> str:
    if isinstance(value, dict):
        return ",".join(f"{k}={_shown(v)}" for k, v in value.items())
    return ",".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)


def _descriptor(run: Run) -> dict[str, str]:
    """What a row may be named by: ``NAMING_KEYS``, from the run's settings where its summary holds them,
    else its summary's keys; then every other setting of its run key, as ``key=value`` (from the
    summary's settings, else from its records')."""
    settings = run.summary.get("settings") or {}
    out = {}
    for key in NAMING_KEYS:
        value = settings.get(key, run.summary.get("judge" if key == "judge_model" else key))
        if value not in (None, "", [], "-"):
            out[key] = _shown(value)
    if settings:
        keyed = run.settings.run_settings()
    else:
        keyed = next((r.get("run_settings") or {} for r in run.records or []), {})
    for key, value in keyed.items():
        if key not in NAMING_KEYS:
            out[key] = f"{key}={_shown(value)}"
    return out


def row_names(runs: Sequence[Run], given: Sequence[str] | None = None) -> tuple[list[str], list[str]]:
    """(a name per run, the keys that name them): the values of the settings in which the runs differ,
    joined by ' / '; a number is added where two runs are alike in all of them (repeats)."""
    if given:
        if len(given) != len(runs):
            raise UsageError(f"--name: {len(given)} name(s) for {len(runs)} runs (give one per run, in their order)")
        return list(given), ["name"]
    described = [_descriptor(r) for r in runs]
    keys = [k for k in NAMING_KEYS if len({d.get(k, "") for d in described}) > 1] or ["model"]
    names = [" / ".join(d.get(k, "-") for k in keys) for d in described]
    # runs alike in all of those but not in another setting (max_tokens, max_steps, a helper model): named by it too
    # (not by an address: two repeats on two machines are repeats, not two agents)
    alike = [[d for d, n in zip(described, names, strict=True) if n == name] for name in set(names)]
    order = [k for k, side in run_setting_sides().items() if side != "where" and k not in NAMING_KEYS]
    more = [k for k in order if any(len({d.get(k, "") for d in g}) > 1 for g in alike)]
    if more:
        keys += more
        names = [" / ".join(d.get(k, "-") for k in keys) for d in described]
    for name in set(names):
        same = [i for i, n in enumerate(names) if n == name]
        if len(same) > 1:
            for count, i in enumerate(same, 1):
                names[i] = f"{name} #{count}"
    return names, keys


def _population(column: Column, protocol: str) -> tuple[Any, Any]:
    """(members, definition) of a column: the judged records of its metric's population in its group."""
    d = definitions(protocol)[column.metric]

    def members(r: Any) -> bool:
        return not r.get("error") and d.population(r) and in_group(r, column.group)

    return members, d


def _per_case(run: Run, column: Column, protocol: str) -> clustered.Cases | dict[str, float] | None:
    """A run's per-case data of a column: a rate's successes and samples per case, or a mean's per-case
    mean (ids sorted); None without records."""
    if run.records is None:
        return None
    members, d = _population(column, protocol)
    if isinstance(d, RateDef):
        return clustered.cases_of(run.records, members, d.success)
    assert isinstance(d, MeanDef)
    return case_means(run.records, d, column.group)


def _aligned(a: clustered.Cases, b: clustered.Cases) -> tuple[tuple[np.ndarray, np.ndarray],
                                                               tuple[np.ndarray, np.ndarray]]:
    """Both sides on the cases they share (sorted ids)."""
    if a.ids == b.ids:
        return (a.y, a.m), (b.y, b.m)
    _, ia, ib = np.intersect1d(np.array(a.ids), np.array(b.ids), assume_unique=True, return_indices=True)
    return (a.y[ia], a.m[ia]), (b.y[ib], b.m[ib])


def _rate_tests(data: list[Any], entries: list[Any], pairs: list[tuple[int, int]],
                paired: list[bool]) -> list[tuple[float, float, float, float, int] | None]:
    """(diff, low, high, p, cases) of each pair of a rate column, the pairs of each kind in one call."""
    out: list[tuple[float, float, float, float, int] | None] = [None] * len(pairs)
    for kind in (True, False):
        chosen = [k for k, (i, j) in enumerate(pairs) if paired[k] == kind
                  and isinstance(data[i], clustered.Cases) and isinstance(data[j], clustered.Cases)
                  and data[i].n and data[j].n]
        if chosen:
            sides = [_aligned(data[pairs[k][0]], data[pairs[k][1]]) if kind
                     else ((data[pairs[k][0]].y, data[pairs[k][0]].m), (data[pairs[k][1]].y, data[pairs[k][1]].m))
                     for k in chosen]
            ya, ma = padded([s[0] for s in sides])
            yb, mb = padded([s[1] for s in sides])
            t: Tested = rate_differences(ya, ma, yb, mb, paired=kind)
            for row, k in enumerate(chosen):
                if not math.isnan(t.p[row]):
                    out[k] = (float(t.diff[row]), float(t.low[row]), float(t.high[row]), float(t.p[row]),
                              int(t.cases[row]))
    for k, (i, j) in enumerate(pairs):  # a run known by its summary alone: independent samples, from its entries
        if out[k] is None and (data[i] is None or data[j] is None) and entries[i] and entries[j]:
            sa, sb = clustered.side_of_entry(entries[i]), clustered.side_of_entry(entries[j])
            d = clustered.difference(sa, sb) if sa and sb else None
            if d is not None:
                out[k] = (d.value, d.ci[0], d.ci[1], d.p_two_sided, d.cases)
    return out


def _mean_tests(data: list[Any], pairs: list[tuple[int, int]],
                paired: list[bool]) -> list[tuple[float, float, float, float, int] | None]:
    """(diff, low, high, p, cases) of each pair of a mean column (ER): Student's t over per-case means, on
    the cases both runs hold when paired; None where a run has no records (a summary has no per-case means)."""
    out: list[tuple[float, float, float, float, int] | None] = []
    for (i, j), both in zip(pairs, paired, strict=True):
        a, b = data[i], data[j]
        if not isinstance(a, dict) or not isinstance(b, dict):
            out.append(None)
            continue
        ids = sorted(set(a) & set(b)) if both else None
        xa, xb = ([a[c] for c in ids], [b[c] for c in ids]) if ids is not None else (list(a.values()), list(b.values()))
        tested = mean_difference(xa, xb, paired=both)
        out.append(None if tested is None else (*tested, len(ids) if ids is not None else min(len(xa), len(xb))))
    return out


def _check(runs: Sequence[Run], names: list[str], ref: int, pairs: list[tuple[int, int]],
           allow_different: bool) -> tuple[list[list[str]], list[bool]]:
    """Each run's differences from the reference, and whether each pair can be paired; refuses (a
    ``UsageError`` naming each run and reason) what is not comparable unless ``allow_different``."""
    diffs = [[] if i == ref else board_differences(runs[ref], run) for i, run in enumerate(runs)]
    problems = [f"\n  {names[i]} ({runs[i].source}): {d}" for i, ds in enumerate(diffs) for d in ds]
    paired = []
    judged = [None if r.records is None else judged_cases(r.records) for r in runs]  # once a run, not once a pair
    for i, j in pairs:
        a, b, in_a, in_b = runs[i], runs[j], judged[i], judged[j]
        if in_a is None or in_b is None:
            paired.append(False)
            continue
        common = len(in_a & in_b)  # pairing.common_cases's count, of the sets made once
        problem = too_few(common, DEFAULT_ALPHA, f"{names[i]} ({a.source}) and {names[j]} ({b.source})")
        if problem:
            problems.append(f"\n  {problem}")
        paired.append(problem is None)
    if problems and not allow_different:
        raise UsageError("the runs are not comparable with the reference "
                         f"{names[ref]} ({runs[ref].source}) (--allow-different puts them on the board anyway, "
                         "marked, unpaired where they share too few cases):" + "".join(problems))
    return diffs, paired


def compare_columns(columns: Sequence[Column], data: Sequence[Sequence[Any]], entries: Sequence[Sequence[Any]],
                    pairs: Sequence[tuple[int, int]], paired: Sequence[bool], *, correction: str = "holm",
                    alpha: float = DEFAULT_ALPHA) -> list[dict[str, Any]]:
    """Every comparison of the board, one family: per column (``data[column][run]``: the run's
    ``clustered.Cases`` for a rate, its per-case means for a mean, None without records; ``entries``
    the same from the summaries), each pair (A, B) tested, then all of them corrected together. A
    comparison is marked ``significant`` when its corrected p-value is below ``alpha``."""
    pairs, paired = list(pairs), list(paired)
    comparisons: list[dict[str, Any]] = []
    for col, column in enumerate(columns):
        tested = (_mean_tests(list(data[col]), pairs, paired) if column.is_mean
                  else _rate_tests(list(data[col]), list(entries[col]), pairs, paired))
        for (i, j), both, t in zip(pairs, paired, tested, strict=True):
            if t is not None:
                diff, low, high, p, cases = t
                comparisons.append({"a": i, "b": j, "column": col, "diff": diff, "ci95": [low, high], "p_value": p,
                                    "paired": both, "cases": cases})
    for c, p_adj in zip(comparisons, adjust([c["p_value"] for c in comparisons], correction), strict=True):
        c["p_adjusted"] = p_adj
        c["significant"] = bool(p_adj < alpha)
        c["direction"] = "higher" if c["diff"] > 0 else "lower" if c["diff"] < 0 else None
        sense = columns[c["column"]].better * (1 if c["diff"] > 0 else -1 if c["diff"] < 0 else 0)
        c["judged"] = {1: "better", -1: "worse"}.get(sense)
    return comparisons


def build_board(runs: Sequence[Run], *, layout: str = DEFAULT_LAYOUT, against: int | None = 0,
                names: Sequence[str] | None = None, correction: str = "holm", alpha: float = DEFAULT_ALPHA,
                allow_different: bool = False) -> dict[str, Any]:
    """The board as JSON-safe data. ``against``: the reference run's index, every run compared with it;
    None: every pair compared (the first run is then the one the others' comparability is checked with)."""
    if len(runs) < 2:
        raise UsageError(f"a board needs at least two runs ({len(runs)} given)")
    if layout not in LAYOUTS:
        raise UsageError(f"--layout: unknown layout {layout!r} (one of {', '.join(LAYOUTS)})")
    if correction not in CORRECTIONS:
        raise UsageError(f"--correction: unknown correction {correction!r} (one of {', '.join(CORRECTIONS)})")
    ref = 0 if against is None else against
    protocol = made_under(runs[ref])
    runs = [read_as(r, protocol) for r in runs]
    row_name, named_by = row_names(runs, names)
    pairs = ([(ref, i) for i in range(len(runs)) if i != ref] if against is not None
             else [(i, j) for i in range(len(runs)) for j in range(i + 1, len(runs))])
    diffs, paired = _check(runs, row_name, ref, pairs, allow_different)
    chosen = LAYOUTS[layout]
    columns = [c for c in chosen.columns if c.metric in definitions(protocol) and any(_entry(r, c) for r in runs)]
    cells = [[_entry(r, c) for c in columns] for r in runs]
    data = [[_per_case(r, c, protocol) for r in runs] for c in columns]
    comparisons = compare_columns(columns, data, [[row[k] for row in cells] for k in range(len(columns))], pairs,
                                  paired, correction=correction, alpha=alpha)
    what = ("each run against the reference" if against is not None else "every pair of runs")
    return {
        "layout": layout, "title": chosen.title, "note": chosen.note,
        "columns": [{"label": c.label, "metric": c.metric, "group": c.group, "better": c.better} for c in columns],
        "runs": [{"name": row_name[i], "source": str(r.source), "model": r.summary.get("model"),
                  "cases": r.metrics.get("cases"), "status": (r.summary.get("run") or {}).get("status"),
                  "differences": diffs[i]} for i, r in enumerate(runs)],
        "named_by": named_by, "reference": against, "cells": cells, "protocol": protocol,
        "comparisons": comparisons, "correction": correction, "alpha": alpha,
        "pairing": [{"a": i, "b": j, "paired": both} for (i, j), both in zip(pairs, paired, strict=True)],
        "interval": INTERVAL_NOTE,
        "test": TEST_NOTE.format(what=what, m=len(comparisons), correction=correction, alpha=alpha),
    }
