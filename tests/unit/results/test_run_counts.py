"""The counts a stopped run prints agree with each other and with what ``--sab-resume`` then does:
an error is no verdict, the resume note names every case the resume redoes (the errors too), cases
finished after pytest gave up on their test are named, and a file that was never written is not named."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

from support.made_up_runs import record

from sab_pytest.pytest_layer.terminal import output_files_line
from sab_pytest.reports import table
from sab_pytest.reports.table import finished_counts, resume_note
from sab_pytest.results import files
from sab_pytest.results.record import StoredRecord
from sab_pytest.results.summary import run_status
from sab_pytest.settings import Settings


def _records(verdicts: int, errors: int) -> dict[str, StoredRecord]:
    made = [record(f"unsafe_detailed-{i:04d}", error="model_api: HTTP 500" if i >= verdicts else None)
            for i in range(verdicts + errors)]
    return {r["case"]["id"]: cast(StoredRecord, r) for r in made}


def _stopped(verdicts: int, errors: int, selected: int, **kw: Any) -> Any:
    records = _records(verdicts, errors)
    chosen = [*records, *(f"unsafe_detailed-{i:04d}" for i in range(len(records), selected))]
    return run_status(records, selected=chosen, full=chosen, stop=None, interrupted=True, **kw)


def test_eleven_errors_are_not_eleven_verdicts() -> None:
    run = _stopped(0, 11, 20)
    assert run["finished"] == 11 and run["errored"] == 11 and run["not_run"] == 9
    assert finished_counts(run) == "11 of 20 cases finished (0 with a verdict, 11 errors)"


def test_the_resume_note_counts_what_the_resume_redoes() -> None:
    """The resume reuses verdicts only (``fixtures._resumed``): it redoes the errors as well as the cases not run."""
    run = _stopped(0, 11, 20)
    assert resume_note(run) == ("9 case(s) not run, and 11 error(s): run the same command with --sab-resume to "
                                "redo those 20 (0 verdict(s) are reused)")
    clean = _stopped(3, 0, 5)
    assert resume_note(clean) == ("2 case(s) not run: run the same command with --sab-resume to redo those 2 "
                                  "(3 verdict(s) are reused)")
    assert resume_note(_stopped(3, 2, 5)) is None  # nothing left unrun: no resume to announce


def test_cases_pytest_did_not_count_are_named() -> None:
    run = _stopped(0, 11, 20, unreported=1)
    assert run["unreported"] == 1
    assert table._run_lines(run) == [
        "run INTERRUPTED; 11 of 20 cases finished (0 with a verdict, 11 errors), 9 not run, 1 of the finished ones "
        "after pytest had skipped or stopped their test (pytest's own counts leave them out)"]


def test_an_old_summary_without_error_counts_says_only_how_many_finished() -> None:
    run = _stopped(2, 1, 4)
    del run["errored"]
    assert finished_counts(run) == "3 of 4 cases finished"


def test_the_files_line_names_only_files_that_exist(tmp_path: Path) -> None:
    settings = Settings(out_dir=tmp_path)
    assert output_files_line(settings, html_written=False) == "results: none written (no case finished)"
    (tmp_path / files.SUMMARY_NAME).write_text("{}")
    assert output_files_line(settings, html_written=False) == (
        f"results: none written (no case finished)   summary: {tmp_path / files.SUMMARY_NAME}")
    (tmp_path / files.RESULTS_NAME).write_text("")
    assert output_files_line(settings, html_written=False).startswith(f"results: {tmp_path / files.RESULTS_NAME}")


def test_merged_shards_add_their_errors_when_every_shard_counted_them(tmp_path: Path) -> None:
    from sab_pytest.results.merge import RunDir, merged_run

    def shard(i: int, **run: Any) -> RunDir:
        return RunDir(tmp_path / str(i), {"run": {"status": "interrupted", "finished": 3, "selected": 4, **run}}, [])

    both = merged_run([shard(0, errored=1), shard(1, errored=2)])
    assert both is not None and both["errored"] == 3
    assert finished_counts(both) == "6 of 8 cases finished (3 with a verdict, 3 errors)"
    older = merged_run([shard(0, errored=1), shard(1)])
    assert older is not None and "errored" not in older
