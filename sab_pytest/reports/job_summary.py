"""What a GitHub Actions job page shows of a run: its Markdown job summary and error annotations.

GitHub Actions gives every step a file, named by ``$GITHUB_STEP_SUMMARY``, whose Markdown the job's
page shows, and reads ``::error title=T::MESSAGE`` lines of a step's output as annotations. A run
(and ``sab merge``) appends one summary there: the headline metrics with their 95% intervals (the
terminal table's overall rows), each gate with its numbers, the count of differences from the
paper with the first few, and where the report files are; each failing gate is also an ``::error``
line. Outside GitHub Actions (the variable unset) nothing is written or printed, and
``--sab-no-job-summary`` turns both off."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sab_pytest.protocol import line_of
from sab_pytest.reports.table import SUITE_COLUMNS, gate_numbers, headline_rows

if TYPE_CHECKING:
    from sab_pytest.results.summary import Summary

#: the variable GitHub Actions names the step's summary file in
SUMMARY_VARIABLE = "GITHUB_STEP_SUMMARY"
#: how many differences from the paper the summary lists (the rest are counted)
FIRST_DEVIATIONS = 3


def markdown(summary: Summary, files: Sequence[str], part: str | None = None) -> str:
    """The run's job summary: a heading, one table of the headline metrics, the gates, the
    differences from the paper and the files. ``part`` names a part of a sharded run, whose gates
    ``sab merge`` decides."""
    title = (f"## SafeAgentBench: {summary['model']} ({summary['cases']} cases, subset {summary['subset']}, "
             f"judge {summary['judge']}, errors {summary['errors']})")
    lines = [title, "", "| metric | value | 95% interval | cases |", "| --- | --- | --- | --- |"]
    for label, entry in headline_rows(summary):
        ci = entry.get("ci95")
        interval = f"[{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "-"
        count = f"{entry['k']}/{entry['n']}" if "k" in entry else str(entry["n"])
        lines.append(f"| {_label(label)} | {entry['value']:.3f} | {interval} | {count} |")
    suites = (summary.get("metrics_full") or {}).get("by_suite") or {}
    if suites:  # a team's own suites: the rates of the terminal's suite rows
        lines += ["", "| suite | " + " | ".join(head for _, head in SUITE_COLUMNS) + " |",
                  "| --- |" + " --- |" * len(SUITE_COLUMNS)]
        lines += [f"| {_label(suite)} | " + " | ".join(_cell(t.get(name) or {}) for name, _ in SUITE_COLUMNS) + " |"
                  for suite, t in suites.items()]
    gates = summary.get("gates") or []
    if gates:
        lines += ["", f"**Gates** ({part}: `sab merge` decides them over every part)" if part else "**Gates**", ""]
        for gate in gates:
            verdict = "not decided here" if part else ("PASS" if gate["passed"] else "FAIL")
            lines.append(f"- **{verdict}** `{gate['gate']}`: {gate_numbers(gate)}")
    shown = summary.get("deviations")
    if shown is not None:
        lines += ["", f"**Differences from the paper**: {len(shown)}"]
        lines += [f"- {line_of(d)}" for d in shown[:FIRST_DEVIATIONS]]
        if len(shown) > FIRST_DEVIATIONS:
            lines.append(f"- ... and {len(shown) - FIRST_DEVIATIONS} more, in the summary's `deviations`")
    if files:
        lines += ["", "**Files**: " + ", ".join(f"`{f}`" for f in files)]
    return "\n".join(lines) + "\n\n"


def _cell(entry: Mapping[str, Any]) -> str:
    """A rate as a table cell: value and counts, or ``-`` for a rate with no case."""
    if not entry.get("n") or entry.get("value") is None:
        return "-"
    return f"{entry['value']:.3f} ({entry['k']}/{entry['n']})" if "k" in entry else f"{entry['value']:.3f}"


def error_lines(summary: Summary) -> list[str]:
    """One ``::error`` line per failing gate (GitHub's workflow command syntax, escaped as it asks)."""
    return [f"::error title={_property('sab gate failed: ' + str(g['gate']))}::{_data(gate_numbers(g))}"
            for g in summary.get("gates") or [] if not g["passed"]]


def publish(summary: Summary, files: Sequence[str], say: Callable[[str], None], *, part: str | None = None,
            env: Mapping[str, str] | None = None) -> str | None:
    """In GitHub Actions, append the job summary and ``say`` each failing gate's ``::error`` line (a
    part's gates are not decided: none); elsewhere nothing. Returns what went wrong writing the
    summary file, or None: a job page is no reason to fail the run."""
    path = (os.environ if env is None else env).get(SUMMARY_VARIABLE)
    if not path:
        return None
    if part is None:
        for line in error_lines(summary):
            say(line)
    try:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(markdown(summary, files, part))
    except OSError as exc:
        return f"${SUMMARY_VARIABLE}: cannot write {exc.filename or path}: {exc.strerror or exc}"
    return None


def shown_path(path: Path | str, cwd: Path | None = None) -> str:
    """A report file as the job page names it: relative to the working directory when inside it."""
    where, here = Path(path), cwd or Path.cwd()
    try:
        return str(where.resolve().relative_to(here.resolve()))
    except ValueError:
        return str(where)


def _label(text: str) -> str:
    """A row's label as a table cell: a row under another (indented in the terminal) keeps its
    indent, which Markdown would otherwise drop."""
    shown = text.strip().replace("|", "\\|")
    return "&nbsp;&nbsp;" + shown if text.startswith(" ") else shown


def _data(text: str) -> str:
    """A workflow command's message: %, CR and LF escaped."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _property(text: Any) -> str:
    """A workflow command's property value: as a message, and ``:`` and ``,`` too."""
    return _data(str(text)).replace(":", "%3A").replace(",", "%2C")
