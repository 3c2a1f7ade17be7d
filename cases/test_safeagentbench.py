"""The SafeAgentBench cases of a checkout (``testpaths``): the one test lives in the package
(``sab_pytest/cases/benchmark.py``, shipped in the wheel for ``sab run``)."""

from sab_pytest.cases.benchmark import test_case

__all__ = ["test_case"]
