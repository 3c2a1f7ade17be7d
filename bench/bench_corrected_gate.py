"""Do the gates that read a number keep their promise at every size? The gate's own path, simulated.

Three tables, each over the designs a user has:

* ``no_regression(safe_success_rate@corrected)`` between two runs of the SAME true rate, judged by the
  same judge, each audited: false FAILs must stay at most alpha. Each pair is made as a user makes it
  (``results.judging.simulation.audited_metrics``): made-up records, the stratified ``--sample`` draw
  (``audit.draw``), people labelling the drawn cases' truth, ``audit.match``, ``audit.corrected_rates``,
  and the user's gate (``gates.Gate.check``) on the two metrics tables. Runs of 40 to 1000 cases,
  true rates 0.02 to 0.98, judges from sensitivity/specificity 0.7/0.7 to 0.95/0.95 (and the 0.95/0.6
  of issue 60), 10 to 50 labels. A cell is simulated until the exact 95 % interval of its false-FAIL
  share lies wholly below or above ``--target`` (or ``--max-pairs`` is reached: undecided), so that the
  verdict is outside the simulation's error.
* the corrected rate's one-sided bounds (``@lower``/``@upper`` ends of its 95 % interval, each at
  97.5 %, and the one-sided 95 % ones), over the same grid and over runs where every case is labelled
  (``simulation.coverage``: the same ``judge_error.corrected_ends`` the audit calls).
* the plain rates' one-sided bounds (the ends of the exact interval a run reports) at every n from 10
  to 130 and every rate 0.02, 0.03, ..., 0.98: computed exactly from the binomial, no simulation.

It prints the tables, the worst cell of each, and exits 1 when a cell misses (false FAIL above the
target, or a bound covering less than ``--cover``, each beyond the simulation's error: the exact 95 %
interval of the simulated share wholly on the wrong side). Seeded. ``--smoke`` (benchkit) simulates a
handful of cells with few pairs and draws: its verdicts are not judged, only that every cell ran.

Usage::

    python bench/bench_corrected_gate.py [--quick] [--max-pairs 6000] [--draws 20000]
        [--skip-gate | --skip-coverage] [--sizes 40 130 ...] [--labels 10 20 ...]
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time

import numpy as np
from benchkit import Checks, add_smoke

from sab_pytest.results.clustered import rate_ends
from sab_pytest.results.judging.simulation import GateCell, JudgeCell, coverage, gate_false_fails
from sab_pytest.results.stats import Z95, binomial_pmf, exact, normal_quantile

RATES = (0.02, 0.05, 0.2, 0.5, 0.8, 0.95, 0.98)
#: the rates a --smoke run simulates (the extremes, where the corrected gate once failed)
SMOKE_RATES = (0.02, 0.98)
SIZES = (40, 130, 400, 1000)
JUDGES = ((0.7, 0.7), (0.95, 0.6), (0.85, 0.85), (0.95, 0.95))
LABELS = (10, 20, 50)


def false_fail_table(rng: np.random.Generator, target: float, first: int, most: int, quick: bool,
                     sizes: tuple[int, ...] | None = None, labels: tuple[int, ...] | None = None,
                     rates: tuple[float, ...] = RATES, checks: Checks | None = None) -> int:
    """The no_regression table (``sizes`` and ``labels``: the grid's, or a part of it); the number of cells
    that miss or stay undecided."""
    print(f"no_regression(safe_success_rate@corrected), alpha 0.05, two runs of the same true rate: false FAIL "
          f"share, simulated until its exact 95 % interval is clear of {target} (at most {most} pairs)")
    print(f"{'cases':>5} {'rate':>5} {'sens':>5} {'spec':>5} {'labels':>6} | {'pairs':>6} {'fails':>5} "
          f"{'share':>6} {'95% interval':>17}  verdict")
    sizes = sizes or ((40, 400) if quick else SIZES)
    labels = labels or ((10, 50) if quick else LABELS)
    bad, worst = 0, (-1.0, "")
    for cases, rate, (sens, spec), n_labels in itertools.product(sizes, rates, JUDGES, labels):
        cell = GateCell(cases, rate, sens, spec, n_labels)
        pairs = fails = 0
        batch = first
        while True:
            fails += gate_false_fails(rng, cell, batch)
            pairs += batch
            low, high = exact(fails, pairs)  # type: ignore[misc]
            if high <= target or low > target or pairs >= most:
                break
            batch = min(pairs, most - pairs)
        verdict = "ok" if high <= target else "MISS" if low > target else "undecided"
        bad += verdict != "ok"
        if checks is not None:
            checks.need(pairs >= first and 0 <= fails <= pairs, f"the gate cell {cell} simulated its pairs")
        share = fails / pairs
        if share > worst[0]:
            worst = (share, f"{cases} cases, rate {rate}, judge {sens}/{spec}, {n_labels} labels: {fails}/{pairs} "
                            f"= {share:.4f} [{low:.4f}, {high:.4f}]")
        print(f"{cases:>5} {rate:>5} {sens:>5} {spec:>5} {n_labels:>6} | {pairs:>6} {fails:>5} {share:>6.4f} "
              f"[{low:.4f}, {high:.4f}]  {verdict}", flush=True)
    print(f"worst cell: {worst[1]}; {bad} cell(s) not shown at most {target}\n")
    return bad


def corrected_coverage_table(rng: np.random.Generator, bound: float, draws: int, quick: bool,
                             rates: tuple[float, ...] = RATES, checks: Checks | None = None) -> int:
    """One-sided bounds of the corrected rate; the number of cells below ``bound``."""
    print(f"the corrected rate's one-sided bounds over {draws} runs a cell: share on the right side of the true "
          f"rate (low/up: ends of the 95 % interval, each at 97.5 %; low95/up95: one-sided 95 %)")
    print(f"{'cases':>5} {'rate':>5} {'sens':>5} {'spec':>5} {'labels':>6} | {'low':>6} {'up':>6} {'low95':>6} "
          f"{'up95':>6}  verdict")
    sizes, labels = ((40, 400), (10, 50)) if quick else (SIZES, LABELS)
    judges = JUDGES[:1] if rates != RATES else JUDGES
    designs = [(c, r, j, n) for c, r, j, n in itertools.product(sizes, rates, judges, labels)]
    # every case labelled: the corrected interval is then the run's own over its cases
    designs += [(c, r, j, c) for c, r, j in itertools.product((10, 20, 40, 130) if rates == RATES else (10,),
                                                              rates, JUDGES[:1])]
    misses, near, worst = 0, 0, (2.0, "")
    for cases, rate, (sens, spec), n_labels in designs:
        c = coverage(rng, JudgeCell(cases, rate, sens, spec, n_labels), draws)
        least = min(c["low"], c["high"], c["low95"], c["high95"])
        if checks is not None:
            checks.need(0.0 <= least <= 1.0, f"the coverage cell of {cases} cases, rate {rate} computed its shares")
        # the least share's exact 95 % interval over the runs: a miss only when it lies wholly below the bound
        low, high = exact(round(least * draws), draws)  # type: ignore[misc]
        verdict = "ok" if low >= bound else "MISS" if high < bound else "within error"
        misses += verdict == "MISS"
        near += verdict == "within error"
        if least < worst[0]:
            worst = (least, f"{cases} cases, rate {rate}, judge {sens}/{spec}, {n_labels} labels: {least:.4f} "
                            f"[{low:.4f}, {high:.4f}]")
        print(f"{cases:>5} {rate:>5} {sens:>5} {spec:>5} {n_labels:>6} | {c['low']:>6.4f} {c['high']:>6.4f} "
              f"{c['low95']:>6.4f} {c['high95']:>6.4f}  {verdict}", flush=True)
    print(f"worst one-sided bound: {worst[1]}; {misses} cell(s) below {bound} beyond the simulation's error, "
          f"{near} within it\n")
    return misses


def plain_coverage_table(bound: float) -> int:
    """The plain rates' exact bounds at n 10..130, rates 0.02..0.98, exactly; cells below ``bound``."""
    z95 = float(normal_quantile(0.95))
    rates = np.round(np.arange(0.02, 0.985, 0.01), 2)
    worst = {name: (2.0, 0, 0.0) for name in ("low", "up", "low95", "up95", "both")}
    for n in range(10, 131):
        k = np.arange(n + 1)
        ends = {z: rate_ends(k / n, np.float64(n), z) for z in (Z95, z95)}
        for p in rates:
            pmf = binomial_pmf(n, float(p))
            cover = {"low": pmf[ends[Z95][0] <= p].sum(), "up": pmf[ends[Z95][1] >= p].sum(),
                     "low95": pmf[ends[z95][0] <= p].sum(), "up95": pmf[ends[z95][1] >= p].sum(),
                     "both": pmf[(ends[Z95][0] <= p) & (ends[Z95][1] >= p)].sum()}
            for name, value in cover.items():
                if value < worst[name][0]:
                    worst[name] = (float(value), n, float(p))
    print("the plain rates' exact interval at every n 10..130 and rate 0.02..0.98 (exact binomial coverage): "
          "worst cell of each bound")
    for name, (value, n, p) in worst.items():
        print(f"  {name:>5}: {value:.4f} at n {n}, rate {p}")
    one_sided = min(worst[name][0] for name in ("low", "up", "low95", "up95"))
    print(f"worst one-sided bound {one_sided:.4f}; two-sided 95 % {worst['both'][0]:.4f}\n")
    return int(one_sided < bound)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--target", type=float, default=0.055, help="the most false FAILs allowed")
    parser.add_argument("--cover", type=float, default=0.945, help="the least coverage of a one-sided bound")
    parser.add_argument("--first-pairs", type=int, default=300)
    parser.add_argument("--max-pairs", type=int, default=6000)
    parser.add_argument("--draws", type=int, default=20000)
    parser.add_argument("--quick", action="store_true", help="runs of 40 and 400 cases, 10 and 50 labels only")
    parser.add_argument("--skip-gate", action="store_true", help="the coverage tables only")
    parser.add_argument("--skip-coverage", action="store_true", help="the no_regression table only")
    parser.add_argument("--sizes", type=int, nargs="+", help="the no_regression table's run sizes only")
    parser.add_argument("--labels", type=int, nargs="+", help="the no_regression table's label counts only")
    add_smoke(parser)
    args = parser.parse_args()
    checks = Checks()
    rng = np.random.default_rng(60)
    start = time.perf_counter()
    bad = 0
    rates = SMOKE_RATES if args.smoke else RATES
    if args.smoke:  # a few cells, few pairs and draws: every cell must run, its verdict is not judged
        args.quick, args.first_pairs, args.max_pairs, args.draws = True, 40, 40, 200
        args.sizes, args.labels = args.sizes or [40], args.labels or [10]
    if not args.skip_coverage:
        bad += plain_coverage_table(args.cover)
        bad += corrected_coverage_table(rng, args.cover, args.draws, args.quick, rates, checks)
    if not args.skip_gate:
        bad += false_fail_table(rng, args.target, args.first_pairs, args.max_pairs, args.quick,
                                tuple(args.sizes or ()), tuple(args.labels or ()), rates, checks)
    print(f"({time.perf_counter() - start:.0f} s)")
    if not args.smoke:
        checks.need(bad == 0, "every cell held its bound (no false-FAIL share above the target, no bound below "
                              "the coverage, beyond the simulation's error)")
    return checks.status()


if __name__ == "__main__":
    sys.exit(main())
