"""Everything sab-pytest uses of xdist's internals, and the check that the installed xdist has it.

Why internals at all: a worker's case runner (``run.case_runner``) runs whole cases ahead of
pytest's items, so it must know which cases the worker will run, and a case it started must never
be given to another worker. xdist's ``load`` scheduling hands out a couple of items at a time
(nothing to run ahead); its ``worksteal`` scheduling hands each worker an even share up front and
lets an idle worker take over part of another's queue, but the victim gives away the tail of its
queue without knowing that the runner may have started those cases: they would run twice. So:

* controller side, ``BenchmarkScheduling``: for a collection holding benchmark cases,
  ``CaseScheduling`` (xdist's work stealing that never asks again for a case a worker kept, and
  asks only for cases that may be unstarted); for any other collection xdist's ``LoadScheduling``;
* worker side, ``WorkerQueue``: reads the worker's queue (``WorkerInteractor.torun`` and
  ``nextitem_index``) for the runner, and replaces the worker's ``steal`` so that it gives up only
  requested cases the runner has not started, atomically under the runner's lock;
* ``stop_controller_loop``: sets the controller loop's ``DSession.shouldstop`` (best effort).

None of this is xdist's public API, so ``missing()`` checks, before any of it is used (on the
controller as xdist builds its scheduler, in each worker as its runner starts), that the installed
xdist has exactly what the code here relies on: each name, each attribute
its methods assign, each method's parameters (those we call and those we override). When anything
is missing, the caller falls back to xdist's own scheduling and the workers run no case ahead
(``find_interactor`` returns None): slower, never wrong, since a case is then started only by its own
item and xdist gives away only items not yet started. ``tests/unit/pytest_layer/test_xdist_adapter.py`` runs the
check against the newest xdist in CI, so a change in xdist fails there first, naming the piece.
"""

from __future__ import annotations

import contextlib
import dis
import importlib
import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

WORKSTEAL = "xdist.scheduler.worksteal"
LOAD = "xdist.scheduler.load"
PROTOCOL = "xdist.scheduler.protocol"
REMOTE = "xdist.remote"
WORKERMANAGE = "xdist.workermanage"


@dataclass(frozen=True)
class Piece:
    """One thing the adapter relies on: ``module.owner.name``, with ``params`` (the parameters as
    ``_params`` renders them) for a method, or ``assigned`` for an instance attribute that a method
    of ``owner`` assigns. ``owner`` empty: a module-level name."""

    module: str
    owner: str
    name: str
    params: str | None = None
    assigned: bool = False

    def __str__(self) -> str:
        where = ".".join(p for p in (self.module, self.owner, self.name) if p)
        return f"{where}({self.params})" if self.params is not None else where


PIECES: tuple[Piece, ...] = (
    # controller: CaseScheduling subclasses WorkStealingScheduling, overrides and calls these
    Piece(WORKSTEAL, "", "MIN_PENDING"),
    Piece(WORKSTEAL, "", "NodePending"),
    Piece(WORKSTEAL, "WorkStealingScheduling", "__init__", "self, config, log=None"),
    Piece(WORKSTEAL, "WorkStealingScheduling", "check_schedule", "self"),
    Piece(WORKSTEAL, "WorkStealingScheduling", "remove_pending_tests_from_node", "self, node, indices"),
    Piece(WORKSTEAL, "WorkStealingScheduling", "remove_node", "self, node"),
    Piece(WORKSTEAL, "WorkStealingScheduling", "_send_tests", "self, node, num"),
    *(Piece(WORKSTEAL, "WorkStealingScheduling", attr, assigned=True)
      for attr in ("node2pending", "node2collection", "pending", "steal_requested_from_node")),
    Piece(LOAD, "", "LoadScheduling"),
    Piece(WORKERMANAGE, "WorkerController", "send_steal", "self, indices"),
    Piece(WORKERMANAGE, "WorkerController", "shutdown", "self"),
    Piece(WORKERMANAGE, "WorkerController", "shutting_down"),
    # worker: WorkerQueue reads the queue and replaces ``steal``, which the command handler must call
    Piece(REMOTE, "WorkerInteractor", "steal", "self, indices"),
    Piece(REMOTE, "WorkerInteractor", "sendevent", "self, name, **kwargs"),
    Piece(REMOTE, "WorkerInteractor", "torun", assigned=True),
    Piece(REMOTE, "WorkerInteractor", "nextitem_index", assigned=True),
    Piece(REMOTE, "TestQueue", "lock", "self"),
    Piece(REMOTE, "TestQueue", "replace", "self, iterable"),
)


