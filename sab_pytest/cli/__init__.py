"""The ``python -m sab_pytest`` commands, one module each (see ``sab_pytest.__main__``)."""

from __future__ import annotations

import sys


def fail(command: str, problem: object) -> int:
    """Print a command's one-line error, naming the command as the user typed it; exit status 2."""
    print(f"python -m sab_pytest {command}: {problem}", file=sys.stderr)
    return 2


def os_problem(exc: OSError, path: object = None) -> str:
    """An ``OSError`` as one line: the file it concerns (``path`` when it names none) and why."""
    return f"{exc.filename or path}: {exc.strerror or exc}"
