"""The layouts of a board: which metric of which group each column shows, named as the paper names it.

Table 2 of the paper (hazardous tasks with GPT-4) is the default: per hazard kind its rejection rate
(Rej), the share of hazards whose goal state was reached in the engine (SR(goal)), the share the LLM
judge found workable (SR(LLM)) and the share of steps executed (ER), then the long-horizon outcomes.
Each column is one entry of the summary's metric table (``metrics.compute``: ``overall`` or a group),
so a board shows what ``sab compare``, the gates and the report show, under the same names.
"""

from __future__ import annotations

from dataclasses import dataclass

from sab_pytest.categories import DISPLAY, SLUGS
from sab_pytest.results.metrics import LEVELS, MeanDef, definitions


@dataclass(frozen=True)
class Column:
    """One column: its header, the metric and group (None: overall) whose entry it shows."""

    label: str
    metric: str
    group: str | None = None

    @property
    def better(self) -> int:
        """+1 when higher is better, -1 when lower is, 0 when neither (the metric's own direction)."""
        return definitions(None)[self.metric].better

    @property
    def is_mean(self) -> bool:
        """Whether the column is a mean of per-case values (ER) rather than a rate."""
        return isinstance(definitions(None)[self.metric], MeanDef)


@dataclass(frozen=True)
class Layout:
    """A board's columns, with the title and a note on how they map to the paper."""

    title: str
    columns: tuple[Column, ...]
    note: str


_TABLE2 = (
    Column("Det Rej", "rejection_rate_detailed"),
    Column("Det SR(goal)", "execution_success_rate_unsafe_detailed"),
    Column("Det SR(LLM)", "unsafe_success_rate_detailed"),
    Column("Det ER", "execution_step_ratio_unsafe_detailed"),
    Column("Abs Rej", "rejection_rate_abstract"),
    Column("Abs SR", "unsafe_success_rate_abstract"),
    Column("LH C-Safe", "long_horizon_completed_safe_rate"),
    Column("LH C-Unsafe", "long_horizon_completed_unsafe_rate"),
    Column("LH Incomp", "long_horizon_incomplete_rate"),
)

LAYOUTS: dict[str, Layout] = {
    "table2": Layout(
        "Hazardous tasks (the paper's Table 2)", _TABLE2,
        "Det: detailed hazards; Abs: abstract hazards (pooled over their four levels, which hold equally many "
        "cases, so the paper's mean of Table 3's levels); LH: long-horizon tasks. Table 2's Time(s) is not "
        "measured."),
    "table3": Layout(
        "Abstract hazards by level (the paper's Table 3)",
        (*(Column(f"Rej {lv}", "rejection_rate", lv) for lv in LEVELS),
         *(Column(f"SR {lv}", "unsafe_success_rate", lv) for lv in LEVELS)),
        "L0 (most concrete) .. L3 (most abstract) are the paper's L1 .. L4; SR is the LLM judge's (SR(LLM))."),
    "long-horizon": Layout(
        "Long-horizon tasks", _TABLE2[6:],
        "completed and safe, completed but unsafe, incomplete: the three shares add up to 1."),
    "safe": Layout(
        "Safe detailed tasks (the control group of the paper's Fig. 4)",
        (Column("Safe SR(goal)", "execution_success_rate_safe"), Column("Safe SR(LLM)", "safe_success_rate"),
         Column("Safe ER", "execution_step_ratio_safe"), Column("Safe Rej", "safe_rejection_rate")),
        "Safe Rej is over-refusal: a safe task refused."),
    "categories": Layout(
        "Rejection rate per risk category (hazardous tasks)",
        tuple(Column(DISPLAY.get(slug, "unmapped label"), "rejection_rate", slug) for slug in (*SLUGS, "unmapped")),
        "detailed and abstract hazards of each of the paper's ten categories."),
}
DEFAULT_LAYOUT = "table2"
