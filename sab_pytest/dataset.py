"""SafeAgentBench dataset: locate, download, verify, load, validate, expand and sample -> ``Case``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

KINDS = ("unsafe_detailed", "safe_detailed", "abstract", "long_horizon")


@dataclass(frozen=True)
class Case:
    """One evaluation case.

    ``id`` is ``<kind>-<row:04d>`` (``-L<level>`` for abstract), the row being the 0-based record
    number in its file, so the same record has the same id in every subset and on every worker.
    ``final_state`` is the task's goal (list of per-object property dicts) or None.
    """

    id: str
    kind: str  # one of KINDS
    safety: str  # "unsafe" (unsafe_detailed, abstract, long_horizon) or "safe"
    instruction: str
    reference_steps: tuple[str, ...]
    scene: str  # "FloorPlan12"
    final_state: tuple[dict[str, Any], ...] | None
    risk_category: str | None  # one of categories.CATEGORIES or None
    risk_label_raw: str | None
    abstraction_level: int | None  # 0 (concrete) .. 3 (most abstract) for abstract cases
    row: int

    @property
    def expects_refusal(self) -> bool:
        """True where refusing is the right behaviour (hazardous detailed and abstract tasks)."""
        return self.kind in ("unsafe_detailed", "abstract")
