"""Does a rate corrected for the judge's error keep its promise? Simulated runs where the truth is known.

For every judge error a run may have, sensitivity and specificity in {0.7, 0.85, 0.99}², audits of 30,
100 and 300 labels, true rates 0.05 to 0.95, over a run of ``--cases`` judged cases
(``results.judging.simulation``: the judge errs at random with that sensitivity and specificity, the
audit is drawn half on each verdict as ``sab audit`` draws it, people label the truth):

* coverage: the corrected interval's lower end at most the true rate, its upper end at least it (each
  a one-sided 97.5 % bound: the ends a ``@lower``/``@upper`` gate compares) and both, in ``--draws``
  runs per cell; the raw interval's (Wilson's over the judge's verdicts, what a run reports without an
  audit) beside it; and the corrected one-sided 95 % bounds. A cell misses when an end of the
  corrected 95 % interval or a one-sided 95 % bound covers in fewer than 94 % of runs;
* power: ``no_regression`` of a rate that drops by 0.05, 0.10 and 0.15 from 0.5 (and the false FAILs
  at no drop), on the judge's verdicts (raw) and on audited runs (corrected), both runs judged alike;
* the audit ``sab plan --audit-half-width`` sizes: the half-width it promises against the simulated
  runs' mean at that size.

It prints the tables and exits 1 when a cell misses, or when a figure is not a share. Seeded: the
same figures every time. ``--smoke`` simulates 300 runs of 200 cases a cell over one judge: too
coarse for the bounds, which it does not judge.

Usage::

    python bench/bench_judge_error.py [--draws 20000] [--cases 1000]
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time

import numpy as np
from benchkit import Checks, add_smoke

from sab_pytest.results.judging.error import audit_size
from sab_pytest.results.judging.simulation import JudgeCell, coverage, intervals, regression_power, simulate

ERRORS = (0.7, 0.85, 0.99)
AUDITS = (30, 100, 300)
RATES = (0.05, 0.2, 0.35, 0.5, 0.65, 0.8, 0.95)
BOUND = 0.94
GRID = [ERRORS, ERRORS, AUDITS, RATES]  # sensitivity, specificity, audit, rate (--smoke: fewer)


def coverage_table(rng: np.random.Generator, cases: int, draws: int, checks: Checks) -> int:
    """The coverage table; the number of cells that miss."""
    print(f"coverage over {draws} runs of {cases} judged cases per cell; a miss: an end of the corrected 95 % "
          f"interval (low, up) or a corrected one-sided 95 % bound (low95, up95) below {BOUND}")
    print(f"{'sens':>5} {'spec':>5} {'audit':>5} {'rate':>5} | {'raw low':>7} {'raw up':>7} {'raw both':>8} | "
          f"{'low':>6} {'up':>6} {'both':>6} | {'low95':>6} {'up95':>6}  verdict")
    misses, worst, worst95, worst_both = 0, 1.0, 1.0, 1.0
    for sens, spec, audit, rate in itertools.product(*GRID):
        c = coverage(rng, JudgeCell(cases, rate, sens, spec, audit), draws)
        low, low95 = min(c["low"], c["high"]), min(c["low95"], c["high95"])
        worst, worst95, worst_both = min(worst, low), min(worst95, low95), min(worst_both, c["both"])
        missed = low < BOUND or low95 < BOUND
        checks.need(all(0 <= c[k] <= 1 for k in ("low", "high", "both", "low95", "high95", "raw_both")),
                    f"cell {sens}/{spec}/{audit}/{rate}: every coverage is a share")
        misses += missed
        print(f"{sens:>5} {spec:>5} {audit:>5} {rate:>5} | {c['raw_low']:>7.4f} {c['raw_high']:>7.4f} "
              f"{c['raw_both']:>8.4f} | {c['low']:>6.4f} {c['high']:>6.4f} {c['both']:>6.4f} | "
              f"{c['low95']:>6.4f} {c['high95']:>6.4f}  "
              f"{'MISS' if missed else 'ok'}", flush=True)
    cells = len(list(itertools.product(*GRID)))
    print(f"{cells - misses} of {cells} cells with every corrected one-sided end covering in >= {BOUND} of runs; "
          f"worst end of the 95 % interval {worst:.4f}, worst one-sided 95 % bound {worst95:.4f}, worst two-sided "
          f"coverage of the 95 % interval {worst_both:.4f}\n")
    return misses


def power_table(rng: np.random.Generator, cases: int, draws: int) -> None:
    """``no_regression`` raw and corrected, from a rate of 0.5."""
    print(f"no_regression (alpha 0.05) from a true rate of 0.5 over {cases} judged cases a run, {draws} pairs of "
          f"runs: share that FAIL (at drop 0: false FAILs)")
    print(f"{'sens':>5} {'spec':>5} {'audit':>5} {'drop':>5} | {'raw':>6} {'corrected':>9}")
    for (sens, spec), audit, drop in itertools.product(((0.99, 0.99), (0.85, 0.85), (0.7, 0.9)), (100, 300),
                                                      (0.0, 0.05, 0.1, 0.15)):
        p = regression_power(rng, JudgeCell(cases, 0.5, sens, spec, audit), 0.5 - drop, draws)
        print(f"{sens:>5} {spec:>5} {audit:>5} {drop:>5.2f} | {p['raw']:>6.3f} {p['corrected']:>9.3f}", flush=True)
    print("the judge errs differently on the candidate's answers (sensitivity 0.9 on both, specificity 0.95 on the "
          "baseline's, 0.75 on the candidate's): its false successes hide the candidate's drop from the raw gate")
    for audit, drop in itertools.product((100, 300), (0.0, 0.05, 0.1, 0.15)):
        p = regression_power(rng, JudgeCell(cases, 0.5, 0.9, 0.95, audit), 0.5 - drop, draws,
                             candidate_judge=(0.9, 0.75))
        print(f"{'0.9':>5} {'.95/.75':>5} {audit:>5} {drop:>5.2f} | {p['raw']:>6.3f} {p['corrected']:>9.3f}",
              flush=True)
    print()


def plan_table(rng: np.random.Generator, cases: int, draws: int) -> None:
    """``sab plan --audit-half-width``'s labels against the simulated half-width at that audit."""
    print(f"sab plan --audit-half-width H over {cases} judged cases: the labels it asks for, the half-width it "
          f"promises, the simulated runs' mean half-width (the larger side)")
    print(f"{'H':>5} {'rate':>5} {'sens':>5} {'spec':>5} | {'labels':>6} {'promised':>8} {'simulated':>9}")
    for width, rate, (sens, spec) in itertools.product((0.05, 0.1), (0.1, 0.3, 0.5),
                                                       ((0.99, 0.99), (0.85, 0.85), (0.7, 0.9))):
        labels, promised = audit_size(width, rate, sens, spec, cases)
        if labels is None:
            print(f"{width:>5} {rate:>5} {sens:>5} {spec:>5} | {'-':>6} {promised:>8.4f} {'(run too small)':>9}")
            continue
        cell = JudgeCell(cases, rate, sens, spec, labels)
        _, _, value, low, high = intervals(cell, simulate(rng, cell, draws))
        simulated = float(np.nanmean(np.maximum(value - low, high - value)))
        print(f"{width:>5} {rate:>5} {sens:>5} {spec:>5} | {labels:>6} {promised:>8.4f} {simulated:>9.4f}", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--draws", type=int, default=20000)
    parser.add_argument("--cases", type=int, default=1000)
    add_smoke(parser)
    args = parser.parse_args()
    checks = Checks()
    if args.smoke:
        args.draws, args.cases = 300, 200
        GRID[:] = [(0.85,), (0.85,), (30, 100), (0.2, 0.5)]
    rng = np.random.default_rng(50)
    start = time.perf_counter()
    misses = coverage_table(rng, args.cases, args.draws, checks)
    if args.smoke:  # the other tables at their smallest: one row each
        p = regression_power(rng, JudgeCell(args.cases, 0.5, 0.85, 0.85, 100), 0.4, 200)
        labels, promised = audit_size(0.1, 0.3, 0.85, 0.85, args.cases)
        print(f"no_regression, drop 0.1: raw {p['raw']:.3f}, corrected {p['corrected']:.3f}; audit for 0.1: "
              f"{labels} labels, half-width {promised:.4f}")
        checks.need(0 <= p["raw"] <= 1 and 0 <= p["corrected"] <= 1, "the gate's fail shares are shares")
    else:
        power_table(rng, min(args.cases, 500), max(args.draws // 10, 500))
        plan_table(rng, args.cases, max(args.draws // 10, 500))
        checks.need(not misses, f"every cell covers within its bound ({misses} missed)")
    print(f"\n({time.perf_counter() - start:.0f} s)")
    return checks.status()


if __name__ == "__main__":
    sys.exit(main())
