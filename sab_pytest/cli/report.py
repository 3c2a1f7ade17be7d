"""``sab report RUN [--out PATH]``: the HTML report of a finished run's files.

RUN is what ``--sab-out`` wrote (or its ``sab-summary.json`` / ``sab-results.jsonl``). The page goes
to ``RUN/sab-report.html`` unless ``--out`` says otherwise.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from sab_pytest.cli import fail, os_problem
from sab_pytest.errors import SabError
from sab_pytest.reports.html.report import write_report
from sab_pytest.results import Redactor, load_run

REPORT_NAME = "sab-report.html"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="sab report",
                                     description="Build the self-contained HTML report of a finished run.")
    parser.add_argument("run", metavar="RUN", help="the run's --sab-out directory (or its sab-summary.json)")
    parser.add_argument("--out", metavar="PATH", default=None, help=f"where the page goes (default RUN/{REPORT_NAME})")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    try:
        run = load_run(args.run, "RUN")
        if run.records is None:
            raise SabError(f"RUN: {args.run} has no sab-results.jsonl: the report needs the per-case records")
        out = Path(args.out) if args.out else run.directory / REPORT_NAME
        write_report(out, run.summary, run.records, Redactor(run.secrets()))
    except SabError as exc:
        return fail("report", exc)
    except OSError as exc:
        return fail("report", os_problem(exc, args.run))
    size = out.stat().st_size
    print(f"wrote {out} ({size / 1e6:.2f} MB, {len(run.records)} cases) in {time.perf_counter() - started:.2f} s")
    return 0
