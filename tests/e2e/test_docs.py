"""The manual holds together: ``docs/options.md`` is the settings table as ``sab_pytest.settings.options_doc``
writes it and lists every option and ini setting the plugin registers with pytest, and every relative
link of the README and the pages leads to a file and, when it names one, a heading of it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from support import ROOT

from sab_pytest.settings import options
from sab_pytest.settings.options_doc import REGENERATE, default_and_help, render

PAGE = ROOT / "docs" / "options.md"
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def test_the_page_is_the_table_as_generated() -> None:
    assert PAGE.read_text(encoding="utf-8") == render(), f"docs/options.md is out of date: run {REGENERATE}"


def test_every_registered_option_and_ini_setting_is_on_the_page(pytester: pytest.Pytester) -> None:
    """What pytest's --help shows for the plugin (its option group, its ini settings) is what the
    page lists, so an option registered beside the table cannot be left out."""
    shown = pytester.runpytest_inprocess("--help").stdout.str()
    group = shown.split("SafeAgentBench (sab-pytest):", 1)[1].split("\n\n", 1)[0]
    flags = re.findall(r"^  (--[\w-]+)", group, flags=re.M)
    inis = re.findall(r"^  (sab_\w+) \(", shown, flags=re.M)
    page = PAGE.read_text(encoding="utf-8")
    listed = re.findall(r"^\| `(--[\w-]+)", page, flags=re.M)
    assert listed == flags and len(flags) == len(list(options()))
    assert {"sab_cases", "sab_gates", "sab_price"} <= set(inis)
    assert all(f"| `{ini}` |" in page for ini in inis)


def test_the_default_is_the_helps_own_words_or_the_tables_value() -> None:
    table = dict(options())
    assert default_and_help(table["seed"]) == ("42", "sampling seed")
    assert default_and_help(table["base_url"]) == ("$OPENAI_BASE_URL", "OpenAI-compatible endpoint")
    assert default_and_help(table["resume"])[0] == "off"
    assert default_and_help(table["judge_for"])[0] == "none"
    row = next(line for line in PAGE.read_text(encoding="utf-8").splitlines() if line.startswith("| `--sab-seed"))
    assert row.split(" | ")[1] == "42"


def anchors(page: Path) -> set[str]:
    """The anchors GitHub makes of a page's headings: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"^```.*?^```", "", page.read_text(encoding="utf-8"), flags=re.S | re.M)
    headings = re.findall(r"^#+ (.+)$", text, flags=re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}


def relative_links(page: Path) -> list[str]:
    text = re.sub(r"^```.*?^```", "", page.read_text(encoding="utf-8"), flags=re.S | re.M)
    return [link for link in re.findall(r"\]\(([^)\s]+)\)", text) if not re.match(r"[a-z]+:", link)]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_relative_link_resolves(page: Path) -> None:
    broken = []
    for link in relative_links(page):
        path, _, anchor = link.partition("#")
        target = (page.parent / path).resolve() if path else page
        if not target.exists() or (anchor and target.suffix == ".md" and anchor not in anchors(target)):
            broken.append(link)
    assert not broken, f"{page.name}: links that lead nowhere: {broken}"


def test_the_readme_links_every_page() -> None:
    linked = {(ROOT / link.partition("#")[0]).resolve() for link in relative_links(ROOT / "README.md")}
    assert set(PAGES[1:]) <= linked | {ROOT / "docs" / "index.md"}
    assert anchors(ROOT / "docs" / "models.md") >= {"inputs", "the-thinksafe-guard", "a-local-fake-model"}
