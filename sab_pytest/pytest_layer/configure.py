"""Turning the plugin on in a process (``activation`` holds the rule, ``entry`` applies it): the
markers, the validated settings, and on the controller the ``Aggregator``, which every
controller-side behaviour hangs on.

The parametrization is here too: a test that requests ``sab_case`` in a run the rule left off
turns the plugin on when it is collected (late: the checks made before any case are skipped).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from sab_pytest.errors import SabError, UsageError
from sab_pytest.models import preload_sdk
from sab_pytest.pytest_layer import activation, aliases, pytest_adapter, terminal
from sab_pytest.pytest_layer.aggregator import Aggregator
from sab_pytest.pytest_layer.collection import CaseFile, ShardFilter, marks, other_sharder, register_markers
from sab_pytest.pytest_layer.option_values import settings_from_config
from sab_pytest.pytest_layer.options import (
    DIR_OPTIONS,
    PATH_OPTIONS,
    PYTEST_PATH_OPTIONS,
    given,
    spellings,
)
from sab_pytest.pytest_layer.state import AGGREGATOR, ENDPOINT_CHECK_KEY, SETTINGS, is_controller
from sab_pytest.pytest_layer.xdist import CaseDistribution
from sab_pytest.run.endpoint_check import check_for_controller
from sab_pytest.run.selection import repeated, select_cases
from sab_pytest.settings import Settings


def activate(config: pytest.Config, *, late: bool = False) -> Settings:
    """Turn the plugin on in this process: markers, validated settings, and on the controller the
    ``Aggregator`` (the single gate every controller-side behaviour hangs on)."""
    settings = config.stash.get(SETTINGS, None)
    if settings is not None:
        return settings
    register_markers(config)
    try:
        settings = settings_from_config(config)
        if is_controller(config) and not late:
            check_split_path_options(config)
        check_one_sharder(config, settings)
        if not late:
            check_no_repeat_copies(config)
        aggregator = Aggregator(config, settings, checked=late) if is_controller(config) else None
    except SabError as exc:
        raise aliases.usage_error(config, exc) from None
    config.stash[SETTINGS] = settings
    run_aliases = aliases.of(config)
    if run_aliases is not None:
        run_aliases.active = True  # its note on short names given up to others is for this run
        if is_controller(config) and not late:
            for line in run_aliases.misdirected(given(config)):
                sys.stderr.write(line + "\n")
    if not is_controller(config) and settings.uses_api:
        verdict_dir = getattr(config, "workerinput", {}).get(ENDPOINT_CHECK_KEY)
        if verdict_dir:  # the run's endpoint check, for the controller (it loads the SDK too)
            check_for_controller(settings, Path(verdict_dir))
        else:
            preload_sdk()  # while this worker collects and waits for its first cases, not after
    if settings.shard is not None:  # on every process: xdist workers collect, the controller reports
        config.pluginmanager.register(ShardFilter(config, *settings.shard), "sab-shard")
    if aggregator is not None:
        terminal.register_clean_ends(config)
        config.stash[AGGREGATOR] = aggregator
        config.pluginmanager.register(aggregator, "sab-aggregator")
        config.pluginmanager.register(CaseDistribution(settings), "sab-case-distribution")
    return settings


def check_one_sharder(config: pytest.Config, settings: Settings) -> None:
    """``--sab-shard`` and another sharding plugin together would cut a part of a part, which no
    merge can put back together: refused, naming both."""
    other = other_sharder(config)
    if settings.shard is not None and other is not None:
        raise UsageError(f"--sab-shard {settings.shard[0]}/{settings.shard[1]}: {other[0]} also cuts this run "
                         f"into parts (part {other[1]} of {other[2]}); use one of them")


#: pytest-repeat's name as a plugin (its entry point) and the destination of its ``--count``
REPEAT_PLUGIN, REPEAT_COUNT = "repeat", "count"


def check_no_repeat_copies(config: pytest.Config) -> None:
    """pytest-repeat's ``--count N`` with N > 1 is refused before the first case, naming
    ``--sab-repeat N``, which is what a user of it means on a benchmark: N samples of each case.

    pytest-repeat makes N copies of every test under new ids (``test_case[<id>-1-2]``); a case's
    copies would share one case id, the runner hands each case out once, and the summary would
    count neither the copies nor their agreement. ``--sab-repeat N`` runs each case N times as
    repeats (ids ``<id>-r1`` ...), reported as such (agreement, flaky cases, intervals over cases),
    so the refusal's one message says the one change to make."""
    count = getattr(config.option, REPEAT_COUNT, None)
    if config.pluginmanager.hasplugin(REPEAT_PLUGIN) and isinstance(count, int) and count > 1:
        raise UsageError(f"--count {count} (pytest-repeat) copies each case under a new test id, which the "
                         f"benchmark would not count as a repeat; write --sab-repeat {count} instead: each case "
                         f"runs {count} times, reported as {count} repeats (agreement, flaky cases)")


def check_split_path_options(config: pytest.Config) -> None:
    """``--sab-out DIR`` (a space, not ``=``) works like ``--sab-out=DIR`` unless pytest took DIR into
    its rootdir/ini search (it reads the command line before it knows our options) and so ended up
    with another configuration, hence other tests: then it is refused, showing the right spelling.

    Judged as xdist's workers will see it: they parse the command line again after the run has
    created its directories (``--sab-out``), so a directory option that does not exist yet is made
    for the moment of the check. A file option (``--junitxml``, ``--sab-html``) is judged as it is:
    its file is written at the end, after every worker has collected."""
    split = activation.split_path_options([*activation.env_addopts(), *config.invocation_params.args],
                                          (*spellings(config, PATH_OPTIONS), *PYTEST_PATH_OPTIONS))
    if not split:
        return
    collect_args = list(config.option.file_or_dir or [])
    try:  # pytest's own rootdir and ini search, private (``pytest_adapter``)
        expected = pytest_adapter.determine_setup(config, collect_args)
        dir_options = spellings(config, DIR_OPTIONS)
        made = (config.invocation_params.dir / value for flag, value in split if flag in dir_options)
        with activation.made_for_a_moment(made) as missing:
            seen = (pytest_adapter.determine_setup(config, [*collect_args, *(value for _, value in split)])
                    if missing else (config.rootpath, config.inipath))
    except Exception:  # pytest's private helper changed, or a path cannot be made: ask for the safe spelling
        raise UsageError(activation.split_path_message(split, config.inipath, None, known=False)) from None
    if seen != expected:
        raise UsageError(activation.split_path_message(split, seen[1], expected[1], created=bool(missing)))


def parametrize_cases(metafunc: pytest.Metafunc) -> None:
    """A test that requests ``sab_case`` runs once per selected case (turning the plugin on, late,
    in a run the rule left off)."""
    problem: str | None = None
    case_file = metafunc.definition.parent
    try:
        activate(metafunc.config, late=True)  # no-op when already on
        settings = metafunc.config.stash[SETTINGS]
        if isinstance(case_file, CaseFile):  # a team's own cases: every case of the file, each repeat
            cases = repeated(case_file.cases(), settings.repeat)
        else:
            cases = select_cases(settings)
    except SabError as exc:
        problem = str(exc)
    if problem is not None:  # outside the except block: one clean message, no chained traceback
        pytest.fail(problem, pytrace=False)
    metafunc.parametrize("sab_case", [pytest.param(c, id=c.sample_id, marks=marks(c)) for c in cases])
