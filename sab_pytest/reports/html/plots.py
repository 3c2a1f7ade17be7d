"""The report's plots: matplotlib ``Figure`` objects (no pyplot state, no GUI backend) saved as SVG
and embedded as data URIs, so each picture is isolated and the page needs no other file."""

from __future__ import annotations

import base64
import io
from collections.abc import Iterable
from typing import Any

from sab_pytest.categories import DISPLAY
from sab_pytest.errors import SabError
from sab_pytest.reports.html.page import LEVELS
from sab_pytest.settings import DEFAULT_ALPHA


def matplotlib_or_error() -> Any:
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise SabError("the HTML report needs matplotlib: pip install 'sab-pytest[report]'") from None
    return Figure


def _svg(fig: Any) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None})
    return "data:image/svg+xml;base64," + base64.b64encode(buf.getvalue()).decode()


def _rate_bars(title: str, rows: list[tuple[str, dict[str, Any]]], xlabel: str, color: str) -> str | None:
    """Horizontal bars of rates with their 95% intervals and k/n labels; None when no row has cases."""
    rows = [(label, e) for label, e in rows if e and e.get("n")]
    if not rows:
        return None
    figure = matplotlib_or_error()
    fig = figure(figsize=(6.4, 0.42 * len(rows) + 1.1))
    ax = fig.subplots()
    ys = list(range(len(rows)))[::-1]
    values = [e["value"] for _, e in rows]
    lo = [max(0.0, e["value"] - e["ci95"][0]) for _, e in rows]  # rounding can put a bound a hair past the value
    hi = [max(0.0, e["ci95"][1] - e["value"]) for _, e in rows]
    ax.barh(ys, values, color=color, height=0.62)
    ax.errorbar(values, ys, xerr=[lo, hi], fmt="none", ecolor="#222", capsize=3, lw=1)
    ax.set_yticks(ys, [label for label, _ in rows])
    for y, (_, e) in zip(ys, rows, strict=True):
        ax.text(1.02, y, f"{e['value']:.2f}  ({e['k']}/{e['n']})", va="center", fontsize=8,
                transform=ax.get_yaxis_transform())
    ax.set_xlim(0, 1)
    ax.set_xlabel(xlabel)
    ax.set_title(title, fontsize=10, loc="left")
    ax.grid(axis="x", alpha=0.3)
    ax.spines[["top", "right"]].set_visible(False)
    return _svg(fig)


def _shares(title: str, parts: list[tuple[str, dict[str, Any], str]]) -> str | None:
    """One stacked bar of outcome shares that add up to 1 (long-horizon outcomes)."""
    n = max((e.get("n") or 0 for _, e, _ in parts), default=0)
    if not n:
        return None
    figure = matplotlib_or_error()
    fig = figure(figsize=(6.4, 1.7))
    ax = fig.subplots()
    left = 0.0
    for label, e, color in parts:
        share = e["value"] or 0.0
        ax.barh([0], [share], left=left, color=color, label=f"{label}: {e['k']}/{e['n']}", height=0.5)
        if share >= 0.08:
            ax.text(left + share / 2, 0, f"{share:.0%}", ha="center", va="center", color="white", fontsize=9)
        left += share
    ax.set_xlim(0, 1)
    ax.set_yticks([])
    ax.set_title(f"{title} (n={n})", fontsize=10, loc="left")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.25), ncol=3, fontsize=8, frameon=False)
    ax.spines[["top", "right", "left"]].set_visible(False)
    return _svg(fig)


def error_bars(m: dict[str, Any]) -> str | None:
    """Errored cases by kind of failure, apart from every rate (None when nothing errored)."""
    kinds = sorted(m.get("error_kinds", {}).items(), key=lambda kv: -kv[1])
    if not kinds:
        return None
    figure = matplotlib_or_error()
    from matplotlib.ticker import MaxNLocator

    fig = figure(figsize=(6.4, 0.4 * len(kinds) + 1.0))
    ax = fig.subplots()
    ys = list(range(len(kinds)))[::-1]
    ax.barh(ys, [n for _, n in kinds], color="#8a5a00", height=0.6)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # counts of cases
    ax.set_yticks(ys, [k for k, _ in kinds])
    for y, (_, n) in zip(ys, kinds, strict=True):
        ax.text(n, y, f" {n}", va="center", fontsize=8)
    ax.set_xlabel(f"errored cases (of {m['cases']}); left out of every rate")
    ax.set_title("Errors by kind", fontsize=10, loc="left")
    ax.spines[["top", "right"]].set_visible(False)
    return _svg(fig)


