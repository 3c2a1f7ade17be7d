"""Collection: the cases' markers, their locations, ``--sab-shard``'s filter of the collected items,
the parts other sharding plugins cut, and a team's own case files.

Own case files (``*.sab.yaml``, ``*.sab.jsonl``): ``pytest_collect_file`` gives each a ``CaseFile``,
pytest's idiom for tests written in another language (tavern, pytest-yaml). Its items are the paper's
case items, the one case test parametrized over ``sab_case`` (``configure.parametrize_cases``), so
``-k``, ``-m``, ``--lf``, xdist's scheduling, the cache, resume, estimate and budget treat them as they
treat the paper's. Reading and validation are plain Python (``sab_pytest.owncases``); this module hands
their cases to pytest, registers the suites' and categories' markers, and names the files a run collects.
"""

from __future__ import annotations

import dataclasses
import os
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from sab_pytest import categories
from sab_pytest.dataset import Case
from sab_pytest.errors import SabError
from sab_pytest.owncases import files as casefiles
from sab_pytest.owncases.check import sim_engine, validate
from sab_pytest.owncases.selection import OwnCases, problems_message
from sab_pytest.owncases.selection import check as check_case_files
from sab_pytest.pytest_layer import activation, aliases, terminal
from sab_pytest.pytest_layer.case_tests import check
from sab_pytest.pytest_layer.state import AGGREGATOR, SETTINGS, case_of
from sab_pytest.results import StoredRecord
from sab_pytest.run import shard
from sab_pytest.run.runtime import make_engine
from sab_pytest.run.selection import repeated, select_cases
from sab_pytest.settings import Settings
from sab_pytest.thor.scenes import SceneSource


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
    if case.suite is not None:  # a team's own case: its suite (``register_own_markers``)
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


# ----------------------------------------------------------------------------- a team's own case files

def test_case(sab_verdict: StoredRecord) -> None:
    """The test of every own case, as the paper's (``sab_pytest.cases.benchmark``): the verdict's check."""
    check(sab_verdict)


class CaseFile(pytest.Module):
    """A case file as a module of one test, ``test_case``, run once per case of the file.

    pytest's own ``Module`` machinery makes the items (``_genfunctions``: the ``pytest_generate_tests``
    hook, then one ``Function`` per case), so an own case is the same kind of item as a paper case;
    the module object is made here instead of imported, and the name ``test_case`` is collected
    whatever the project's ``python_functions`` say."""

    def _getobj(self) -> types.ModuleType:
        module = types.ModuleType(f"sab_cases_{casefiles.suite_name(self.path)}")
        module.__file__ = str(self.path)
        module.test_case = test_case  # type: ignore[attr-defined]
        return module

    def collect(self) -> list[Any]:
        register_own_markers(self.config, self.cases())
        return list(self._genfunctions("test_case", self.obj.test_case))

    def cases(self) -> list[Case]:
        """The file's cases (read once per process); a file with errors is a collection error listing them
        (the controller's check before the first case lists them first in a run that asked for it)."""
        made = getattr(self, "_cases", None)
        if made is None:
            suite_file = casefiles.read(self.path)
            problems = [p for p in suite_file.problems if p.severity == "error"]
            if problems:
                raise self.CollectError("\n".join(map(str, problems)))
            if self._unchecked():
                self._check()
            made = self._cases = casefiles.cases(suite_file, ini_categories(self.config))
        return made

    def _unchecked(self) -> bool:
        """Whether no check before the first case saw this file: the controller validates the files under
        what the run collects (``check_own_cases``); a run that turned on only when it met the file (no
        option, no ``sab_cases`` path) did not, so the file is checked here, at its collection, before any
        case runs. xdist's workers leave it to their controller."""
        if hasattr(self.config, "workerinput"):
            return False
        aggregator = self.config.stash.get(AGGREGATOR, None)
        return aggregator is None or self.path.resolve() not in aggregator.own.files

    def _check(self) -> None:
        settings = self.config.stash.get(SETTINGS, None)
        report = validate([self.path], scenes_dir=settings.thor_scenes if settings else None,
                          data_dir=settings.data_dir if settings else None, own_categories=ini_categories(self.config))
        if report.errors:
            raise self.CollectError(problems_message(report))


