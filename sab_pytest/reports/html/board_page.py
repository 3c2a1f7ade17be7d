"""A board (``results.board``) as one offline page: the table, its notes, and a plot per column, each
run a point with its 95% interval (drawn with the report's own SVG canvas, ``plots``), so a reader sees
at a glance which runs stand apart and by how much."""

from __future__ import annotations

from typing import Any

from sab_pytest.reports.board import header, interval_text, marks, notes, run_label, value_text
from sab_pytest.reports.html.page import esc, page, plot_grid
from sab_pytest.reports.html.plots import GRID, ROW, Axis, Canvas, text_width

REFERENCE, BETTER, WORSE, PLAIN = "#2f6db5", "#1d7a3e", "#b3261e", "#5b6470"


def _colour(board: dict[str, Any], i: int, col: int) -> str:
    """Blue for the reference, green / red for a run significantly better / worse than it, grey otherwise."""
    if board["reference"] == i:
        return REFERENCE
    for c in board["comparisons"]:
        if c["b"] == i and c["column"] == col and c["significant"] and board["reference"] is not None:
            return {"better": BETTER, "worse": WORSE}.get(c["judged"] or "", PLAIN)
    return PLAIN


def column_plot(board: dict[str, Any], col: int) -> str | None:
    """One column: a row per run, its value as a point and its 95% interval as a line (None: no run has cases)."""
    entries = [row[col] for row in board["cells"]]
    if not any(e and e.get("value") is not None for e in entries):
        return None
    labels = [run_label(board, i) for i in range(len(board["runs"]))]
    canvas = Canvas(640)
    canvas.text(8, 14, header(board["columns"][col]), size=12.5, bold=True)
    left = min(14 + max(text_width(label) for label in labels), 640 * 0.45)
    axis, top = Axis(0.0, 1.0, left, 640 - 110), 30.0
    bottom = top + ROW * len(labels)
    axis.draw(canvas, [0.0, 0.2, 0.4, 0.6, 0.8, 1.0], top, bottom, "value with its 95% interval", "{:.1f}")
    ref = board["reference"]
    if ref is not None and entries[ref] and entries[ref].get("value") is not None:
        x = axis.x(entries[ref]["value"])
        canvas.line(x, top, x, bottom, GRID, width=2)
    for i, (label, e) in enumerate(zip(labels, entries, strict=True)):
        y = top + ROW * i + ROW / 2
        canvas.text(left - 6, y, label, anchor="end")
        if not e or e.get("value") is None:
            canvas.text(axis.x(0.0) + 4, y, "no cases", size=10, color=PLAIN)
            continue
        colour = _colour(board, i, col)
        if e.get("ci95"):
            lo, hi = axis.x(e["ci95"][0]), axis.x(e["ci95"][1])
            canvas.line(lo, y, hi, y, colour, width=2)
            for x in (lo, hi):
                canvas.line(x, y - 4, x, y + 4, colour, width=1.5)
        canvas.circle(axis.x(e["value"]), y, 4.5, colour)
        canvas.text(640 - 104, y, f"{e['value']:.2f}  {interval_text(e).split('] ')[-1]}", size=10)
    return canvas.data_uri()


def board_page(board: dict[str, Any]) -> str:
    """The board as a self-contained page (``sab board --html``)."""
    mark = marks(board)
    cols = board["columns"]
    head = "".join(f"<th>{esc(header(c))}</th>" for c in cols)
    rows = []
    for i in range(len(board["runs"])):
        cells = []
        for k in range(len(cols)):
            e = board["cells"][i][k]
            m = mark.get((i, k), "")
            cls = {"": "", "better": ' class="ok"', "worse": ' class="bad"'}
            judged = next((c["judged"] or "" for c in board["comparisons"]
                           if m and c["b"] == i and c["column"] == k), "")
            cells.append(f"<td{cls.get(judged, '')}><b>{esc(value_text(e))}</b> {esc(m)}<br>"
                         f'<span class="muted">{esc(interval_text(e))}</span></td>')
        rows.append(f"<tr><th>{esc(run_label(board, i))}</th>{''.join(cells)}</tr>")
    table = f'<table class="grid" id="board"><tr><th>run</th>{head}</tr>{"".join(rows)}</table>'
    listed = "".join(f"<li>{esc(line.strip())}</li>" for line in notes(board))
    plots = [(f"{header(c)}: each run's value and 95% interval", column_plot(board, k)) for k, c in enumerate(cols)]
    legend = ("Blue: the reference; green / red: significantly better / worse than the reference after the "
              "correction; grey: no significant difference." if board["reference"] is not None
              else "Every pair was tested: the significant differences are listed above.")
    title = f"SafeAgentBench board: {board['title']}"
    return page(title, f"<h1>{esc(title)}</h1>{table}<ul>{listed}</ul><h2>Per metric</h2>"
                       f'<p class="muted">{esc(legend)}</p>{plot_grid(plots)}')
