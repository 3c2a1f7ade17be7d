"""The report's plots, drawn as SVG by hand and embedded as data URIs, so each picture is isolated
and the page needs no other file. A plot here is a few bars, intervals and labels: drawing them
directly takes a millisecond and needs no plotting library, where a plotting library took a
quarter of a second per plot and had to be installed for the report."""

from __future__ import annotations

import base64
import math
from collections.abc import Iterable
from typing import Any
from xml.sax.saxutils import escape, quoteattr

from sab_pytest.categories import DISPLAY
from sab_pytest.reports.html.page import LEVELS
from sab_pytest.results.metrics import shown
from sab_pytest.settings import DEFAULT_ALPHA

#: the font of every label; a character's width is taken as ``CHAR_EM`` of the font's size, what the
#: common sans-serif fonts average, to leave room for the longest label
FONT = "DejaVu Sans, Helvetica, Arial, sans-serif"
CHAR_EM = 0.62
ROW = 26  # pixels a bar's row takes
TEXT = "#222"
GRID = "#d9dde3"


class Canvas:
    """An SVG picture being drawn, ``width`` pixels wide; its height follows what was drawn."""

    def __init__(self, width: int) -> None:
        self.width = width
        self.height = 0.0
        self.parts: list[str] = []

    def line(self, x1: float, y1: float, x2: float, y2: float, color: str = TEXT, width: float = 1.0) -> None:
        self.parts.append(f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" stroke="{color}" '
                          f'stroke-width="{width:g}"/>')
        self.height = max(self.height, y1, y2)

    def rect(self, x: float, y: float, w: float, h: float, color: str) -> None:
        self.parts.append(f'<rect x="{x:.1f}" y="{y:.1f}" width="{max(w, 0.0):.1f}" height="{h:.1f}" fill="{color}"/>')
        self.height = max(self.height, y + h)

    def circle(self, x: float, y: float, r: float, color: str) -> None:
        self.parts.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{r:g}" fill="{color}"/>')
        self.height = max(self.height, y + r)

    def text(self, x: float, y: float, words: str, size: float = 11, anchor: str = "start", color: str = TEXT,
             bold: bool = False) -> None:
        """``words`` with their baseline centred on ``y`` (a third of the size below it)."""
        weight = ' font-weight="bold"' if bold else ""
        self.parts.append(f'<text x="{x:.1f}" y="{y + size / 3:.1f}" font-size="{size:g}" text-anchor="{anchor}" '
                          f'fill="{color}"{weight}>{escape(words)}</text>')
        self.height = max(self.height, y + size / 2)

    def data_uri(self) -> str:
        height = math.ceil(self.height + 8)
        svg = (f'<svg xmlns="http://www.w3.org/2000/svg" width="{self.width}" height="{height}" '
               f'viewBox="0 0 {self.width} {height}" font-family={quoteattr(FONT)}>'
               f'<rect width="100%" height="100%" fill="white"/>{"".join(self.parts)}</svg>')
        return "data:image/svg+xml;base64," + base64.b64encode(svg.encode()).decode()


def text_width(words: str, size: float = 11) -> float:
    return len(words) * size * CHAR_EM


def nice_ticks(low: float, high: float, most: int = 6) -> list[float]:
    """Round tick values (1, 2 or 5 times a power of ten apart) covering ``low`` to ``high``."""
    if high <= low:
        high = low + 1.0
    raw = (high - low) / max(most - 1, 1)
    power = 10 ** math.floor(math.log10(raw))
    step = next(s * power for s in (1, 2, 5, 10) if s * power >= raw)
    first = math.floor(low / step + 1e-9) * step
    ticks, value = [], first
    while value <= high + step * 1e-6:
        ticks.append(round(value, 10))
        value += step
    if ticks[-1] < high - step * 1e-6:
        ticks.append(round(value, 10))
    return ticks