def _module(name: str) -> ModuleType | None:
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def _params(fn: Callable[..., Any]) -> str:
    """A function's parameters as written in its ``def`` (names, ``*``/``**``, defaults), without
    annotations: what a caller or an override has to match."""
    parts: list[str] = []
    star = False
    for p in inspect.signature(fn).parameters.values():
        if p.kind is p.KEYWORD_ONLY and not star:
            parts.append("*")
        star = star or p.kind in (p.KEYWORD_ONLY, p.VAR_POSITIONAL)
        prefix = "*" if p.kind is p.VAR_POSITIONAL else "**" if p.kind is p.VAR_KEYWORD else ""
        parts.append(prefix + p.name + (f"={p.default!r}" if p.default is not p.empty else ""))
    return ", ".join(parts)


def _functions(cls: type) -> list[Any]:
    """The code objects of ``cls``'s methods and properties, base classes included."""
    codes = []
    for klass in cls.__mro__:
        for value in vars(klass).values():
            for fn in (value, getattr(value, "fget", None), getattr(value, "__func__", None)):
                code = getattr(fn, "__code__", None)
                if code is not None:
                    codes.append(code)
    return codes


def _assigns(cls: type, attr: str) -> bool:
    """Whether a method of ``cls`` assigns ``self.<attr>`` (instance attributes exist only once
    the object runs, so the code that sets them is what can be checked up front)."""
    return any(ins.opname == "STORE_ATTR" and ins.argval == attr
               for code in _functions(cls) for ins in dis.get_instructions(code))


def piece_problem(piece: Piece) -> str | None:
    """What is wrong with ``piece`` in the installed package (xdist here, pytest in
    ``pytest_adapter``), or None."""
    holder: Any = _module(piece.module)
    if holder is None:
        return "module missing"
    if piece.owner:
        holder = getattr(holder, piece.owner, None)
        if not isinstance(holder, type):
            return f"{piece.owner} missing"
    if piece.assigned:
        return None if _assigns(holder, piece.name) else "never assigned"
    value = inspect.getattr_static(holder, piece.name, None) if isinstance(holder, type) else \
        getattr(holder, piece.name, None)
    if value is None:
        return "missing"
    if piece.params is not None:
        fn = getattr(holder, piece.name)
        found = _params(fn) if callable(fn) else "not a function"
        if found != piece.params:
            return f"parameters are now ({found})"
    return None


def missing() -> list[str]:
    """Every piece the installed xdist lacks, each as ``name: what is wrong``; empty when all is there.

    Beyond ``PIECES``: the worker's command handler must call ``steal`` (which ``WorkerQueue``
    replaces), and ``BenchmarkScheduling`` must have every member of xdist's scheduler protocol
    (where that protocol exists), else xdist would call one it lacks."""
    found = [f"{piece}: {problem}" for piece in PIECES if (problem := piece_problem(piece)) is not None]
    interactor = getattr(_module(REMOTE), "WorkerInteractor", None)
    if isinstance(interactor, type) and not any(
            "steal" in code.co_names for code in _functions(interactor) if code.co_name != "steal"):
        found.append(f"{REMOTE}.WorkerInteractor.steal: no longer called by the worker's command handler")
    protocol = getattr(_module(PROTOCOL), "Scheduling", None)
    if isinstance(protocol, type):
        ours = set(dir(BenchmarkScheduling))
        for name in sorted(n for n in vars(protocol) if not n.startswith("_") and n not in ours):
            found.append(f"{PROTOCOL}.Scheduling.{name}: not implemented by sab-pytest's scheduler")
    return found


def fallback_line(problems: Sequence[str]) -> str:
    """The one terminal line of a run whose xdist lacks a piece: the version, what is missing, the cost."""
    import xdist

    version = getattr(xdist, "__version__", "?")
    shown = "; ".join(problems[:3]) + (f"; and {len(problems) - 3} more" if len(problems) > 3 else "")
    return (f"sab: warning: pytest-xdist {version} lacks what sab-pytest's case scheduling relies on ({shown}); "
            "using xdist's own scheduling: cases are not run ahead, so fewer run at once (results are unaffected)")


# -- controller side ------------------------------------------------------------------------------
_WorkStealing: Any = getattr(_module(WORKSTEAL), "WorkStealingScheduling", object)  # object: never built


