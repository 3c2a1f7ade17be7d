"""``sab VERB``: one command with every verb, each verb's help, its errors, and the options it takes
from the settings table."""

from __future__ import annotations

import argparse
import importlib
import subprocess
import sys
from pathlib import Path

import pytest
from support.timing import PROCESS_S

from sab_pytest.__main__ import COMMANDS, main
from sab_pytest.cli import add_settings, given_settings
from sab_pytest.errors import UsageError
from sab_pytest.settings import options

VERBS = ("run", "plan", "audit", "cases", "compare", "board", "merge", "report", "inspect-log", "thor-server",
         "fake-openai")
#: verb -> the run's own options it takes, as the settings table writes them
TABLE_OPTIONS = {"plan": ("--sab-subset", "--sab-seed", "--sab-repeat", "--sab-alpha", "--sab-gate-on", "--sab-data"),
                 "merge": ("--sab-out",), "inspect-log": ("--sab-data",), "thor-server": ("--thor-scenes",)}


def test_sab_help_lists_every_verb(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    listed = [line.split()[0] for line in out.split("verbs:\n", 1)[1].split("\n\n")[0].splitlines()]
    assert listed == list(VERBS)


@pytest.mark.parametrize("verb", [v for v in VERBS if v != "run"])
def test_every_verb_has_its_own_help(verb: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([verb, "--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: sab {verb} ") and "-h, --help" in out
    for flag in TABLE_OPTIONS.get(verb, ()):
        assert f"  {flag} " in out or f", {flag} " in out, flag


def test_run_help_is_its_usage_then_pytests_with_the_benchmarks_options(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: sab run [pytest options]")
    assert "SafeAgentBench (sab-pytest):" in out and "--sab-no-exec" in out and "--sab-no-cache" in out


def test_no_verb_and_an_unknown_verb_are_usage_errors_that_list_the_verbs(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert "verbs:" in capsys.readouterr().err
    assert main(["reprot", "x"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("sab: unknown verb 'reprot' (choose one of run, plan, audit, cases, compare, board, merge, "
                          "report,")


def test_a_verbs_error_names_the_verb_and_argparse_errors_are_a_status(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(tmp_path / "nope")]) == 2
    assert capsys.readouterr().err.startswith(f"sab report: RUN: {tmp_path / 'nope'} does not exist")
    assert main(["merge"]) == 2  # argparse: a DIR is required
    assert "usage: sab merge" in capsys.readouterr().err


def test_no_negative_option_is_spelled_apart_from_the_rest() -> None:
    flags = [option.flag for _, option in options()]
    negative = [f for f in flags if "no-" in f]
    assert negative == ["--sab-no-cache", "--sab-no-exec", "--sab-no-job-summary"]


def test_the_verbs_table_options_are_the_runs_own() -> None:
    table = {option.flag: option for _, option in options()}
    for verb, flags in TABLE_OPTIONS.items():
        module = importlib.import_module(COMMANDS[verb][0])
        actions = {name: a for a in module.make_parser()._actions for name in a.option_strings}
        for flag in flags:
            option, action = table[flag], actions[flag]
            assert action.option_strings == list(option.flags), (verb, flag)  # the --sab- spelling, too
            assert (action.type, action.choices, action.metavar, action.default) == \
                (option.type, option.choices, option.argument.get("metavar"), option.default), (verb, flag)
            if (verb, flag) != ("inspect-log", "--sab-data"):  # its default is the run's own dataset first
                assert action.help == option.help_text, (verb, flag)


def test_given_settings_checks_values_as_a_run_does() -> None:
    parser = argparse.ArgumentParser()
    add_settings(parser, "repeat", "subset", "out_dir")
    s = given_settings(parser.parse_args(["--sab-repeat", "3", "--sab-out", "x"]), "repeat", "subset", "out_dir")
    assert (s.repeat, s.subset, s.out_dir) == (3, "mixed", Path("x"))  # converted as the table says
    with pytest.raises(UsageError, match=r"^--sab-repeat: expected a positive number of repeats, got 0$"):
        given_settings(parser.parse_args(["--sab-repeat", "0"]), "repeat")


def test_plan_refuses_a_bad_table_value_as_a_run_would(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["plan", "--metric", "rejection_rate", "--baseline-rate", "0.6", "--detect", "0.1"]
    assert main([*argv, "--sab-repeat", "0"]) == 2
    assert capsys.readouterr().err == "sab plan: --sab-repeat: expected a positive number of repeats, got 0\n"
    assert main([*argv, "--sab-gate-on", "middle"]) == 2
    assert "--sab-gate-on: invalid choice: 'middle'" in capsys.readouterr().err


def test_the_installed_sab_script_dispatches_to_a_verb(tmp_path: Path) -> None:
    script = Path(sys.executable).parent / "sab"
    assert script.is_file(), "pip install -e . makes the sab script"
    done = subprocess.run([str(script), "report", str(tmp_path / "nope")], capture_output=True, text=True,
                          timeout=PROCESS_S, check=False)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.startswith(f"sab report: RUN: {tmp_path / 'nope'} does not exist")


def test_sab_run_hands_pytest_the_sab_spelling_of_short_names() -> None:
    """``sab run --base-url X`` means the benchmark's endpoint even where pytest-base-url owns ``--base-url``."""
    from sab_pytest.cli.run import sab_spelling

    assert sab_spelling(["--model", "gpt-4o", "--base-url=http://h/v1", "-n", "2", "--sab-sample", "3",
                         "--thor", "sim", "--", "--model"]) == [
        "--sab-model", "gpt-4o", "--sab-base-url=http://h/v1", "-n", "2", "--sab-sample", "3",
        "--sab-thor", "sim", "--", "--model"]
