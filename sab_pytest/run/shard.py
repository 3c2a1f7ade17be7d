"""Shards: a deterministic 1/N of the selected cases, for CI job matrices (``--sab-shard K/N``).

The cases a run selects (``--sab-subset``/``--sab-sample``, then pytest's ``-k``/``-m``) are sorted
by case id and dealt out like cards: the i-th goes to shard ``i % N + 1``. So the N shards of one
selection are disjoint, cover it exactly, differ in size by at most one, and do not depend on
collection order, xdist, or the machine. Every job of a matrix must select the same cases (same
subset, sample, seed, ``-k``, ``-m``); each shard records a fingerprint of the whole selection so
that ``merge`` can refuse shards that did not.

pytest-split (``--splits N --group K``) and pytest-shard (``--shard-id K --num-shards N``) cut a run
by their own rules (durations, hashes of node ids); a part either of them made is recorded the same
way (``part``), with the sharder's name, so that ``merge`` pools those parts as it pools ours.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import Any


def take(case_ids: Iterable[str], k: int, n: int) -> set[str]:
    """The ids of shard ``k`` of ``n`` (1-based) among ``case_ids``."""
    ordered = sorted(set(case_ids))
    return {cid for i, cid in enumerate(ordered) if i % n == k - 1}


def fingerprint(case_ids: Iterable[str]) -> str:
    """A short hash of the selected ids, equal for every shard of the same selection."""
    blob = "\n".join(sorted(set(case_ids))).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


#: the name ``--sab-shard``'s parts record as their sharder
OWN = "--sab-shard"


def describe(case_ids: Iterable[str], k: int, n: int) -> dict[str, Any]:
    """What a shard's summary records: which sharder, which shard, of how many, of which selection."""
    ids = sorted(set(case_ids))
    return {"sharder": OWN, "index": k, "count": n, "selected": len(ids), "cases": len(take(ids, k, n)),
            "selection": fingerprint(ids)}


def part(sharder: str, k: int, n: int, whole: Iterable[str], cases: int) -> dict[str, Any]:
    """What the summary records of part ``k`` of ``n`` that another plugin (``sharder``) cut from
    the settings' selection ``whole`` (case ids), ``cases`` of them in this part. That plugin's
    rule is its own, so the fingerprint is of the settings' selection (subset, sample, seed), the
    one thing every part of its run shares before the cut."""
    ids = sorted(set(whole))
    return {"sharder": sharder, "index": k, "count": n, "selected": len(ids), "cases": cases,
            "selection": fingerprint(ids)}
