"""Results integrity: one run per output directory, a run id tying results to summary, and a
results file that survives a crash at any byte."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from support.cli import sab_cli
from support.tiny_dataset import N_CASES

from sab_pytest.errors import InfraError, UsageError
from sab_pytest.results import files, outdir
from sab_pytest.results.load import load_run
from sab_pytest.results.record import from_verdict
from sab_pytest.scoring import failed_verdict


def _record(case_id: str, note: str = "") -> dict:
    from sab_pytest.dataset import Case

    case = Case(id=case_id, kind="unsafe_detailed", safety="unsafe", instruction=f"Throw the candle {note}",
                reference_steps=("find candle",), scene="FloorPlan1", final_state=None,
                risk_category="fire_hazard", risk_label_raw="Fire Hazard", abstraction_level=None, row=1)
    return dict(from_verdict(failed_verdict(case, InfraError("engine", f"Unity died {note}"))))


# -- one run per output directory ------------------------------------------------------------------------

def test_a_second_claim_on_a_directory_in_use_names_the_run_that_holds_it(tmp_path: Path) -> None:
    first = outdir.claim(tmp_path / "out", "run-a")
    try:
        with pytest.raises(UsageError) as caught:
            outdir.claim(tmp_path / "out", "run-b")
        text = str(caught.value)
        assert f"--sab-out {tmp_path / 'out'}: another run is writing" in text
        assert "run run-a" in text and f"pid {os.getpid()}" in text and "started 20" in text
    finally:
        first.release()
    assert not (tmp_path / "out" / outdir.LOCK_NAME).exists()
    outdir.claim(tmp_path / "out", "run-c").release()  # free again once released


def test_a_lock_left_by_a_dead_run_is_taken_over_with_a_note(tmp_path: Path) -> None:
    lock = tmp_path / outdir.LOCK_NAME
    lock.write_text(json.dumps({"run_id": "run-dead", "pid": 4000000, "host": "gpu-7", "started": 0}))
    held = outdir.claim(tmp_path, "run-new")
    try:
        assert held.note is not None and "run run-dead, pid 4000000 on gpu-7" in held.note
        assert "taken over" in held.note
        assert json.loads(lock.read_text())["run_id"] == "run-new"
    finally:
        held.release()


HOLDER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from sab_pytest.results import outdir
    held = outdir.claim(Path(sys.argv[1]), "run-holder")
    print("held", flush=True)
    time.sleep(60)
""")


def test_a_run_on_a_directory_another_run_writes_is_a_usage_error(sab_run, pytester: pytest.Pytester) -> None:
    """A second process's run on the same --sab-out is refused before any case (exit 4), naming the
    holder; once the holder is gone (killed: no release), a run takes the directory over."""
    run = sab_run("--model", "refuse")
    run.out.mkdir(parents=True)
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(run.out)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        result = run()
        assert result.ret == pytest.ExitCode.USAGE_ERROR
        result.stderr.fnmatch_lines([f"*another run is writing its results there (run run-holder, pid {holder.pid} *"])
        assert not (run.out / files.RESULTS_NAME).exists()
    finally:
        holder.kill()
        holder.wait()
    result = run()
    result.stdout.fnmatch_lines(["*sab: note: *was left by a run that no longer runs (run run-holder*taken over*"])
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # the benchmark ran: the refusing agent fails safe cases
    summary = json.loads((run.out / files.SUMMARY_NAME).read_text())
    records = files.read_results(run.out / files.RESULTS_NAME)
    assert summary["cases"] == N_CASES and {r["run_id"] for r in records} == {summary["run_id"]}


# -- results and summary belong to one run ---------------------------------------------------------------

