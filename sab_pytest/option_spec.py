"""How one setting is written: its ``Option`` (flag, help, policy key, checks, conversions) and the
``setting`` that declares a ``Settings`` field with it.

Kept apart from the table itself (``settings``) so that the table stays one screenful per group of
options; every layer reads both. Imports nothing of the project.
"""

from __future__ import annotations

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
class Option:
    """How one setting is written on the command line and in the policy file.

    ``cli_default`` is what pytest stores when the option is not written (None where the value then
    comes from ``env``, ``ini`` or ``resolve``); ``to_setting`` turns the option's value into the
    field's (``"on"`` -> True); ``from_policy`` turns a policy file's value into the option's (a
    path relative to the policy file, ``execute: false`` -> ``--no-sab-exec``).
    """

    flag: str
    help: str
    type: Callable[[str], Any] | None = None  # argparse's type (int, float); None: text
    metavar: str | None = None
    choices: tuple[str, ...] | None = None
    action: str | None = None  # "store_true" (a switch) or "append" (repeatable)
    cli_default: Any = None
    policy: str | None = None  # the key in the release policy file, if it has one
    expects: str = ""  # the policy key's value, in words (its error message says it)
    path: bool = False  # a path: relative to the policy file; written after a space, pytest may misread it
    env: str | None = None  # environment variable read when the option is not written
    ini: str | None = None  # ini setting read when the option is not written (``append``: added to it)
    ini_help: str = ""
    check: Check | None = None
    to_setting: Callable[[Any], Any] | None = None
    from_policy: Callable[[Any, Path], Any] | None = None

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
    """A ``Settings`` field that is also an option (the field's metadata carries the ``Option``)."""
    if isinstance(default, (list, dict, set)):
        raise TypeError("a setting's default must be immutable")
    return field(default=default, metadata={"option": option})


def relative(value: str, base: Path) -> str:
    return str((base / value).resolve()) if not Path(value).is_absolute() else value


def on_off(value: bool) -> str:
    return "on" if value else "off"