def register_own_markers(config: pytest.Config, cases: list[Case]) -> None:
    """A marker per suite and per own risk category, so ``-m kitchen`` selects a suite and
    ``--strict-markers`` accepts them."""
    known = {line.split(":", 1)[0].strip() for line in config.getini("markers")}
    for case in cases:
        for name, doc in ((case.suite, "own suite"), (case.risk_category, "own risk category")):
            if name and name not in known and name not in categories.SLUGS:  # the paper's come with the plugin
                config.addinivalue_line("markers", f"{name}: SafeAgentBench {doc}")
                known.add(name)


def ini_categories(config: pytest.Config) -> dict[str, str]:
    """The run's own risk categories from the ini setting ``sab_categories`` (``slug: Name`` lines)."""
    return casefiles.declared_categories(list(config.getini("sab_categories")))


def collect_file(file_path: Path, parent: pytest.Collector) -> CaseFile | None:
    return CaseFile.from_parent(parent, path=file_path)


def roots(config: pytest.Config) -> list[Path]:
    """The paths the run collects, where its case files are looked for."""
    base = config.invocation_params.dir
    return [(base / arg.split("::", 1)[0]).resolve() for arg in config.args]


def check_own_cases(config: pytest.Config, settings: Settings) -> OwnCases:
    """The team's own case files under what the run collects, validated on the controller before
    anything else (``owncases.selection.check``): an error is the run's usage error, every problem at
    ``file:line``, before any file is written; warnings go to the terminal."""
    try:
        own = check_case_files(settings, roots(config), ini_categories(config), embedded_engine(settings),
                    config.getini("norecursedirs"))
    except SabError as exc:
        raise aliases.usage_error(config, exc) from None
    for warning in own.warnings:
        terminal.say(config, f"sab: warning: {warning}", yellow=True)
    for note in own.notes:
        terminal.say(config, f"sab: note: own cases: {note}")
    own = dataclasses.replace(own, cases=tuple(repeated(list(own.cases), settings.repeat)))
    return dataclasses.replace(own, paper=paper_in_run(config, own, None))


def embedded_engine(settings: Settings) -> Callable[[], Any]:
    """What the reference steps of own cases run on: the run's own engine under ``--thor sim``
    (``runtime.make_engine``: whatever the run executes with), else the embedded one on the run's
    scenes (the check is offline whatever engine the cases will use)."""
    def make() -> Any:
        if settings.engine == "sim":
            return make_engine(settings)
        return sim_engine(SceneSource(settings.thor_scenes))

    return make


def run_cases(config: pytest.Config, settings: Settings, own: OwnCases, selected: list[str] | None) -> list[Case]:
    """The cases of the run's whole selection (its estimate, its idea of complete): the paper's (subset,
    sample, repeats) when the run has them, and the team's own."""
    return [*(select_cases(settings) if paper_in_run(config, own, selected) else []), *own.cases]


def paper_in_run(config: pytest.Config, own: OwnCases, selected: list[str] | None) -> bool:
    """Whether the paper's cases are part of this run: some were collected (once ``selected`` is
    known), else the run collects their path (``collects_paper``). A run of a team's own cases alone
    is complete without them; a run without own cases is the paper's, as before."""
    if not own.cases:
        return True
    if selected is not None:
        mine = {c.sample_id for c in own.cases}
        return any(case_id not in mine for case_id in selected)
    return collects_paper(config)


def collects_paper(config: pytest.Config) -> bool:
    """Whether the run collects the paper's cases: it reaches a ``sab_cases`` path that is not a
    team's own case file, or folder of them only (``activation.own_cases_only``)."""
    paper_paths = [p for p in config.getini("sab_cases") if not activation.own_cases_only(Path(p))]
    return bool(paper_paths) and activation.collects_cases(config.args, config.invocation_params.dir, paper_paths)


