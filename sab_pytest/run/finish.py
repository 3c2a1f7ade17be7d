"""The end of a run, as plain Python: close the results file, fold a rerun into the earlier
verdicts of the same settings, build and write the summary and the HTML report, decide the gates.

The pytest layer calls ``finish_run`` once, on the controller, before the session's exit status is
final; any other front end can call it the same way with what it gathered (``RunEnd``) and the
files it has open (``RunFiles``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from sab_pytest.errors import SabError
from sab_pytest.reports.html.report import write_report
from sab_pytest.reports.inspect import log as inspect_log
from sab_pytest.results import (
    Run,
    RunStatus,
    StoredRecord,
    Summary,
    build_summary,
    files,
    gates,
    sample_id,
    setting_differences,
    stamped,
)
from sab_pytest.run.batch_mode import batch_usage
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


@dataclass
class RunEnd:
    """What the front end gathered by the end of the run.

    ``records`` are the verdicts this run produced; ``status`` what kind of run it was
    (``summary.run_status``); ``full_selection`` every case id of the settings' selection, for a
    rerun of part of it; ``run_id`` (``results.outdir``) the id on every line of the results file;
    ``unrecorded`` the usage of calls made by cases the run's stop cut short (billed, though no
    case has a record); ``baseline`` the ``--sab-baseline`` run; ``shard_info`` what ``--sab-shard``
    ran, given the number of cases finished."""

    records: dict[str, StoredRecord]
    status: RunStatus
    full_selection: Iterable[str] = ()
    run_id: str | None = None
    unrecorded: Mapping[str, Any] | None = None
    baseline: Run | None = None
    shard_info: Callable[[int], dict[str, Any] | None] = lambda _n: None


@dataclass
class RunFiles:
    """The run's open outputs: ``redact`` applied to all it writes, the results file's ``writer``
    (closed here), and the ``--sab-inspect-log`` file fed as the run went (``live_log``)."""

    redact: files.Redactor
    writer: files.ResultsWriter | None = None
    live_log: LiveLog | None = None


def finish_run(settings: Settings, end: RunEnd, out: RunFiles) -> Finished:
    """Write the run's summary (and reports) from the verdicts of ``end``.

    With ``--sab-resume`` the results file is compacted (a redone case's new line replaces its old
    one), and a rerun of part of the selection (``--lf``, ``-k``) is summarised together with the
    earlier verdicts of the same settings, so that the summary covers every case of the file.
    The live Inspect log is closed when it holds exactly the summarised records (else the log is
    written whole from them).
    """
    path = settings.out_dir / files.RESULTS_NAME
    if out.writer is not None:
        out.writer.close()
        if settings.resume:
            files.compact_results(path, out.redact, end.run_id)
    records = _with_earlier(settings, end, path)
    baseline = end.baseline
    summary = build_summary(
        list(records.values()), settings, run=end.status, baseline_summary=baseline.summary if baseline else None,
        baseline=gates.Baseline(baseline.metrics, baseline.records, str(baseline.source)) if baseline else None,
        shard=end.shard_info(len(records)), run_id=end.run_id, unrecorded=end.unrecorded,
        allowed_differences=setting_differences(settings, baseline.settings) if baseline else None)
    if settings.batch:  # --sab-batch: batched and live requests and tokens apart (the cost is at the batch price)
        cast(dict[str, Any], summary)["batch"] = batch_usage(settings, summary["usage"])
    files.write_summary(settings.out_dir / files.SUMMARY_NAME, summary, out.redact)
    done = Finished(summary, records)
    if settings.html is not None:
        done.html_error = _write_html(settings.html, summary, records, out.redact)
        done.html_written = done.html_error is None
    if settings.inspect_log is not None:
        done.inspect_log_error = _write_inspect_log(settings.inspect_log, settings, summary, records, out.redact,
                                                    out.live_log)
    return done


def _with_earlier(settings: Settings, end: RunEnd, path: Path) -> dict[str, StoredRecord]:
    """``end.records``, with the earlier verdicts of the same settings when a ``--sab-resume`` run
    redid part of the selection (the count of those goes into the run's status as ``merged``)."""
    if not (settings.resume and end.status["partial_selection"]):
        return end.records
    key, full = settings.run_key(), set(end.full_selection)
    earlier = files.latest_per_case(r for r in files.read_results(path)
                                    if r.get("run_key") == key and sample_id(r) in full)
    merged = {**earlier, **end.records}
    end.status["merged"] = len(merged) - len(end.records)
    return merged


def _write_html(path: Path, summary: Summary, records: dict[str, StoredRecord],
                redact: files.Redactor) -> str | None:
    """``--sab-html``: None when written, else why not (the other files are written all the same).
    The report's modules are imported here only: a run without the option never needs them."""
    try:
        write_report(path, summary, list(records.values()), redact)
    except (SabError, OSError) as exc:
        return str(exc)
    return None


def _write_inspect_log(path: Path, settings: Settings, summary: Summary, records: dict[str, StoredRecord],
                       redact: files.Redactor, live_log: LiveLog | None) -> str | None:
    """``--sab-inspect-log``: the run as an Inspect eval log; None when written, else why not (the
    other files are written all the same). inspect_ai is imported here only: a run without the option
    never needs it."""
    try:
        if live_log is not None and live_log.finish(summary, records):
            return None

        run_id = summary.get("run_id")  # stamped as on the results file's lines (not on records in memory)
        inspect_log.write(path, summary, [stamped(r, run_id=run_id) for r in records.values()], redact,
                          inspect_log.dataset_cases(settings.data_dir))
    except (SabError, OSError, ImportError) as exc:
        return str(exc)
    return None


def gates_hold(summary: Summary) -> bool:
    """With gates, a run passes only when every gate holds and no case errored."""
    return all(g["passed"] for g in summary["gates"]) and summary["errors"] == 0