class CaseScheduling(_WorkStealing):
    """xdist's work stealing, except that a case a worker refused to give up (it started it) is
    never asked for again, and a steal request asks only for cases that may still be unstarted."""

    steal_requested_from_node: Any  # xdist's (the base is untyped); assigned here too

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
        result: str | None = super().remove_node(node)
        return result

    def check_schedule(self) -> None:
        """As ``WorkStealingScheduling.check_schedule`` (``_deal``), except that a worker whose process
        is gone before xdist has read its end does not end the run: the cases or the steal sent to
        it are lost with its closed channel (``OSError``, which xdist's own ``shutdown`` ignores
        too), and its "errordown" event, still queued, comes next and hands its cases back
        (``remove_node``: the first as its crash, the rest to the others)."""
        with contextlib.suppress(OSError):
            self._deal()

    def _deal(self) -> None:
        """Cases to idle workers; else a steal that asks for the second half of the victim's cases
        that are neither running nor next (the first ``MIN_PENDING``) nor kept."""
        worksteal = importlib.import_module(WORKSTEAL)
        min_pending: int = worksteal.MIN_PENDING
        nodes_up = [worksteal.NodePending(node, pending) for node, pending in self.node2pending.items()
                    if not node.shutting_down]

        def idle_nodes() -> list[Any]:
            return [node for node, pending in nodes_up if len(pending) < min_pending]

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
            return [i for i in pending[min_pending:] if i not in self.kept]

        victim = max(nodes_up, key=lambda np: len(stealable(np.pending)), default=None)
        candidates = stealable(victim.pending) if victim is not None else []
        if not candidates:
            for node in idle_nodes():  # nothing left to take: let idle workers finish
                node.shutdown()
            return
        assert victim is not None
        asked = candidates[-max(1, len(candidates) // 2):]
        victim.node.send_steal(asked)  # before the state that expects its answer
        self._asked = asked
        self.steal_requested_from_node = victim.node


class BenchmarkScheduling:
    """``CaseScheduling`` for a collection with benchmark cases, xdist's ``LoadScheduling`` for any
    other; both see every node and collection until the choice is made at ``schedule``. Build it
    only when ``missing()`` is empty."""

    def __init__(self, config: Any, log: Any, is_case: Callable[[str], bool]) -> None:
        self.config = config  # as xdist's schedulers have it: plugins read it (pytest-rerunfailures' crash hook)
        self._is_case = is_case
        load = importlib.import_module(LOAD).LoadScheduling(config, log)
        self._options: tuple[Any, Any] = (CaseScheduling(config, log), load)
        self.chosen: Any = None

    def _current(self) -> Any:
        return self.chosen if self.chosen is not None else self._options[0]

    @property
    def nodes(self) -> list[Any]:
        return list(self._current().nodes)

    @property
    def collection_is_completed(self) -> bool:
        return bool(self._current().collection_is_completed)

    @property
    def tests_finished(self) -> bool:
        return bool(self._current().tests_finished)

    @property
    def has_pending(self) -> bool:
        return bool(self._current().has_pending)

    def add_node(self, node: Any) -> None:
        for option in self._targets():
            option.add_node(node)

    def add_node_collection(self, node: Any, collection: Sequence[str]) -> None:
        for option in self._targets():
            option.add_node_collection(node, collection)

    def remove_node(self, node: Any) -> str | None:
        results: list[str | None] = [option.remove_node(node) for option in self._targets()]
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
            collection: list[str] = next(iter(first.node2collection.values()), [])
            self.chosen = first if any(self._is_case(nodeid) for nodeid in collection) else self._options[1]
        self.chosen.schedule()

    def _targets(self) -> tuple[Any, ...]:
        return (self.chosen,) if self.chosen is not None else self._options


def stop_controller_loop(config: Any, message: str) -> None:
    """Make xdist's controller loop stop scheduling, as ``--maxfail`` does: it reads its own
    ``DSession.shouldstop``. Best effort: an xdist without it stops when the workers do."""
    dsession = config.pluginmanager.get_plugin("dsession")
    if dsession is not None and hasattr(dsession, "shouldstop") and not dsession.shouldstop:
        dsession.shouldstop = message


# -- worker side ----------------------------------------------------------------------------------
def find_interactor(config: Any) -> Any | None:
    """xdist's worker loop object in this process, for a ``WorkerQueue``. None outside an xdist
    worker, and None when the installed xdist lacks a piece (``missing()``): the worker then runs no
    case ahead, so a case starts only when its own item runs, and xdist's own steal (which gives
    away only items not yet started) is safe. The object is executed from xdist's source by
    execnet, so it is found by its shape, not imported."""
    if not hasattr(config, "workerinput") or missing():
        return None
    for plugin in config.pluginmanager.get_plugins():
        if (type(plugin).__name__ == "WorkerInteractor" and hasattr(plugin, "steal")
                and hasattr(plugin, "nextitem_index") and hasattr(getattr(plugin, "torun", None), "lock")):
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

