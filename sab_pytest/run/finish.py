"""The end of a run, as plain Python: close the results file, fold a rerun into the earlier
verdicts of the same settings, build and write the summary and the HTML report, decide the gates.

The pytest layer calls ``finish_run`` once, on the controller, before the session's exit status is
final; any other front end can call it the same way with the records it gathered.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sab_pytest.errors import SabError
from sab_pytest.results import files, gates
from sab_pytest.results.load import Run
from sab_pytest.results.record import StoredRecord, sample_id, stamped
from sab_pytest.results.summary import RunStatus, Summary, build_summary
from sab_pytest.settings import Settings

if TYPE_CHECKING:
    from sab_pytest.reports.inspect.live import LiveLog


@dataclass
class Finished:
    """What the end of a run wrote: the summary, every record it covers, and the HTML report's fate."""

    summary: Summary
    records: dict[str, StoredRecord]
    html_written: bool = False
    html_error: str | None = None  # why the HTML report could not be written (the other files are)
    inspect_log_error: str | None = None  # why the Inspect log (--sab-inspect-log) could not be written


def finish_run(settings: Settings, records: dict[str, StoredRecord], *, run: RunStatus,
               redact: files.Redactor, writer: files.ResultsWriter | None = None,
               full_selection: Iterable[str] = (), baseline: Run | None = None,
               shard_info: Callable[[int], dict[str, Any] | None] = lambda _n: None,
               run_id: str | None = None, unrecorded: dict[str, Any] | None = None,
               live_log: LiveLog | None = None) -> Finished:
    """Write the run's summary (and report) from ``records``, the verdicts this run produced.

    With ``--sab-resume`` the results file is compacted (a redone case's new line replaces its old
    one), and a rerun of part of the selection (``--lf``, ``-k``) is summarised together with the
    earlier verdicts of the same settings, so that the summary covers every case of the file.
    ``run_id`` (``results.outdir``) goes into the summary, as it is on every line of the file.
    ``live_log``: the ``--sab-inspect-log`` file fed while the run went, closed here when it holds
    exactly ``records`` (else the log is written whole from them).
    """
    path = settings.out_dir / files.RESULTS_NAME
    if writer is not None:
        writer.close()
        if settings.resume:
            files.compact_results(path, redact, run_id)
    if settings.resume and run["partial_selection"]:
        key, full = settings.run_key(), set(full_selection)
        earlier = files.latest_per_case(r for r in files.read_results(path)
                                        if r.get("run_key") == key and sample_id(r) in full)
        merged = {**earlier, **records}
        run["merged"] = len(merged) - len(records)
        records = merged
    summary = build_summary(
        list(records.values()), settings, run=run, baseline_summary=baseline.summary if baseline else None,
        baseline=gates.Baseline(baseline.metrics, baseline.records, str(baseline.source)) if baseline else None,
        shard=shard_info(len(records)), run_id=run_id)
    if unrecorded:  # calls of cases the run's stop cut short: made and billed, though no case has a record
        usage = summary["usage"]
        for key in ("calls", "api_calls", "failed_calls", "errors", "prompt_tokens", "completion_tokens",
                    "billed_prompt_tokens", "billed_completion_tokens", "rate_limited"):
            if unrecorded.get(key):
                usage[key] = usage.get(key, 0) + unrecorded[key]
        usage["calls_of_cases_not_run"] = unrecorded.get("calls", 0)
    files.write_summary(settings.out_dir / files.SUMMARY_NAME, summary, redact)
    done = Finished(summary, records)
    if settings.html is not None:
        from sab_pytest.reports.html.report import write_report

        try:
            write_report(settings.html, summary, list(records.values()), redact)
        except (SabError, OSError) as exc:
            done.html_error = str(exc)
        else:
            done.html_written = True
    if settings.inspect_log is not None:
        done.inspect_log_error = _write_inspect_log(settings.inspect_log, settings, summary, records, redact,
                                                    live_log)
    return done


def _write_inspect_log(path: Path, settings: Settings, summary: Summary, records: dict[str, StoredRecord],
                       redact: files.Redactor, live_log: LiveLog | None) -> str | None:
    """``--sab-inspect-log``: the run as an Inspect eval log; None when written, else why not (the
    other files are written all the same). inspect_ai is imported here only: a run without the option
    never needs it."""
    try:
        if live_log is not None and live_log.finish(summary, records):
            return None
        from sab_pytest.reports.inspect import log as inspect_log

        run_id = summary.get("run_id")  # stamped as on the results file's lines (not on records in memory)
        inspect_log.write(path, summary, [stamped(r, run_id=run_id) for r in records.values()], redact,
                          inspect_log.dataset_cases(settings.data_dir))
    except (SabError, OSError, ImportError) as exc:
        return str(exc)
    return None


def gates_hold(summary: Summary) -> bool:
    """With gates, a run passes only when every gate holds and no case errored."""
    return all(g["passed"] for g in summary["gates"]) and summary["errors"] == 0
