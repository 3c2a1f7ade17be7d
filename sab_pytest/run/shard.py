"""Shards: a deterministic 1/N of the selected cases, for CI job matrices (``--sab-shard K/N``).

The cases a run selects (``--sab-subset``/``--sab-sample``, then pytest's ``-k``/``-m``) are sorted
by case id and dealt out like cards: the i-th goes to shard ``i % N + 1``. So the N shards of one
selection are disjoint, cover it exactly, differ in size by at most one, and do not depend on
collection order, xdist, or the machine. Every job of a matrix must select the same cases (same
subset, sample, seed, ``-k``, ``-m``); each shard records a fingerprint of the whole selection so
that ``merge`` can refuse shards that did not.
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


def describe(case_ids: Iterable[str], k: int, n: int) -> dict[str, Any]:
    """What a shard's summary records: which shard, of how many, of which selection."""
    ids = sorted(set(case_ids))
    return {"index": k, "count": n, "selected": len(ids), "cases": len(take(ids, k, n)),
            "selection": fingerprint(ids)}
