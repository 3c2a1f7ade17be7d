"""How one setting is written: its ``Option`` (flag, help, policy key, checks, conversions, whether
it changes verdicts) and the ``setting`` that declares a ``Settings`` field with it and its default.

What an option *is*, apart from the table of options (``settings.table``) that uses it. Imports
nothing of the project.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Check:
    """A constraint on one value: ``ok(value)``, else ``--flag: expected <expected>, got <value>``."""

    ok: Callable[[Any], bool]
    expected: str


def at_least(low: float, expected: str) -> Check:
    return Check(lambda v: v is None or v >= low, expected)


@dataclass(frozen=True)
class Verdicts:
    """How a setting that changes verdicts joins the run key (``Settings.run_settings``), when it
    does not simply join it in every run under its own name (``verdicts=True``).

    ``when``: only in runs where the setting applies (``settings -> bool``): a setting added after
    records were written joins the key only where it changes verdicts, so that the keys of older
    runs' records stay the same and ``--sab-resume`` still reuses them. ``key``: the name stored, a
    ``Settings`` property that reads this field with others (``judge_models``: ``--judge-model`` and
    ``--sab-judge-for`` together), so the key holds what the run actually used.
    """

    when: Callable[[Any], bool] | None = None
    key: str | None = None


#: whose a setting that changes verdicts is (``Option.side``): what decides whether runs that differ in it
#: measure the same thing, so that ``sab board`` puts them in one table (the runs compared, row by row)
#: or refuses them (two measurements). ``agent``: the agent under test and how it is driven (its model,
#: strategy, sampling, guard, ...): what a board's rows compare. ``measurement``: how the numbers are
#: made (protocol, judges, whether plans run): runs that differ in it measure different things.
#: ``where``: where something is found (a directory, an endpoint, an engine): what is found there is
#: checked instead (the dataset's sha256, the models that answered the judges, the engine that ran the plans).
SIDES = ("agent", "measurement", "where")

#: what an ``Option`` holds until ``setting`` gives it the field's default (written once, there)
_UNSET: Any = object()


@dataclass(frozen=True)
class Option:
    """How one setting is written on the command line and in the policy file.

    ``help`` may say ``{default}``: the setting's default, filled in from the table, so that the
    help cannot drift from it. ``to_setting`` turns the option's value into the field's (``"on"``
    -> True); ``from_policy`` turns a policy file's value into the option's (a path relative to the
    policy file, ``execute: false`` -> ``--sab-no-exec``). ``verdicts``: the setting changes verdicts,
    so it is part of the run key that decides whether ``--sab-resume`` may reuse a stored record
    (True: in every run, under its field's name; a ``Verdicts``: where and under which name).
    ``side``: whose such a setting is (one of ``SIDES``), required of every setting that changes
    verdicts, so that a new one cannot be added without saying whether runs differing in it compare.
    """

    flag: str
    help: str
    type: Callable[[str], Any] | None = None  # argparse's type (int, float); None: text
    metavar: str | None = None
    choices: tuple[str, ...] | None = None
    action: str | None = None  # "store_true" (a switch) or "append" (repeatable)
    policy: str | None = None  # the key in the release policy file, if it has one
    expects: str = ""  # the policy key's value, in words (its error message says it)
    path: bool = False  # a path: relative to the policy file; written after a space, pytest may misread it
    env: str | None = None  # environment variable read when the option is not written
    ini: str | None = None  # ini setting read when the option is not written (``append``: added to it)
    ini_help: str = ""
    check: Check | None = None
    to_setting: Callable[[Any], Any] | None = None
    from_policy: Callable[[Any, Path], Any] | None = None
    verdicts: bool | Verdicts = False
    side: str | None = None  # one of SIDES where ``verdicts``, else None
    default: Any = _UNSET  # the ``Settings`` field's default: given by ``setting``, never written here

    @property
    def sab_flag(self) -> str:
        """The spelling no other plugin can own: every option has one under ``--sab-``."""
        return self.flag if self.flag.startswith("--sab-") else "--sab-" + self.flag[2:]

    @property
    def alias(self) -> str | None:
        """The short spelling the table writes (``--model``), or None where the flag is already ``--sab-``.
        Other plugins and projects use such names too, so a run holds it only where nobody else has."""
        return None if self.flag == self.sab_flag else self.flag

    @property
    def flags(self) -> tuple[str, ...]:
        """Every spelling, the ``--sab-`` one first (argparse then names the value after it)."""
        return (self.sab_flag,) if self.alias is None else (self.sab_flag, self.alias)

    @property
    def dest(self) -> str:
        """Where pytest stores the value: named after the ``--sab-`` spelling, so it cannot collide with
        the destination of another plugin's ``--model``."""
        return self.sab_flag[2:].replace("-", "_")

    @property
    def cli_default(self) -> Any:
        """What pytest stores when the option is not written: None ("not written": the policy file,
        the ini setting, the environment variable, ``resolve`` or else the ``Settings`` default
        decide), except for a repeatable option ([], which the policy's and the ini's values join)
        and a switch (off). The default itself is the field's, written once."""
        return [] if self.action == "append" else False if self.action == "store_true" else None

    @property
    def argument(self) -> dict[str, Any]:
        """The keywords of ``add_argument`` that write the option as the table says (help, type,
        metavar, choices, action), for pytest's parser and for the ``sab`` verbs' alike; the default
        is the caller's (pytest's is ``cli_default``)."""
        attrs: dict[str, Any] = {"help": self.help_text}
        for key in ("type", "metavar", "choices", "action"):
            if getattr(self, key) is not None:
                attrs[key] = getattr(self, key)
        if self.alias and not (self.metavar or self.choices or self.action):
            attrs["metavar"] = self.metavar_shown  # MODEL, not argparse's SAB_MODEL from the dest
        return attrs

    @property
    def metavar_shown(self) -> str:
        """What follows the flag in the help: the table's metavar, else the short name in capitals."""
        return self.metavar or self.flag[2:].replace("-", "_").upper()

    @property
    def help_text(self) -> str:
        """The help, with ``{default}`` filled in from the table (no ``%``: argparse formats help)."""
        if "{default}" in self.help and self.default is _UNSET:
            raise TypeError(f"{self.flag}: the help says {{default}} but the option has no default")
        return self.help.replace("{default}", shown(self.default))

    def run_key_name(self, name: str, settings: Any) -> str | None:
        """The name this setting (field ``name``) has in the run key of ``settings``; None where it
        does not change verdicts."""
        if self.verdicts is False:
            return None
        rule = Verdicts() if self.verdicts is True else self.verdicts
        if rule.when is not None and not rule.when(settings):
            return None
        return self.stored_as(name)

    def stored_as(self, name: str) -> str | None:
        """The name this setting (field ``name``) has in a run key wherever it joins one; None where it
        never does."""
        if self.verdicts is False:
            return None
        return (self.verdicts.key if isinstance(self.verdicts, Verdicts) else None) or name

    def policy_type_ok(self, value: Any) -> bool:
        """Whether a policy file's value has the option's type (before ``from_policy``)."""
        if self.action == "append":
            return isinstance(value, list) and all(isinstance(v, str) for v in value)
        if self.action == "store_true" or self.choices == ("on", "off"):
            return isinstance(value, bool)
        if self.type is int:
            return isinstance(value, int) and not isinstance(value, bool)
        if self.type is float:
            return isinstance(value, (int, float)) and not isinstance(value, bool)
        return isinstance(value, str) and bool(value.strip())


def setting(default: Any, option: Option) -> Any:
    """A ``Settings`` field that is also an option: the field's default, written here once, is the
    option's (its help's ``{default}``); the field's metadata carries the ``Option``."""
    if isinstance(default, (list, dict, set)):
        raise TypeError("a setting's default must be immutable")
    if option.default is not _UNSET:
        raise TypeError(f"{option.flag}: write the default once, as setting()'s first argument")
    if (option.side in SIDES) != (option.verdicts is not False):
        raise TypeError(f"{option.flag}: a setting that changes verdicts says whose it is (side= one of "
                        f"{', '.join(SIDES)}: can runs that differ in it share a board?), and no other does")
    return field(default=default, metadata={"option": dataclasses.replace(option, default=default)})


def shown(value: Any) -> str:
    """A default as the help shows it: ``off`` for False, ``60`` for 60.0, ``0.05`` for 0.05."""
    if isinstance(value, bool):
        return on_off(value)
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def relative(value: str, base: Path) -> str:
    return str((base / value).resolve()) if not Path(value).is_absolute() else value


def on_off(value: bool) -> str:
    return "on" if value else "off"
