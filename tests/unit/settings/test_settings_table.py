"""The settings table: every setting declared once reaches the pytest options, ``Settings``, the
policy file and the checks, with the same name and default everywhere."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

import pytest

from sab_pytest.errors import UsageError
from sab_pytest.pytest_layer.options import OPTION_NAMES, PATH_OPTIONS
from sab_pytest.run.policy import KEYS, load_policy
from sab_pytest.settings import DEFAULT_ALPHA, Settings, check_options, options
from sab_pytest.settings.resolution import resolve
from sab_pytest.settings.spec import SIDES, Option, setting

TABLE = dict(options())


def _a_valid_policy_value(name: str) -> object:
    option = TABLE[name]
    if option.action == "append":
        return ["rejection_rate>=0.5"]
    if option.action == "store_true" or option.choices == ("on", "off"):
        return True
    if option.choices:  # the policy file checks a value against its choices (all its errors at once)
        return option.choices[0]
    if option.type is int:
        return 7
    if option.type is float:
        return 0.25
    return "gpt-4o-mini" if name.endswith("model") else "sim" if name == "engine" else "some-value"


def test_every_option_is_a_settings_field_with_a_flag_and_a_help_that_states_its_default() -> None:
    fields = {f.name: f for f in dataclasses.fields(Settings)}
    assert set(TABLE) <= set(fields)
    assert [option.sab_flag for option in TABLE.values()] == OPTION_NAMES
    assert all(name.startswith("--sab-") for name in OPTION_NAMES)  # every option has a spelling no one else owns
    assert len(set(OPTION_NAMES)) == len(OPTION_NAMES)
    for name, option in TABLE.items():
        assert option.default == fields[name].default, name  # the option's default is the field's
        assert "default" in option.help_text and "{" not in option.help_text, option.flag
        if "%" in option.help_text:  # argparse formats the help: a lone % breaks ``pytest --help``
            assert "%(" in option.help_text, option.flag
    assert {"--sab-out", "--sab-data", "--sab-html", "--sab-policy"} <= set(PATH_OPTIONS)


def test_a_default_value_is_written_once_and_shown_from_the_table() -> None:
    """A default that is a plain value reaches the help from the table (``{default}``), so the two cannot
    drift; only the defaults that depend on other options (``resolve``) are told in words."""
    told_in_words = {"judge_model": "the model's judges", "judge_api_key_env": "the agent's key variable",
                     "judge_prompts": "the protocol's",
                     "no_cache": "use it", "execute": "execute", "allow_modified_data": "refuse them",
                     "no_job_summary": "both there"}
    for name, option in TABLE.items():
        if isinstance(option.default, (int, float, str)) and name not in told_in_words:  # bool is an int
            assert "{default}" in option.help, option.flag
        assert not re.search(r"default:? [0-9]", option.help), option.flag
    assert TABLE["timeout_s"].help_text.endswith("(default 60)")
    assert TABLE["safety_hint"].help_text.startswith("add one") and "(default off, " in TABLE["safety_hint"].help_text
    assert TABLE["alpha"].default == DEFAULT_ALPHA and f"(default {DEFAULT_ALPHA})" in TABLE["alpha"].help_text
    with pytest.raises(TypeError, match="write the default once"):
        setting(1, dataclasses.replace(TABLE["seed"], default=2))


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


#: run keys of settings (records in ``sab-results.jsonl`` carry them): ``--sab-resume`` reuses a
#: results file's records only while the same settings give the same key, so a key must not change
#: when an unrelated option or a column of the settings table is added
KEYS_OF_EARLIER_RECORDS = [
    ({"protocol": "sab"}, "f8245875d759e07f"),
    ({"protocol": "sab", "strategy": "react", "max_steps": 5, "action_format": "text"}, "16de596b8b9e632f"),
    ({"protocol": "sab", "model": "gpt-4o", "strategy": "map_vlm", "map_vision_model": "eyes-1"}, "b3e07eeefd78b86d"),
    ({"protocol": "sab", "guard": "thinksafe", "guard_model": "rules"}, "5543cca6c0927518"),
    ({"protocol": "sab", "model": "gpt-4o", "judge_model": "gpt-4o", "judge_for": ("detailed=gpt-4",),
      "judge_temperature": "0.5", "judge_prompts": "upstream"}, "7c835facd1372924"),
    ({"protocol": "sab", "base_url": "http://x/v1", "data_dir": "/d", "execute": False, "temperature": 0.3,
      "max_tokens": 100, "engine": "local", "safety_hint": True}, "70529c131b45beeb"),
]


@pytest.mark.parametrize(("values", "key"), KEYS_OF_EARLIER_RECORDS)
def test_the_run_key_of_the_same_settings_stays_the_same(values: dict[str, Any], key: str) -> None:
    assert Settings(**values).run_key() == key


def _another(name: str, value: object) -> object:
    """A value of the field other than ``value``, which keeps every ``Verdicts.when`` of the table true."""
    special = {"judge_for": ("detailed=other-judge",), "judge_panel": ("judge-a,judge-c",),
               "judge_temperature": "0.7", "shard": (1, 2),
               "strategy": "basic", "model": "other-model", "judge_model": "other-judge", "guard": "other"}
    if name in special:
        return special[name]
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value + 1
    if isinstance(value, tuple):
        return (*value, "rejection_rate>=0.5")
    if isinstance(value, Path):
        return value / "elsewhere"
    field = next(f for f in dataclasses.fields(Settings) if f.name == name)
    return {"int | None": 3, "float | None": 1.5, "Path | None": Path("elsewhere")}.get(str(field.type), "other")


def test_the_verdicts_column_decides_the_run_key() -> None:
    """Changing a setting changes the run key exactly when the table says it changes verdicts."""
    every_rule_applies = Settings(model="gpt-4o", judge_model="gpt-4o", strategy="map_vlm", guard="thinksafe",
                                  judge_panel=("judge-a,judge-b",))
    assert set(every_rule_applies.run_settings()) == {
        option.run_key_name(name, every_rule_applies) for name, option in TABLE.items() if option.verdicts}
    for name, option in TABLE.items():
        changed = dataclasses.replace(every_rule_applies, **{name: _another(name, getattr(every_rule_applies, name))})
        assert (changed.run_key() != every_rule_applies.run_key()) == bool(option.verdicts), name
    assert not TABLE["concurrency"].verdicts and TABLE["temperature"].verdicts
    # a ``when`` keeps a setting out of the key where it does not apply: an offline text planner has no episodes
    assert Settings(max_steps=5).run_key() == Settings().run_key() != Settings(temperature=0.5).run_key()
    assert Settings(concurrency=8).run_settings() == Settings().run_settings()


def test_a_setting_that_changes_verdicts_says_whose_it_is() -> None:
    """A new setting that changes verdicts cannot be declared without saying whether runs that differ in
    it may share a board (``side``, read by ``sab board`` through ``run_setting_sides``): the table does
    not load until it says."""
    with pytest.raises(TypeError, match=r"--sab-x: a setting that changes verdicts says whose it is \(side= one of "
                                        "agent, measurement, where"):
        setting(1, Option("--sab-x", "x", verdicts=True))
    with pytest.raises(TypeError, match="--sab-x: a setting that changes verdicts says whose"):
        setting(1, Option("--sab-x", "x", side="agent"))  # and no other setting does
    assert all((option.side in SIDES) == bool(option.verdicts) for option in TABLE.values())