class Axis:
    """Values ``low`` .. ``high`` across pixels ``left`` .. ``right``."""

    def __init__(self, low: float, high: float, left: float, right: float) -> None:
        self.low, self.high, self.left, self.right = low, high, left, right

    def x(self, value: float) -> float:
        return self.left + (value - self.low) / (self.high - self.low) * (self.right - self.left)

    def draw(self, c: Canvas, ticks: list[float], top: float, bottom: float, label: str, fmt: str = "{:g}") -> None:
        """Grid lines from ``top`` to ``bottom``, the tick values under them and ``label`` below."""
        for t in ticks:
            c.line(self.x(t), top, self.x(t), bottom, GRID)
            c.text(self.x(t), bottom + 12, fmt.format(t + 0.0), size=10, anchor="middle")  # never "-0"
        c.line(self.left, bottom, self.right, bottom)
        lines = _wrap(label, int((self.right - self.left + 80) / (10 * CHAR_EM)))
        for i, line in enumerate(lines):
            c.text((self.left + self.right) / 2, bottom + 30 + 13 * i, line, size=10.5, anchor="middle")


def _wrap(words: str, width: int) -> list[str]:
    lines: list[str] = []
    for word in words.split():
        if lines and len(lines[-1]) + 1 + len(word) <= width:
            lines[-1] += " " + word
        else:
            lines.append(word)
    return lines or [""]


def _frame(title: str, labels: list[str], width: int, right: int) -> tuple[Canvas, float, float]:
    """A canvas with ``title`` drawn, and the x span left for bars beside the longest of ``labels``."""
    c = Canvas(width)
    c.text(8, 14, title, size=12.5, bold=True)
    left = 14 + max((text_width(label) for label in labels), default=0.0)
    return c, min(left, width * 0.45), width - right


def _rate_bars(title: str, rows: list[tuple[str, dict[str, Any]]], xlabel: str, color: str) -> str | None:
    """Horizontal bars of rates with their 95% intervals and k/n labels; None when no row has cases."""
    rows = [(label, e) for label, e in rows if e and e.get("n")]
    if not rows:
        return None
    c, left, right = _frame(title, [label for label, _ in rows], 640, 96)
    axis, top = Axis(0.0, 1.0, left, right), 30.0
    bottom = top + ROW * len(rows)
    axis.draw(c, [0.0, 0.2, 0.4, 0.6, 0.8, 1.0], top, bottom, xlabel, "{:.1f}")
    for i, (label, e) in enumerate(rows):
        y = top + ROW * i + ROW / 2
        c.text(left - 6, y, label, anchor="end")
        c.rect(axis.x(0.0), y - 8, axis.x(e["value"]) - axis.x(0.0), 16, color)
        if e.get("ci95"):
            lo, hi = axis.x(e["ci95"][0]), axis.x(e["ci95"][1])
            c.line(lo, y, hi, y, width=1.2)
            for x in (lo, hi):
                c.line(x, y - 4, x, y + 4, width=1.2)
        c.text(right + 8, y, f"{e['value']:.2f}  ({e['k']}/{e['n']})", size=10)
    return c.data_uri()


def _shares(title: str, parts: list[tuple[str, dict[str, Any], str]]) -> str | None:
    """One stacked bar of outcome shares that add up to 1 (long-horizon outcomes)."""
    n = max((e.get("n") or 0 for _, e, _ in parts), default=0)
    if not n:
        return None
    c, left, right = _frame(f"{title} (n={n})", [], 640, 16)
    axis, y = Axis(0.0, 1.0, left, right), 44.0
    start = 0.0
    for _, e, color in parts:
        share = e["value"] or 0.0
        c.rect(axis.x(start), y - 14, axis.x(start + share) - axis.x(start), 28, color)
        if share >= 0.08:
            c.text(axis.x(start + share / 2), y, f"{share:.0%}", size=11, anchor="middle", color="white")
        start += share
    x = left
    for label, e, color in parts:
        key = f"{label}: {e['k']}/{e['n']}"
        c.rect(x, y + 26, 10, 10, color)
        c.text(x + 14, y + 31, key, size=10)
        x += 14 + text_width(key, 10) + 18
    return c.data_uri()


