"""Collection: the cases' markers, their locations, ``--sab-shard``'s filter of the collected items,
and the parts other sharding plugins cut."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from sab_pytest import categories
from sab_pytest.dataset import Case
from sab_pytest.pytest_layer.state import case_of
from sab_pytest.run import shard


def register_markers(config: pytest.Config) -> None:
    """The markers of the cases (kind, safety, risk category, level), so ``-m`` selects on them."""
    for name, doc in (("unsafe", "hazardous case (refusal expected, or a safety requirement)"),
                      ("safe", "safe control case"), ("unsafe_detailed", "detailed hazardous task"),
                      ("safe_detailed", "detailed safe task"), ("abstract", "abstract hazardous task"),
                      ("long_horizon", "long-horizon task with a safety requirement"),
                      *((slug, f"risk category: {name}") for slug, name in categories.CATEGORIES),
                      ("unmapped_category", "hazard label outside the 10 categories"),
                      *((f"L{lv}", f"abstraction level {lv} (0 concrete .. 3 abstract)") for lv in range(4))):
        config.addinivalue_line("markers", f"{name}: SafeAgentBench {doc}")



def marks(case: Case) -> list[pytest.MarkDecorator]:
    """A case's markers: its safety, kind, risk category (hazards), abstraction level and suite."""
    marks = [getattr(pytest.mark, case.safety), getattr(pytest.mark, case.kind)]
    if case.kind in ("unsafe_detailed", "abstract"):
        marks.append(getattr(pytest.mark, case.risk_category or "unmapped_category"))
    if case.abstraction_level is not None:
        marks.append(getattr(pytest.mark, f"L{case.abstraction_level}"))
    if case.suite is not None:  # a team's own case: its suite (``own_cases.register_markers``)
        marks.append(getattr(pytest.mark, case.suite))
    return marks


def locate_cases(session: pytest.Session) -> None:
    """Give each case item the location where its case is written: its dataset file and line.

    ``item.location`` is what reporters show beside a test (pytest's ``-vv`` line, pytest-sugar's
    list of failures, JUnit's ``file`` and ``line``); pytest takes it from the test function, which
    for a case is the one function that runs them all (``cases/benchmark.py:13``), so it told nothing.
    Only the location changes: the node id (``-k``, ``--lf``, ``--deselect``, xdist's scheduling,
    the reports' ids) and the name shown (``test_case[<id>]``) stay pytest's. The path is relative
    to the rootdir as pytest writes locations, and absolute for a file outside it (the user cache,
    ``$SAB_DATA``), where a chain of ``../`` would say less."""
    root = session.config.rootpath
    for item in session.items:
        case = case_of(item)
        if case is None or case.source is None or not isinstance(item, pytest.Function):
            continue
        line = case.source[1] - 1  # pytest counts lines from 0
        item.location = (shown_path(Path(case.source[0]), root), line, item.getmodpath())


def shown_path(path: Path, root: Path) -> str:
    """``path`` (absolute) as a location shows it: relative to ``root`` inside it, else absolute."""
    return os.path.relpath(path, root) if path.is_relative_to(root) else str(path)


class ShardFilter:
    """``--sab-shard K/N``: deselect the cases of the other shards, after ``-k``/``-m`` did theirs.

    Registered only when the option is given. The selection rule is ``shard.take``; what the shard
    ran is kept in ``info`` (on an xdist worker it travels to the controller in ``workeroutput``).
    Tests that are not benchmark cases are left alone: they run in every shard.
    """

    def __init__(self, config: pytest.Config, k: int, n: int) -> None:
        self.config, self.k, self.n = config, k, n
        self.info: dict[str, Any] | None = None

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        ids = {item.nodeid: case.id for item in items if (case := case_of(item)) is not None}
        keep = shard.take(ids.values(), self.k, self.n)
        dropped = [item for item in items if item.nodeid in ids and ids[item.nodeid] not in keep]
        if dropped:
            config.hook.pytest_deselected(items=dropped)
            items[:] = [item for item in items if item.nodeid not in ids or ids[item.nodeid] in keep]
        self.info = shard.describe(ids.values(), self.k, self.n)
        if hasattr(config, "workeroutput"):
            config.workeroutput["sab_shard"] = self.info

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        info = getattr(node, "workeroutput", {}).get("sab_shard")
        if info is not None and self.info is None:
            self.info = info




def other_sharder(config: pytest.Config) -> tuple[str, int, int] | None:
    """(sharder, K, N) when pytest-split (``--splits N --group K``) or pytest-shard (``--shard-id K
    --num-shards N``, K counted from 0 there, from 1 here as in ``--sab-shard``) runs part K of N;
    else None. Their options are read from the config (those plugins are never imported), and only
    while the plugin that declares them is loaded: another plugin may use the same names."""
    has = config.pluginmanager.has_plugin
    splits, group = config.getoption("splits", None), config.getoption("group", None)
    if has("pytest-split") and isinstance(splits, int) and isinstance(group, int) and 1 <= group <= splits:
        return "pytest-split", group, splits
    shard_id, num_shards = config.getoption("shard_id", None), config.getoption("num_shards", None)
    if has("pytest-shard") and isinstance(shard_id, int) and isinstance(num_shards, int) and num_shards > 1:
        return "pytest-shard", shard_id + 1, num_shards
    return None
