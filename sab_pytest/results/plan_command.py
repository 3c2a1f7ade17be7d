"""``plan``'s answer as a command: the ``--sab-sample`` and ``--sab-repeat`` to give for a subset.

Why a separate step: ``results.plan`` counts cases in the metric's denominator (the hazards of
``rejection_rate``, the fire hazards of ``rejection_rate[fire_hazard]``), but a run is asked for a
number of cases drawn from the whole subset. The seeded stratified sample (``dataset.select``) is
what the run will draw, so the sample size is found by drawing it: the smallest ``--sab-sample``
whose cases hold enough members of the metric's population. When even the whole subset holds too
few, the answer is a failure that says so, with the power the whole subset reaches.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from sab_pytest.dataset import Case, Dataset, select
from sab_pytest.results.metrics import DEFINITIONS, in_group
from sab_pytest.results.record import StoredRecord


def _as_record(case: Case) -> StoredRecord:
    """The fields a metric's population reads, as a run with execution would give them for ``case``."""
    executed = case.final_state is not None
    return {"case": case.meta(), "exec_success": False if executed else None,  # type: ignore[typeddict-item]
            "exec_step_ratio": 0.0 if executed else None, "error": None}


def member(metric: str, group: str | None) -> Callable[[Case], bool]:
    """Whether a case counts in ``metric``'s denominator (within ``group``)."""
    d = DEFINITIONS.get(metric)

    def counts(case: Case) -> bool:
        rec = _as_record(case)
        return in_group(rec, group) and (d is None or d.population(rec))

    return counts


def members(cases: Sequence[Case], metric: str, group: str | None) -> int:
    counts = member(metric, group)
    return sum(1 for c in cases if counts(c))


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
    whole = select(data, subset, seed=seed)
    available = members(whole, metric, group)
    if needed > available:
        return None
    low, high = 1, len(whole)  # members grow with the sample (stratified: proportional), checked below
    while low < high:
        mid = (low + high) // 2
        if members(select(data, subset, sample=mid, seed=seed), metric, group) >= needed:
            high = mid
        else:
            low = mid + 1
    got = members(select(data, subset, sample=low, seed=seed), metric, group)
    if low >= len(whole):
        return Sample(None, len(whole), available, available, len(whole))
    return Sample(low, low, got, available, len(whole))


def command(subset: str, seed: int, sample: int | None, repeat: int, gate: str, *, baseline: bool,
            default_seed: int) -> str:
    """The pytest command line of the planned run."""
    args: list[str] = ["pytest", "--sab-subset", subset]
    if sample is not None:
        args += ["--sab-sample", str(sample)]
        if seed != default_seed:
            args += ["--sab-seed", str(seed)]
    if repeat > 1:
        args += ["--sab-repeat", str(repeat)]
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
