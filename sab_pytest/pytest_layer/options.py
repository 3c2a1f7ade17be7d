"""The plugin's command-line options and ini settings, made from the settings table.

Nothing here declares an option: ``sab_pytest.settings`` does, once. This module registers the
table's options (``addoption``/``addini``) from ``settings.flags``, the table's flags as literals
generated from it, so that a run that does not ask for the benchmark never builds the table; and,
in a run that does, each value is read: written on the command line (or in ``addopts``), else the
release policy file's, else the ini setting or environment variable the table names, else the
default (``pytest_layer.option_values``, imported only then: every run imports this module).
"""

from __future__ import annotations

import pytest

from sab_pytest.pytest_layer import activation, aliases
from sab_pytest.settings.flags import FLAGS

#: the ``--sab-`` spelling of every option; any of them given (or a short name this run holds, see
#: ``option_names``) turns the plugin on (the activation rule)
OPTION_NAMES: list[str] = [flag.sab_flag for flag in FLAGS]
#: options that take a path (table flags): written with a space, pytest may take the path into its ini search
PATH_OPTIONS: tuple[str, ...] = tuple(flag.flag for flag in FLAGS if flag.path)
#: those of them that name a directory the run may create before xdist starts its workers
DIR_OPTIONS: tuple[str, ...] = tuple(flag.flag for flag in FLAGS if flag.path and flag.metavar == "DIR")
#: pytest's own options that take a path, which the same search takes in when written with a space
PYTEST_PATH_OPTIONS = ("--junitxml", "--junit-xml", "--basetemp", "--confcutdir")


def pytest_addoption(parser: pytest.Parser, pluginmanager: pytest.PytestPluginManager) -> None:
    group = parser.getgroup("safeagentbench", "SafeAgentBench (sab-pytest)")
    names = aliases.Aliases(parser)
    for flag in FLAGS:
        # not written: None (or [] / off), so the policy, ini, environment, ``resolve`` or the field's default decide
        names.add(group, flag.sab_flag, flag.alias, dest=flag.dest, **flag.argument, default=flag.cli_default)
        if flag.ini:
            if flag.action == "append":
                parser.addini(flag.ini, flag.ini_help, type="linelist", default=[])
            else:
                parser.addini(flag.ini, flag.ini_help, default="")
    parser.addini("sab_cases", "paths holding the benchmark's cases: a run that collects one of them turns the "
                  "plugin on without any option (the checkout sets 'cases')", type="paths", default=[])
    parser.addini("sab_categories", "a team's own risk categories for its case files, one 'slug: Name' a line "
                  "(docs/own-cases.md)", type="linelist", default=[])
    names.guard()
    pluginmanager.register(names, aliases.PLUGIN_NAME)


def option_names(config: pytest.Config) -> list[str]:
    """Every spelling of our options this run owns: the ``--sab-`` ones, and the short names no other
    plugin or conftest took (another's ``--base-url`` given does not ask for the benchmark)."""
    run_aliases = aliases.of(config)
    held = run_aliases.names() if run_aliases is not None else set()
    return [*OPTION_NAMES, *(flag.alias for flag in FLAGS if flag.alias in held)]


def spellings(config: pytest.Config, flags: tuple[str, ...]) -> tuple[str, ...]:
    """``flags`` (table flags) with each one's other spelling this run owns."""
    owned = set(option_names(config))
    table = {flag.flag: flag for flag in FLAGS}
    return tuple(name for flag in flags for name in (table[flag].sab_flag, table[flag].alias) if name in owned)


def given(config: pytest.Config) -> list[str]:
    """The arguments written for this run: ``PYTEST_ADDOPTS``, ini ``addopts``, the command line."""
    return [*activation.env_addopts(), *config.getini("addopts"), *config.invocation_params.args]
