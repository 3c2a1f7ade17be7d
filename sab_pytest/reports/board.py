"""A board (``results.board``) as people paste it: the terminal, Markdown (a README, a pull request),
CSV (one line per cell, for a spreadsheet or a data frame), LaTeX (a booktabs table, for a paper) and
JSON; the HTML page is ``reports.html.board_page``.

Every format shows the same cells: the value, its 95% interval and n, and, against a reference, a mark
on the cells whose difference from the reference survives the correction for the table's tests
(▲ significantly higher, ▼ significantly lower; each column's header says with ↑ or ↓ which way is
better). The significant differences are also listed under the table with their corrected p-values,
which is the one place an all-pairs board shows them.
"""

from __future__ import annotations

import csv
import io
import json
import re
from typing import Any

HIGHER, LOWER = "▲", "▼"
ARROWS = {1: "↑", -1: "↓", 0: ""}


def header(column: dict[str, Any]) -> str:
    """A column's header with the paper's arrow: ↑ higher is better, ↓ lower is better."""
    arrow = ARROWS[column["better"]]
    return f"{column['label']}{arrow}" if arrow else column["label"]


def value_text(entry: dict[str, Any] | None) -> str:
    return "n/a" if entry is None or entry.get("value") is None else f"{entry['value']:.2f}"


def interval_text(entry: dict[str, Any] | None) -> str:
    """``[0.52, 0.71] n=100``: the 95% interval and the samples (cases when repeats entered)."""
    if entry is None or entry.get("value") is None:
        return ""
    ci = entry.get("ci95")
    n = f"n={entry.get('cases') if entry.get('cases') not in (None, entry.get('n')) else entry.get('n')}"
    return f"[{ci[0]:.2f}, {ci[1]:.2f}] {n}" if ci else f"[no interval] {n}"


def marks(board: dict[str, Any]) -> dict[tuple[int, int], str]:
    """(run, column) -> mark of each cell whose difference from the reference is significant."""
    if board["reference"] is None:
        return {}
    return {(c["b"], c["column"]): HIGHER if c["direction"] == "higher" else LOWER
            for c in board["comparisons"] if c["significant"]}


def run_label(board: dict[str, Any], i: int) -> str:
    """A row's name, with '(reference)' on the reference and '†' on a run compared although it differs."""
    run = board["runs"][i]
    return run["name"] + (" (reference)" if board["reference"] == i else "") + (" †" if run["differences"] else "")


def cell_text(board: dict[str, Any], i: int, col: int, mark: dict[tuple[int, int], str]) -> str:
    entry = board["cells"][i][col]
    text = f"{value_text(entry)} {interval_text(entry)}".strip()
    return f"{text} {mark[(i, col)]}" if (i, col) in mark else text


def notes(board: dict[str, Any]) -> list[str]:
    """The lines under the table: what the marks mean, how the intervals and tests were made, the
    runs compared although they differ, the pairs that could not be paired, the significant differences."""
    lines = [board["note"], board["interval"], board["test"]]
    if board["reference"] is not None:
        lines.append(f"{HIGHER} / {LOWER}: significantly higher / lower than the reference after the correction")
    names = [r["name"] for r in board["runs"]]
    lines += [f"† {r['name']} ({r['source']}) differs from the reference: {'; '.join(r['differences'])}"
              for r in board["runs"] if r["differences"]]
    lines += [f"not paired (too few shared cases, or a results file missing): {names[p['a']]} and {names[p['b']]}"
              for p in board["pairing"] if not p["paired"]]
    found = [c for c in board["comparisons"] if c["significant"]]
    lines.append(f"significant differences: {len(found)}" + (":" if found else ""))
    for c in found:
        col = board["columns"][c["column"]]
        judged = f", {c['judged']}" if c["judged"] else ""
        lines.append(f"  {col['label']}: {names[c['b']]} - {names[c['a']]} = {c['diff']:+.3f} "
                     f"[{c['ci95'][0]:+.3f}, {c['ci95'][1]:+.3f}]{judged} (p={c['p_value']:.2g}, "
                     f"{board['correction']} p={c['p_adjusted']:.2g})")
    return lines


def render_text(board: dict[str, Any]) -> list[str]:
    """The terminal table: a run on two lines, its values (with marks) over their intervals and n."""
    mark = marks(board)
    cols = board["columns"]
    first = ["run", *(header(c) for c in cols)]
    rows: list[list[str]] = []
    for i in range(len(board["runs"])):
        rows.append([run_label(board, i), *(value_text(e) + (f" {mark[(i, k)]}" if (i, k) in mark else "")
                                            for k, e in enumerate(board["cells"][i]))])
        rows.append(["", *(interval_text(e) for e in board["cells"][i])])
    widths = [max(len(r[k]) for r in [first, *rows]) for k in range(len(first))]
    lines = [board["title"], "", "  ".join(h.ljust(w) for h, w in zip(first, widths, strict=True)).rstrip()]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    return [*lines, "", *notes(board)]


