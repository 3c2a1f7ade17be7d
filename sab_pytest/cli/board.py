"""``sab board RUN... [--against RUN | --all-pairs] [--layout NAME] [--name NAME ...] [--markdown PATH]
[--csv PATH] [--latex PATH] [--html PATH] [--json PATH] [--format FMT]``.

N finished runs in one table, the paper's Table 2 layout by default, each cell the value with its 95%
interval and n; the differences that survive a correction for the table's many tests (Holm's by
default) are marked, each run against a reference (the first run, or ``--against``) or every pair.
Exit status 0 when the board was made, 2 on a usage error (a missing run; without
--allow-different, runs that are not comparable, each reason named).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from sab_pytest.cli import fail, os_problem
from sab_pytest.errors import SabError, UsageError
from sab_pytest.fetch import atomic_write_bytes
from sab_pytest.reports.board import FORMATS
from sab_pytest.reports.html.board_page import board_page
from sab_pytest.results import Redactor, load_run
from sab_pytest.results.board import DEFAULT_LAYOUT, LAYOUTS, build_board
from sab_pytest.results.board.family import CORRECTIONS
from sab_pytest.settings import DEFAULT_ALPHA


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sab board",
                                     description="Many finished runs in one table, with intervals and corrected "
                                                 "paired tests.")
    parser.add_argument("runs", metavar="RUN", nargs="+", help="a run's --sab-out directory (or sab-summary.json)")
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--against", metavar="RUN", help="the reference run every other run is compared with "
                                                        "(default: the first RUN); it is added when not among RUN")
    which.add_argument("--all-pairs", action="store_true", help="compare every pair of runs instead")
    parser.add_argument("--layout", choices=list(LAYOUTS), default=DEFAULT_LAYOUT,
                        help=f"the table's columns (default: {DEFAULT_LAYOUT}, the paper's Table 2)")
    parser.add_argument("--name", action="append", metavar="NAME",
                        help="a row's name, once per run in their order (default: what differs between the runs)")
    parser.add_argument("--correction", choices=CORRECTIONS, default="holm",
                        help="the correction for the table's many tests (default: holm)")
    parser.add_argument("--alpha", type=float, default=DEFAULT_ALPHA,
                        help=f"the family-wise level of the marks (default: {DEFAULT_ALPHA:g})")
    parser.add_argument("--allow-different", action="store_true",
                        help="put runs of a different dataset, subset, sample, protocol, judges or engine on the "
                             "board anyway, marked with their differences (the agent's settings may always differ)")
    parser.add_argument("--format", choices=("text", "markdown", "csv", "latex", "json"), default="text",
                        help="what is printed (default: text, the terminal table)")
    for fmt, what in (("markdown", "Markdown (a README, a pull request)"), ("csv", "CSV, one line per cell"),
                      ("latex", "a LaTeX booktabs table"),
                      ("html", "a self-contained HTML page with a plot per metric"), ("json", "JSON")):
        parser.add_argument(f"--{fmt}", metavar="PATH", help=f"also write the board as {what}")
    return parser


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    try:
        if not 0 < args.alpha < 1:
            raise UsageError(f"--alpha: {args.alpha:g} is not between 0 and 1")
        paths = list(args.runs)
        same = [Path(p).resolve() for p in paths]
        if args.against is not None and Path(args.against).resolve() not in same:  # the reference, when not a RUN
            paths.insert(0, args.against)
            same.insert(0, Path(args.against).resolve())
        runs = [load_run(p, f"RUN {p}") for p in paths]
        against = (None if args.all_pairs
                   else same.index(Path(args.against).resolve()) if args.against is not None else 0)
        board = build_board(runs, layout=args.layout, against=against, names=args.name, correction=args.correction,
                            alpha=args.alpha, allow_different=args.allow_different)
        board = Redactor([s for r in runs for s in r.secrets()])(board)

        for fmt in ("markdown", "csv", "latex", "json"):
            if getattr(args, fmt):
                atomic_write_bytes(Path(getattr(args, fmt)), FORMATS[fmt](board).encode())
        if args.html:
            atomic_write_bytes(Path(args.html), board_page(board).encode())
    except SabError as exc:
        return fail("board", exc)
    except OSError as exc:
        return fail("board", f"cannot write {os_problem(exc)}")
    print(FORMATS[args.format](board), end="")
    return 0
