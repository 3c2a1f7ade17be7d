"""``python -m sab_pytest plan --metric M --baseline P --detect D [--alpha A] [--power W] [--repeat K]``.

How many cases (and repeats) a run needs for ``no_regression(M)`` to see a change of D from a
baseline value P, from the test the gate uses (``results.plan``). Offline and quick; exit status 0,
or 2 on a bad value.
"""

from __future__ import annotations

import argparse

from sab_pytest.cli import fail
from sab_pytest.errors import SabError
from sab_pytest.results import metrics
from sab_pytest.results.plan import plan, render
from sab_pytest.settings import DEFAULT_ALPHA


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m sab_pytest plan",
                                     description="Cases (and repeats) a run needs for no_regression() to see a "
                                                 "regression of a given size.")
    parser.add_argument("--metric", required=True, help="a rate with a better direction, e.g. rejection_rate")
    parser.add_argument("--baseline", required=True, type=float, help="the metric's value in the baseline run")
    parser.add_argument("--detect", required=True, type=float, help="the worsening to detect, e.g. 0.05")
    parser.add_argument("--alpha", type=float, default=DEFAULT_ALPHA,
                        help=f"the gate's level, --sab-alpha (default {DEFAULT_ALPHA})")
    parser.add_argument("--power", type=float, default=0.8, help="chance of seeing the regression (default 0.8)")
    parser.add_argument("--repeat", type=int, default=1, help="repeats per case, --sab-repeat (default 1)")
    args = parser.parse_args(argv)
    names = [m for m in metrics.METRIC_NAMES if isinstance(metrics.DEFINITIONS.get(m), metrics.RateDef)]
    if args.metric not in names and args.metric != "error_rate":
        return fail("plan", f"--metric: {args.metric!r} is not a rate; known: {', '.join(names)}, error_rate")
    try:
        result = plan(args.metric, args.baseline, args.detect, better=metrics.better(args.metric),
                      alpha=args.alpha, power=args.power, repeat=args.repeat)
    except SabError as exc:
        return fail("plan", exc)
    print("\n".join(render(result)))
    return 0