def _md_escape(text: str) -> str:
    """Text as Markdown shows it literally inside a line: the marks that could start markup there (code,
    emphasis, a link or image, inline HTML, an entity, a table's cell, strikethrough, GitHub's math) are
    backslash-escaped, which CommonMark allows of any ASCII punctuation."""
    return re.sub(r"([\\`*_\[\]<>|~&$])", r"\\\1", text)


def render_markdown(board: dict[str, Any]) -> str:
    """A GitHub-flavoured Markdown table (a cell: value [interval] n=, and its mark) with the notes as a list;
    the runs' names and sources escaped (they are the user's text), the numbers as they are."""
    mark = marks(board)
    cols = board["columns"]
    lines = [f"**{_md_escape(board['title'])}**", "",
             "| " + " | ".join(["run", *(header(c) for c in cols)]) + " |",
             "|" + "---|" * (len(cols) + 1)]
    for i in range(len(board["runs"])):
        cells = [_md_escape(run_label(board, i)), *(cell_text(board, i, k, mark) for k in range(len(cols)))]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join([*lines, "", *(f"- {_md_escape(line.strip())}" for line in notes(board)), ""])


CSV_FIELDS = ("run", "source", "reference", "column", "metric", "group", "better", "value", "ci_low", "ci_high", "k",
              "n", "cases", "diff", "diff_low", "diff_high", "p_value", "p_adjusted", "significant", "paired")


def render_csv(board: dict[str, Any]) -> str:
    """One line per cell (run x column), with its difference from the reference when there is one."""
    against = {(c["b"], c["column"]): c for c in board["comparisons"]} if board["reference"] is not None else {}
    out = io.StringIO()
    writer = csv.DictWriter(out, CSV_FIELDS, lineterminator="\n")
    writer.writeheader()
    for i, run in enumerate(board["runs"]):
        for k, col in enumerate(board["columns"]):
            e = board["cells"][i][k] or {}
            c = against.get((i, k)) or {}
            ci, dci = e.get("ci95") or [None, None], c.get("ci95") or [None, None]
            writer.writerow({"run": run["name"], "source": run["source"], "reference": board["reference"] == i,
                             "column": col["label"], "metric": col["metric"], "group": col["group"] or "",
                             "better": col["better"], "value": e.get("value"), "ci_low": ci[0], "ci_high": ci[1],
                             "k": e.get("k"), "n": e.get("n"), "cases": e.get("cases"), "diff": c.get("diff"),
                             "diff_low": dci[0], "diff_high": dci[1], "p_value": c.get("p_value"),
                             "p_adjusted": c.get("p_adjusted"), "significant": c.get("significant"),
                             "paired": c.get("paired")})
    return out.getvalue()


_LATEX_SPECIAL = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
                  "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}",
                  "†": r"$^\dagger$", "↑": r"$\uparrow$", "↓": r"$\downarrow$"}
_LATEX_MARKS = {HIGHER: r"$^{\blacktriangle}$", LOWER: r"$^{\blacktriangledown}$"}


def latex_escape(text: str) -> str:
    return "".join(_LATEX_SPECIAL.get(ch, ch) for ch in text)


def render_latex(board: dict[str, Any]) -> str:
    """A booktabs table (``\\usepackage{booktabs, amssymb}``): a cell is the value with its interval and n
    in small type below-right, and the mark of a significant difference from the reference."""
    mark = marks(board)
    cols = board["columns"]
    lines = [f"% {latex_escape(board['title'])}: needs \\usepackage{{booktabs}} and \\usepackage{{amssymb}}",
             r"\begin{tabular}{l" + "c" * len(cols) + "}", r"\toprule",
             " & ".join(["Run", *(latex_escape(header(c)) for c in cols)]) + r" \\", r"\midrule"]
    for i in range(len(board["runs"])):
        cells = [latex_escape(run_label(board, i))]
        for k in range(len(cols)):
            e = board["cells"][i][k]
            text = latex_escape(value_text(e)) + (_LATEX_MARKS[mark[(i, k)]] if (i, k) in mark else "")
            if interval_text(e):
                text += r" {\scriptsize " + latex_escape(interval_text(e)) + "}"
            cells.append(text)
        lines.append(" & ".join(cells) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}"]
    return "\n".join(lines) + "\n"


def render_json(board: dict[str, Any]) -> str:
    return json.dumps(board, indent=2) + "\n"


FORMATS = {"text": lambda b: "\n".join(render_text(b)) + "\n", "markdown": render_markdown, "csv": render_csv,
           "latex": render_latex, "json": render_json}
