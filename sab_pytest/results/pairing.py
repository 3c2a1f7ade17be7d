"""The one pairing rule of ``no_regression`` gates and ``compare``: two runs are paired by case id.

Why by case and not by sample: the case is the unit (``clustered``). Pairing repeat i of one run with
repeat i of the other is arbitrary (the repeats of a case are exchangeable), fails outright when the
runs have different K (a K = 1 baseline has no ``-r1`` samples), and counts K samples of one case as
K independent pairs. So each side contributes, per case, its successes and judged samples in the
metric's population; a case counts when both runs have it, and the cases only one run has are left
out (and said so). The difference and its test are ``clustered.paired_difference``. Every count it
reports is a count of cases.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from sab_pytest.results import clustered
from sab_pytest.results.metrics import RateDef, definitions, in_group
from sab_pytest.results.record import StoredRecord


@dataclass(frozen=True)
class CasePairs:
    """The cases both runs have in a rate's population, with each side's per-case counts (same ids)."""

    first: clustered.Cases
    second: clustered.Cases
    left_out: int  # cases in the population of one run only
    k_first: int  # the most samples of a case in each run (its --sab-repeat)
    k_second: int

    @property
    def n(self) -> int:
        return self.first.n

    def difference(self, level: float = 0.95) -> clustered.Difference | None:
        """second - first over the paired cases (``clustered.paired_difference``)."""
        return clustered.paired_difference(self.first, self.second, level)

    def describe(self) -> str:
        """How the cases were paired, for gate lines and compare's header."""
        k = "" if self.k_first == self.k_second == 1 else f", repeats K={self.k_first} vs K={self.k_second}"
        return f"{self.n} paired cases, {self.left_out} left out{k}"


def _population(metric: str, group: str | None,
                protocol: str | None) -> tuple[Callable[[StoredRecord], bool], Callable[[StoredRecord], bool]]:
    """(members, success) of ``metric`` in ``group``: judged records of its population; ``error_rate``
    counts every record."""
    if metric == "error_rate":
        return (lambda r: True), (lambda r: bool(r.get("error")))
    d = definitions(protocol)[metric]
    assert isinstance(d, RateDef)
    return (lambda r: not r.get("error") and d.population(r) and in_group(r, group)), d.success


def pair_cases(metric: str, group: str | None, first: Iterable[StoredRecord],
               second: Iterable[StoredRecord], protocol: str | None = None) -> CasePairs | None:
    """The cases of ``metric`` (a rate, or ``error_rate``) in ``group`` that both runs judged, in
    sorted id order, both read under ``protocol``'s definition (the current run's: a baseline of the
    other protocol is compared by the same rule); None for a metric that is not a rate."""
    if metric != "error_rate" and not isinstance(definitions(protocol).get(metric), RateDef):
        return None
    members, success = _population(metric, group, protocol)
    first, second = list(first), list(second)
    a, b = clustered.cases_of(first, members, success), clustered.cases_of(second, members, success)
    ids = tuple(sorted(set(a.ids) & set(b.ids)))
    return CasePairs(a.subset(ids), b.subset(ids), len(set(a.ids) ^ set(b.ids)), _most(first), _most(second))


def _most(records: list[StoredRecord]) -> int:
    """The most samples any case has in a run (its K)."""
    seen: dict[str, int] = {}
    for r in records:
        cid = str(r["case"]["id"])
        seen[cid] = seen.get(cid, 0) + 1
    return max(seen.values(), default=1)


def judged_cases(records: Iterable[StoredRecord]) -> set[str]:
    """The case ids a run judged (a case whose every record errored is not one)."""
    return {str(r["case"]["id"]) for r in records if not r.get("error")}


def common_cases(first: Iterable[StoredRecord], second: Iterable[StoredRecord]) -> tuple[int, int]:
    """(case ids both runs judged, case ids only one of them did), whatever the metric."""
    a, b = judged_cases(first), judged_cases(second)
    return len(a & b), len(a ^ b)


def min_paired_cases(alpha: float) -> int:
    """The fewest paired cases a ``no_regression`` gate is tested on: as many as it takes for a run
    that lost every one of them (0.5**n < alpha) to count as evidence; fewer cases cannot show how
    much cases vary, so it is a usage error rather than a pass (5 at alpha 0.05)."""
    return max(1, math.floor(math.log(alpha) / math.log(0.5)) + 1)


def too_few(paired: int, alpha: float, runs: str) -> str | None:
    """The usage error of two runs that share too few judged cases (``common_cases``) to pair (None
    when enough); ``runs`` names both, e.g. ``"this run (out) and the baseline (base)"``."""
    need = min_paired_cases(alpha)
    if paired >= need:
        return None
    return (f"only {paired} cases judged in both {runs}; at least {need} are needed to test for "
            f"a regression at alpha {alpha:g}: run the same cases (--sab-subset, --sab-sample, --sab-seed)")
