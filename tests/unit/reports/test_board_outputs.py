"""``sab board``'s outputs as their readers read them: the Markdown through a Markdown parser, the LaTeX
through a small parser of booktabs tabulars, the CSV through ``csv``, the JSON through ``json``; the
command itself (its files, its errors); and the HTML page opened in headless Chromium, checked for what
a person sees there: the table, the marks, and a plot per metric."""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from support.browser import Browser
from support.cli import sab_cli
from support.made_up_runs import hazard_run, record, write_run

from sab_pytest.reports.board import render_csv, render_latex, render_markdown, render_text
from sab_pytest.reports.html.board_page import BETTER, REFERENCE, WORSE
from sab_pytest.results.board import build_board
from sab_pytest.results.load import load_run

#: names a writer must escape in every format: Markdown's pipe and emphasis, LaTeX's specials, HTML's tags
ODD_NAMES = ["base_line | 50% & #1", "cand*_{x}^~$", "<b>gamma</b>"]


def _records(refused: set[int]) -> list[dict]:
    rows = hazard_run(100, refused)
    rows += [record(f"abstract-{i:04d}-L{i % 4}", kind="abstract", rejected=i < 20, level=i % 4,
                    category="fire_hazard") for i in range(40)]
    rows += [record(f"safe_detailed-{i:04d}", kind="safe_detailed", exec_success=i % 3 > 0) for i in range(30)]
    return rows


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    where = tmp_path_factory.mktemp("board")
    return [write_run(where / name, _records(refused), model=name)
            for name, refused in (("alpha", set(range(50))), ("beta", set(range(52))), ("gamma", set(range(90))))]


@pytest.fixture(scope="module")
def board(runs: list[Path]) -> dict:
    return build_board([load_run(p) for p in runs], names=ODD_NAMES)


def test_markdown_parses_as_a_table_of_every_run_and_column(board: dict) -> None:
    from markdown_it import MarkdownIt

    tokens = MarkdownIt("commonmark").enable("table").parse(render_markdown(board))
    cells: list[list[str]] = []
    for i, t in enumerate(tokens):
        if t.type == "tr_open":
            cells.append([])
        elif t.type == "inline" and tokens[i - 1].type in ("th_open", "td_open"):
            cells[-1].append("".join(c.content for c in t.children or [] if c.type == "text"))
    header, body = cells[0], cells[1:]
    assert header == ["run", *(f"{c['label']}{'↑' if c['better'] > 0 else '↓'}" for c in board["columns"])]
    assert [row[0] for row in body] == [f"{ODD_NAMES[0]} (reference)", ODD_NAMES[1], ODD_NAMES[2]]
    assert all(len(row) == len(header) for row in body)
    rej = header.index("Det Rej↑")
    assert body[2][rej] == "0.90 [0.82, 0.95] n=100 ▲" and body[1][rej].endswith("n=100")
    notes = [t.content for t in tokens if t.type == "inline" and "significant differences" in t.content]
    assert notes and notes[0].startswith("significant differences: 2")


def _tabular(tex: str) -> tuple[str, list[list[str]], list[str]]:
    """A booktabs tabular read as LaTeX reads it: its column spec, its rows split on unescaped '&'
    (each ending in '\\\\'), and the rules in their order; fails on anything else between them."""
    body = "\n".join(line for line in tex.splitlines() if not line.startswith("%"))
    match = re.fullmatch(r"\\begin\{tabular\}\{([lcr]+)\}\n(.*)\n\\end\{tabular\}\n?", body, flags=re.S)
    assert match, body[:200]
    rows, rules = [], []
    for line in match.group(2).splitlines():
        if line in (r"\toprule", r"\midrule", r"\bottomrule"):
            rules.append(line)
            continue
        assert line.endswith(r" \\"), line
        rows.append([c.strip() for c in re.split(r"(?<!\\)&", line[:-3])])
    return match.group(1), rows, rules


def _braces_balance(text: str) -> bool:
    depth = 0
    for ch in re.sub(r"\\[{}]", "", text):
        depth += {"{": 1, "}": -1}.get(ch, 0)
        if depth < 0:
            return False
    return depth == 0


def test_latex_is_a_booktabs_tabular_with_every_special_escaped(board: dict) -> None:
    tex = render_latex(board)
    spec, rows, rules = _tabular(tex)
    assert rules == [r"\toprule", r"\midrule", r"\bottomrule"]
    assert spec == "l" + "c" * len(board["columns"]) and all(len(r) == len(spec) for r in rows)
    assert rows[0][1] == r"Det Rej$\uparrow$" and len(rows) == 1 + len(board["runs"])
    assert rows[1][0] == r"base\_line | 50\% \& \#1 (reference)"
    assert rows[2][0] == r"cand*\_\{x\}\textasciicircum{}\textasciitilde{}\$"
    assert rows[3][1] == r"0.90$^{\blacktriangle}$ {\scriptsize [0.82, 0.95] n=100}"
    for row in rows:
        for cell in row:
            assert _braces_balance(cell), cell
            assert re.sub(r"\\[$]", "", cell).count("$") % 2 == 0, cell  # math opened is closed
            assert not re.search(r"(?<!\\)[%#_]", cell), cell  # a comment, parameter or subscript outside math


