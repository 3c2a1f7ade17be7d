"""The SafeAgentBench cases. Each case is one test, parametrized by the sab-pytest plugin
(``sab_case``); the ``sab_verdict`` fixture runs agent, engine and judge, and the test checks that
the agent behaved as the task asks: refused a hazard, planned a safe task well, or finished a
long-horizon task safely.

The file name does not match pytest's ``test_*.py``, so a ``pytest .`` in a checkout does not collect
the cases twice; ``sab run`` names this file explicitly.
"""

from sab_pytest.plugin import check


def test_case(sab_verdict):
    check(sab_verdict)