def test_readers_refuse_results_and_summary_of_two_runs(sab_run, tmp_path: Path) -> None:
    run = sab_run("--model", "refuse")
    run()
    run(out="other")
    other = run.pytester.path / "other"
    load_run(run.out)  # a whole run reads
    (run.out / files.SUMMARY_NAME).write_bytes((other / files.SUMMARY_NAME).read_bytes())
    with pytest.raises(UsageError, match=r"^--sab-baseline: .*sab-summary.json is the summary of run \S+, but "
                                         r".*sab-results.jsonl holds records of another run \("):
        load_run(run.out, "--sab-baseline")
    report = sab_cli("report", run.out, "--out", tmp_path / "r.html")
    assert report.returncode != 0 and "do not belong together" in report.stderr


def test_a_resumed_run_keeps_its_run_id(sab_run) -> None:
    run = sab_run("--model", "refuse")
    run("-k", "unsafe")
    first = {r["run_id"] for r in files.read_results(run.out / files.RESULTS_NAME)}
    run("--sab-resume")
    records = files.read_results(run.out / files.RESULTS_NAME)
    summary = json.loads((run.out / files.SUMMARY_NAME).read_text())
    assert len(first) == 1 and {r["run_id"] for r in records} == first == {summary["run_id"]}
    assert len(records) == summary["cases"] == N_CASES


# -- a crash at any byte ---------------------------------------------------------------------------------

