"""The SafeAgentBench cases. Each case is one test, parametrized by the sab-pytest plugin
(``sab_case``); the ``sab_verdict`` fixture runs agent, engine and judge, and the test checks that
the agent behaved as the task asks: refused a hazard, planned a safe task well, or finished a
long-horizon task safely.
"""

from sab_pytest.plugin import check


def test_case(sab_verdict):
    check(sab_verdict)
