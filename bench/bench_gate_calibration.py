"""Are gate decisions calibrated? ``no_regression`` and the rate intervals, simulated where the truth is known.

For every design a team runs, (K_base, K_cand) in {1, 3, 5}^2 repeats, baseline rates 0.3, 0.5, 0.7
and 0.9, and 20, 57 and 130 cases, with cases that differ in difficulty (per-case rates from a
Beta around the mean, ``--agreement`` their intraclass correlation), ``--draws`` simulated pairs of
runs per cell (``results.calibration``, decided by the gate's own rule):

* false FAIL: the candidate is the baseline model itself on the same cases; ``no_regression`` must
  fail at most alpha + 0.01 of the time;
* power: the candidate's rate is lower by the drop that ``sab plan`` (``sample_size.regression_power``,
  told the same agreement) promises power 0.8 for at this design, or by half the rate where that
  takes more (20 cases cannot see less: the plan then promises less), its cases drawn apart from the
  baseline's; the simulated power must be within 0.05 of the promise;
* coverage: a one-sided ``@lower`` (``@upper``) gate's interval end at most (at least) the true rate
  in at least 95% of runs, for each side's K (over ten times the draws: a run is cheap to simulate,
  and the true coverage of the closest cells lies within a few tenths of a percent of the bound).

It prints one line per cell and exits 1 when a cell misses a bound, or when a figure is not a share
(outside 0..1, not a number). Seeded: the same figures every time. ``--smoke`` simulates 4 cells with
100 draws: its figures are then too coarse for the bounds, which it does not judge.

Usage::

    python bench/bench_gate_calibration.py [--draws 2000] [--agreement 0.3] [--alpha 0.05]
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time

import numpy as np
from benchkit import Checks, add_smoke

from sab_pytest.results.calibration import Cell, coverage, fail_share
from sab_pytest.results.sample_size import regression_power
from sab_pytest.results.stats import root

KS = (1, 3, 5)
RATES = (0.3, 0.5, 0.7, 0.9)
SIZES = (20, 57, 130)
TARGET_POWER = 0.8


def planned_drop(cell: Cell, alpha: float) -> tuple[float, float]:
    """(the candidate's rate for which the plan promises power 0.8, that promised power), found by
    scipy's root-finding (``stats.root``); the largest drop considered is half the rate."""
    def promised(p1: float) -> float:
        return float(regression_power(cell.cases, cell.rate, p1, alpha=alpha, repeat=cell.k_cand,
                                      baseline_repeat=cell.k_base, agreement=cell.agreement))

    lo, hi = cell.rate * 0.5, cell.rate  # promised power falls from lo to hi
    if promised(lo) < TARGET_POWER:
        return lo, promised(lo)
    found = root(lambda p1: promised(p1) - TARGET_POWER, lo, hi)
    return found, promised(found)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--draws", type=int, default=2000)
    parser.add_argument("--agreement", type=float, default=0.3)
    parser.add_argument("--alpha", type=float, default=0.05)
    add_smoke(parser)
    args = parser.parse_args()
    checks = Checks()
    ks, rates, sizes = (KS, RATES, SIZES) if not args.smoke else ((1, 3), (0.5,), (20, 57))
    if args.smoke:
        args.draws = 100
    rng = np.random.default_rng(34)
    start = time.perf_counter()
    misses = 0
    worst = {"false_fail": 0.0, "power_gap": 0.0, "coverage": 1.0}
    print(f"agreement {args.agreement}, alpha {args.alpha}, {args.draws} draws per cell; bounds: false FAIL <= "
          f"{args.alpha + 0.01:.2f}, |power - planned| <= 0.05, one-sided coverage >= 0.95")
    print(f"{'K_base':>6} {'K_cand':>6} {'rate':>5} {'cases':>5} | {'falseFAIL':>9} | {'drop to':>7} {'planned':>7} "
          f"{'power':>6} | {'cov@lower':>9} {'cov@upper':>9}  verdict")
    for k_base, k_cand, rate, cases in itertools.product(ks, ks, rates, sizes):
        cell = Cell(k_base, k_cand, cases, rate, rate, args.agreement)
        false_fail = fail_share(rng, cell, args.draws, args.alpha, shared=True)
        p1, planned = planned_drop(cell, args.alpha)
        power = fail_share(rng, Cell(k_base, k_cand, cases, rate, p1, args.agreement), args.draws, args.alpha,
                           shared=False)
        covers = [coverage(rng, rate, k, cases, args.agreement, 10 * args.draws) for k in sorted({k_base, k_cand})]
        low_cov, high_cov = min(c[0] for c in covers), min(c[1] for c in covers)
        bad = [what for what, failed in (("false FAIL", false_fail > args.alpha + 0.01),
                                         ("power", abs(power - planned) > 0.05),
                                         ("coverage", min(low_cov, high_cov) < 0.95)) if failed]
        misses += bool(bad)
        checks.need(all(0 <= v <= 1 for v in (false_fail, planned, power, low_cov, high_cov)),
                    f"cell {k_base}/{k_cand}/{rate}/{cases}: every figure is a share")
        worst["false_fail"] = max(worst["false_fail"], false_fail)
        worst["power_gap"] = max(worst["power_gap"], abs(power - planned))
        worst["coverage"] = min(worst["coverage"], low_cov, high_cov)
        print(f"{k_base:>6} {k_cand:>6} {rate:>5.1f} {cases:>5} | {false_fail:>9.4f} | {p1:>7.3f} {planned:>7.3f} "
              f"{power:>6.3f} | {low_cov:>9.4f} {high_cov:>9.4f}  {'MISS: ' + ', '.join(bad) if bad else 'ok'}",
              flush=True)
    cells = len(ks) ** 2 * len(rates) * len(sizes)
    print(f"\n{cells - misses} of {cells} cells within every bound; worst false FAIL {worst['false_fail']:.4f}, "
          f"worst |power - planned| {worst['power_gap']:.4f}, worst one-sided coverage {worst['coverage']:.4f} "
          f"({time.perf_counter() - start:.0f} s)")
    if not args.smoke:
        checks.need(not misses, f"every cell within its bounds ({misses} missed)")
    return checks.status()


if __name__ == "__main__":
    sys.exit(main())
