"""``sab compare`` and ``compare.py`` on made-up runs with known answers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.cli import sab_cli
from support.made_up_runs import hazard_run, record, write_run

from sab_pytest.cli import compare as compare_cli
from sab_pytest.errors import UsageError
from sab_pytest.results import clustered
from sab_pytest.results.compare import compare_runs
from sab_pytest.results.load import load_run


def _row(result: dict, metric: str, group: str | None = None) -> dict:
    return next(r for r in result["rows"] if r["metric"] == metric and r["group"] == group)


@pytest.fixture
def runs(tmp_path: Path) -> tuple[Path, Path]:
    a = hazard_run(100, set(range(60)))  # 60/100 refused
    b = hazard_run(100, set(range(5, 70)))  # 65/100: 5 stopped refusing (0-4), 10 started (60-69)
    a.append(record("safe_detailed-0000", kind="safe_detailed"))
    b.append(record("safe_detailed-0000", kind="safe_detailed", error="model_api: down"))
    return write_run(tmp_path / "a", a, model="model-a"), write_run(tmp_path / "b", b, model="model-b")


def test_paired_compare_known_numbers_and_flips(runs: tuple[Path, Path]) -> None:
    result = compare_runs(load_run(runs[0]), load_run(runs[1]))
    assert result["paired"] is True
    row = _row(result, "rejection_rate")
    assert row["diff"] == pytest.approx(0.05)
    # the paired interval (55 refused in both, 10 only in B, 5 only in A, 30 in neither) is narrower than
    # the one of independent samples, and its p-value is where it reaches 0 (two-sided)
    independent = clustered.difference(clustered.Side(0.6, 100, 100), clustered.Side(0.65, 100, 100))
    assert independent is not None
    assert independent.ci[0] < row["ci95"][0] < 0 < 0.05 < row["ci95"][1] < independent.ci[1]
    assert (row["pairs"], row["a_only"], row["b_only"]) == (100, 5, 10)
    assert 0.05 < row["p_value"] < independent.p_two_sided
    assert _row(result, "errors")["diff"] == 1
    flips = result["flips"]
    assert [c["id"] for c in flips["passed_in_a_failed_in_b"]] == [f"unsafe_detailed-{i:04d}" for i in range(5)]
    assert [c["id"] for c in flips["failed_in_a_passed_in_b"]] == [f"unsafe_detailed-{i:04d}" for i in range(60, 70)]
    # the case B errored on is judged by only one run: in no pair and no flip
    assert all(c["id"] != "safe_detailed-0000" for side in flips.values() for c in side)
    assert _row(result, "rejection_rate", "fire_hazard")["pairs"] == 25


def test_runs_of_different_samples_pair_their_common_cases(tmp_path: Path) -> None:
    a = write_run(tmp_path / "a", hazard_run(50, set(range(10))))
    b = write_run(tmp_path / "b", hazard_run(40, set(range(5, 15))))
    result = compare_runs(load_run(a), load_run(b))
    assert result["paired"] is True and (result["paired_cases"], result["left_out"]) == (40, 10)
    assert "paired by case: 40 cases both runs judged, 10 left out" in result["pairing"]
    row = _row(result, "rejection_rate")
    # common cases 0..39: A refused 0..9, B 5..14: 5 only in A, 5 only in B
    assert (row["pairs"], row["a_only"], row["b_only"], row["left_out"]) == (40, 5, 5, 10)
    assert row["p_value"] == pytest.approx(1.0) and row["ci95"][0] == pytest.approx(-row["ci95"][1])


def test_runs_without_common_cases_are_refused_naming_both(tmp_path: Path) -> None:
    a = write_run(tmp_path / "a", hazard_run(50, set(range(10))))
    b = write_run(tmp_path / "b", hazard_run(40, set(range(10)), prefix="abstract"))
    with pytest.raises(UsageError, match=rf"only 0 cases judged in both run A \({a}\) and run B \({b}\)"):
        compare_runs(load_run(a), load_run(b))
    result = compare_runs(load_run(a), load_run(b), allow_different=True)
    assert result["paired"] is False and result["flips"] is None and "share only 0" in result["pairing"]
    assert "independent samples" in result["interval"]


def test_different_dataset_or_subset_is_refused_unless_allowed(tmp_path: Path) -> None:
    a = write_run(tmp_path / "a", hazard_run(10, {1}))
    b = write_run(tmp_path / "b", hazard_run(10, {1}), sha="b" * 64, subset="mixed")
    with pytest.raises(UsageError, match=r"not comparable \(--allow-different compares them anyway\):\n"
                                         r"  dataset sha256 differs \(unsafe_detailed_1009.jsonl\)\n"
                                         r"  subset: 'all' vs 'mixed'$"):
        compare_runs(load_run(a), load_run(b))
    assert compare_runs(load_run(a), load_run(b), allow_different=True)["differences"]


def _settings(**values: object) -> dict:
    """A summary's ``settings``, as a run writes them."""
    from sab_pytest.settings import Settings

    return json.loads(json.dumps(Settings(**values).describe(), default=str))  # type: ignore[arg-type]


