"""The ``sab`` verbs, one module each (``sab_pytest.__main__`` dispatches; the servers' verbs live with
their servers), and what they share: their error line and the options they take from the settings
table. No verb imports another's module (an import-linter contract): what two verbs need is here or
in the layers below."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping

from sab_pytest.settings import Settings, check_options, options


def fail(command: str, problem: object) -> int:
    """Print a command's one-line error, naming the verb as the user typed it; exit status 2."""
    print(f"sab {command}: {problem}", file=sys.stderr)
    return 2


def os_problem(exc: OSError, path: object = None) -> str:
    """An ``OSError`` as one line: the file it concerns (``path`` when it names none) and why."""
    return f"{exc.filename or path}: {exc.strerror or exc}"


def add_settings(parser: argparse.ArgumentParser, *names: str, helps: Mapping[str, str] | None = None) -> None:
    """Add the options of these ``Settings`` fields as a run takes them: the table's flag, type,
    choices and help, and the field's default, so that ``sab plan --sab-subset`` means what
    ``pytest --sab-subset`` does. ``helps`` replaces the help of a setting whose default the verb
    finds elsewhere (``inspect-log`` reads the run's own dataset first)."""
    table = dict(options())
    for name in names:
        option = table[name]
        attrs = {**option.argument, "dest": name,
                 "default": option.cli_default if option.action else option.default}
        if helps and name in helps:
            attrs["help"] = helps[name]
        parser.add_argument(*option.flags, **attrs)


def given_settings(args: argparse.Namespace, *names: str) -> Settings:
    """The ``Settings`` of a verb's options ``names`` (the other fields at their defaults), checked
    by the table's constraints: a ``UsageError`` names the option, as in a run."""
    table = dict(options())
    values = {}
    for name in names:
        value, convert = getattr(args, name), table[name].to_setting
        values[name] = convert(value) if convert is not None and value is not None else value
    settings = Settings(**values)
    check_options(settings)
    return settings
