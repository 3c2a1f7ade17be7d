"""The short option names (``--model``, ``--base-url``, ``--thor`` ...): held only where nobody else
in the run wants them.

Every option has a ``--sab-`` spelling no other plugin can own. The table's short names are common
words: pytest-base-url and pytest-playwright declare ``--base-url``, ML projects' conftest files
``--model``. argparse refuses a name registered twice, and pytest reports that as a crash of
whoever registered second, so holding a short name another plugin also wants would break every
pytest run of the environment. Hence:

* at our ``pytest_addoption``, a short name some plugin already registered is left to it;
* a plugin or conftest that registers one of our short names later (pytest loads conftest files
  after every installed plugin) takes it: the parser's ``addoption`` is wrapped for that run so
  that the name is removed from our option just before theirs is added;
* a run that asks for the benchmark prints one line naming the ``--sab-`` spelling of each name
  given up (``pytest_report_header``), and on stderr, even under ``-q``, one line for each such
  name the user wrote without its ``--sab-`` spelling (``misdirected``); other runs say nothing;
* a message of the run that names an option names it as this run spells it (``respelled``):
  "check --base-url" says ``--sab-base-url`` where another plugin owns ``--base-url``.

Removing a name from a registered option reaches into pytest's parser: pytest 9.1 and later keep
argparse actions from the start (``Argument._action``), earlier versions build argparse from
``Argument._long_opts`` at each parse. Both are handled; anything else leaves the name held as
before, which is no worse than without this module.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from typing import Any

import pytest

#: the plugin name under which a run's ``Aliases`` is registered (one per pytest run)
PLUGIN_NAME = "sab-aliases"


class Aliases:
    """The short names of one pytest run: which this plugin holds, and which it gave up to whom."""

    def __init__(self, parser: pytest.Parser) -> None:
        self.parser = parser
        self.held: dict[str, tuple[str, Any]] = {}  # short name -> (--sab- spelling, pytest's Argument)
        self.given_up: dict[str, tuple[str, str]] = {}  # short name -> (--sab- spelling, who took it)
        self.active = False  # the run asks for the benchmark (set when the plugin turns on)

    def claimed(self, name: str) -> bool:
        """Whether a plugin registered before us declares ``name``."""
        return any(name in argument.names() for group in self.parser._groups for argument in group.options)

    def add(self, group: pytest.OptionGroup, sab_flag: str, alias: str | None, **attrs: Any) -> None:
        """Register an option under its ``--sab-`` spelling, and under ``alias`` if nobody has it."""
        if alias is not None and self.claimed(alias):
            self.given_up[alias] = (sab_flag, "a plugin loaded before sab-pytest")
            alias = None
        group.addoption(*([sab_flag] if alias is None else [sab_flag, alias]), **attrs)
        if alias is not None:
            self.held[alias] = (sab_flag, group.options[-1])

    def guard(self) -> None:
        """From now on, whoever registers one of our short names gets it (see the module's doc)."""
        for group in self.parser._groups:
            self._guard_group(group)
        getgroup = self.parser.getgroup

        def guarded_getgroup(*args: Any, **kwargs: Any) -> pytest.OptionGroup:
            group = getgroup(*args, **kwargs)
            self._guard_group(group)
            return group

        self.parser.getgroup = guarded_getgroup  # type: ignore[method-assign]

    def _guard_group(self, group: pytest.OptionGroup) -> None:
        if getattr(group.addoption, "_sab_guarded", False):
            return
        addoption: Callable[..., None] = group.addoption

        def guarded_addoption(*opts: str, **attrs: Any) -> None:
            for name in opts:
                if name in self.held:
                    self.give_up(name, _caller())
            addoption(*opts, **attrs)

        guarded_addoption._sab_guarded = True  # type: ignore[attr-defined]
        group.addoption = guarded_addoption  # type: ignore[method-assign]

    def give_up(self, name: str, taker: str) -> None:
        """Remove ``name`` from our option, for another plugin's option to take it."""
        sab_flag, argument = self.held.pop(name)
        action = getattr(argument, "_action", None)
        if action is not None:  # the parser holds argparse actions already
            action.option_strings.remove(name)
            self.parser.optparser._option_string_actions.pop(name, None)
        else:  # the parser builds argparse from these at each parse
            argument._long_opts.remove(name)
        self.given_up[name] = (sab_flag, taker)

    def names(self) -> set[str]:
        """The short names this run holds."""
        return set(self.held)

    def note(self) -> str | None:
        """The line for a run that asks for the benchmark, when short names went to someone else."""
        if not self.given_up:
            return None
        parts = [f"{name} belongs to {taker} here: write {sab_flag}"
                 for name, (sab_flag, taker) in sorted(self.given_up.items())]
        return "sab-pytest: " + "; ".join(parts)


    def misdirected(self, args: list[str]) -> list[str]:
        """One line per short name given up that ``args`` write while not writing its ``--sab-``
        spelling: the value went to the other plugin and the benchmark runs on its own setting's
        default, which the user should hear even under ``-q`` (the header's note is not shown then)."""
        written = {arg.split("=", 1)[0] for arg in args if arg.startswith("--")}
        return [f"sab-pytest: {name} went to {taker}, which declares it too; the benchmark did not take it "
                f"and runs on the default of {sab_flag}: write {sab_flag}"
                for name, (sab_flag, taker) in sorted(self.given_up.items())
                if name in written and sab_flag not in written]

    def respelled(self, text: str) -> str:
        """``text`` (a message naming options) with each short name given up in its ``--sab-``
        spelling, the one that works in this run."""
        for name, (sab_flag, _) in self.given_up.items():
            text = re.sub(rf"(?<![\w-]){re.escape(name)}(?![\w-])", sab_flag, text)
        return text

    def pytest_report_header(self) -> str | None:
        return self.note() if self.active else None


def _caller() -> str:
    """The file that registered an option (a conftest.py, another plugin's module), for the note."""
    frame = sys._getframe(2)
    while frame is not None and frame.f_globals.get("__name__", "").startswith(("_pytest.", "pluggy", __name__)):
        frame = frame.f_back  # type: ignore[assignment]
    return str(frame.f_globals.get("__file__") or "another plugin") if frame is not None else "another plugin"


def respelled(config: pytest.Config, text: str) -> str:
    """``text`` with the option names that work in this run (``Aliases.respelled``)."""
    run_aliases = of(config)
    return run_aliases.respelled(text) if run_aliases is not None else text


def usage_error(config: pytest.Config, exc: BaseException) -> pytest.UsageError:
    """pytest's usage error (one ``ERROR:`` line, exit 4) for ``exc``, naming options as they are
    spelled in this run."""
    return pytest.UsageError(respelled(config, str(exc)))


def of(config: pytest.Config) -> Aliases | None:
    """The run's ``Aliases`` (None where the plugin registered no options, e.g. a bare ``Config``)."""
    plugin = config.pluginmanager.get_plugin(PLUGIN_NAME)
    return plugin if isinstance(plugin, Aliases) else None
