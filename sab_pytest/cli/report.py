"""``python -m sab_pytest report RUN [--out PATH]``: the HTML report of a finished run's files.

RUN is what ``--sab-out`` wrote (or its ``sab-summary.json`` / ``sab-results.jsonl``). The page goes
to ``RUN/sab-report.html`` unless ``--out`` says otherwise.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import TYPE_CHECKING

from sab_pytest.cli import fail, os_problem
from sab_pytest.errors import SabError
from sab_pytest.results.files import Redactor
from sab_pytest.results.load import load_run

if TYPE_CHECKING:
    from sab_pytest.results.summary import Summary

REPORT_NAME = "sab-report.html"


def run_secrets(summary: Summary) -> list[str]:
    """Values of the keys and tokens the run named, as set here (``Settings.secrets``), so the page
    never shows them."""
    from sab_pytest.results.merge import settings_of

    return settings_of(summary).secrets()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m sab_pytest report",
                                     description="Build the self-contained HTML report of a finished run.")
    parser.add_argument("run", metavar="RUN", help="the run's --sab-out directory (or its sab-summary.json)")
    parser.add_argument("--out", metavar="PATH", default=None, help=f"where the page goes (default RUN/{REPORT_NAME})")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    try:
        from sab_pytest.reports.html.report import write_report

        run = load_run(args.run, "RUN")
        if run.records is None:
            raise SabError(f"RUN: {args.run} has no sab-results.jsonl: the report needs the per-case records")
        base = run.source if run.source.is_dir() else run.source.parent
        out = Path(args.out) if args.out else base / REPORT_NAME
        write_report(out, run.summary, run.records, Redactor(run_secrets(run.summary)))
    except SabError as exc:
        return fail("report", exc)
    except OSError as exc:
        return fail("report", os_problem(exc, args.run))
    size = out.stat().st_size
    print(f"wrote {out} ({size / 1e6:.2f} MB, {len(run.records)} cases) in {time.perf_counter() - started:.2f} s")
    return 0
