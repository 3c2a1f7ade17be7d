"""What a run wrote, read as the project reads it: the records through ``read_results`` (each
checked against the record schema), the summary as its JSON. Unlike the project's reader, which
skips a torn line (a crash mid-write), the tests' reader fails on one: a test that tears a file on
purpose reads its bytes instead."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sab_pytest.results.files import RESULTS_NAME, SUMMARY_NAME, read_results


def read_records(out: Path) -> list[dict[str, Any]]:
    """Every record of ``out``'s results file, in file order, a case written twice listed twice;
    none when the file does not exist. Every line of the file must be a whole record."""
    path = out / RESULTS_NAME
    records = read_results(path)
    lines = [line for line in path.read_bytes().splitlines() if line.strip()] if path.exists() else []
    assert len(records) == len(lines), f"{path}: {len(lines) - len(records)} line(s) are not whole records"
    return records


def records_by_case(out: Path) -> dict[str, dict[str, Any]]:
    """``out``'s records by case id, a later record of a case replacing an earlier one."""
    return {r["case"]["id"]: r for r in read_records(out)}


def read_summary(out: Path) -> dict[str, Any]:
    """``out``'s ``sab-summary.json``."""
    return json.loads((out / SUMMARY_NAME).read_text())
