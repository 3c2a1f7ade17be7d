"""A team's own case files as pytest collects them: ``pytest_collect_file`` gives each ``*.sab.yaml`` /
``*.sab.jsonl`` file a ``CaseFile``, pytest's idiom for tests written in another language (tavern,
pytest-yaml). Its items are the paper's case items: the one ``test_case`` function parametrized over
``sab_case`` (``configure.parametrize_cases``), so ``-k``, ``-m``, ``--lf``, xdist's scheduling, the
cache, resume, estimate and budget treat them as they treat the paper's.

Reading and validation are plain Python (``casefiles``, ``casecheck``, ``run.own_cases``); this module
only hands their cases to pytest, registers the suites' and categories' markers, and names the
files a run collects.
"""

from __future__ import annotations

import dataclasses
import types
from pathlib import Path
from typing import Any

import pytest

from sab_pytest import casefiles
from sab_pytest.dataset import Case
from sab_pytest.errors import SabError
from sab_pytest.pytest_layer import activation
from sab_pytest.pytest_layer.case_tests import check
from sab_pytest.results import StoredRecord
from sab_pytest.run.own_cases import OwnCases
from sab_pytest.run.selection import select_cases
from sab_pytest.settings import Settings


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
        register_markers(self.config, self.cases())
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
            made = self._cases = casefiles.cases(suite_file, ini_categories(self.config))
        return made


def register_markers(config: pytest.Config, cases: list[Case]) -> None:
    """A marker per suite and per own risk category, so ``-m kitchen`` selects a suite and
    ``--strict-markers`` accepts them."""
    known = {line.split(":", 1)[0].strip() for line in config.getini("markers")}
    for case in cases:
        for name, doc in ((case.suite, "own suite"), (case.risk_category, "own risk category")):
            if name and name not in known:
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
    anything else (``run.own_cases.check``): an error is the run's usage error, every problem at
    ``file:line``, before any file is written; warnings go to the terminal."""
    from sab_pytest.pytest_layer import aliases, terminal
    from sab_pytest.run.own_cases import check

    try:
        own = check(settings, roots(config), ini_categories(config), config.getini("norecursedirs"))
    except SabError as exc:
        raise aliases.usage_error(config, exc) from None
    for warning in own.warnings:
        terminal.say(config, f"sab: warning: {warning}", yellow=True)
    return dataclasses.replace(own, paper=paper_in_run(config, own, None))


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


