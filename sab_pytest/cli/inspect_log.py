"""``python -m sab_pytest inspect-log RUN [-o FILE]``: a finished run as an Inspect eval log.

RUN is what ``--sab-out`` wrote (or its ``sab-summary.json`` / ``sab-results.jsonl``), a single run's or
what ``python -m sab_pytest merge`` made of shards. The log goes to ``RUN/sab-inspect.eval`` unless
``-o`` says otherwise (``.eval`` or ``.json``); ``inspect view`` and ``inspect_ai.analysis`` read it.
"""

from __future__ import annotations

import argparse
import time
from datetime import datetime, timezone
from pathlib import Path

from sab_pytest.cli import fail, os_problem
from sab_pytest.errors import SabError
from sab_pytest.results.files import RESULTS_NAME, Redactor
from sab_pytest.results.load import load_run

LOG_NAME = "sab-inspect.eval"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m sab_pytest inspect-log",
                                     description="Write a finished run as an Inspect eval log (inspect view, "
                                                 "inspect_ai.analysis.samples_df).")
    parser.add_argument("run", metavar="RUN", help="the run's --sab-out directory (or its sab-summary.json), "
                                                   "merged shards included")
    parser.add_argument("-o", "--out", metavar="FILE", default=None,
                        help=f"the log file, .eval or .json (default RUN/{LOG_NAME})")
    parser.add_argument("--sab-data", metavar="DIR", default=None,
                        help="the dataset, for each sample's target (default: the run's, else $SAB_DATA, else the "
                             "user cache)")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    try:
        from sab_pytest.cli.report import run_secrets
        from sab_pytest.reports.inspect import log as inspect_log
        from sab_pytest.results.merge import settings_of

        inspect_log.require("inspect-log")
        run = load_run(args.run, "RUN")
        if run.records is None:
            raise SabError(f"RUN: {args.run} has no sab-results.jsonl: the log needs the per-case records")
        base = run.source if run.source.is_dir() else run.source.parent
        out = Path(args.out) if args.out else base / LOG_NAME
        inspect_log.log_format(out, "-o")
        data = args.sab_data or settings_of(run.summary).data_dir
        ended = datetime.fromtimestamp((base / RESULTS_NAME).stat().st_mtime, timezone.utc) if (
            base / RESULTS_NAME).is_file() else None  # the run's last line, not now
        inspect_log.write(out, run.summary, run.records, Redactor(run_secrets(run.summary)),
                          inspect_log.dataset_cases(data), completed=ended)
    except SabError as exc:
        return fail("inspect-log", exc)
    except OSError as exc:
        return fail("inspect-log", os_problem(exc, args.run))
    size = out.stat().st_size
    print(f"wrote {out} ({size / 1e6:.2f} MB, {len(run.records)} samples) in {time.perf_counter() - started:.2f} s")
    return 0