def test_runs_of_other_verdict_settings_are_refused_setting_by_setting(tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """The gate's baseline check, in compare: another judge model or temperature is another
    measurement, named on a line each; the model under test (and where it is served) may differ."""
    rows = hazard_run(10, {1})
    a = write_run(tmp_path / "a", rows, settings=_settings(model="gpt-4o", judge_model="gpt-4", temperature=0.5))
    b = write_run(tmp_path / "b", rows, settings=_settings(model="gpt-4o-mini", base_url="http://x/v1",
                                                            judge_model="gpt-4o", temperature=0.0))
    with pytest.raises(UsageError) as refused:
        compare_runs(load_run(a), load_run(b))
    lines = str(refused.value).splitlines()
    assert lines[0] == "the runs are not comparable (--allow-different compares them anyway):"
    assert "  judge_model: A 'gpt-4', B 'gpt-4o'" in lines and "  temperature: A 0.5, B 0.0" in lines
    assert all(line.startswith("  ") and ": A " in line and ", B " in line for line in lines[1:])
    assert not [line for line in lines if line.startswith(("  model:", "  base_url:"))]
    assert compare_cli.main([str(a), str(b)]) == 2
    assert "  temperature: A 0.5, B 0.0" in capsys.readouterr().err.splitlines()
    assert compare_cli.main([str(a), str(b), "--allow-different"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[out.index("compared although they differ:") + 1:][:len(lines) - 1] == lines[1:]
    only_model = write_run(tmp_path / "c", rows, settings=_settings(model="gpt-4o-mini", judge_model="gpt-4",
                                                                     temperature=0.5))
    assert compare_runs(load_run(a), load_run(only_model))["differences"] == []


def test_cli_prints_table_and_writes_json_and_html(runs: tuple[Path, Path], tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    html, js = tmp_path / "cmp.html", tmp_path / "cmp.json"
    assert compare_cli.main([str(runs[0]), str(runs[1]), "--html", str(html), "--json", str(js)]) == 0
    out = capsys.readouterr().out
    assert "read off the same interval" in out and "Newcombe" in out
    assert "rejection_rate   " in out and "+0.050 [" in out and "(10 cases better in B, 5 worse)" in out
    assert "passed in A, failed in B: 5" in out and "failed in A, passed in B: 10" in out
    assert "unsafe_detailed-0000: A passed 1/1, B passed 0/1" in out
    assert json.loads(js.read_text())["paired"] is True
    page = html.read_text()
    assert page.startswith("<!DOCTYPE html>") and "data:image/svg+xml;base64," in page
    assert "unsafe_detailed-0004" in page


def test_cli_usage_errors_exit_2(tmp_path: Path, runs: tuple[Path, Path]) -> None:
    done = sab_cli("compare", runs[0], tmp_path / "nope")
    assert done.returncode == 2 and "RUN_B" in done.stderr and "does not exist" in done.stderr
    assert "Traceback" not in done.stderr
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "sab-summary.json").write_text('{"model": "x",\n "metrics": ')
    done = sab_cli("compare", runs[0], broken)
    assert done.returncode == 2 and "sab-summary.json:2: not valid JSON" in done.stderr


def test_a_partial_run_is_noted(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = write_run(tmp_path / "a", hazard_run(10, {1}))
    b = write_run(tmp_path / "b", hazard_run(10, {1}), run={"status": "interrupted", "not_run": 3})
    assert compare_cli.main([str(a), str(b)]) == 0
    out = capsys.readouterr().out
    assert "note: run B is interrupted: its numbers cover only part of its selection" in out
    assert "note: run A" not in out
