"""Many finished runs in one table (``sab board``): the layouts (``layouts``), the table and its
comparisons (``build``), and the family of tests it makes with their correction (``family``)."""

from sab_pytest.results.board.build import build_board, row_names
from sab_pytest.results.board.layouts import DEFAULT_LAYOUT, LAYOUTS

__all__ = ["DEFAULT_LAYOUT", "LAYOUTS", "build_board", "row_names"]
