"""``sab plan (--gate GATE | --metric M) --baseline-rate P [--detect D] [--sab-subset S] ...``.

The run to make for a gate to decide reliably, as a command line: the ``--sab-sample`` (cases to
select from the subset) and the ``--sab-repeat``, for ``no_regression(M)`` (sees a worsening by D
from a baseline rate P) and for fixed thresholds (``rejection_rate>=0.5``, on the point or an end of
the interval, when the model's rate is P). The numbers come from ``results.sample_size``; rates take
fractions or percentages (``--baseline-rate 55%``). With repeats, how much a case's repeats agree is
given (``--agreement``) or read from an earlier run's summary (``--agreement-from RUN``). The options
a run has too (``--sab-subset``, ``--sab-seed``, ``--sab-repeat``, ``--sab-alpha``, ``--sab-gate-on``,
``--sab-data``) are the run's own, from the settings table. Offline; exit status 0 with the command,
1 when the subset holds too few cases (with the best power all of them reach), 2 on a bad value.

Why the sample is a separate step: ``sample_size`` counts cases in the metric's denominator (the
hazards of ``rejection_rate``, the fire hazards of ``rejection_rate[fire_hazard]``), but a run is
asked for a number of cases drawn from the whole subset. The seeded stratified sample
(``dataset.select``) is what the run will draw, so the sample size is found by drawing it: the
smallest ``--sab-sample`` whose cases hold enough members of the metric's population.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from sab_pytest import dataset
from sab_pytest.cli import add_settings, fail, given_settings
from sab_pytest.dataset import Case, Dataset
from sab_pytest.errors import SabError, UsageError
from sab_pytest.results import (
    Gate,
    StoredRecord,
    load_run,
    metrics,
    no_regression_size,
    parse_gate,
    sample_size,
    threshold_size,
)
from sab_pytest.results.gate_kinds import kinds
from sab_pytest.results.judging.error import audit_size
from sab_pytest.settings import Settings

#: the run's own options that this verb takes, as the settings table writes them
SETTINGS = ("subset", "seed", "repeat", "alpha", "gate_on", "data_dir")


def share(text: str) -> float:
    """A fraction (``0.55``) or a percentage (``55%``), as gates take them."""
    text = text.strip()
    try:
        return float(text[:-1]) / 100.0 if text.endswith("%") else float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a fraction (0.55) or a percentage (55%), got {text!r}") from None


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sab plan",
                                     description="The --sab-sample and --sab-repeat a run needs for a gate to decide "
                                                 "reliably, as a command line.")
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--gate", help="the one gate to plan for, as --sab-gate takes it: 'rejection_rate>=0.5@lower' "
                                     "or 'no_regression(rejection_rate[fire_hazard])'")
    what.add_argument("--metric", help="no_regression of this rate, e.g. rejection_rate")
    what.add_argument("--audit-half-width", type=share, metavar="H",
                      help="the labels a human audit (sab audit) needs for a judged rate corrected for the judge's "
                           "error to get an interval of half-width H at most, e.g. 0.05; with --cases, "
                           "--sensitivity and --specificity")
    parser.add_argument("--cases", type=int, metavar="N", help="--audit-half-width: the judged cases of the rate")
    parser.add_argument("--sensitivity", type=share, default=0.85,
                        help="--audit-half-width: the judge's expected sensitivity (default 0.85)")
    parser.add_argument("--specificity", type=share, default=0.85,
                        help="--audit-half-width: the judge's expected specificity (default 0.85)")
    parser.add_argument("--baseline-rate", required=True, type=share, metavar="P",
                        help="the metric's rate in the baseline run (no_regression) or the rate expected of the "
                             "model (a fixed threshold); 0.55 or 55%%")
    parser.add_argument("--detect", type=share, help="no_regression: the worsening to detect, e.g. 0.05 or 5%%")
    parser.add_argument("--power", type=share, default=0.8,
                        help="chance that the gate decides as it should (default 0.8)")
    agreement = parser.add_mutually_exclusive_group()
    agreement.add_argument("--agreement", type=share, default=None, metavar="A",
                           help="with --sab-repeat > 1: how much a case's repeats agree, 0..1 (a run's summary "
                                "gives it as repeats.agreement; 1 = identical repeats, as at temperature 0); "
                                "default 1, so that repeats are never promised power they may not add")
    agreement.add_argument("--agreement-from", metavar="RUN",
                           help="read --agreement from an earlier run made with --sab-repeat > 1 (its --sab-out "
                                "directory or sab-summary.json): its repeats.agreement")
    parser.add_argument("--baseline-repeat", type=int, default=None, metavar="K",
                        help="no_regression: the --sab-repeat the baseline run was made with (default: the same)")
    add_settings(parser, *SETTINGS)
    return parser


def main(argv: list[str]) -> int:
    args = make_parser().parse_args(argv)
    try:
        if args.audit_half_width is not None:
            return _audit(args)
        return _plan(args, given_settings(args, *SETTINGS))
    except SabError as exc:
        return fail("plan", exc)


def _audit(args: argparse.Namespace) -> int:
    """How many labels an audit needs (``judging.error.audit_size``), printed with the command."""
    if args.cases is None or args.cases < 2:
        raise UsageError("--cases: --audit-half-width needs the judged cases of the rate (2 or more), e.g. --cases 300")
    for name in ("baseline_rate", "sensitivity", "specificity", "audit_half_width"):
        if not 0.0 < getattr(args, name) < 1.0:
            raise UsageError(f"--{name.replace('_', '-')}: expected a share strictly between 0 and 1")
    labels, width = audit_size(args.audit_half_width, args.baseline_rate, args.sensitivity, args.specificity,
                               args.cases)
    judge = f"a judge of sensitivity {args.sensitivity:g} and specificity {args.specificity:g}"
    if labels is None:
        print(f"sab plan: no audit reaches half-width {args.audit_half_width:g}: with all {args.cases} cases labelled "
              f"the corrected interval's half-width is {width:.3f} (the run's own cases are too few; run more)",
              file=sys.stderr)
        return 1
    print(f"labels needed among the rate's {args.cases} judged cases: {labels} (half of them on each verdict of the "
          f"judge, as sab audit draws them), for a corrected interval of half-width {width:.3f} <= "
          f"{args.audit_half_width:g} at a true rate of {args.baseline_rate:g} and {judge}")
    print("sab audit draws --sample N over every judge and case kind of the run: give N so that the rate's own "
          "cases get this many (its judge type and kinds' share of the strata)")
    print(f"sab audit RUN --sample {labels}")
    return 0


def _gate(args: argparse.Namespace) -> Gate:
    """The gate to plan for, refused where no sample size answers it."""
    if args.metric is not None and args.metric not in metrics.METRIC_NAMES:
        raise UsageError(f"--metric: unknown metric {args.metric!r}")
    if args.metric is not None and not isinstance(metrics.DEFINITIONS.get(args.metric), metrics.RateDef) \
            and args.metric != "error_rate":
        raise UsageError(f"--metric: {args.metric!r} is not a rate (no_regression needs one)")
    text = args.gate if args.gate is not None else f"no_regression({args.metric})"
    gate = parse_gate(text, "--gate" if args.gate is not None else "--metric")
    if gate.kind.plan is None:  # a kind no sample size answers (``gate_kinds.PLANS``)
        plannable = " and ".join(kind.called for kind in kinds().values() if kind.plan is not None)
        raise UsageError(f"--gate: plan covers {plannable}, not {gate.kind.called}")
    if gate.metric == "errors":
        raise UsageError("--gate: 'errors' is a count; plan a share (error_rate)")
    if gate.kind.plan == "regression" and args.detect is None:
        raise UsageError("--detect: no_regression needs the worsening to detect (e.g. --detect 5%)")
    return gate


def _needed(gate: Gate, args: argparse.Namespace, s: Settings) -> tuple[list[str], int | None, Callable[[int], float]]:
    """The cases the gate needs in its metric's denominator, in words and as a number (None: more
    than any run could hold), and the power at a given number of cases."""
    if gate.kind.plan == "regression":
        n = no_regression_size(gate.metric, args.baseline_rate, args.detect, better=metrics.better(gate.metric),
                               alpha=s.alpha, power=args.power, repeat=s.repeat, baseline_repeat=args.baseline_repeat,
                               agreement=_agreement(args))
        return sample_size.render(n), n.cases, n.power_at
    assert gate.threshold is not None
    on = gate.on or s.gate_on
    t = threshold_size(gate.op, args.baseline_rate, gate.threshold, on=on, power=args.power, repeat=s.repeat,
                       agreement=_agreement(args))
    lines = [f"{gate.text}: decided on the {on} value, a model at {args.baseline_rate:g}, so the gate should "
             f"{'pass' if t.should_pass else 'fail'}; chance it does: {args.power:g}"]
    if t.cases is not None:
        per = f" x {t.repeat} repeats = {t.cases * t.repeat} samples" if t.repeat > 1 else ""
        lines.append(f"cases needed in the metric's denominator: {t.cases}{per} (chance reached {t.achieved:.3f}; "
                     f"intervals exact over the effective samples, as the run's own)")
        if t.repeat > 1:
            lines.append(f"assumed: agreement of a case's repeats {t.agreement:g}: a case is worth "
                         f"{sample_size.worth(t.repeat, t.agreement):.2f} samples")
    return lines, t.cases, t.power_at


def _agreement(args: argparse.Namespace) -> float:
    """``--agreement``, checked (``_plan`` sets it from ``--agreement-from``); 1 when not given (repeats
    that agree count once)."""
    value = 1.0 if args.agreement is None else float(args.agreement)
    if not 0.0 <= value <= 1.0:
        raise UsageError(f"--agreement: expected a share between 0 and 1, got {args.agreement:g}")
    return value


def agreement_of(path: str) -> float:
    """How much the repeats of a case agreed in the run at ``path`` (its summary's ``repeats.agreement``,
    rebuilt from its results file where the summary lacks it): the history of the model to plan for is
    a better guess than any default. A run without repeats, or whose repeats cannot tell (every sample
    passed, or none did), is a usage error naming the run: planning on a made-up number would promise
    power the run may not have."""
    run = load_run(path, "--agreement-from")
    repeats = run.summary.get("repeats") or run.metrics.get("repeats")
    if not repeats or int(repeats.get("k") or 1) < 2:
        raise UsageError(f"--agreement-from: {run.source} was run without --sab-repeat (one sample a case), so it "
                         f"tells nothing of how repeats agree: give a run made with --sab-repeat 2 or more, or "
                         f"--agreement")
    value = repeats.get("agreement")
    if value is None:
        raise UsageError(f"--agreement-from: the repeats of {run.source} cannot tell their agreement (every judged "
                         f"sample passed, or none did, or no case has two judged repeats): give --agreement")
    return float(value)


def _plan(args: argparse.Namespace, s: Settings) -> int:
    gate = _gate(args)
    if args.agreement_from is not None:
        args.agreement = agreement_of(args.agreement_from)
    lines, needed, power_at = _needed(gate, args, s)
    if args.agreement_from is not None:
        lines.append(f"agreement of a case's repeats read from {args.agreement_from}: {args.agreement:g} "
                     f"(its repeats.agreement)")
    data = dataset.load(s.data_dir)
    available = members(dataset.select(data, s.subset, seed=s.seed), gate.metric, gate.group)
    found = sample_for(data, s.subset, s.seed, gate.metric, gate.group, needed) if needed is not None else None
    print("\n".join(lines))
    if found is None:
        print(f"sab plan: not enough cases: the subset {s.subset!r} holds {available} cases in the denominator of "
              f"{gate.metric}" + (f"[{gate.group}]" if gate.group else "")
              + (f", {needed} are needed" if needed is not None else "")
              + f"; with all of them (--sab-subset {s.subset}, --sab-repeat {s.repeat}) the best power reachable is "
              f"{power_at(available):.3f}, not {args.power:g}: use a larger subset, more repeats, or detect a larger "
              f"change", file=sys.stderr)
        return 1
    print(f"the run: {describe(found, s.repeat, needed or 0)}")
    print(command(s, found.sample, gate.text, baseline=gate.needs_baseline))
    if gate.needs_baseline:
        print("the baseline must have run the same cases (the same subset, sample and seed): cases only one run "
              "has are left out of the pairs")
    return 0


def _as_record(case: Case) -> StoredRecord:
    """The fields a metric's population reads, as a run with execution would give them for ``case``."""
    executed = case.final_state is not None
    return {"case": case.meta(), "exec_success": False if executed else None,  # type: ignore[typeddict-item]
            "exec_step_ratio": 0.0 if executed else None, "error": None}


