"""``settings/flags.json`` is the settings table as ``flags_render`` writes it (what the inert plugin
registers without building the table), ``settings.flags`` reads it back as the table's own values,
and the package's names load on first use."""

from __future__ import annotations

from pathlib import Path

import pytest

import sab_pytest.settings
from sab_pytest.settings import flags, options
from sab_pytest.settings.flags_render import REGENERATE, _argument, render


def test_the_file_is_the_table_as_generated() -> None:
    written = Path(flags.__file__).with_name("flags.json").read_text(encoding="utf-8")
    assert written == render(), f"settings/flags.json is out of date: run {REGENERATE}"


def test_each_flag_read_back_is_its_options_registration() -> None:
    table = dict(options())
    assert [flag.name for flag in flags.FLAGS] == list(table)
    for flag in flags.FLAGS:
        option = table[flag.name]
        assert (flag.flag, flag.sab_flag, flag.alias, flag.dest, flag.cli_default, flag.path, flag.ini) == (
            option.flag, option.sab_flag, option.alias, option.dest, option.cli_default, option.path, option.ini)
        assert flag.argument == option.argument, flag.flag  # the type int again, choices a tuple again
    assert {flag.argument.get("type") for flag in flags.FLAGS} == {None, int, float}


def test_a_type_json_cannot_name_is_refused_by_name() -> None:
    assert _argument({"help": "h", "type": float}) == {"help": "h", "type": "float"}
    with pytest.raises(TypeError, match=r"one of \['float', 'int'\], got <class 'complex'>"):
        _argument({"help": "h", "type": complex})


def test_every_name_of_the_package_loads_and_an_unknown_one_is_an_attribute_error() -> None:
    for name in sab_pytest.settings.__all__:
        assert getattr(sab_pytest.settings, name) is not None
    assert "Settings" in dir(sab_pytest.settings)
    with pytest.raises(AttributeError, match="has no attribute 'Setting'"):
        sab_pytest.settings.Setting  # noqa: B018
