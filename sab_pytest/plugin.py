"""The pytest entry point (``pytest11 = sab_pytest.plugin``): an index of the pytest layer.

Every hook and fixture lives in ``sab_pytest.pytest_layer``, the only code that imports pytest or
xdist; this module names them so that pytest finds them in one plugin. They are light
(``pytest_layer.entry``): a run that does not ask for the benchmark imports its option table and
nothing more. Flow of one run::

    options.pytest_addoption        the options (from the table in ``sab_pytest.settings``; ``aliases``)
    entry.pytest_configure          the activation rule; then ``configure.activate``: settings validated,
                                    the controller's Aggregator
    entry.pytest_collect_file       a team's own case files (``*.sab.yaml``) as modules of cases (``collection``)
    entry.pytest_generate_tests     the cases as parametrized items (markers from ``collection``)
    workers:    sab_verdict fixture -> Runtime.evaluate (``sab_pytest.run``) -> record
                record travels as report.user_properties (survives a crashed worker)
                case_tests.check: the case's assertion (``--sab-case-tests record``: a recorded pass)
    controller: aggregator.Aggregator: the run-level checks before any case; each record written
                as it arrives; at the end ``run.finish`` writes summary, reports and decides gates,
                ``junit_gates`` sends each gate to every reporter as a test report;
                ``terminal`` prints the table

The plugin loads in every pytest run of its environment, so it does nothing unless the run asks
for the benchmark (the rule is in ``pytest_layer.activation``).
"""

from __future__ import annotations

from sab_pytest.pytest_layer.entry import _sab_resumed as _sab_resumed  # pytest finds fixtures here, too
from sab_pytest.pytest_layer.entry import (
    check,
    pytest_collect_file,
    pytest_collection_finish,
    pytest_configure,
    pytest_generate_tests,
    pytest_runtest_logreport,
    pytest_runtest_makereport,
    pytest_runtest_setup,
    pytest_sessionfinish,
    pytest_unconfigure,
    sab_runtime,
    sab_settings,
    sab_verdict,
)
from sab_pytest.pytest_layer.options import pytest_addoption

# What a benchmark's tests use (``check`` and the ``sab_*`` fixtures) and the hooks pytest calls.
__all__ = [
    "check", "pytest_addoption", "pytest_collect_file", "pytest_collection_finish", "pytest_configure",
    "pytest_generate_tests",
    "pytest_runtest_logreport", "pytest_runtest_makereport", "pytest_runtest_setup", "pytest_sessionfinish",
    "pytest_unconfigure",
    "sab_runtime", "sab_settings", "sab_verdict",
]
