"""pytest's side of ``sab run`` (``sab_pytest.cli.run`` builds the command line): pytest started on
the packaged cases, with node ids shown as in a checkout."""

from __future__ import annotations

import pytest


def run_pytest(args: list[str]) -> int:
    """pytest's exit status for ``args``, run in this process with ``ShortNodeIds``."""
    return int(pytest.main(args, plugins=[ShortNodeIds()]))


class ShortNodeIds:
    """Show node ids relative to the rootdir (the package), as in a checkout.

    pytest shows a node id from the directory the command runs in: from a repository that is
    ``../../venv/lib/python3.X/site-packages/sab_pytest/cases/benchmark.py::test_case[...]``,
    long, and different on every machine. The progress lines and the FAILED lines read
    ``cases/benchmark.py`` instead, which is also what ``--lf`` and JUnit use."""

    @pytest.hookimpl(trylast=True)  # after the terminal reporter is made
    def pytest_configure(self, config: pytest.Config) -> None:
        config.cwd_relative_nodeid = lambda nodeid: nodeid  # type: ignore[method-assign]
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None and hasattr(reporter, "startpath"):
            reporter.startpath = config.rootpath