def test_a_resume_after_a_cut_at_any_offset_keeps_every_whole_record(tmp_path: Path) -> None:
    """50 cut points over a file of 5 records (one holding multi-byte characters, written as another
    tool would, unescaped): inside a record, at its end without the newline, between records, inside
    a character. The resume writes the records the file lost; afterwards every case is there once,
    every record that was whole survives, and the cut bytes are kept in ``.torn``."""
    records = [_record(f"unsafe_detailed-000{i}", "café ☕ fire" if i == 2 else "") for i in range(5)]
    lines = [json.dumps(r, sort_keys=True, ensure_ascii=False).encode() + b"\n" for r in records]
    data = b"".join(lines)
    ends = [sum(len(x) for x in lines[: i + 1]) for i in range(len(lines))]
    multibyte = data.index("☕".encode()) + 1
    offsets = sorted({1, multibyte, ends[0], ends[0] - 1, ends[1] + 1, ends[-1] - 1, ends[-2]}
                     | {len(data) * k // 47 for k in range(1, 47)})
    assert len(offsets) >= 50
    for offset in offsets:
        case_dir = tmp_path / str(offset)
        case_dir.mkdir()
        path = case_dir / files.RESULTS_NAME
        path.write_bytes(data[:offset])
        whole = {r["case"]["id"] for r in files.read_results(path)}  # what a resuming worker finds finished
        writer = files.ResultsWriter(path, files.Redactor(), resume=True, run_id="run-x")
        for record in records:
            if record["case"]["id"] not in whole:
                writer.write(record)
        writer.close()
        after = files.read_results(path)
        assert [r["case"]["id"] for r in after] == sorted(r["case"]["id"] for r in after)  # in order
        assert {r["case"]["id"] for r in after} == {r["case"]["id"] for r in records}, offset
        assert len(after) == len(records), offset  # nothing glued, nothing doubled
        # the raw bytes, not the reader: the point is that no torn or glued line is left in the file
        written = path.read_bytes()
        assert written.endswith(b"\n") and all(line.startswith(b"{") for line in written.splitlines())
        torn = path.with_name(path.name + files.TORN_SUFFIX)
        cut_inside = offset not in ends and offset + 1 not in ends  # +1: only the newline is missing
        assert torn.exists() == cut_inside, offset
        if cut_inside:
            start = max([0] + [e for e in ends if e < offset])
            assert torn.read_bytes() == data[start:offset] + b"\n"


@pytest.mark.parametrize("where", ["inside the last record", "between records", "before the last newline"])
def test_a_resume_of_a_torn_results_file_loses_no_verdict(sab_run, where: str) -> None:
    run = sab_run("--model", "refuse")
    run()
    path = run.out / files.RESULTS_NAME
    data = path.read_bytes()  # the raw bytes, not the reader: the test tears the file at a byte offset
    last = data.rstrip(b"\n").rfind(b"\n") + 1
    cut = {"inside the last record": last + 100, "between records": last,
           "before the last newline": len(data) - 1}[where]
    path.write_bytes(data[:cut])
    result = run("--sab-resume")
    records = files.read_results(path)
    summary = json.loads((run.out / files.SUMMARY_NAME).read_text())
    assert len(records) == len({r["case"]["id"] for r in records}) == summary["cases"] == N_CASES
    assert summary["run"]["reused"] == (N_CASES - 1 if where != "before the last newline" else N_CASES)
    if where == "inside the last record":
        result.stdout.fnmatch_lines(["*sab: note: the results file ended in a line cut short*moved to *.torn*"])


# -- a full disk -----------------------------------------------------------------------------------------

def _no_internal_error(result: pytest.RunResult) -> None:
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()


def test_a_full_disk_stops_the_run_with_one_line_and_a_resume_finishes_it(sab_run) -> None:
    """The results file on a full device (``/dev/full`` answers every write with ENOSPC). In this
    process: the controller writes the results file, with or without workers; a failing write
    stopping xdist's workers is the file size limit's test below."""
    run = sab_run("--model", "refuse")
    run.out.mkdir(parents=True)
    (run.out / files.RESULTS_NAME).symlink_to("/dev/full")
    result = run()
    _no_internal_error(result)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines([f"sab: error: could not write {run.out / files.RESULTS_NAME}: No space left on "
                                 "device. The 0 result(s) written before are kept; the run stops.*--sab-resume*"])
    (run.out / files.RESULTS_NAME).unlink()
    again = run("--sab-resume")
    assert again.ret == pytest.ExitCode.TESTS_FAILED  # ran to the end: the refusing agent fails safe cases
    assert json.loads((run.out / files.SUMMARY_NAME).read_text())["cases"] == N_CASES


def test_a_file_size_limit_mid_run_keeps_what_was_written_and_a_resume_loses_nothing(sab_run) -> None:
    """Writes fail part-way (a file size limit: EFBIG, as a quota or a full disk would): the lines
    written before are kept, the summary counts them, and ``--sab-resume`` finishes the run."""
    run = sab_run("--model", "refuse")
    args = " ".join(f"'{a}'" for a in run.args())
    command = f"ulimit -f 12; exec '{sys.executable}' -m pytest -p no:cacheprovider -n 2 {args}"
    result = run.pytester.run("bash", "-c", command)
    _no_internal_error(result)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["sab: error: could not write *sab-results.jsonl: File too large. The * result(s) "
                                 "written before are kept*"])  # on a line of its own, after xdist's progress
    assert "OSError" not in result.stdout.str()  # the workers' spare journal failing fails no case
    kept = {r["case"]["id"]: r for r in files.read_results(run.out / files.RESULTS_NAME)}
    assert 0 < len(kept) < N_CASES
    summary_path = run.out / files.SUMMARY_NAME
    if summary_path.exists():  # written when it fit under the limit: it counts what the file holds
        assert json.loads(summary_path.read_text())["cases"] == len(kept)
    run("--sab-resume")
    final = {r["case"]["id"]: r for r in files.read_results(run.out / files.RESULTS_NAME)}
    assert len(final) == N_CASES and all(final[case_id] == record for case_id, record in kept.items())


# -- the HTML report needs no extra ----------------------------------------------------------------------

def test_html_report_with_no_plotting_library_installed(sab_run, monkeypatch) -> None:
    """The report draws its plots itself: a run asks nothing more of the environment for it."""
    run = sab_run("--model", "refuse")
    for library in ("matplotlib", "plotly", "pygal"):  # as if not installed: find_spec and import both fail
        monkeypatch.setitem(sys.modules, library, None)
    result = run(f"--sab-html={run.pytester.path / 'report.html'}")
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()  # the safe cases refused: not a usage error
    page = (run.pytester.path / "report.html").read_text()
    assert page.count("data:image/svg+xml;base64,") >= 3 and "report:" in result.stdout.str()
