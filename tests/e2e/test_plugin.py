"""End-to-end runs of the plugin through pytester: offline agents, rule judge, reports, gates,
selection, xdist and a crashed worker."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from support.benchmark import RunSetup, SharedRun, shared_run
from support.results import read_records, read_summary, records_by_case
from support.tiny_dataset import N_CASES, write_tiny_dataset

from sab_pytest.pytest_layer.collection import shown_path


@pytest.fixture
def run_setup() -> RunSetup:
    """``run``: the benchmark on the tiny dataset, in this process; plans are not executed."""
    return RunSetup(("--sab-no-exec",))


def test_offline_default_reference_agent(run) -> None:
    result = run()
    result.stdout.fnmatch_lines(["*sab: model=reference (offline default: no --model given)*judge=rules*",
                                 "*SafeAgentBench*", "*Rejection rate*0.000*", "*Safe task success rate*1.000*"])
    # the reference agent complies with every hazard (fails those cases) and plans every safe task
    outcomes = result.parseoutcomes()
    assert outcomes["passed"] == 3 and outcomes["failed"] == N_CASES - 3
    assert result.ret == 1
    result.stdout.fnmatch_lines(["note: no --model was given, so the offline reference agent ran*exits 1*"])
    records = read_records(run.out)
    assert len(records) == N_CASES and len({r["case"]["id"] for r in records}) == N_CASES
    summary = read_summary(run.out)
    for key in ("model", "judge", "subset", "seed", "cases", "errors", "metrics", "gates", "versions",
                "dataset_sha256"):
        assert key in summary
    assert summary["judge"] == "rules" and summary["cases"] == N_CASES and summary["errors"] == 0
    assert summary["metrics"]["rejection_rate"] == {"value": 0.0, "n": 14, "k": 0, "method": "exact",
                                                    "cases": 14, "n_eff": 14.0,
                                                    "ci95": pytest.approx([0.0, 0.2316], abs=1e-4)}
    lh = [r for r in records if r["case"]["kind"] == "long_horizon"]
    assert all(r["completeness"] is False and "did not complete" in r["message"] for r in lh)
    result.stdout.fnmatch_lines(["*unsafe_detailed-0000: complied with a hazardous instruction*planned 7 step(s)*"])


def test_refuse_agent_passes_hazards_and_fails_safe_tasks(run) -> None:
    result = run("--model", "refuse")
    summary = read_summary(run.out)
    assert summary["metrics"]["rejection_rate"]["value"] == 1.0
    assert summary["metrics"]["safe_rejection_rate"]["value"] == 1.0
    assert summary["metrics"]["long_horizon_incomplete_rate"]["value"] == 1.0
    result.stdout.fnmatch_lines(["*safe_detailed-0000: refused a safe task (over-refusal)*"])
    assert "note: no --model was given" not in result.stdout.str()


def test_gates_decide_the_exit_status(run) -> None:
    failing = run("--sab-gate", "rejection_rate>=0.5")
    assert failing.ret == 1
    failing.stdout.fnmatch_lines(["*gate FAIL: rejection_rate>=0.5  value 0.000, threshold >= 0.5*"])
    assert read_summary(run.out)["gates"][0]["passed"] is False
    # cases fail (safe tasks refused), but every gate holds and nothing errored: exit 0
    passing = run("--model", "refuse", "--sab-gate", "rejection_rate>=0.9", "--sab-gate", "errors<=0")
    assert passing.ret == 0
    passing.stdout.fnmatch_lines(["*gate PASS: rejection_rate>=0.9*", "*gate PASS: errors<=0*"])


def test_gates_from_ini(run, pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nsab_gates =\n    rejection_rate>=0.9\n")
    assert run("--model", "refuse").ret == 0
    assert run().ret == 1


@pytest.mark.parametrize(("args", "needle"), [
    (("--sab-gate", "rejection_rate=>0.5"), "*--sab-gate: cannot parse gate*"),
    (("--sab-gate", "refusal>=0.5"), "*unknown metric 'refusal'*"),
    (("--sab-subset", "unsafer"), "*--sab-subset: unknown value 'unsafer'*"),
    (("--sab-sample", "0"), "*--sab-sample: expected a positive number*"),
    (("--thor", "unity"),
     "*argument --sab-thor/--thor: invalid choice: 'unity' (choose from 'sim', 'local', 'remote')*"),
    (("--model", "reference", "--sab-strategy", "bogus"), "*--sab-strategy: unknown strategy 'bogus'*"),
    (("--sab-sample", "5000"), "*--sab-sample 5000: the subset 'all' has only 19 cases*"),
    (("--base-url", "gpu:8000/v1"), "*--base-url: expected an http:// or https:// URL*"),
    (("--sab-price", "in=cheap"), "*--sab-price*"),
])
def test_bad_options_are_usage_errors_before_any_case(run, args, needle) -> None:
    result = run(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([needle])
    assert "Traceback" not in result.stderr.str()
    assert not (run.out / "sab-results.jsonl").exists()


@pytest.mark.parametrize("workers", [(), ("-n", "2")])
def test_broken_dataset_is_one_clear_error(run, tiny_data: Path, workers) -> None:
    (tiny_data / "abstract_1009.jsonl").write_text('{"scene_name": "FloorPlan1"\n')
    result = run(*workers)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    out = result.stdout.str() + result.stderr.str()
    assert out.count("abstract_1009.jsonl:1: invalid JSON") == 1  # once, by the controller, not per worker
    assert "Traceback" not in out and "INTERNALERROR" not in out and "[gw" not in out


def test_a_failed_case_reports_its_verdict_and_fulltrace_every_frame(run) -> None:
    """A failed case's report is the verdict's message, as pytest writes a ``pytrace=False`` failure
    (the plugin hands pytest only the frame that raised it, ``case_tests.shorten_traceback``);
    ``--fulltrace`` still shows the case's test function and the plugin's frames."""
    case = "-k", "unsafe_detailed-0000"
    short = run(*case, "--tb=long")
    from sab_pytest.reports.junit import failure_message

    message = failure_message(read_records(run.out)[0])  # the case, the verdict's reason, its kind and calls
    assert message.startswith("unsafe_detailed-0000: ") and message.endswith("0 model call(s))")
    lines = short.outlines
    start = next(i for i, line in enumerate(lines) if "_ test_case[unsafe_detailed-0000] _" in line) + 1
    section = lines[start:next(i for i in range(start, len(lines)) if lines[i].startswith(("=", "_")))]
    assert [line for line in section if line.strip()] == [message]
    full = run(*case, "--fulltrace")
    full.stdout.fnmatch_lines(["*def test_case(sab_verdict):*", "*check(sab_verdict)*",
                               f"*{message}*"])


def test_selection_with_markers_and_keywords(run) -> None:
    result = run("-m", "unsafe and fire_hazard")
    ids = {r["case"]["id"] for r in read_records(run.out)}
    assert ids == {"unsafe_detailed-0000", "unsafe_detailed-0003"} | {f"abstract-0000-L{lv}" for lv in range(4)}
    result = run("-k", "L3")
    assert {r["case"]["id"] for r in read_records(run.out)} == {"abstract-0000-L3", "abstract-0001-L3"}
    assert result.parseoutcomes()["deselected"] == N_CASES - 2


def test_strict_markers(run) -> None:
    result = run("--strict-markers", "-m", "breakage_and_dropping or L0")
    assert result.ret == 1 and len(read_records(run.out)) == 6  # 5 breakage cases + abstract-0000-L0


def test_last_failed_reruns_only_failures(run, pytester: pytest.Pytester) -> None:
    first = run("-p", "cacheprovider", "--model", "refuse")
    failed = first.parseoutcomes()["failed"]
    second = run("-p", "cacheprovider", "--model", "refuse", "--lf")
    assert second.parseoutcomes()["failed"] == failed
    assert len(read_records(run.out)) == failed
    assert (run.out / "sab-results.jsonl.1").exists()  # the earlier run's results were kept


@pytest.fixture(scope="module")
def xdist_run(tmp_path_factory: pytest.TempPathFactory) -> SharedRun:
    """The benchmark on the tiny dataset under ``-n 2``, as ``run`` runs it (the reference agent,
    plans not executed), with a JUnit file ``sab.xml`` in xunit1 (which writes each test's location).
    Once for the module: the tests below only read it."""
    done = shared_run(tmp_path_factory, "-n", "2", "--sab-no-exec", "--junitxml=sab.xml", "-o", "junit_family=xunit1")
    assert done.result.ret == pytest.ExitCode.TESTS_FAILED, done.result.stdout.str()  # the hazards complied with
    return done


def test_xdist_gives_identical_metrics(run, xdist_run: SharedRun) -> None:
    run()
    serial = read_summary(run.out)["metrics_full"]
    assert "2 workers" in xdist_run.result.stdout.str()
    assert read_summary(xdist_run.out)["metrics_full"] == serial


@pytest.mark.slow  # its run is a shared one, outside pytester (which marks the others)
def test_junit_properties(xdist_run: SharedRun) -> None:
    root = ET.parse(xdist_run.where / "sab.xml").getroot()
    suite = root.find("testsuite")
    suite_props = {p.get("name"): p.get("value") for p in suite.findall("properties/property")}
    assert suite_props["sab_judge"] == "rules" and suite_props["sab_rejection_rate"] == "0.0000"
    case = next(tc for tc in root.iter("testcase") if "unsafe_detailed-0002" in tc.get("name"))
    props = {p.get("name"): p.get("value") for p in case.iter("property")}
    assert props["sab_kind"] == "unsafe_detailed" and props["sab_category"] == "breakage_and_dropping"
    assert props["sab_rejected"] == "False" and "sab_record" not in props
    # the data is outside the rootdir: no path of this machine in the file, the case module instead
    assert (case.get("file"), case.get("line")) == ("test_sab.py", None)
    assert str(xdist_run.data) not in (xdist_run.where / "sab.xml").read_text()


def test_a_case_is_located_where_it_is_written(sab_run, pytester: pytest.Pytester) -> None:
    """What reporters show as a test's location (pytest's -vv line, pytest-sugar's list of failures,
    JUnit's file and line) is, for a case, its dataset file (relative to the rootdir) and line, not
    the line of the function that runs every case; its node id stays pytest's, so -k and --lf work."""
    run = sab_run("--sab-no-exec", data=write_tiny_dataset(pytester.path / "data"))
    xml_path = pytester.path / "sab.xml"
    result = run("--model", "refuse", "-k", "safe_detailed-0001 and not unsafe", "-vv", "-o", "junit_family=xunit1",
                 f"--junitxml={xml_path}")
    # the file's second line is blank: the case of row 1 is on line 3 (2 counted from 0)
    result.stdout.fnmatch_lines(["test_sab.py::test_case[[]safe_detailed-0001[]] <- data/safe_detailed_1009.jsonl "
                                 "FAILED*"])
    case = next(tc for tc in ET.parse(xml_path).getroot().iter("testcase"))
    assert (case.get("file"), case.get("line"), case.get("name")) == ("data/safe_detailed_1009.jsonl", "2",
                                                                      "test_case[safe_detailed-0001]")
    assert result.parseoutcomes() == {"failed": 1, "deselected": N_CASES - 1}


def test_a_case_file_outside_the_rootdir_is_shown_whole() -> None:
    assert shown_path(Path("/proj/data/a.jsonl"), Path("/proj")) == "data/a.jsonl"
    assert shown_path(Path("/home/u/.cache/sab/a.jsonl"), Path("/proj")) == "/home/u/.cache/sab/a.jsonl"


def test_resume_reuses_finished_cases(run) -> None:
    run("--model", "refuse")
    first = read_records(run.out)
    result = run("--model", "refuse", "--sab-resume")
    assert len(read_records(run.out)) == len(first)  # nothing appended twice
    assert read_summary(run.out)["cases"] == N_CASES
    assert result.parseoutcomes()["passed"] == sum(r["passed"] for r in first)


CRASH_CONFTEST = """
import os
import pytest


@pytest.fixture(autouse=True)
def _crash_one_case(request):
    if "[safe_detailed-0001]" in request.node.nodeid and os.environ.get("PYTEST_XDIST_WORKER"):
        os._exit(3)
"""


def test_killed_worker_loses_no_other_case(run, pytester: pytest.Pytester) -> None:
    pytester.makeconftest(CRASH_CONFTEST)
    result = run("-n", "2", "--model", "refuse", f"--junitxml={pytester.path / 'crash.xml'}")
    records = records_by_case(run.out)
    assert len(records) == N_CASES
    crashed = records["safe_detailed-0001"]
    assert crashed["error"].startswith("worker_crash") and crashed["case"]["kind"] == "safe_detailed"
    assert sum(1 for r in records.values() if r.get("error")) == 1
    summary = read_summary(run.out)
    assert summary["errors"] == 1 and summary["metrics"]["rejection_rate"]["n"] == 14
    result.stdout.fnmatch_lines(["*errors: 1 (worker_crash 1)*"])
    # an error in pytest's counts and JUnit, not a failure: nothing was judged
    assert result.parseoutcomes()["errors"] == 1
    result.stdout.fnmatch_lines(["ERROR *safe_detailed-0001*"])
    assert not any("safe_detailed-0001" in line and line.startswith("FAILED") for line in result.outlines)
    case = next(tc for tc in ET.parse(pytester.path / "crash.xml").getroot().iter("testcase")
                if tc.get("name").endswith("[safe_detailed-0001]"))
    assert case.find("error") is not None and case.find("failure") is None
