"""``sab_pytest/settings/flags.json``, written from the settings table: what pytest registers for
each option (its spellings, ``add_argument``'s keywords, its ini setting), as data.

The plugin loads in every pytest run of its environment, and most of those runs never ask for the
benchmark. All they need of the table is its flags; building the table itself (the ``Settings``
dataclass with its ~60 fields and an ``Option`` dataclass per option) costs them some 20 ms of CPU
for nothing. So the pytest layer registers the options from ``settings.flags`` (which reads this
file) and builds ``Settings`` only in a run that asks for the benchmark. The file is generated,
never written by hand: run ``python -m sab_pytest.settings.flags_render > sab_pytest/settings/flags.json``
after changing an option; a test compares the committed file with ``render()``.
"""

from __future__ import annotations

import json
from typing import Any

from sab_pytest.settings import options
from sab_pytest.settings.flags import TYPES

#: how the file is made again (the test's failure message names it)
REGENERATE = "python -m sab_pytest.settings.flags_render > sab_pytest/settings/flags.json"

#: argparse ``type``s the table uses, stored by the name ``settings.flags.TYPES`` reads them back with
_TYPES = {kind: name for name, kind in TYPES.items()}


def _argument(argument: dict[str, Any]) -> dict[str, Any]:
    """``add_argument``'s keywords as JSON can hold them: the type by its name."""
    kind = argument.get("type")
    if kind is None:
        return argument
    if kind not in _TYPES:
        raise TypeError(f"an option's type must be one of {sorted(_TYPES.values())}, got {kind!r}")
    return {**argument, "type": _TYPES[kind]}


def render() -> str:
    """The whole file: one option per line, in the table's order."""
    rows = [json.dumps({"name": name, "flag": option.flag, "sab_flag": option.sab_flag, "alias": option.alias,
                        "dest": option.dest, "argument": _argument(option.argument),
                        "cli_default": option.cli_default, "action": option.action, "metavar": option.metavar,
                        "path": option.path, "ini": option.ini, "ini_help": option.ini_help}, ensure_ascii=False)
            for name, option in options()]
    return "[\n" + ",\n".join(rows) + "\n]\n"


if __name__ == "__main__":
    print(render(), end="")
