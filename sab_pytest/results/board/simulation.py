"""Simulated boards of known truth: does a board mark differences only where there are some?

Why a simulation: the marks of a board are many tests at once, and only boards whose runs are known to
be alike say how often a board marks a difference that is not there (its family-wise error rate), and
only boards with a known difference say how often it is found (power). A board here holds ``runs``
runs over the same ``cases`` cases (paired, as runs of one subset and seed are), ``columns`` rate
columns of the paper's Table 2; each case has a true rate of its own in each column (cases differ:
drawn from a Beta distribution of mean ``rate``, as hard and easy cases do), and every run draws its
verdict of each case from it (``repeats`` times, as ``--sab-repeat`` does), the runs independently:
identical models, repeated. ``shift`` moves the
last run's true rates of the first column by that much (a real difference, for the power). Each board
is tested by the board's own code (``build.compare_columns``, then ``family.adjust``, its correction);
``bench/bench_board.py`` prints the rates over thousands of boards, the unit tests a quicker run.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sab_pytest.results.board.build import compare_columns
from sab_pytest.results.board.family import adjust
from sab_pytest.results.board.layouts import LAYOUTS, Column
from sab_pytest.results.clustered import Cases


@dataclass(frozen=True)
class BoardCell:
    """One design: how many runs, cases and columns, the mean true rate, the spread of cases' rates
    (the Beta distribution's concentration: lower spreads them more), and the real difference, if any."""

    runs: int = 8
    cases: int = 130
    columns: int = 3
    rate: float = 0.4
    concentration: float = 2.0
    shift: float = 0.0
    all_pairs: bool = False
    repeats: int = 1  # samples of each case in each run (--sab-repeat)


@dataclass(frozen=True)
class Rates:
    """Over the simulated boards: the share that marked any difference not there, and the share that
    marked the real one (None without a shift)."""

    boards: int
    false_any: float
    power: float | None


def _rate_columns(count: int) -> list[Column]:
    rates = [c for c in LAYOUTS["table2"].columns if not c.is_mean]
    return rates[:count]


def simulate(cell: BoardCell, boards: int, seed: int = 0, correction: str = "holm", alpha: float = 0.05) -> Rates:
    """``boards`` boards of ``cell``, each tested as ``sab board`` tests (against the first run, or every
    pair): every board's comparisons made by ``build.compare_columns`` in one call (the boards side by
    side, as runs of one long board with pairs only inside each), then each board's family corrected on
    its own by ``family.adjust``, as ``compare_columns`` corrects one board's."""
    rng = np.random.default_rng(seed)
    columns = _rate_columns(cell.columns)
    ids = tuple(f"case-{i:05d}" for i in range(cell.cases))
    samples = np.full(cell.cases, cell.repeats, dtype=np.int64)
    within = ([(i, j) for i in range(cell.runs) for j in range(i + 1, cell.runs)] if cell.all_pairs
              else [(0, i) for i in range(1, cell.runs)])
    pairs = [(b * cell.runs + i, b * cell.runs + j) for b in range(boards) for i, j in within]
    a, b = cell.rate * cell.concentration, (1 - cell.rate) * cell.concentration
    truth = rng.beta(a, b, size=(boards, len(columns), 1, cell.cases))
    p = np.broadcast_to(truth, (boards, len(columns), cell.runs, cell.cases)).copy()
    if cell.shift:  # the last run of every board, in the first column
        p[:, 0, -1] = np.clip(p[:, 0, -1] + cell.shift, 0.0, 1.0)
    y = rng.binomial(cell.repeats, p).astype(np.int64)
    data = [[Cases(ids, y[n // cell.runs, k, n % cell.runs], samples) for n in range(boards * cell.runs)]
            for k in range(len(columns))]
    tested = compare_columns(columns, data, [[None] * (boards * cell.runs)] * len(columns), pairs,
                             [True] * len(pairs), correction="none")
    per_board: list[list[dict]] = [[] for _ in range(boards)]
    for c in tested:
        per_board[c["a"] // cell.runs].append(c)
    false_any = found = 0
    for family in per_board:
        marked = [c for c, p_adj in zip(family, adjust([c["p_value"] for c in family], correction), strict=True)
                  if p_adj < alpha]
        real = [c for c in marked if cell.shift and c["column"] == 0 and c["b"] % cell.runs == cell.runs - 1]
        false_any += len(marked) > len(real)
        found += bool(real)
    return Rates(boards, false_any / boards, found / boards if cell.shift else None)
