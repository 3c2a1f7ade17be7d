"""What a run wrote, read as the project reads it: the records through ``read_results`` (each
checked against the record schema, a torn last line skipped), the summary as its JSON."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sab_pytest.results.files import RESULTS_NAME, SUMMARY_NAME, read_results


def read_records(out: Path) -> list[dict[str, Any]]:
    """Every record of ``out``'s results file, in file order, a case written twice listed twice;
    none when the file does not exist."""
    return read_results(out / RESULTS_NAME)


def records_by_case(out: Path) -> dict[str, dict[str, Any]]:
    """``out``'s records by case id, a later record of a case replacing an earlier one."""
    return {r["case"]["id"]: r for r in read_records(out)}


def read_summary(out: Path) -> dict[str, Any]:
    """``out``'s ``sab-summary.json``."""
    return json.loads((out / SUMMARY_NAME).read_text())
