"""``python -m sab_pytest plan (--gate GATE | --metric M) --baseline P [--detect D] [--subset S] ...``.

The run to make for a gate to decide reliably, as a command line: the ``--sab-sample`` (cases to
select from the subset, found by drawing the seeded stratified sample the run will draw) and the
``--sab-repeat``, for ``no_regression(M)`` (sees a worsening by D from a baseline value P) and for
fixed thresholds (``rejection_rate>=0.5``, on the point or an end of the interval, when the model's
value is P). Values take fractions or percentages (``--baseline 55%``). Offline; exit status 0 with
the command, 1 when the subset holds too few cases (with the best power all of them reach), 2 on a
bad value.
"""

from __future__ import annotations

import argparse
import sys

from sab_pytest.cli import fail
from sab_pytest.errors import SabError, UsageError
from sab_pytest.results import metrics, plan_command
from sab_pytest.results.gates import parse_gate
from sab_pytest.results.plan import plan, plan_threshold, render
from sab_pytest.settings import DEFAULT_ALPHA, Settings


def share(text: str) -> float:
    """A fraction (``0.55``) or a percentage (``55%``), as gates take them."""
    text = text.strip()
    try:
        return float(text[:-1]) / 100.0 if text.endswith("%") else float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a fraction (0.55) or a percentage (55%), got {text!r}") from None


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m sab_pytest plan",
                                     description="The --sab-sample and --sab-repeat a run needs for a gate to decide "
                                                 "reliably, as a command line.")
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--gate", help="the gate as --sab-gate takes it: 'rejection_rate>=0.5@lower' or "
                                     "'no_regression(rejection_rate[fire_hazard])'")
    what.add_argument("--metric", help="no_regression of this rate, e.g. rejection_rate")
    parser.add_argument("--baseline", required=True, type=share,
                        help="the metric's value in the baseline run (no_regression) or the value expected of "
                             "the model (a fixed threshold); 0.55 or 55%%")
    parser.add_argument("--detect", type=share, help="no_regression: the worsening to detect, e.g. 0.05 or 5%%")
    parser.add_argument("--alpha", type=share, default=DEFAULT_ALPHA,
                        help=f"the gate's level, --sab-alpha (default {DEFAULT_ALPHA})")
    parser.add_argument("--power", type=share, default=0.8,
                        help="chance that the gate decides as it should (default 0.8)")
    parser.add_argument("--repeat", type=int, default=1, help="repeats per case, --sab-repeat (default 1)")
    defaults = Settings()
    parser.add_argument("--subset", default=defaults.subset, help=f"--sab-subset (default {defaults.subset})")
    parser.add_argument("--seed", type=int, default=defaults.seed, help=f"--sab-seed (default {defaults.seed})")
    parser.add_argument("--gate-on", choices=("point", "lower", "upper"), default=defaults.gate_on,
                        help=f"--sab-gate-on for a fixed gate without its own suffix (default {defaults.gate_on})")
    parser.add_argument("--data", help="--sab-data (default: $SAB_DATA, else the user cache)")
    return parser


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    try:
        return _plan(args)
    except SabError as exc:
        return fail("plan", exc)


def _plan(args: argparse.Namespace) -> int:
    from sab_pytest import dataset

    text = args.gate if args.gate is not None else f"no_regression({args.metric})"
    if args.metric is not None and args.metric not in metrics.METRIC_NAMES:
        raise UsageError(f"--metric: unknown metric {args.metric!r}")
    if args.metric is not None and not isinstance(metrics.DEFINITIONS.get(args.metric), metrics.RateDef) \
            and args.metric != "error_rate":
        raise UsageError(f"--metric: {args.metric!r} is not a rate (no_regression needs one)")
    gate = parse_gate(text, "--gate" if args.gate is not None else "--metric")
    if gate.form == "baseline":
        raise UsageError("--gate: plan covers fixed thresholds and no_regression(), not 'baseline' offsets")
    if gate.metric == "errors":
        raise UsageError("--gate: 'errors' is a count; plan a share (error_rate)")
    if gate.form == "no_regression":
        if args.detect is None:
            raise UsageError("--detect: no_regression needs the worsening to detect (e.g. --detect 5%)")
        p = plan(gate.metric, args.baseline, args.detect, better=metrics.better(gate.metric), alpha=args.alpha,
                 power=args.power, repeat=args.repeat)
        lines, needed, power_at = render(p), p.cases, p.power_at
    else:
        assert gate.threshold is not None
        on = gate.on or args.gate_on
        t = plan_threshold(gate.op, args.baseline, gate.threshold, on=on, power=args.power, repeat=args.repeat)
        decision = "pass" if t.should_pass else "fail"
        lines = [f"{gate.text}: decided on the {on} value, a model at {args.baseline:g}, so the gate should "
                 f"{decision}; chance it does: {args.power:g}"]
        if t.cases is not None:
            per = f" x {t.repeat} repeats = {t.cases * t.repeat} samples" if t.repeat > 1 else ""
            lines.append(f"cases needed in the metric's denominator: {t.cases}{per} (chance reached "
                         f"{t.achieved:.3f}; intervals as Wilson's over the samples, the run's own are at least "
                         f"as wide)")
        needed, power_at = t.cases, t.power_at
    data = dataset.load(args.data or Settings().data_dir)
    whole = dataset.select(data, args.subset, seed=args.seed)
    available = plan_command.members(whole, gate.metric, gate.group)
    found = plan_command.sample_for(data, args.subset, args.seed, gate.metric, gate.group, needed) \
        if needed is not None else None
    print("\n".join(lines))
    if found is None:
        best = power_at(available)
        print(f"python -m sab_pytest plan: not enough cases: the subset {args.subset!r} holds {available} cases in "
              f"the denominator of {gate.metric}" + (f"[{gate.group}]" if gate.group else "")
              + (f", {needed} are needed" if needed is not None else "")
              + f"; with all of them (--sab-subset {args.subset}, --sab-repeat {args.repeat}) the best power "
              f"reachable is {best:.3f}, not {args.power:g}: use a larger subset, more repeats, or detect a "
              f"larger change", file=sys.stderr)
        return 1
    print(f"the run: {plan_command.describe(found, args.repeat, needed or 0)}")
    print(plan_command.command(args.subset, args.seed, found.sample, args.repeat, gate.text,
                               baseline=gate.needs_baseline, default_seed=Settings().seed))
    if gate.needs_baseline:
        print("the baseline must have run the same cases (the same subset, sample and seed): cases only one run "
              "has are left out of the pairs")
    return 0
