"""The plugin's command-line options and ini settings, made from the settings table, and the
``Settings`` they give.

Nothing here declares an option: ``sab_pytest.settings`` does, once. This module registers the
table's options (``addoption``/``addini``) from ``settings.flags``, the table's flags as literals
generated from it, so that a run that does not ask for the benchmark never builds the table; and,
in a run that does, reads each value: written on the command line (or in ``addopts``), else the
release policy file's, else the ini setting or environment variable the table names, else the
default; ``settings.resolution.resolve`` then makes the ``Settings`` and ``run.validate`` checks them.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import pytest

from sab_pytest.pytest_layer import activation, aliases
from sab_pytest.settings.flags import FLAGS

if TYPE_CHECKING:
    from sab_pytest.errors import UsageError
    from sab_pytest.settings import Option, Settings

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


class _Options:
    """Option values: written on the command line (or in addopts), else from the policy file, else the default."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        path = config.getoption("sab_policy")
        self.policy = None
        if path:
            from sab_pytest.run.policy import load_policy

            self.policy = load_policy(path)
        self.written = given(config)

    def __call__(self, option: Option) -> Any:
        name = option.flag
        value = self.config.getoption(option.dest)
        if self.policy is not None and name in self.policy.values:
            if option.action == "append":  # gates add up: the policy's, then the command line's
                value = [*self.policy.get(name), *value]
            elif not self._written(name):
                value = self.policy.get(name)
        if option.ini:
            ini = self.config.getini(option.ini)
            value = [*ini, *value] if option.action == "append" else value or ini or None
        if option.env and not value:
            value = os.environ.get(option.env) or None
        return value

    def _written(self, name: str) -> bool:
        return activation.names_option(self.written, spellings(self.config, (name,))) is not None

    def locate(self, exc: UsageError) -> UsageError:
        """An option's error, pointed at the policy line its value came from (when it came from there)."""
        if self.policy is not None:
            for option in self.policy.lines:  # (a gate's own message already quotes the gate)
                if str(exc).startswith(f"{option}:") and option != "--sab-gate" and not self._written(option):
                    return self.policy.located(option, str(exc))
        return exc


def settings_from_config(config: pytest.Config) -> Settings:
    """The run's ``Settings`` from this pytest run's options, validated (a ``UsageError`` names the
    option, or the policy file's line when the value came from there)."""
    # loaded only in a run that is on: every run imports this module
    from sab_pytest.errors import UsageError
    from sab_pytest.fetch import cache_root
    from sab_pytest.run.validate import validate
    from sab_pytest.settings import options
    from sab_pytest.settings.resolution import resolve

    opt = _Options(config)
    try:
        settings = resolve({name: opt(option) for name, option in options()},
                           user_cache=lambda: cache_root() / "responses")
        return validate(settings)
    except UsageError as exc:
        raise opt.locate(exc) from None


def given(config: pytest.Config) -> list[str]:
    """The arguments written for this run: ``PYTEST_ADDOPTS``, ini ``addopts``, the command line."""
    return [*activation.env_addopts(), *config.getini("addopts"), *config.invocation_params.args]
