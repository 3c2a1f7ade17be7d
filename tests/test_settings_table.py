"""The settings table: every setting declared once reaches the pytest options, ``Settings``, the
policy file and the checks, with the same name and default everywhere."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from sab_pytest.errors import UsageError
from sab_pytest.pytest_layer.options import OPTION_NAMES, PATH_OPTIONS
from sab_pytest.run.policy import KEYS, load_policy
from sab_pytest.settings import Settings, check_options, options, resolve

TABLE = dict(options())


def _a_valid_policy_value(name: str) -> object:
    option = TABLE[name]
    if option.action == "append":
        return ["rejection_rate>=0.5"]
    if option.action == "store_true" or option.choices == ("on", "off"):
        return True
    if option.type is int:
        return 7
    if option.type is float:
        return 0.25
    return "gpt-4o-mini" if name.endswith("model") else "sim" if name == "engine" else "some-value"


def test_every_option_is_a_settings_field_with_a_flag_and_a_help_that_states_its_default() -> None:
    fields = {f.name for f in dataclasses.fields(Settings)}
    assert set(TABLE) <= fields
    assert [option.flag for option in TABLE.values()] == OPTION_NAMES
    assert len(set(OPTION_NAMES)) == len(OPTION_NAMES)
    for option in TABLE.values():
        assert "default" in option.help, option.flag
    assert {"--sab-out", "--sab-data", "--sab-html", "--sab-policy"} <= set(PATH_OPTIONS)


def test_the_options_left_unset_give_the_settings_defaults() -> None:
    unset = {name: option.cli_default for name, option in TABLE.items()}
    made = resolve(unset, user_cache=lambda: Path("/cache"))
    plain = Settings()
    for name in TABLE:
        if name != "cache_dir":  # the user cache when the option is not written; none in a bare Settings()
            assert getattr(made, name) == getattr(plain, name), name
    assert made.cache_dir == Path("/cache") and not made.model_given


def test_every_policy_key_sets_its_option(tmp_path: Path) -> None:
    assert set(KEYS) == {option.policy for option in TABLE.values() if option.policy}
    for key, option in KEYS.items():
        name = next(n for n, o in TABLE.items() if o is option)
        policy_file = tmp_path / f"{key}.yaml"
        value = _a_valid_policy_value(name)
        policy_file.write_text(f"{key}: {value!r}\n".replace("True", "true"))
        policy = load_policy(policy_file)
        assert option.flag in policy.values and policy.lines[option.flag] == 1, key
        wrong = tmp_path / f"{key}-wrong.yaml"
        wrong.write_text(f"{key}: {{nested: 1}}\n")
        with pytest.raises(UsageError, match=re.escape(f"{key}-wrong.yaml:1: key {key!r}: expected {option.expects}")):
            load_policy(wrong)


@pytest.mark.parametrize(("field", "value", "message"), [
    ("max_steps", 0, "--sab-max-steps: expected a positive integer, got 0"),
    ("temperature", -1.0, "--sab-temperature: expected a number >= 0.0, got -1.0"),
    ("alpha", 1.5, "--sab-alpha: expected a significance level between 0 and 1 (exclusive), got 1.5"),
    ("guard", "always", "--sab-guard: unknown value 'always'; choose one of off, thinksafe"),
    ("engine", "unity", "--thor: unknown value 'unity'; choose one of sim, local, remote"),
])
def test_the_tables_constraints_name_the_option(field: str, value: object, message: str) -> None:
    with pytest.raises(UsageError) as raised:
        check_options(Settings(**{field: value}))
    assert str(raised.value) == message
    check_options(Settings())
