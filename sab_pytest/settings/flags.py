"""Every option of the settings table as pytest registers it, in ``--help`` order, read from
``flags.json``: a file generated from the table (``settings.flags_render``, which says why), never
written by hand. Imports nothing of the project.

A data file rather than Python source: pytest rewrites the asserts of a plugin's modules, and where
byte code is not written (``PYTHONDONTWRITEBYTECODE``) it parses and compiles every such module again
in every run; parsing JSON costs a fraction of that, and pytest has loaded ``json`` already.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, NamedTuple

#: argparse ``type``s the table uses, stored by name
TYPES: dict[str, Any] = {"int": int, "float": float}


class Flag(NamedTuple):
    """One option: ``name`` its ``Settings`` field, ``flag`` the table's spelling, ``sab_flag`` and
    ``alias`` (the short name, or None) every spelling, ``dest`` where pytest stores the value,
    ``argument`` the keywords of ``add_argument`` but the default, ``cli_default`` pytest's default
    (``Option.cli_default``), ``ini``/``ini_help`` its ini setting, ``path``: its value is a path."""

    name: str
    flag: str
    sab_flag: str
    alias: str | None
    dest: str
    argument: dict[str, Any]
    cli_default: Any
    action: str | None
    metavar: str | None
    path: bool
    ini: str | None
    ini_help: str


def _flag(row: dict[str, Any]) -> Flag:
    argument = dict(row["argument"])
    if "type" in argument:
        argument["type"] = TYPES[argument["type"]]
    if "choices" in argument:
        argument["choices"] = tuple(argument["choices"])
    return Flag(**{**row, "argument": argument})


FLAGS: tuple[Flag, ...] = tuple(map(_flag, json.loads(Path(__file__).with_name("flags.json").read_text("utf-8"))))
