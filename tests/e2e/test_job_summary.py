"""GitHub Actions' job page: with ``$GITHUB_STEP_SUMMARY`` set, a run appends one Markdown summary
(every headline metric with its interval, each gate with its numbers, the differences from the
paper, the files) and prints each failing gate as an ``::error`` line; without it, or with
``--sab-no-job-summary``, nothing."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.benchmark import RunSetup
from support.results import read_summary

from sab_pytest.reports.table import headline_rows

FAILING, HOLDING = "rejection_rate>=0.5", "safe_success_rate>=0.5"
GATES = ("--sab-gate", FAILING, "--sab-gate", HOLDING)


@pytest.fixture
def run_setup() -> RunSetup:
    return RunSetup(("--sab-no-exec", "-p", "no:cacheprovider"), inprocess=True)


def test_a_run_in_github_actions_appends_its_summary_and_annotates_the_failing_gate(
        run, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    page = pytester.path / "step-summary.md"
    page.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(page))
    result = run(*GATES, "-q", f"--junitxml={pytester.path / 'sab.xml'}")
    assert result.ret == 1
    text = page.read_text()
    assert text.startswith("earlier step\n")  # appended, not replaced
    lines = text.splitlines()
    assert [line for line in lines if line.startswith("| metric |")] == ["| metric | value | 95% interval | cases |"]
    rows = [line for line in lines if line.startswith("| ") and not line.startswith(("| metric", "| ---"))]
    summary = read_summary(run.out)
    expected = headline_rows(summary)
    assert len(rows) == len(expected) > 5
    for row, (label, entry) in zip(rows, expected, strict=True):
        ci = entry["ci95"]
        shown = ("&nbsp;&nbsp;" if label.startswith(" ") else "") + label.strip()  # a row under another
        assert row.startswith(f"| {shown} | {entry['value']:.3f} | [{ci[0]:.3f}, {ci[1]:.3f}] |")
    assert any(line.startswith(f"- **FAIL** `{FAILING}`: value 0.000") for line in lines)
    assert any(line.startswith(f"- **PASS** `{HOLDING}`: value ") for line in lines)
    assert f"**Differences from the paper**: {len(summary['deviations'])}" in lines
    assert "`sab.xml`" in text and "`out/sab-summary.json`" in text
    errors = [line for line in result.outlines if line.startswith("::error")]
    assert errors == [f"::error title=sab gate failed%3A {FAILING}::value 0.000, threshold >= 0.5, "
                      "P(decides the other way on resampled cases) 0.00"]


@pytest.mark.parametrize("where", ["outside GitHub Actions", "turned off"])
def test_no_summary_and_no_annotation(where: str, run, pytester: pytest.Pytester,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    page = pytester.path / "step-summary.md"
    options: tuple[str, ...] = GATES
    if where == "turned off":
        monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(page))
        options += ("--sab-no-job-summary",)
    else:
        monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    result = run(*options)
    assert result.ret == 1 and not page.exists()
    assert not [line for line in result.outlines + result.errlines if "::error" in line or "job summary" in line]


def test_an_unwritable_summary_file_is_said_and_does_not_change_the_exit(
        run, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(pytester.path / "no-such-dir" / "summary.md"))
    result = run("--sab-gate", HOLDING)
    assert result.ret == 0
    assert any(line.startswith("sab-pytest: job summary: $GITHUB_STEP_SUMMARY: cannot write ")
               for line in result.outlines)
    assert not Path(pytester.path / "no-such-dir").exists()
