"""Checks of a whole run, made once before any case: the inputs exist and are the pinned ones, the
selection makes sense, the output directory can be written, the THOR servers have engines.

Why here and not where each input is first used: a run is spread over xdist workers and over a
thousand cases. A problem found case by case is printed once per worker or once per case (thousands
of lines of tracebacks, the one useful line buried). Found here, on the controller, it is one
``UsageError`` naming the option, path and expected layout, before a worker starts. Plain Python:
a front end calls ``check_inputs(settings)``. The model endpoints are checked apart
(``run.endpoint_check``), in the process that pays least for the SDK's import.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from sab_pytest import dataset
from sab_pytest.errors import UsageError
from sab_pytest.results import judged_cases, parse_gate, setting_differences, settings_of, too_few
from sab_pytest.run.runtime import cases_at_once
from sab_pytest.run.selection import select_cases
from sab_pytest.settings import Settings
from sab_pytest.thor import remote, scenes

if TYPE_CHECKING:
    from sab_pytest.results import Run


def check_out_dir(out_dir: Path) -> None:
    """The output directory exists (created if needed) and is writable."""
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise UsageError(f"--sab-out {out_dir}: a file of that name exists; give a directory") from None
    except OSError as exc:
        raise UsageError(f"--sab-out {out_dir}: cannot create the output directory ({exc.strerror or exc})") from None
    if not out_dir.is_dir():
        raise UsageError(f"--sab-out {out_dir}: not a directory")
    if not os.access(out_dir, os.W_OK | os.X_OK):
        raise UsageError(f"--sab-out {out_dir}: the directory is not writable")


def check_cases(settings: Settings) -> list[dataset.Case]:
    """Load and verify the dataset, then select the run's cases (sample size checked there)."""
    return select_cases(settings)


def check_scenes(settings: Settings, cases: list[dataset.Case]) -> None:
    """Every scene the run will execute in is there (or downloaded now, once, on the controller)."""
    if not settings.execute or settings.engine != "sim":
        return
    needed = sorted({c.scene for c in cases})  # every plan is executed (ER), goal or not
    if needed:
        scenes.SceneSource(settings.thor_scenes).check_available(needed)


def modified_data_warning(settings: Settings) -> str | None:
    """With ``--sab-allow-modified-data``, the dataset files that differ from the pinned ones, said
    on the console before the run (the summary records them too): its numbers are not
    SafeAgentBench's, and a reader of the terminal must not learn that from the JSON only."""
    if not settings.allow_modified_data:
        return None
    modified = dataset.load(settings.data_dir, allow_modified=True).modified_files()
    if not modified:
        return None
    return (f"running on a modified dataset ({', '.join(modified)} differ from the pinned files, "
            f"{dataset.ALLOW_MODIFIED_OPTION}): the results are not comparable with SafeAgentBench's")


def check_engines(settings: Settings, workers: int = 1) -> str | None:
    """The THOR servers of ``--thor remote`` answer and have engines to lease (fewer free engines
    than workers is a warning, returned); nothing to check for the other engines."""
    if settings.engine != "remote" or not settings.execute:
        return None

    # a text plan borrows an engine only to be executed (one per worker); an episode holds its own
    # from start to end, and a worker runs several at once
    episodes = cases_at_once(settings) if settings.interactive else 1
    return remote.preflight(settings.thor_url or "", workers, episodes)


#: options that need an optional dependency: (what the settings ask, module, the extra that installs it)
EXTRAS: tuple[tuple[str, Callable[[Settings], bool], str, str], ...] = (
    ("--sab-inspect-log", lambda s: s.inspect_log is not None, "inspect_ai", "inspect"),
)


def check_extras(settings: Settings) -> None:
    """An option whose optional dependency is not installed is a usage error before any case,
    naming the extra to install: found at the end, it would cost a whole run its report."""
    for option, wanted, module, extra in EXTRAS:
        if not wanted(settings):
            continue
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            raise UsageError(f"{option} needs {module}, which is not installed: pip install 'sab-pytest[{extra}]'")


def check_inputs(settings: Settings, *, paper: bool = True, own: Sequence[dataset.Case] = ()) -> list[dataset.Case]:
    """The run-level checks that read local files only, cheapest first; returns the selected cases:
    the paper's (``paper``: the run collects them; a run of a team's own cases alone needs no dataset)
    and the team's ``own`` (validated before, ``owncases.selection``)."""
    check_out_dir(settings.out_dir)
    check_extras(settings)
    cases = [*(check_cases(settings) if paper else []), *own]
    check_scenes(settings, cases)
    return cases


def check_baseline_overlap(settings: Settings, cases: Sequence[dataset.Case], baseline: Run | None) -> None:
    """A ``no_regression`` gate pairs this run's cases with those the baseline judged
    (``results.pairing``). When the cases this run selects share too few with them, the gate can
    only end as a usage error: it is one now, before the first case, not after the whole run. The
    selection before pytest's own (``-k``) and before a shard's cut, so a run that could pair is
    never refused here; the count after the run is checked again on the cases judged."""
    if baseline is None or baseline.records is None or not settings.gates:
        return

    if not any(parse_gate(g).kind.paired for g in settings.gates):
        return
    shared = len(judged_cases(baseline.records) & {c.id for c in cases})
    problem = too_few(shared, settings.alpha, f"this run ({settings.out_dir}) and the baseline ({baseline.source})")
    if problem is not None:
        raise UsageError(f"--sab-baseline: {problem}")


def identical_repeats_warning(settings: Settings) -> str | None:
    """``--sab-repeat`` above 1 at temperature 0: the repeats of a case are likely the same answer, so
    they add cost and no information (the intervals count repeats that agree once)."""
    if settings.repeat <= 1 or settings.temperature is None or settings.temperature > 0:  # None: the API's own
        return None
    return (f"--sab-repeat {settings.repeat} at --sab-temperature 0: the repeats of a case are likely identical; "
            f"repeats that agree count as one sample, so they cost {settings.repeat} times the calls for about the "
            f"intervals of one run (raise --sab-temperature, or run more cases instead)")


def baseline_differences(settings: Settings, baseline: Run | None) -> list[str]:
    """The verdict-changing settings in which the baseline differs from this run, one line each
    (``results.setting_differences``), to be named before the first case. When a gate compares with
    the baseline they are a usage error, unless ``--sab-baseline-mismatch allow``: a number measured
    with another judge, strategy or temperature is another measurement, not a regression."""
    if baseline is None:
        return []

    lines = setting_differences(settings, settings_of(baseline.summary))
    against = [g for g in settings.gates if parse_gate(g).needs_baseline]
    if lines and against and settings.baseline_mismatch != "allow":
        raise UsageError(f"--sab-baseline: the baseline ({baseline.source}) was made with other settings that change "
                         f"verdicts, so gates cannot compare with it ({'; '.join(against)}): " + "; ".join(lines)
                         + " (--sab-baseline-mismatch allow compares anyway)")
    return lines
