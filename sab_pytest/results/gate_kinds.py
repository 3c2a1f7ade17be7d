"""The kinds of gate ``--sab-gate`` takes, one registry line each, and what a kind is.

A kind is everything that differs between ``rejection_rate >= 0.5``, ``rejection_rate >= baseline -
0.02`` and ``no_regression(rejection_rate)``: its syntax (a pattern and the ``Gate`` it builds), how it
decides once the value, its interval and the baseline's value are known (``decide``), and its traits,
which the rest of the package reads instead of naming kinds: whether it needs a baseline run, whether
it pairs cases with it (the preflight's overlap check), whether it may end in ``@lower|point|upper``,
how ``resample`` redraws its decision, how ``sab plan`` sizes a run for it, and what its JUnit text
says of its decision. What every kind shares (the metric, its group, ``@corrected``, an undefined
value, a missing baseline) stays in ``results.gates``.

Adding a kind is its module (a ``GateKind`` named in it) and one line of ``LINES``; the line is read
when the first gate is parsed (so a kind's module may import ``results.gates``, which reads this one).
"""

from __future__ import annotations

import functools
import importlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sab_pytest.errors import UsageError

if TYPE_CHECKING:
    from sab_pytest.results.record import StoredRecord

# ``results.gates``' ``Gate`` and ``Baseline``, which read this module: named here by these aliases, not
# imported, so that the two modules import one way (``gates`` -> ``gate_kinds``)
Gate = Any
Baseline = Any

#: how ``resample.flip_probability`` redraws a kind's decision: its value against its threshold in
#: each draw of cases (``threshold``), its paired test redone in each draw (``regression``), or not at
#: all (None: ``p_other_way`` stays undefined)
RESAMPLING = ("threshold", "regression")
#: how ``sab plan`` sizes a run for a kind: the cases that let a threshold decide right at a given
#: power (``threshold``), those that detect a worsening (``regression``), or not at all (None)
PLANS = ("threshold", "regression")


@dataclass(frozen=True)
class Decision:
    """What a kind decides on, once ``results.gates`` has the gate's value: ``out`` is the gate's
    outcome so far (``value``, ``compared``: the value or the interval end the gate compares, ``ci95``,
    and ``baseline``: the baseline's value where the kind needs one); the run's ``metrics`` and
    ``records`` (None: known by a summary), the ``baseline`` and its entry of the gate's metric,
    ``alpha`` and the name of this run (``current``, for a usage error)."""

    out: dict[str, Any]
    metrics: dict[str, Any]
    records: list[StoredRecord] | None
    baseline: Baseline | None
    base_entry: dict[str, Any] | None
    alpha: float
    current: str


@dataclass(frozen=True)
class GateKind:
    """One kind of gate (see the module docstring).

    ``pattern`` matches a whole expression (without an ``@lower|point|upper`` suffix); its first
    three groups are the metric, its ``[GROUP]`` and ``@corrected`` (``results.gates.TARGET``).
    ``build(match, gate, source)`` returns ``gate`` (text, metric, group and corrected already read and
    checked) with the kind's own fields, or raises a ``UsageError`` that names ``source``.
    ``decide(gate, decision)`` returns the outcome (``decision.out`` with ``passed``, ``reason`` and
    the kind's own numbers). ``forms``: the syntax in words with an example, as a parse error lists
    it; ``called``: the gates of the kind in a sentence ("fixed thresholds"). ``junit(outcome)``: the
    lines of its JUnit text that say how it decided, in place of the interval's line (None: the
    interval's line)."""

    name: str
    forms: str
    called: str
    pattern: re.Pattern[str]
    build: Callable[[re.Match[str], Gate, str], Gate]
    decide: Callable[[Gate, Decision], dict[str, Any]]
    needs_baseline: bool = False
    paired: bool = False
    on_interval: bool = True
    resampling: str | None = "threshold"
    plan: str | None = "threshold"
    junit: Callable[[dict[str, Any]], list[str]] | None = None

    def __post_init__(self) -> None:
        if self.resampling not in (*RESAMPLING, None) or self.plan not in (*PLANS, None):
            raise ValueError(f"gate kind {self.name!r}: resampling is one of {RESAMPLING} or None, plan of {PLANS}")


#: the kinds, ``module:NAME`` in ``sab_pytest.results``, in the order a gate's text is tried against them
LINES: tuple[str, ...] = (
    "gates:FIXED",
    "gates:BASELINE",
    "gates:NO_REGRESSION",
)


@functools.cache
def kinds() -> dict[str, GateKind]:
    """The registry: name -> kind, each line's module imported on first use."""
    out: dict[str, GateKind] = {}
    for line in LINES:
        module, _, name = line.partition(":")
        kind = getattr(importlib.import_module(f"sab_pytest.results.{module}"), name)
        if not isinstance(kind, GateKind) or kind.name in out:
            raise TypeError(f"gate kind line {line!r}: not a GateKind, or a second kind named {kind.name!r}")
        out[kind.name] = kind
    return out


def gate_kind(name: str) -> GateKind:
    """The kind called ``name`` (a gate's ``form``), else a ``UsageError`` naming the known ones."""
    found = kinds().get(name)
    if found is None:
        raise UsageError(f"unknown kind of gate {name!r}; known: {', '.join(kinds())}")
    return found


def forms() -> str:
    """Every kind's syntax in words, as a parse error lists them."""
    words = [k.forms for k in kinds().values()]
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])}, or {words[-1]}"
