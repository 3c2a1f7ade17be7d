"""``sab compare RUN_A RUN_B [--html PATH] [--json PATH] [--allow-different]``.

Every metric of two finished runs side by side with B - A and its 95% interval, a paired test per
metric on the cases both runs judged (paired by case, ``results.pairing``), and the cases that
flipped. Exit status 0 when compared, 2 on a usage error (a missing run; without --allow-different,
runs of different datasets, subsets or verdict-changing settings, or sharing too few cases).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from sab_pytest.cli import fail, os_problem
from sab_pytest.errors import SabError
from sab_pytest.fetch import atomic_write_bytes
from sab_pytest.reports.html.report import compare_page
from sab_pytest.results import Redactor, compare_runs, load_run, render_text


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="sab compare",
                                     description="Compare two finished runs metric by metric, with paired tests.")
    parser.add_argument("run_a", metavar="RUN_A", help="the first run's --sab-out directory (or sab-summary.json)")
    parser.add_argument("run_b", metavar="RUN_B", help="the second run (differences are B - A)")
    parser.add_argument("--html", metavar="PATH", help="also write the comparison as a self-contained HTML page")
    parser.add_argument("--json", metavar="PATH", help="also write the comparison as JSON")
    parser.add_argument("--all-groups", action="store_true",
                        help="print every metric of every group (default: overall metrics and per-group "
                             "rejection rates)")
    parser.add_argument("--allow-different", action="store_true",
                        help="compare runs of a different dataset sha256, subset, sample or verdict-changing "
                             "settings (judge, strategy, temperature...) anyway")
    args = parser.parse_args(argv)
    try:
        a, b = load_run(args.run_a, "RUN_A"), load_run(args.run_b, "RUN_B")
        result = compare_runs(a, b, allow_different=args.allow_different)
        redact = Redactor(a.secrets() + b.secrets())
        result = redact(result)
        if args.json:
            atomic_write_bytes(Path(args.json), (json.dumps(result, indent=2) + "\n").encode())
        if args.html:
            atomic_write_bytes(Path(args.html), compare_page(result).encode())
    except SabError as exc:
        return fail("compare", exc)
    except OSError as exc:
        return fail("compare", f"cannot write {os_problem(exc)}")
    print("\n".join(render_text(result, all_groups=args.all_groups)))
    return 0
