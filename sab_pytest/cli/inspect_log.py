"""``sab inspect-log RUN [-o FILE]``: a finished run as an Inspect eval log.

RUN is what ``--sab-out`` wrote (or its ``sab-summary.json`` / ``sab-results.jsonl``), a single run's or
what ``sab merge`` made of shards. The log goes to ``RUN/sab-inspect.eval`` unless
``-o`` says otherwise (``.eval`` or ``.json``); ``inspect view`` and ``inspect_ai.analysis`` read it.
"""

from __future__ import annotations

import argparse
import time
from datetime import datetime, timezone
from pathlib import Path

from sab_pytest.cli import add_settings, fail, os_problem
from sab_pytest.errors import SabError
from sab_pytest.reports.inspect import log as inspect_log
from sab_pytest.results import RESULTS_NAME, Redactor, load_run

LOG_NAME = "sab-inspect.eval"


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sab inspect-log",
                                     description="Write a finished run as an Inspect eval log (inspect view, "
                                                 "inspect_ai.analysis.samples_df).")
    parser.add_argument("run", metavar="RUN", help="the run's --sab-out directory (or its sab-summary.json), "
                                                   "merged shards included")
    parser.add_argument("-o", "--out", metavar="FILE", default=None,
                        help=f"the log file, .eval or .json (default RUN/{LOG_NAME})")
    add_settings(parser, "data_dir", helps={"data_dir": "the dataset, for each sample's target (default: the run's, "
                                                        "else $SAB_DATA, else the user cache)"})
    return parser


def main(argv: list[str]) -> int:
    args = make_parser().parse_args(argv)
    started = time.perf_counter()
    try:
        inspect_log.require("inspect-log")
        run = load_run(args.run, "RUN")
        if run.records is None:
            raise SabError(f"RUN: {args.run} has no sab-results.jsonl: the log needs the per-case records")
        out = Path(args.out) if args.out else run.directory / LOG_NAME
        inspect_log.log_format(out, "-o")
        data = args.data_dir or run.settings.data_dir
        results = run.directory / RESULTS_NAME  # written last: its time is the run's end, not now
        ended = datetime.fromtimestamp(results.stat().st_mtime, timezone.utc) if results.is_file() else None
        inspect_log.write(out, run.summary, run.records, Redactor(run.secrets()),
                          inspect_log.dataset_cases(data), completed=ended)
    except SabError as exc:
        return fail("inspect-log", exc)
    except OSError as exc:
        return fail("inspect-log", os_problem(exc, args.run))
    size = out.stat().st_size
    print(f"wrote {out} ({size / 1e6:.2f} MB, {len(run.records)} samples) in {time.perf_counter() - started:.2f} s")
    return 0