def plots(m: dict[str, Any]) -> list[tuple[str, str | None]]:
    """(caption, SVG data URI or None when the run has no such cases) for each plot of the report."""
    o = m["overall"]
    cats = [(DISPLAY.get(slug, "unmapped label"), t["rejection_rate"]) for slug, t in m["by_category"].items()]
    levels = [(lv, m["by_level"][lv]["rejection_rate"]) for lv in LEVELS]
    return [
        (f"Rejection rate per risk category (hazardous cases, 95% {interval_words(e for _, e in cats)} intervals)",
         _rate_bars("Rejection rate by risk category", cats, "rejection rate", "#2f6db5")),
        (f"Rejection rate per abstraction level (L0 concrete .. L3 abstract; 95% "
         f"{interval_words(e for _, e in levels)} intervals)",
         _rate_bars("Rejection rate by abstraction level", levels, "rejection rate", "#2f6db5")),
        ("Safe tasks: success against over-refusal",
         _rate_bars("Safe tasks", [("plan succeeds", o["safe_success_rate"]),
                                   ("refused (over-refusal)", o["safe_rejection_rate"])], "share of safe tasks",
                    "#3a8f5c")),
        ("Execution in the engine: safe goals reached against hazards carried out",
         _rate_bars("Execution success", [("safe goals reached", o["execution_success_rate_safe"]),
                                          ("hazards carried out", o["execution_success_rate_unsafe"])],
                    "share of executed cases", "#a35d2a")),
        ("Long-horizon outcomes",
         _shares("Long-horizon outcomes", [("completed, safe", o["long_horizon_completed_safe_rate"], "#3a8f5c"),
                                           ("completed, unsafe", o["long_horizon_completed_unsafe_rate"], "#c0392b"),
                                           ("incomplete", o["long_horizon_incomplete_rate"], "#8a8f98")])),
    ]


#: how a metric entry's ``method`` key reads in a caption; an entry without it predates the key: Wilson
_METHODS = {"wilson": "Wilson",
            "wilson_design_effect": "Wilson over the effective samples (repeats that agree count once)",
            "normal": "normal", "normal_over_cases": "normal, over cases"}


def interval_words(entries: Iterable[dict[str, Any] | None]) -> str:
    """The interval method the plotted entries really used, in words (both when they differ)."""
    used = sorted({str((e or {}).get("method") or "wilson") for e in entries if e and e.get("ci95")}) or ["wilson"]
    return " / ".join(_METHODS.get(m, m) for m in used)


def _significant(row: dict[str, Any], alpha: float = DEFAULT_ALPHA) -> bool:
    """Whether a compare row's change is significant: its paired test's p below ``alpha``, or,
    without a test, its 95% interval clear of zero."""
    if row.get("p_value") is not None:
        return bool(row["p_value"] < alpha)
    ci = row.get("ci95")
    return ci is not None and (ci[0] > 0 or ci[1] < 0)


def forest(rows: list[dict[str, Any]]) -> str | None:
    """Differences B - A of the overall metrics with their intervals (a forest plot)."""
    rows = [r for r in rows if r["group"] is None and r["diff"] is not None and r["metric"] != "errors"]
    if not rows:
        return None
    figure = matplotlib_or_error()
    fig = figure(figsize=(7.2, 0.3 * len(rows) + 1.0))
    ax = fig.subplots()
    ys = list(range(len(rows)))[::-1]
    for y, r in zip(ys, rows, strict=True):
        ci = r["ci95"] or [r["diff"], r["diff"]]
        change = r["diff"] * r["better"]
        color = ("#8a8f98" if change == 0 or not _significant(r)
                 else ("#1d7a3e" if change > 0 else "#b3261e"))
        ax.plot(ci, [y, y], color=color, lw=2)
        ax.plot([r["diff"]], [y], "o", color=color)
    ax.axvline(0, color="#222", lw=0.8)
    ax.set_yticks(ys, [r["metric"] for r in rows], fontsize=8)
    ax.set_xlabel(f"B - A (green: B significantly better, red: significantly worse, grey: not significant at "
                  f"{DEFAULT_ALPHA:g}, or no better side)")
    ax.grid(axis="x", alpha=0.3)
    ax.spines[["top", "right"]].set_visible(False)
    return _svg(fig)
