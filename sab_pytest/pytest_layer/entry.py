"""The hooks and fixtures pytest finds in the plugin (``sab_pytest.plugin`` names them), light enough
for every pytest run of the environment.

The plugin loads in every pytest process where it is installed, xdist workers included, and most of
those runs never ask for the benchmark. Importing the benchmark there (the dataset, numpy, the model
SDK, Pillow) would cost each of them a few tenths of a second for nothing. So this module imports
only the option table and the activation rule (``options``, ``activation``, ``state``); each hook
imports the module that does the work inside its body, once the run has asked for the benchmark
(``SETTINGS`` is in the stash) or a test has requested ``sab_case``.
"""

from __future__ import annotations

import time
from collections.abc import Generator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from sab_pytest.pytest_layer import activation
from sab_pytest.pytest_layer.options import given, option_names
from sab_pytest.pytest_layer.state import (
    AGGREGATOR,
    LAST_SETUP,
    RECORD_KEY,
    RUNTIME,
    SETTINGS,
    SETUP_STARTED,
    is_controller,
)

if TYPE_CHECKING:
    from sab_pytest.dataset import Case
    from sab_pytest.results import StoredRecord
    from sab_pytest.settings import Settings


def check(record: StoredRecord) -> None:
    """The assertion of a benchmark case: fail with what the agent did (``case_tests.check``)."""
    from sab_pytest.pytest_layer.case_tests import check as check_record  # start-up: only once the run is on

    check_record(record)


def requested(config: pytest.Config) -> bool:
    """The activation rule (``activation``): an option of ours given, or the cases' paths collected."""
    if activation.names_option(given(config), option_names(config)):
        return True
    case_paths = config.getini("sab_cases")
    if case_paths and activation.collects_cases(config.args, config.invocation_params.dir, case_paths):
        return True
    # a path written on the command line or in testpaths (not the current folder: every bare run of the
    # environment would search its whole project) that is or holds a team's own case file
    return config.args_source != pytest.Config.ArgsSource.INVOCATION_DIR and activation.collects_case_files(
        config.args, config.invocation_params.dir, config.getini("norecursedirs"))


def pytest_configure(config: pytest.Config) -> None:
    if config.option.help:
        return  # help must work whatever else is wrong
    if requested(config):
        from sab_pytest.pytest_layer.configure import activate  # start-up: only once the run is on

        activate(config)
    elif is_controller(config):
        config.pluginmanager.register(_LateGate(config), "sab-late-gate")


class _LateGate:
    """Registered on the controller of a run that is off: when a benchmark result arrives anyway
    (a test requested ``sab_case`` without any option; under xdist only the workers collect), turn
    the plugin on then, so the result is counted. Otherwise it does nothing."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if AGGREGATOR in self.config.stash or not any(k == RECORD_KEY for k, _ in report.user_properties):
            return
        from sab_pytest.pytest_layer.configure import activate  # start-up: only once the run is on

        activate(self.config, late=True)
        self.config.stash[AGGREGATOR].pytest_runtest_logreport(report)


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    """A team's own case file (``*.sab.yaml``, ``*.sab.jsonl``) is collected as a module of cases
    (``collection.CaseFile``); any other file costs one test of its name's end."""
    if not file_path.name.endswith(activation.CASE_FILE_SUFFIXES):
        return None
    from sab_pytest.pytest_layer.collection import collect_file  # start-up: only once the run is on

    return collect_file(file_path, parent)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "sab_case" not in metafunc.fixturenames:
        return
    from sab_pytest.pytest_layer.configure import parametrize_cases  # start-up: only once the run is on

    parametrize_cases(metafunc)


def pytest_unconfigure(config: pytest.Config) -> None:
    aggregator = config.stash.get(AGGREGATOR, None)
    if aggregator is not None:
        aggregator.close()


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    if SETTINGS in session.config.stash:
        from sab_pytest.pytest_layer.collection import locate_cases  # start-up: only once the run is on
        from sab_pytest.pytest_layer.fixtures import collection_finished  # start-up: only once the run is on

        locate_cases(session)
        collection_finished(session)


@pytest.hookimpl(tryfirst=True)  # before the item's fixtures, the runtime among them, are set up
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Note when the item's setup began: a case's wall-clock limit (pytest-timeout's) counts from
    then, so that the case ends itself before pytest-timeout ends its item."""
    if SETTINGS in item.config.stash:
        item.stash[SETUP_STARTED] = now = time.monotonic()
        item.config.stash[LAST_SETUP] = (item, now)


@pytest.hookimpl(tryfirst=True)  # before an xdist worker serializes the report for the controller
def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """A case's record travels once, on its setup report (the fixture attaches it there); the call
    and teardown reports of the item carry the same user properties, and a record with its model
    transcripts is some 10 KB: sent three times per case, it costs the controller, which
    deserializes every worker's reports, more than the case itself."""
    if report.when != "setup" and any(k == RECORD_KEY for k, _ in report.user_properties):
        report.user_properties = [(k, v) for k, v in report.user_properties if k != RECORD_KEY]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, Any]:
    if SETTINGS not in item.config.stash:
        return (yield)
    from sab_pytest.pytest_layer.case_tests import recorded, shorten_traceback  # start-up: only once the run is on

    shorten_traceback(item, call)
    report: pytest.TestReport = yield
    return recorded(item, call, report)


def pytest_sessionfinish(session: pytest.Session) -> None:
    runtime = session.config.stash.get(RUNTIME, None)
    if runtime is not None:
        runtime.runner.stop()
        runtime.close()


@pytest.fixture(scope="session")
def sab_settings(pytestconfig: pytest.Config) -> Settings:
    return pytestconfig.stash[SETTINGS]


@pytest.fixture(scope="session")
def sab_runtime(request: pytest.FixtureRequest) -> Any:
    """The process's runtime and case runner (``fixtures.runtime``)."""
    from sab_pytest.pytest_layer.fixtures import runtime  # start-up: only once the run is on

    return runtime(request.session)


@pytest.fixture(scope="session")
def _sab_resumed(request: pytest.FixtureRequest) -> dict[str, StoredRecord]:
    from sab_pytest.pytest_layer.fixtures import resumed  # start-up: only once the run is on

    return resumed(request.config)


@pytest.fixture
def sab_verdict(sab_case: Case, sab_runtime: Any, _sab_resumed: dict[str, StoredRecord],
                request: pytest.FixtureRequest) -> StoredRecord:
    """The case evaluated (setup phase), as its JSON record (``fixtures.verdict``)."""
    from sab_pytest.pytest_layer.fixtures import verdict  # start-up: only once the run is on

    return verdict(sab_case, sab_runtime, _sab_resumed, request)
