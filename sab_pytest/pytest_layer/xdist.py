"""Cases and xdist: each worker knows its cases up front, and never gives away one it started.

Why: a worker's case runner (``run.case_runner``) runs whole cases ahead of pytest's items, so it
must know which cases the worker will run. xdist's default ``load`` scheduling hands out a couple of
items at a time, which leaves nothing to run ahead; its ``worksteal`` scheduling hands each worker
an even share at the start and lets an idle worker take over part of another's queue, but the
worker gives away the tail of its queue without knowing that the runner may have started (or
finished) those cases: they would run twice.

Controller side, ``BenchmarkScheduling`` (returned by ``CaseDistribution.pytest_xdist_make_scheduler``
when ``--dist`` is ``load``, xdist's default with ``-n``): once the workers' collections are in, a
collection holding benchmark cases is scheduled by ``CaseScheduling`` (work stealing that remembers
which cases a worker refused to give up and never asks for them again); any other collection by
xdist's own ``LoadScheduling``, unchanged.

Worker side, ``WorkerQueue``: reads the worker's queue (the item indices xdist will run next, in
order) for the runner, and replaces the worker's answer to a steal request so that it gives up
only the requested cases the runner has not started, atomically under the runner's lock.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from xdist.scheduler import LoadScheduling, WorkStealingScheduling
from xdist.scheduler.worksteal import MIN_PENDING, NodePending

from sab_pytest.pytest_layer.state import CASE_ID, RUN_STORE_KEY
from sab_pytest.settings import Settings


class CaseScheduling(WorkStealingScheduling):
    """xdist's work stealing, except that a case a worker refused to give up (it started it) is
    never asked for again, and a steal request asks only for cases that may still be unstarted."""

    def __init__(self, config: Any, log: Any = None) -> None:
        super().__init__(config, log)
        self.kept: set[int] = set()  # indices a worker kept: started there
        self._asked: list[int] = []

    def remove_pending_tests_from_node(self, node: Any, indices: Sequence[int]) -> None:
        self.kept.update(set(self._asked) - set(indices))
        self._asked = []
        super().remove_pending_tests_from_node(node, indices)

    def remove_node(self, node: Any) -> str | None:
        self.kept.difference_update(self.node2pending.get(node, ()))  # re-queued: anyone may start them
        if self.steal_requested_from_node is node:
            self._asked = []
        return super().remove_node(node)

    def check_schedule(self) -> None:
        """As ``WorkStealingScheduling.check_schedule``; the steal asks for the second half of the
        victim's cases that are neither running nor next (the first ``MIN_PENDING``) nor kept."""
        nodes_up = [NodePending(node, pending) for node, pending in self.node2pending.items()
                    if not node.shutting_down]

        def idle_nodes() -> list[Any]:
            return [node for node, pending in nodes_up if len(pending) < MIN_PENDING]

        if not idle_nodes():
            return
        if self.pending:
            idle = idle_nodes()
            for i, node in enumerate(idle):
                self._send_tests(node, len(self.pending) // (len(idle) - i))
            if not idle_nodes():
                return
        if self.steal_requested_from_node is not None:
            return

        def stealable(pending: list[int]) -> list[int]:
            return [i for i in pending[MIN_PENDING:] if i not in self.kept]

        victim = max(nodes_up, key=lambda np: len(stealable(np.pending)), default=None)
        candidates = stealable(victim.pending) if victim is not None else []
        if not candidates:
            for node in idle_nodes():  # nothing left to take: let idle workers finish
                node.shutdown()
            return
        assert victim is not None
        self._asked = candidates[-max(1, len(candidates) // 2):]
        victim.node.send_steal(self._asked)
        self.steal_requested_from_node = victim.node


class BenchmarkScheduling:
    """``CaseScheduling`` for a collection with benchmark cases, xdist's ``LoadScheduling`` for any
    other; both see every node and collection until the choice is made at ``schedule``."""

    def __init__(self, config: Any, log: Any, is_case: Callable[[str], bool]) -> None:
        self._is_case = is_case
        self._options = (CaseScheduling(config, log), LoadScheduling(config, log))
        self.chosen: CaseScheduling | LoadScheduling | None = None

    def _current(self) -> Any:
        return self.chosen if self.chosen is not None else self._options[0]

    @property
    def nodes(self) -> list[Any]:
        return self._current().nodes

    @property
    def collection_is_completed(self) -> bool:
        return self._current().collection_is_completed

    @property
    def tests_finished(self) -> bool:
        return self._current().tests_finished

    @property
    def has_pending(self) -> bool:
        return self._current().has_pending

    def add_node(self, node: Any) -> None:
        for option in self._targets():
            option.add_node(node)

    def add_node_collection(self, node: Any, collection: Sequence[str]) -> None:
        for option in self._targets():
            option.add_node_collection(node, collection)

    def remove_node(self, node: Any) -> str | None:
        results = [option.remove_node(node) for option in self._targets()]
        return results[0]

    def mark_test_complete(self, node: Any, item_index: int, duration: float = 0) -> None:
        self._current().mark_test_complete(node, item_index, duration)

    def mark_test_pending(self, item: str) -> None:
        self._current().mark_test_pending(item)

    def remove_pending_tests_from_node(self, node: Any, indices: Sequence[int]) -> None:
        self._current().remove_pending_tests_from_node(node, indices)

    def schedule(self) -> None:
        if self.chosen is None:
            first = self._options[0]
            collection = next(iter(first.node2collection.values()), [])
            self.chosen = first if any(self._is_case(nodeid) for nodeid in collection) else self._options[1]
        self.chosen.schedule()

    def _targets(self) -> tuple[Any, ...]:
        return (self.chosen,) if self.chosen is not None else self._options


def find_interactor(config: Any) -> Any | None:
    """xdist's worker loop object in this process (None outside an xdist worker). It is executed
    from xdist's source by execnet, so it is found by its shape, not imported."""
    if not hasattr(config, "workerinput"):
        return None
    for plugin in config.pluginmanager.get_plugins():
        if type(plugin).__name__ == "WorkerInteractor" and hasattr(plugin, "torun") and hasattr(plugin, "steal"):
            return plugin
    return None


class WorkerQueue:
    """The item indices this worker will run, in order, and a steal answer that keeps started cases.

    ``started(index)`` says whether the runner started the case of item ``index``; it is called
    under ``lock`` (the runner's), which ``install`` also holds while it removes stolen indices
    from the queue, so a case is either started here or given away, never both.
    """

    def __init__(self, interactor: Any, lock: Any, started: Callable[[int], bool]) -> None:
        self.interactor = interactor
        self.lock = lock
        self.started = started
        self._original_steal: Any = None

    def indices(self) -> list[int]:
        """The next item (already taken off the queue by xdist's loop) and the queue behind it."""
        nxt = getattr(self.interactor, "nextitem_index", None)
        with self.interactor.torun.lock() as queue:
            rest = [i for i in queue if isinstance(i, int)]
        return ([nxt] if isinstance(nxt, int) else []) + rest

    def install(self) -> None:
        """Answer the controller's steal requests with the requested indices not started here."""
        self._original_steal = self.interactor.__dict__.get("steal")
        self.interactor.steal = self._steal

    def uninstall(self) -> None:
        if self._original_steal is None:
            self.interactor.__dict__.pop("steal", None)
        else:
            self.interactor.steal = self._original_steal

    def _steal(self, indices: Sequence[int]) -> None:
        requested = set(indices)
        torun = self.interactor.torun
        with self.lock, torun.lock() as queue:
            given = [i for i in queue if i in requested and not self.started(i)]
            if given:
                keep = set(given)
                torun.replace([i for i in queue if i not in keep])
        self.interactor.sendevent("unscheduled", indices=given)


class CaseDistribution:
    """Controller side, registered with the ``Aggregator``: how the run's processes share its cases.

    * Under ``-n``, xdist's default ``load`` scheduling is replaced by one that gives each worker
      its share of cases up front and lets an idle worker take over cases another has not started
      (``BenchmarkScheduling`` above); for a collection without benchmark cases it is xdist's own
      ``load`` scheduling. Any other ``--dist`` is left alone.
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
            import tempfile

            self.run_store = Path(tempfile.mkdtemp(prefix="sab-run-store-"))
        return self.run_store

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        store = self.run_store_dir()
        if store is not None:
            node.workerinput[RUN_STORE_KEY] = str(store)

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        if self.run_store is not None:
            import shutil

            shutil.rmtree(self.run_store, ignore_errors=True)

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_make_scheduler(self, config: pytest.Config, log: Any) -> Any:
        if config.getvalue("dist") != "load":
            return None
        return BenchmarkScheduling(config, log, lambda nodeid: CASE_ID.search(nodeid) is not None)




def stop_scheduling(config: pytest.Config, session: pytest.Session | None, message: str) -> None:
    """Stop the run from the controller: no further item is scheduled or started.

    Without xdist, pytest stops after the running item (``session.shouldstop``). Under xdist the
    controller's loop reads its own ``DSession.shouldstop`` instead (a worker's stop reaches it
    with that worker's results): setting it shuts the workers down and the run ends as
    interrupted, like ``--maxfail``."""
    if session is not None:
        session.shouldstop = message
    dsession = config.pluginmanager.get_plugin("dsession")
    if dsession is not None and hasattr(dsession, "shouldstop") and not dsession.shouldstop:
        dsession.shouldstop = message
