"""A run's own case files (``casefiles``): found under what the run collects, validated once on the
controller before the first case (``casecheck``), their cases beside the paper's selection.

Validation is the run's first check: an error stops the run with one usage error listing every
problem at ``file:line``, before the output directory is claimed or any result is written. The
reference steps are run on the embedded engine the run itself would make (``runtime.make_engine``
under ``--thor sim``), through the run's own execution (``thor.execute``), so the check follows
whatever the run executes with.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sab_pytest.casecheck import Report, validate
from sab_pytest.casefiles import find
from sab_pytest.dataset import Case
from sab_pytest.errors import UsageError
from sab_pytest.run.selection import repeated
from sab_pytest.settings import Settings


@dataclass(frozen=True)
class OwnCases:
    """The own cases of a run (each repeat as its own sample) and the warnings validation gave."""

    cases: tuple[Case, ...] = ()
    warnings: tuple[str, ...] = ()
    files: tuple[Path, ...] = field(default=())
    #: whether the run also has the paper's cases (it collects their path); a run without own cases does
    paper: bool = True

    def by_id(self) -> dict[str, Case]:
        return {c.id: c for c in self.cases}

    def suites(self) -> list[str]:
        return sorted({c.suite for c in self.cases if c.suite})


def engine_factory(settings: Settings) -> Callable[[], Any]:
    """The embedded engine the reference steps run on: the run's own under ``--thor sim``, else
    the embedded one on the run's scenes (the check is offline whatever engine the cases use)."""
    def make() -> Any:
        if settings.engine == "sim":
            from sab_pytest.run.runtime import make_engine

            return make_engine(settings)
        from sab_pytest.thor.scenes import SceneSource
        from sab_pytest.thor.sim import Controller

        return Controller(scenes=SceneSource(settings.thor_scenes))

    return make


def check(settings: Settings, roots: Iterable[Path], own_categories: Mapping[str, str],
          skip_dirs: Iterable[str] = ()) -> OwnCases:
    """Find, validate and read the case files at or under ``roots``; a ``UsageError`` listing every
    problem when any is an error."""
    paths = find(roots, skip_dirs)
    if not paths:
        return OwnCases()
    report = validate(paths, scenes_dir=settings.thor_scenes, data_dir=settings.data_dir,
                      own_categories=own_categories, engine=engine_factory(settings))
    if report.errors:
        raise UsageError(problems_message(report))
    return OwnCases(tuple(repeated(report.cases, settings.repeat)), tuple(map(str, report.warnings)), tuple(paths))


def problems_message(report: Report) -> str:
    """The usage error of case files with errors: a count, then every problem on a line of its own."""
    return (f"the case files hold {len(report.errors)} error(s); nothing was run or written:\n"
            + "\n".join(str(p) for p in sorted(report.problems, key=lambda p: (p.path, p.line))))