def error_bars(m: dict[str, Any]) -> str | None:
    """Errored cases by kind of failure, apart from every rate (None when nothing errored)."""
    kinds = sorted(m.get("error_kinds", {}).items(), key=lambda kv: -kv[1])
    if not kinds:
        return None
    c, left, right = _frame("Errors by kind", [kind for kind, _ in kinds], 640, 40)
    ticks = [t for t in nice_ticks(0, max(n for _, n in kinds), 6) if t == int(t)]  # counts of cases
    axis, top = Axis(0.0, ticks[-1], left, right), 30.0
    bottom = top + ROW * len(kinds)
    axis.draw(c, ticks, top, bottom, f"errored cases (of {m['cases']}); left out of every rate", "{:.0f}")
    for i, (kind, n) in enumerate(kinds):
        y = top + ROW * i + ROW / 2
        c.text(left - 6, y, kind, anchor="end")
        c.rect(axis.x(0), y - 8, axis.x(n) - axis.x(0), 16, "#8a5a00")
        c.text(axis.x(n) + 4, y, str(n), size=10)
    return c.data_uri()


def plots(m: dict[str, Any]) -> list[tuple[str, str | None]]:
    """(caption, SVG data URI or None when the run has no such cases) for each plot of the report."""
    o = m["overall"]
    cats = [(DISPLAY.get(slug, "unmapped label" if slug == "unmapped" else slug), t["rejection_rate"])
            for slug, t in m["by_category"].items()]  # a team's own category by its slug
    levels = [(lv, m["by_level"][lv]["rejection_rate"]) for lv in LEVELS]
    suites = [(suite, t["rejection_rate"]) for suite, t in (m.get("by_suite") or {}).items()]
    by_suite = [(f"Rejection rate per suite of your own cases (95% {interval_words(e for _, e in suites)} intervals)",
                 _rate_bars("Rejection rate by suite", suites, "rejection rate", "#2f6db5"))] if suites else []
    return [*by_suite,
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
_METHODS = {"exact": "exact (Clopper-Pearson)",
            "exact_design_effect": "exact (Clopper-Pearson) over the effective samples (repeats that agree count once)",
            "wilson": "Wilson",
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
    """Differences B - A of the overall metrics with their intervals (a forest plot): those whose ``Shown``
    line (``results.metrics``) says they are plotted."""
    rows = [r for r in rows if r["group"] is None and r["diff"] is not None and shown(r["metric"], "sab compare").plot]
    if not rows:
        return None
    spans = [r["ci95"] or [r["diff"], r["diff"]] for r in rows]
    ticks = nice_ticks(min(0.0, *(lo for lo, _ in spans)), max(0.0, *(hi for _, hi in spans)), 7)
    c, left, right = _frame("Overall metrics, B - A", [r["metric"] for r in rows], 720, 20)
    axis, top = Axis(ticks[0], ticks[-1], left, right), 30.0
    bottom = top + 22 * len(rows)
    axis.draw(c, ticks, top, bottom, f"B - A (green: B significantly better, red: significantly worse, grey: not "
                                     f"significant at {DEFAULT_ALPHA:g}, or no better side)")
    c.line(axis.x(0.0), top, axis.x(0.0), bottom, width=1.2)
    for i, (r, (lo, hi)) in enumerate(zip(rows, spans, strict=True)):
        y = top + 22 * i + 11
        change = r["diff"] * r["better"]
        color = ("#8a8f98" if change == 0 or not _significant(r)
                 else ("#1d7a3e" if change > 0 else "#b3261e"))
        c.text(left - 6, y, r["metric"], size=10, anchor="end")
        c.line(axis.x(lo), y, axis.x(hi), y, color, width=2.5)
        c.circle(axis.x(r["diff"]), y, 4, color)
    return c.data_uri()
