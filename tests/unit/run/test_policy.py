"""The release policy file: every key validated with file, line and key in the message."""

from __future__ import annotations

from pathlib import Path

import pytest

from sab_pytest.errors import UsageError
from sab_pytest.run.policy import load_policy


def _policy(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "release.yaml"
    path.write_text(text)
    return path


def test_a_good_policy_maps_onto_options(tmp_path: Path) -> None:
    (tmp_path / "runs" / "v1").mkdir(parents=True)
    path = _policy(tmp_path, "model: gpt-4o\nsafety_hint: true\nexecute: false\nsample: 20\nalpha: 0.01\n"
                             "gates:\n  - rejection_rate >= 0.6\n  - no_regression(rejection_rate)\n"
                             "baseline: runs/v1\nhtml: out/report.html\ntemperature: 0\n")
    p = load_policy(path)
    assert p.get("--model") == "gpt-4o" and p.get("--sab-safety-hint") == "on" and p.get("--sab-no-exec") is True
    assert p.get("--sab-sample") == 20 and p.get("--sab-alpha") == 0.01 and p.get("--sab-temperature") == 0.0
    assert p.get("--sab-gate") == ["rejection_rate >= 0.6", "no_regression(rejection_rate)"]
    # paths are relative to the policy file, so the pipeline may run from anywhere
    assert p.get("--sab-baseline") == str((tmp_path / "runs" / "v1").resolve())
    assert p.get("--sab-html") == str((tmp_path / "out" / "report.html").resolve())
    assert p.lines["--sab-gate"] == 6


@pytest.mark.parametrize(("text", "needle"), [
    ("model: gpt-4o\nmodle: x\n", r"release.yaml:2: unknown key 'modle'; known keys: model, "),
    ("model: gpt-4o\nsample: many\n", r"release.yaml:2: key 'sample': expected a whole number of cases, got 'many'"),
    ("seed: 1\nsafety_hint: maybe\n", r"release.yaml:2: key 'safety_hint': expected true or false, got 'maybe'"),
    ("alpha: [1]\n", r"release.yaml:1: key 'alpha': expected a number between 0 and 1, got \[1\]"),
    ("gates: rejection_rate>=0.5\n", r"release.yaml:1: key 'gates': expected a list of gate expressions"),
    ("model: a\ngates:\n  - rejection_rate>=0.5\n  - rejection_rate>=150%\n",
     r"release.yaml:4: gates\[1\]: threshold 150% in gate 'rejection_rate>=150%' is out of range"),
    ("model: a\nmodel: b\n", r"release.yaml:2: key 'model' given twice \(first on line 1\)"),
    ("- model: a\n", r"release.yaml:1: expected a mapping of keys"),
    ("model: [a\n", r"release.yaml:2: not valid YAML"),
    ("", r"release.yaml is empty"),
    ("sample: true\n", r"key 'sample': expected a whole number of cases, got True"),
])
def test_policy_errors_name_file_line_and_key(tmp_path: Path, text: str, needle: str) -> None:
    with pytest.raises(UsageError, match=needle):
        load_policy(_policy(tmp_path, text))


def test_missing_policy_file(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"--sab-policy: cannot read .*nope\.yaml"):
        load_policy(tmp_path / "nope.yaml")


def test_every_problem_of_a_policy_is_in_one_error(tmp_path: Path) -> None:
    """Four mistakes, one run: each with its line and key, the good keys not reported."""
    text = ("model: gpt-4o\nmodle: x\nsample: many\ngates:\n  - rejection_rate>=0.5\n  - rejection_rate>=150%\n"
            "  - nonsense\ncase_tests: maybe\nalpha: 2\n")
    with pytest.raises(UsageError) as info:
        load_policy(_policy(tmp_path, text))
    message = str(info.value)
    assert message.startswith(f"--sab-policy: {tmp_path / 'release.yaml'}: 6 problems:")
    for needle in ("release.yaml:2: unknown key 'modle'", "release.yaml:3: key 'sample': expected a whole number",
                   "release.yaml:6: gates[1]: threshold 150%", "release.yaml:7: gates[2]: cannot parse gate",
                   "release.yaml:8: key 'case_tests': --sab-case-tests: unknown value 'maybe'; choose one of fail, "
                   "record",
                   "release.yaml:9: key 'alpha': --sab-alpha: expected a significance level between 0 and 1"):
        assert needle in message, needle
    assert "release.yaml:1" not in message and len(message.splitlines()) == 7  # the good key is not reported


def test_case_tests_in_a_policy(tmp_path: Path) -> None:
    assert load_policy(_policy(tmp_path, "case_tests: fail\n")).get("--sab-case-tests") == "fail"
