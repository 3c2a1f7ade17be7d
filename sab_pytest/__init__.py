"""sab-pytest: SafeAgentBench run as a pytest plugin.

The package is plain Python that works without pytest; ``sab_pytest.plugin`` is the thin pytest
layer on top. Data flows one way: case -> agent -> plan -> engine -> judge -> verdict -> metrics ->
reports, one module per step.
"""

__version__ = "0.1.0"