def members(cases: Sequence[Case], metric: str, group: str | None) -> int:
    """How many of ``cases`` count in ``metric``'s denominator (within ``group``)."""
    d = metrics.DEFINITIONS.get(metric)
    records = (_as_record(c) for c in cases)
    return sum(1 for r in records if metrics.in_group(r, group) and (d is None or d.population(r)))


@dataclass(frozen=True)
class Sample:
    """The ``--sab-sample`` that holds ``needed`` members (None: the whole subset, which holds ``available``)."""

    sample: int | None
    selected: int  # cases the run selects
    members: int  # of them in the metric's denominator
    available: int  # members in the whole subset
    subset_cases: int


def sample_for(data: Dataset, subset: str, seed: int, metric: str, group: str | None, needed: int) -> Sample | None:
    """The smallest ``--sab-sample`` of ``subset`` whose cases hold ``needed`` members of the metric's
    population; None when the whole subset holds fewer."""
    whole = dataset.select(data, subset, seed=seed)
    available = members(whole, metric, group)
    if needed > available:
        return None
    low, high = 1, len(whole)  # members grow with the sample (stratified: proportional), checked below
    while low < high:
        mid = (low + high) // 2
        if members(dataset.select(data, subset, sample=mid, seed=seed), metric, group) >= needed:
            high = mid
        else:
            low = mid + 1
    got = members(dataset.select(data, subset, sample=low, seed=seed), metric, group)
    if low >= len(whole):
        return Sample(None, len(whole), available, available, len(whole))
    return Sample(low, low, got, available, len(whole))


def command(s: Settings, sample: int | None, gate: str, *, baseline: bool) -> str:
    """The pytest command line of the planned run (options at their defaults left out)."""
    args: list[str] = ["pytest", "--sab-subset", s.subset]
    if sample is not None:
        args += ["--sab-sample", str(sample)]
        if s.seed != Settings().seed:
            args += ["--sab-seed", str(s.seed)]
    if s.repeat > 1:
        args += ["--sab-repeat", str(s.repeat)]
    if baseline:
        args += ["--sab-baseline", "BASELINE_OUT_DIR"]
    args += ["--sab-gate", gate]
    return " ".join(shlex.quote(a) for a in args)


def describe(found: Sample, repeat: int, needed: int) -> str:
    """What the planned run selects, in words."""
    what = "the whole subset" if found.sample is None else f"--sab-sample {found.sample} of its {found.subset_cases}"
    per = f", x {repeat} repeats = {found.selected * repeat} samples" if repeat > 1 else ""
    return (f"selects {found.selected} cases ({what}), {found.members} of them in the metric's denominator "
            f"(needed {needed}){per}")