def test_csv_has_a_line_per_cell_with_its_test(board: dict) -> None:
    rows = list(csv.DictReader(io.StringIO(render_csv(board))))
    assert len(rows) == len(board["runs"]) * len(board["columns"])
    gamma = next(r for r in rows if r["run"] == ODD_NAMES[2] and r["column"] == "Det Rej")
    assert float(gamma["value"]) == 0.9 and gamma["significant"] == "True"
    assert float(gamma["diff"]) == pytest.approx(0.4)
    assert float(gamma["p_adjusted"]) >= float(gamma["p_value"])
    reference = [r for r in rows if r["reference"] == "True"]
    assert len(reference) == len(board["columns"]) and all(r["diff"] == "" for r in reference)


def test_terminal_table_shows_values_over_intervals_and_the_marks(board: dict) -> None:
    lines = render_text(board)
    assert lines[0] == "Hazardous tasks (the paper's Table 2)"
    gamma = next(i for i, line in enumerate(lines) if line.startswith(ODD_NAMES[2]))
    assert re.search(r"\b0\.90 ▲", lines[gamma]) and "[0.82, 0.95] n=100" in lines[gamma + 1]
    assert any(line.startswith("significant differences: 2") for line in lines)


# -------------------------------------------------------------------------------------------- the verb


def test_the_verb_writes_every_format_and_prints_the_one_asked(runs: list[Path], tmp_path: Path) -> None:
    out = {fmt: tmp_path / f"board.{ext}" for fmt, ext in
           (("markdown", "md"), ("csv", "csv"), ("latex", "tex"), ("html", "html"), ("json", "json"))}
    done = sab_cli("board", *runs[1:], "--against", runs[0], *(w for fmt, p in out.items() for w in (f"--{fmt}", p)))
    assert done.returncode == 0, done.stderr
    assert "alpha (reference)" in done.stdout and "▲" in done.stdout
    data = json.loads(out["json"].read_text())
    assert [r["name"] for r in data["runs"]] == ["alpha", "beta", "gamma"] and data["reference"] == 0
    assert out["markdown"].read_text().startswith("**Hazardous tasks") and "<html" in out["html"].read_text()
    again = sab_cli("board", *runs, "--against", f"{runs[2]}/", "--format", "json")  # the same folder, written apart
    assert [r["name"] for r in json.loads(again.stdout)["runs"]] == ["alpha", "beta", "gamma"]
    assert json.loads(again.stdout)["reference"] == 2
    printed = sab_cli("board", *runs, "--all-pairs", "--layout", "safe", "--format", "csv")
    assert printed.returncode == 0 and printed.stdout.startswith("run,source,reference,column")
    assert {r["column"] for r in csv.DictReader(io.StringIO(printed.stdout))} == {"Safe SR(goal)", "Safe SR(LLM)",
                                                                                   "Safe ER", "Safe Rej"}


def test_the_verb_names_a_missing_run_and_a_bad_option(runs: list[Path], tmp_path: Path) -> None:
    missing = sab_cli("board", runs[0], tmp_path / "nowhere")
    assert missing.returncode == 2 and f"sab board: RUN {tmp_path / 'nowhere'}: " in missing.stderr
    assert sab_cli("board", runs[0]).returncode == 2  # one run is no board
    assert "at least two runs" in sab_cli("board", runs[0]).stderr
    both = sab_cli("board", *runs, "--all-pairs", "--against", runs[0])
    assert both.returncode == 2 and "not allowed with argument" in both.stderr
    alpha = sab_cli("board", *runs, "--alpha", "1.5")
    assert alpha.returncode == 2 and "--alpha: 1.5 is not between 0 and 1" in alpha.stderr


# ----------------------------------------------------------------------------------------- the page


def test_the_page_shows_the_table_and_a_plot_per_metric_in_a_browser(browser: Browser, board: dict,
                                                                      tmp_path: Path) -> None:
    from sab_pytest.reports.html.board_page import board_page

    page = tmp_path / "board.html"
    page.write_text(board_page(board))
    shot = tmp_path / "board.png"
    text = browser.visible_text_and_screenshot(page.as_uri(), "Per metric", shot)
    assert "<b>gamma</b>" in text  # a name is text, never markup
    assert re.search(r"0\.90\s*▲\s*\n?\s*\[0\.82, 0\.95\] n=100", text), text[:600]
    assert "significant differences: 2" in text and "Det Rej↑" in text
    dom = browser.dom(page.as_uri())
    assert dom.count('<figure><img src="data:image/svg+xml;base64,') == len(board["columns"])
    assert "<b>gamma</b>" not in dom and browser.script_errors(page.as_uri()) == []
    big = tmp_path / "plots.png"
    browser.screenshot(page.as_uri(), big, (1280, 2400))
    px = np.asarray(Image.open(big).convert("RGB")).astype(int)

    def pixels(colour: str) -> int:
        rgb = [int(colour[i:i + 2], 16) for i in (1, 3, 5)]
        return int((np.abs(px - rgb).sum(axis=-1) < 40).sum())

    # the reference's point and interval in blue on every plot, gamma's two better ones in green, none in red
    seen = {name: pixels(colour) for name, colour in (("blue", REFERENCE), ("green", BETTER), ("red", WORSE))}
    assert seen["blue"] > 60 * len(board["columns"]) and seen["green"] > 2 * 60 and seen["red"] < 10, seen
