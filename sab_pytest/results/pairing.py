"""The one pairing rule of ``no_regression`` gates and ``compare``: two runs are paired by case id.

Why by case and not by sample: the case is the unit (``resample``). Pairing repeat i of one run with
repeat i of the other is arbitrary (the repeats of a case are exchangeable), fails outright when the
runs have different K (a K = 1 baseline has no ``-r1`` samples), and counts K samples of one case as
K independent pairs. So each side contributes, per case, its pass fraction over its judged samples
in the metric's population (0 or 1 at K = 1); a case counts when both runs have it, and the cases
only one run has are left out (and said so). The test on the pairs is the exact McNemar test on the
cases whose fractions differ (a sign test on the per-case differences), which is McNemar's own test
when both runs have K = 1. Every count it reports is a count of cases.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from sab_pytest.results.metrics import RateDef, definitions, in_group
from sab_pytest.results.record import StoredRecord


@dataclass(frozen=True)
class CasePairs:
    """The cases both runs have in a rate's population, with each side's per-case pass fraction."""

    ids: tuple[str, ...]
    first: tuple[float, ...]
    second: tuple[float, ...]
    left_out: int  # cases in the population of one run only
    k_first: int  # the most samples of a case in each run (its --sab-repeat)
    k_second: int

    @property
    def n(self) -> int:
        return len(self.ids)

    @property
    def first_better(self) -> int:
        """Cases where the first run's pass fraction is higher (McNemar's ``b``)."""
        return sum(x > y for x, y in zip(self.first, self.second, strict=True))

    @property
    def second_better(self) -> int:
        return sum(y > x for x, y in zip(self.first, self.second, strict=True))

    def table(self) -> tuple[float, float, float, float]:
        """(both, first only, second only, neither) as expected counts of cases: a case adds x*y to
        ``both``, x*(1-y) to ``first only`` and so on, so at K = 1 it is the plain 2x2 table."""
        both = sum(x * y for x, y in zip(self.first, self.second, strict=True))
        first_only = sum(x * (1 - y) for x, y in zip(self.first, self.second, strict=True))
        second_only = sum((1 - x) * y for x, y in zip(self.first, self.second, strict=True))
        return both, first_only, second_only, self.n - both - first_only - second_only

    def describe(self) -> str:
        """How the cases were paired, for gate lines and compare's header."""
        k = "" if self.k_first == self.k_second == 1 else f", per-case pass fractions (K={self.k_first} vs " \
                                                          f"K={self.k_second})"
        return f"{self.n} paired cases, {self.left_out} left out{k}"


def _fractions(records: Iterable[StoredRecord], metric: str, group: str | None,
               protocol: str | None) -> tuple[dict[str, float], int]:
    """Per case id: the share of its judged samples in ``metric``'s population (and ``group``) that
    are a success under ``protocol``'s definition; and the most samples any case has. ``error_rate``
    counts every record."""
    d = definitions(protocol).get(metric)
    counts: dict[str, list[int]] = {}
    seen: dict[str, int] = {}
    for r in records:
        cid = str(r["case"]["id"])
        seen[cid] = seen.get(cid, 0) + 1
        if metric == "error_rate":
            member, success = True, bool(r.get("error"))
        elif r.get("error") or not isinstance(d, RateDef):
            continue
        else:
            member = d.population(r) and in_group(r, group)
            success = member and bool(d.success(r))
        if member:
            c = counts.setdefault(cid, [0, 0])
            c[0] += success
            c[1] += 1
    return {cid: k / n for cid, (k, n) in counts.items()}, max(seen.values(), default=1)


def pair_cases(metric: str, group: str | None, first: Iterable[StoredRecord],
               second: Iterable[StoredRecord], protocol: str | None = None) -> CasePairs | None:
    """The cases of ``metric`` (a rate, or ``error_rate``) in ``group`` that both runs judged, in
    sorted id order, both read under ``protocol``'s definition (the current run's: a baseline of the
    other protocol is compared by the same rule); None for a metric that is not a rate."""
    if metric != "error_rate" and not isinstance(definitions(protocol).get(metric), RateDef):
        return None
    a, k_a = _fractions(first, metric, group, protocol)
    b, k_b = _fractions(second, metric, group, protocol)
    ids = tuple(sorted(set(a) & set(b)))
    return CasePairs(ids, tuple(a[i] for i in ids), tuple(b[i] for i in ids), len(set(a) ^ set(b)), k_a, k_b)


def judged_cases(records: Iterable[StoredRecord]) -> set[str]:
    """The case ids a run judged (a case whose every record errored is not one)."""
    return {str(r["case"]["id"]) for r in records if not r.get("error")}


def common_cases(first: Iterable[StoredRecord], second: Iterable[StoredRecord]) -> tuple[int, int]:
    """(case ids both runs judged, case ids only one of them did), whatever the metric."""
    a, b = judged_cases(first), judged_cases(second)
    return len(a & b), len(a ^ b)


def min_paired_cases(alpha: float) -> int:
    """The fewest paired cases at which the one-sided exact test can see a regression at all
    (all of them worse: p = 0.5**n < alpha); below it a ``no_regression`` gate could never fail,
    so it is a usage error rather than a pass (5 at alpha 0.05)."""
    return max(1, math.floor(math.log(alpha) / math.log(0.5)) + 1)


def too_few(paired: int, alpha: float, runs: str) -> str | None:
    """The usage error of two runs that share too few judged cases (``common_cases``) to pair (None
    when enough); ``runs`` names both, e.g. ``"this run (out) and the baseline (base)"``."""
    need = min_paired_cases(alpha)
    if paired >= need:
        return None
    return (f"only {paired} cases judged in both {runs}; at least {need} are needed for the exact test to see "
            f"a regression at alpha {alpha:g}: run the same cases (--sab-subset, --sab-sample, --sab-seed)")
