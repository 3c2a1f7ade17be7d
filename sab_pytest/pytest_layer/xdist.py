"""How the run's processes share its cases (``CaseDistribution``) and its endpoint check
(``endpoint_check``), and stopping xdist's scheduling.

What this relies on of xdist beyond its hooks lives in ``xdist_adapter``, which also checks that
the installed xdist has it; here the check's answer picks the scheduler: ours, or (with one
warning line) xdist's own.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from sab_pytest.pytest_layer import terminal, xdist_adapter
from sab_pytest.pytest_layer.state import CASE_ID, ENDPOINT_CHECK_KEY, RUN_STORE_KEY
from sab_pytest.run.endpoint_check import check_endpoints, start_endpoint_check, wait_for_worker
from sab_pytest.settings import Settings

if TYPE_CHECKING:
    from sab_pytest.run.breaker import RunState


class CaseDistribution:
    """Controller side, registered with the ``Aggregator``: how the run's processes share its cases.

    * Under ``-n``, xdist's default ``load`` scheduling is replaced by one that gives each worker
      its share of cases up front and lets an idle worker take over cases another has not started
      (``xdist_adapter.BenchmarkScheduling``); for a collection without benchmark cases it is
      xdist's own ``load`` scheduling. Any other ``--dist`` is left alone.
    * When the installed xdist lacks what that relies on (``xdist_adapter.missing``, checked by
      the controller and by each worker), xdist schedules on its own, the workers run no case
      ahead, and one warning line says so, naming the version and the missing piece.
    * With the response cache off (``--sab-no-cache``), the run still makes each distinct model
      call once (the dataset repeats some instructions): its processes share a run store, a
      response cache in a temporary directory that lives as long as the run.
    """

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.run_store: Path | None = None

    def run_store_dir(self) -> Path | None:
        """The run store, created on first use; None when the cache is on or no call is made."""
        s = self.settings
        if self.run_store is None and s.cache_dir is None and not (s.offline_agent and s.judge_model == "rules"):
            self.run_store = Path(tempfile.mkdtemp(prefix="sab-run-store-"))
        return self.run_store

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        store = self.run_store_dir()
        if store is not None:
            node.workerinput[RUN_STORE_KEY] = str(store)

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        if self.run_store is not None:
            shutil.rmtree(self.run_store, ignore_errors=True)

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_make_scheduler(self, config: pytest.Config, log: Any) -> Any:
        """Called once per run on the controller, as xdist builds its scheduler: the check of the
        controller's xdist, then the scheduler (each worker checks its own, ``find_interactor``)."""
        problems = xdist_adapter.missing()
        if problems:
            terminal.say(config, xdist_adapter.fallback_line(problems), yellow=True)
            return None
        if config.getvalue("dist") != "load":
            return None
        return xdist_adapter.BenchmarkScheduling(config, log, lambda nodeid: CASE_ID.search(nodeid) is not None)


def endpoint_check(config: pytest.Config, settings: Settings, run_state: RunState | None) -> Callable[[], None]:
    """Start the run's endpoint check (``run.endpoint_check``); the returned function waits for its
    verdict and raises a failed one. Under xdist the first worker makes it (``EndpointCheckHandover``)."""
    if not settings.uses_api:
        return lambda: None
    if run_state is None or not config.pluginmanager.has_plugin("dsession"):
        return start_endpoint_check(settings)
    handover = EndpointCheckHandover(settings, run_state.directory)
    config.pluginmanager.register(handover, "sab-endpoint-check")
    return handover.wait


class EndpointCheckHandover:
    """Controller side under xdist: the endpoint check handed to the first worker xdist sets up,
    which imports the SDK for its cases anyway (``run.endpoint_check`` says why and how the
    controller waits); checked by the controller itself when no worker could take it."""

    def __init__(self, settings: Settings, directory: Path) -> None:
        self.settings = settings
        self.directory = directory
        self.alive: Callable[[], bool] | None = None  # whether that worker's process still talks to us

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        alive = getattr(getattr(node, "gateway", None), "hasreceiver", None)  # execnet: False once it ended
        if self.alive is None and callable(alive):
            self.alive = alive
            node.workerinput[ENDPOINT_CHECK_KEY] = str(self.directory)

    def wait(self) -> None:
        if self.alive is None:
            check_endpoints(self.settings)
        else:
            wait_for_worker(self.settings, self.directory, self.alive)


def stop_scheduling(config: pytest.Config, session: pytest.Session | None, message: str) -> None:
    """Stop the run from the controller: no further item is scheduled or started.

    Without xdist, pytest stops after the running item (``session.shouldstop``). Under xdist the
    controller's loop reads its own ``DSession.shouldstop`` instead (a worker's stop reaches it
    with that worker's results): setting it shuts the workers down and the run ends as
    interrupted, like ``--maxfail``."""
    if session is not None:
        session.shouldstop = message
    xdist_adapter.stop_controller_loop(config, message)
