"""``sab merge DIR... [--sab-out DIR] [--junitxml FILE]``: one run from the output directories of its
shards; with ``--junitxml``, its JUnit file (``reports.junit_file``), where CI shows the gates decided
over every part; in GitHub Actions, its job summary and ``::error`` lines (``reports.job_summary``).

Exit status as the single run would have had it: with gates, 0 only if every gate holds and no case
errored; without, 0 only if every case passed; 1 otherwise or when a shard's results are missing;
2 when the shards cannot be merged (every reason is printed); 4, pytest's usage error, when a gate
cannot be decided (a baseline sharing too few cases with the merged run).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from sab_pytest.cli import add_settings, fail, os_problem
from sab_pytest.errors import SabError
from sab_pytest.reports import job_summary
from sab_pytest.reports.junit_file import write_junit
from sab_pytest.reports.table import render_table
from sab_pytest.results import RESULTS_NAME, SUMMARY_NAME, exit_status, merge, read_run
from sab_pytest.results.files import read_results


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sab merge",
                                     description="Combine the output directories of --sab-shard runs into one run.")
    parser.add_argument("dirs", nargs="+", metavar="DIR", help="output directory of one shard (--sab-out)")
    add_settings(parser, "out_dir", "no_job_summary")
    parser.add_argument("--junitxml", "--junit-xml", metavar="FILE", type=Path, default=None,
                        help="write the merged run's JUnit XML file: one testcase per case and per gate, the gates "
                             "decided over every part")
    return parser


def main(argv: list[str]) -> int:
    args = make_parser().parse_args(argv)
    out = Path(args.out_dir)
    inputs = [Path(d) for d in args.dirs]
    if any(out.resolve() == d.resolve() for d in inputs):
        return fail("merge", f"--sab-out {out} is one of the shard directories; choose another")
    try:
        summary = merge([read_run(d) for d in inputs], out)
    except SabError as exc:
        return fail("merge", exc)
    except OSError as exc:  # --sab-out cannot be made or written
        return fail("merge", f"--sab-out: cannot write {os_problem(exc, out)}")
    if args.junitxml is not None:
        try:
            write_junit(args.junitxml, summary, read_results(out / RESULTS_NAME))
        except OSError as exc:
            return fail("merge", f"--junitxml: cannot write {os_problem(exc, args.junitxml)}")
    for line in render_table(summary):
        print(line)
    if summary["missing_results"]:
        print(f"incomplete: {summary['missing_results']} selected case(s) have no result in their shard")
    status = (summary.get("run") or {}).get("status")
    if status not in (None, "complete"):
        print(f"incomplete: a shard's run is {status}")
    junit = f", {args.junitxml}" if args.junitxml is not None else ""
    print(f"merged {len(inputs)} shards, {summary['cases']} cases -> {out / RESULTS_NAME}, "
          f"{out / SUMMARY_NAME}{junit}")
    for gate in summary.get("gates") or []:
        if gate.get("usage_error"):
            print(f"sab merge: --sab-baseline: {gate['usage_error']}", file=sys.stderr)
    if not args.no_job_summary:  # in GitHub Actions: the merged run's job summary and ::error lines
        written = [out / RESULTS_NAME, out / SUMMARY_NAME, *([args.junitxml] if args.junitxml is not None else [])]
        problem = job_summary.publish(summary, [job_summary.shown_path(p) for p in written], print)
        if problem is not None:
            print(f"sab merge: job summary: {problem}", file=sys.stderr)
    return exit_status(summary)
