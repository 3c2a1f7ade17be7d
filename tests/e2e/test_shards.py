"""Scale-out: ``--sab-shard K/N`` slices, pytest-split's and pytest-shard's parts, ``sab merge``, xdist's
own ``--tx``."""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
from pathlib import Path

import junitparser
import pytest
from support import junit_schema
from support.benchmark import RunSetup
from support.cli import sab_cli
from support.results import read_records, read_summary
from support.tiny_dataset import N_CASES

from sab_pytest.results.merge import MergeError, merge, read_run
from sab_pytest.run import shard


@pytest.fixture
def run_setup(real_scenes_dir: Path) -> RunSetup:
    """``run(*args, out=...)``: in this process (a subprocess per run would dominate the test's
    time); with ``-n``/``--tx`` the workers are processes of their own."""
    return RunSetup((f"--thor-scenes={real_scenes_dir}", "-p", "no:cacheprovider"), inprocess=True)


def _ids(directory: Path) -> list[str]:
    return [r["case"]["id"] for r in read_records(directory)]


def _merge_cli(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return sab_cli("merge", *args)


def test_take_partitions_any_selection_evenly() -> None:
    ids = [f"unsafe_detailed-{i:04d}" for i in range(10)] + ["abstract-0001-L2", "safe_detailed-0003"]
    parts = [shard.take(ids, k, 5) for k in range(1, 6)]
    assert set().union(*parts) == set(ids) and sum(map(len, parts)) == len(ids)
    assert {len(p) for p in parts} == {2, 3}
    assert shard.take(reversed(ids), 2, 5) == parts[1]  # order of collection does not matter
    assert shard.fingerprint(ids) == shard.fingerprint(reversed(ids)) != shard.fingerprint(ids[1:])


def test_four_shards_merged_equal_one_run_to_the_last_digit(run, pytester: pytest.Pytester) -> None:
    whole = run(out="whole")
    for k in range(1, 5):
        part = run(f"--sab-shard={k}/4", out=f"s{k}")  # in this process: a shard under xdist is the next test's
        part.stdout.fnmatch_lines([f"*shard {k}/4*"])
        info = read_summary(pytester.path / f"s{k}")["shard"]
        assert info["index"] == k and info["count"] == 4 and info["selected"] == N_CASES
        assert len(_ids(pytester.path / f"s{k}")) == info["cases"] in (4, 5)
    done = _merge_cli(*(pytester.path / f"s{k}" for k in range(1, 5)), "--sab-out", pytester.path / "merged")
    assert done.returncode == whole.ret == 1, done.stderr  # the reference agent fails the hazards
    merged, single = read_summary(pytester.path / "merged"), read_summary(pytester.path / "whole")
    assert merged["metrics_full"] == single["metrics_full"] and merged["cases"] == N_CASES
    assert merged["shard"] is None and [m["shard"]["index"] for m in merged["merged_from"]] == [1, 2, 3, 4]
    assert sorted(_ids(pytester.path / "merged")) == sorted(_ids(pytester.path / "whole"))
    assert "merged 4 shards, 19 cases" in done.stdout and "Rejection rate" in done.stdout


def test_parts_cut_by_pytest_split_and_pytest_shard_merge_into_the_whole_run(run, pytester: pytest.Pytester) -> None:
    p = pytester.path
    run(out="whole")
    whole = read_summary(p / "whole")
    parts = {"pytest-split": [("--splits", "2", "--group", str(k)) for k in (1, 2)],
             "pytest-shard": [("--num-shards", "2", "--shard-id", str(k)) for k in (0, 1)]}  # counted from 0
    for sharder, groups in parts.items():
        for k, args in enumerate(groups, 1):
            done = run(*args, out=f"{sharder}-{k}")
            summary = read_summary(p / f"{sharder}-{k}")
            assert "RERUN" not in done.stdout.str() and summary["run"]["status"] == "complete"
            assert summary["run"]["partial_selection"] is False
            info = summary["shard"]
            assert (info["sharder"], info["index"], info["count"], info["selected"]) == (sharder, k, 2, N_CASES)
            assert 0 < info["cases"] == len(_ids(p / f"{sharder}-{k}")) < N_CASES
            done.stdout.fnmatch_lines([f"*part {k}/2 cut by {sharder}*"])
        merged = merge([read_run(p / f"{sharder}-{k}") for k in (1, 2)], p / f"{sharder}-merged")
        assert merged["metrics_full"] == whole["metrics_full"] and merged["cases"] == N_CASES
        assert merged["run"]["status"] == "complete" and merged["missing_results"] == 0
        assert sorted(_ids(p / f"{sharder}-merged")) == sorted(_ids(p / "whole"))
    with pytest.raises(MergeError, match="parts cut by different sharders"):
        merge([read_run(p / "pytest-split-1"), read_run(p / "pytest-shard-2")], p / "mixed")
    both = run("--sab-shard=1/2", "--splits", "2", "--group", "1", out="both")
    assert both.ret == pytest.ExitCode.USAGE_ERROR
    both.stderr.fnmatch_lines(["*--sab-shard 1/2: pytest-split also cuts this run into parts (part 1 of 2)*"])


def test_shard_is_taken_after_keyword_selection_and_is_stable_under_xdist(run, pytester: pytest.Pytester) -> None:
    serial = run("-k", "abstract", "--sab-shard=2/3", "-p", "no:xdist", out="a")
    assert serial.parseoutcomes()["deselected"] == N_CASES - 3  # 8 abstract cases; shard 2 of 3 gets 3
    spread = run("-k", "abstract", "--sab-shard=2/3", "-n", "2", out="b")
    spread.stdout.fnmatch_lines(["*shard 2/3*"])
    assert sorted(_ids(pytester.path / "a")) == sorted(_ids(pytester.path / "b"))
    assert all(cid.startswith("abstract-") for cid in _ids(pytester.path / "a"))
    assert read_summary(pytester.path / "a")["shard"] == read_summary(pytester.path / "b")["shard"]
    assert spread.ret == serial.ret


def _edit_summary(src: Path, dst: Path, change) -> Path:
    """A copy of shard ``src`` whose summary says something else (what another job could have run)."""
    shutil.copytree(src, dst)
    summary = read_summary(dst)
    change(summary)
    (dst / "sab-summary.json").write_text(json.dumps(summary))
    return dst


def test_merge_gates_refusals_and_incomplete_shards(run, pytester: pytest.Pytester) -> None:
    p = pytester.path
    for k in (1, 2, 3):
        run("--model", "refuse", f"--sab-shard={k}/3", "--sab-gate", "rejection_rate>=0.9", out=f"r{k}")
    done = _merge_cli(p / "r1", p / "r2", p / "r3", "--sab-out", p / "m")
    assert done.returncode == 0, done.stdout + done.stderr  # the gate holds, nothing errored
    assert "gate PASS: rejection_rate>=0.9" in done.stdout and read_summary(p / "m")["gates_passed"] is True

    def other_model(s: dict) -> None:
        s["settings"]["model"] = "gpt-4o"

    def other_selection(s: dict) -> None:
        s["shard"].update(selection="0123456789abcdef", selected=8)

    def other_data(s: dict) -> None:
        s["dataset_sha256"] = {"unsafe_detailed_1009.jsonl": "0" * 64}

    cases = {
        "missing": ([p / "r1", p / "r2"], ["missing shard(s): 3/3"]),
        "twice": ([p / "r1", p / "r2", p / "r2", p / "r3"], ["shard 2/3 given 2 times"]),
        "settings": ([p / "r1", p / "r2", _edit_summary(p / "r3", p / "x-model", other_model)],
                     ["settings differ: model is 'refuse' in", "but 'gpt-4o' in"]),
        "selection": ([p / "r1", p / "r2", _edit_summary(p / "r3", p / "x-sel", other_selection)],
                      ["shards selected different cases"]),
        "dataset": ([p / "r1", p / "r2", _edit_summary(p / "r3", p / "x-data", other_data)], ["dataset differs"]),
        "not a shard": ([p / "r1", _edit_summary(p / "r2", p / "plain", lambda s: s.update(shard=None))],
                        ["plain: not a shard"]),
        "no run": ([p / "r1", p / "nowhere"], ["nowhere: no sab-summary.json"]),
    }
    for name, (dirs, needles) in cases.items():
        out = p / f"out-{name.replace(' ', '-')}"
        done = _merge_cli(*dirs, "--sab-out", out)
        assert done.returncode == 2, name
        for needle in needles:
            assert needle in done.stderr, (name, done.stderr)
        assert not (out / "sab-summary.json").exists()
    assert _merge_cli(p / "r1", "--sab-out", p / "r1").returncode == 2  # never overwrite a shard
    (p / "a-file").write_text("")
    unwritable = _merge_cli(p / "r1", p / "r2", p / "r3", "--sab-out", p / "a-file" / "m")
    assert unwritable.returncode == 2 and "Traceback" not in unwritable.stderr
    assert "sab merge: --sab-out " in unwritable.stderr
    assert "/a-file/m: cannot create the output directory: Not a directory" in unwritable.stderr
    assert "Not a directory" in unwritable.stderr

    # a shard whose last case never finished: merged, but the merge cannot pass
    shutil.copytree(p / "r3", p / "cut")
    results = p / "cut" / "sab-results.jsonl"
    results.write_text("".join(results.read_text().splitlines(keepends=True)[:-1]))
    done = _merge_cli(p / "r1", p / "r2", p / "cut", "--sab-out", p / "m2")
    assert done.returncode == 1 and "incomplete: 1 selected case(s) have no result" in done.stdout
    assert read_summary(p / "m2")["missing_results"] == 1 and read_summary(p / "m2")["cases"] == N_CASES - 1
    runs = [read_run(p / d) for d in ("r1", "r2", "r3")]
    doubled = dataclasses.replace(runs[2], records=runs[2].records + runs[0].records[:1])
    with pytest.raises(MergeError, match=r"case \S+ is in both"):
        merge([runs[0], runs[1], doubled], p / "m3")


def test_xdist_tx_popen_runs_the_benchmark(run, pytester: pytest.Pytester) -> None:
    serial = run("--model", "refuse", "-p", "no:xdist", out="serial")
    spread = run("--model", "refuse", "--tx", "2*popen", "--dist", "load", out="tx")
    assert "2 workers" in spread.stdout.str() or "[gw1]" in spread.stdout.str()
    # outcomes, not warnings: the in-process serial run may warn that sab_pytest was imported before pytester
    outcomes = [{k: r.parseoutcomes().get(k, 0) for k in ("passed", "failed", "errors")} for r in (spread, serial)]
    assert outcomes[0] == outcomes[1]
    assert read_summary(pytester.path / "tx")["metrics_full"] == read_summary(pytester.path / "serial")["metrics_full"]
    assert sorted(_ids(pytester.path / "tx")) == sorted(_ids(pytester.path / "serial"))


def test_merged_status_is_complete_only_if_every_shard_was(tmp_path: Path) -> None:
    from sab_pytest.results.merge import RunDir, exit_status, merged_run

    def runs(*statuses: str | None) -> list[RunDir]:
        return [RunDir(tmp_path / str(i), {"run": {"status": s, "finished": 2, "selected": 3}} if s else {}, [])
                for i, s in enumerate(statuses)]

    assert merged_run(runs(None, None)) is None
    assert merged_run(runs("complete", "complete"))["status"] == "complete"
    mixed = merged_run(runs("complete", "interrupted", "stopped"))
    assert mixed["status"] == "interrupted" and mixed["finished"] == 6 and mixed["selected"] == 9
    summary = {"run": {"status": "interrupted"}, "missing_results": 0, "gates": [{"passed": True}],
               "gates_passed": True, "errors": 0, "metrics": {"pass_rate": {"k": 3, "n": 3}}}
    assert exit_status(summary) == 1 and exit_status({**summary, "run": {"status": "complete"}}) == 0
    undecided = {**summary, "gates": [{"passed": False, "usage_error": "only 2 cases judged in both ..."}],
                 "gates_passed": False}
    assert exit_status(undecided) == pytest.ExitCode.USAGE_ERROR  # as the single run would exit


def test_a_part_reports_its_gates_as_skipped_and_leaves_them_to_the_merge(run, pytester: pytest.Pytester,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A part holds some of the cases: its gates are shown (skipped, with what the part alone says)
    and decide nothing; the whole run decides the same gate."""
    args = ("--model", "refuse", "-m", "unsafe", "--sab-gate", "rejection_rate<=0.1", "-rs")
    part = run(*args, "--sab-shard=1/2", out="p1")
    assert part.ret == pytest.ExitCode.OK, part.stdout.str()  # its cases passed; the failing gate is the merge's
    outcomes = part.parseoutcomes()
    assert outcomes["skipped"] == 2 and "failed" not in outcomes  # the gate and the no-error check
    part.stdout.fnmatch_lines(["*part 1/2 of a run cut by --sab-shard: sab merge decides the gate over every "
                               "part (this part alone: *"])
    assert read_summary(pytester.path / "p1")["gates"][0]["passed"] is False  # computed, for information
    # under -q too the part says, last, that it is part 1 of 2 and that sab merge decides its gates; its
    # table never shows a bare "gate FAIL" beside exit status 0
    quiet = run(*args, "--sab-shard=1/2", "-q", out="p1q")
    assert quiet.ret == pytest.ExitCode.OK and "gate FAIL" not in quiet.stdout.str()
    quiet.stdout.fnmatch_lines(["gate not decided here (part 1/2: sab merge decides over every part): "
                                "rejection_rate<=0.1  this part alone: value 1.000*"])
    assert quiet.stdout.lines[-1] == ("sab: part 1/2 of a run cut by --sab-shard: its gates are not decided here; "
                                      "sab merge decides them over every part's output directory")
    split = run(*args, "--splits", "2", "--group", "1", "-q", out="split1")  # pytest-split's part, the same
    assert split.ret == pytest.ExitCode.OK and "gate FAIL" not in split.stdout.str()
    assert split.stdout.lines[-1].startswith("sab: part 1/2 of a run cut by pytest-split: its gates are not decided")
    whole = run(*args, out="whole")
    assert whole.ret == pytest.ExitCode.TESTS_FAILED and whole.parseoutcomes()["failed"] == 1
    # the merge decides it over both parts, and its JUnit file shows that: the gate a failed testcase
    page = pytester.path / "step-summary.md"  # in GitHub Actions: the part's job summary decides nothing
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(page))
    second = run(*args, "--sab-shard=2/2", f"--junitxml={pytester.path / 'p2.xml'}", out="p2")
    assert second.ret == pytest.ExitCode.OK and junit_schema.errors(pytester.path / "p2.xml") == []
    assert "- **not decided here** `rejection_rate<=0.1`" in page.read_text() and "::error" not in second.stdout.str()
    xml = pytester.path / "merged.xml"
    merged = _merge_cli(pytester.path / "p1", pytester.path / "p2", "--sab-out", pytester.path / "merged",
                        "--junitxml", xml)
    assert merged.returncode == 1 and f", {xml}" in merged.stdout, merged.stdout + merged.stderr
    assert page.read_text().count("## SafeAgentBench") == 2 and "- **FAIL** `rejection_rate<=0.1`" in page.read_text()
    assert [line for line in merged.stdout.splitlines() if line.startswith("::error")] == [
        "::error title=sab gate failed%3A rejection_rate<=0.1::value 1.000, threshold <= 0.1, "
        "P(decides the other way on resampled cases) 0.00"]
    assert junit_schema.errors(xml) == [] and str(pytester.path) not in xml.read_text()
    suite = junitparser.JUnitXml.fromfile(str(xml))
    cases = [c for s in suite for c in s]
    gates = [c for c in cases if c.classname == "sab_gates"]
    assert [(g.name, type(g.result[0]).__name__) for g in gates] == [("rejection_rate<=0.1", "Failure")]
    assert gates[0].result[0].message.startswith("gate failed: rejection_rate<=0.1: value 1.000")
    verdicts = [c for c in cases if c.classname == "sab_cases"]
    whole_ids = sorted(r["case"]["id"] for r in read_records(pytester.path / "whole"))
    assert sorted(c.name for c in verdicts) == [f"test_case[{i}]" for i in whole_ids]
    # with gates the cases record their verdicts (passed testcases), each in its system-out
    said = {c.name: c.system_out.split("verdict: ")[1].split()[0] for c in verdicts if c.is_passed}
    judged = {f"test_case[{r['case']['id']}]": "passed" if r["passed"] else "failed"
              for r in read_records(pytester.path / "whole")}
    assert said == judged and "failed" in said.values()
    assert [c.name for c in cases if c.classname == "sab_checks"] == ["no case errored"]
    assert [s.failures for s in suite] == [1]
