"""A run's own case files: found under what the run collects, validated once on the controller before
the first case (``owncases.check``), their cases beside the paper's selection.

Validation is the run's first check: an error stops the run with one usage error listing every
problem at ``file:line``, before the output directory is claimed or any result is written. The
reference steps run on the engine the caller makes (the run's own embedded engine, so the check
follows whatever the run executes with), through the run's execution (``thor.execute``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sab_pytest.dataset import Case
from sab_pytest.errors import UsageError
from sab_pytest.owncases.check import Report, validate
from sab_pytest.owncases.files import find
from sab_pytest.settings import Settings


@dataclass(frozen=True)
class OwnCases:
    """The own cases of a run and the warnings validation gave."""

    cases: tuple[Case, ...] = ()
    warnings: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()  # what validation left out, and why (the paper's dataset not at hand)
    files: tuple[Path, ...] = field(default=())
    #: whether the run also has the paper's cases (it collects their path); a run without own cases does
    paper: bool = True

    def by_id(self) -> dict[str, Case]:
        return {c.id: c for c in self.cases}


def check(settings: Settings, roots: Iterable[Path], own_categories: Mapping[str, str],
          engine: Callable[[], Any], skip_dirs: Iterable[str] = ()) -> OwnCases:
    """Find, validate and read the case files at or under ``roots``; a ``UsageError`` listing every
    problem when any is an error. ``engine`` makes the embedded engine the reference steps run on."""
    paths = find(roots, skip_dirs)
    if not paths:
        return OwnCases()
    report = validate(paths, scenes_dir=settings.thor_scenes, data_dir=settings.data_dir,
                      own_categories=own_categories, engine=engine)
    if report.errors:
        raise UsageError(problems_message(report))
    return OwnCases(tuple(report.cases), tuple(map(str, report.warnings)), tuple(report.notes), tuple(paths))


def problems_message(report: Report) -> str:
    """The usage error of case files with errors: a count, then every problem on a line of its own."""
    return (f"the case files hold {len(report.errors)} error(s); nothing was run or written:\n"
            + "\n".join(str(p) for p in sorted(report.problems, key=lambda p: (p.path, p.line))))
