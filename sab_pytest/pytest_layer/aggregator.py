"""Controller side: one record per case, written as it arrives; the run-level checks before any
case; at the end the summary, reports, JUnit properties, gates and exit status."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

import pytest

from sab_pytest import dataset
from sab_pytest.batching.journal import pending_note
from sab_pytest.errors import INTERRUPTED, OUTPUT_FAILED, ErrorKind, SabError
from sab_pytest.pytest_layer import aliases, terminal
from sab_pytest.pytest_layer.collection import OwnCases, check_own_cases, other_sharder, run_cases
from sab_pytest.pytest_layer.junit_gates import annotate_case, drop_earlier_attempts, log_xml, report_gates
from sab_pytest.pytest_layer.state import AGGREGATOR, CASE_ID, RECORD_KEY, RUN_DIR_KEY, case_ids
from sab_pytest.pytest_layer.xdist import endpoint_check, stop_scheduling
from sab_pytest.reports import junit
from sab_pytest.reports.inspect.live import LiveLog
from sab_pytest.reports.inspect.log import preload
from sab_pytest.results import (
    CaseMeta,
    StoredRecord,
    case_meta,
    crashed,
    files,
    load_run,
    outdir,
    run_status,
    sample_id,
    split_sample_id,
)
from sab_pytest.run.batch_mode import batch_line
from sab_pytest.run.breaker import RunState, Stop
from sab_pytest.run.estimate import estimate, render
from sab_pytest.run.finish import RunEnd, RunFiles, finish_run, gates_hold
from sab_pytest.run.preflight import (
    baseline_differences,
    check_baseline_overlap,
    check_engines,
    check_inputs,
    identical_repeats_warning,
    modified_data_warning,
)
from sab_pytest.run.selection import select_cases
from sab_pytest.run.shard import part, take
from sab_pytest.settings import Settings

if TYPE_CHECKING:
    from sab_pytest.reports.inspect.live import LiveLog
    from sab_pytest.results import RunStatus, Summary


def aggregator(config: pytest.Config) -> Aggregator | None:
    """The controller's ``Aggregator`` when the plugin is on in this run, else None.

    The one gate for controller-side behaviour: hook methods go on the ``Aggregator`` (or on objects
    it registers), and code outside it asks here, so nothing happens in a project that did not ask
    for the benchmark. Worker-side behaviour goes into fixtures that only ``sab_case`` tests request.
    """
    return config.stash.get(AGGREGATOR, None)


class Aggregator:
    """Controller-side collector: one record per case, written as it arrives; metrics at the end."""

    def __init__(self, config: pytest.Config, settings: Settings, *, checked: bool = False) -> None:
        self.config = config
        self.settings = settings
        self.checked = checked  # run-level checks done (or skipped: turned on late, mid-session)
        self.records: dict[str, StoredRecord] = {}
        self.redact = files.Redactor(settings.secrets())
        self.writer: files.ResultsWriter | None = None
        self.summary: Summary | None = None
        self._case_meta: dict[str, dataset.Case] | None = None
        self._run_state: Any = None
        self.selected: list[str] | None = None  # case ids this run collected (after -k, -m, --lf ...)
        self.sharder = other_sharder(config)  # pytest-split's or pytest-shard's part of a run, if one is
        self.interrupted = False
        self._endpoints_checked: Callable[[], None] | None = None  # waits for the endpoint check's verdict
        self.baseline = None
        self.html_written = False
        self.claim: outdir.Claim | None = None  # this run's hold on --sab-out, taken before the first case
        self.session: pytest.Session | None = None
        self._output_stop: Stop | None = None  # set when the results file could not be written
        self._sigterm: Any = None  # SIGTERM's handler before the run made it stop like Ctrl-C
        self._announced: set[str] = set()  # the action-format fallbacks already said on the terminal
        self._unreported = 0  # records adopted from the run directory: pytest never reported their tests
        self.live_log: LiveLog | None = None  # --sab-inspect-log's .eval file, fed as records come
        self.exit_reasons: list[str] = []  # the gates' and checks' failures that made the exit status 1
        self.own: OwnCases = OwnCases()  # the team's own cases the run collects, validated before the first case
        self._undecided_part: str | None = None  # "part K/N of a run cut by ..." whose gates sab merge decides
        if settings.baseline:  # read once, on the controller, before any case runs
            self.baseline = load_run(settings.baseline, "--sab-baseline")

    @property
    def run_state(self) -> Any:
        """The run's shared breakers and stop signal (``breaker.RunState``), made on first use;
        None for offline runs on the embedded engine (no model call, no engine to fail)."""
        if self._run_state is None and self.settings.shares_run_state:
            self._run_state = RunState.create(self.settings.max_failures)
        return self._run_state

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        """xdist: hand each worker the run directory, so all processes share one breaker."""
        if self.run_state is not None:
            node.workerinput[RUN_DIR_KEY] = str(self.run_state.directory)

    @pytest.hookimpl(tryfirst=True)  # before pytest spends its time formatting the traceback
    def pytest_keyboard_interrupt(self, excinfo: Any) -> None:
        """Ctrl-C (or another stop) on the controller: tell every worker to make no further call."""
        self.interrupted = True
        if self.run_state is not None:
            self.run_state.request_stop(INTERRUPTED, "the run was interrupted (Ctrl-C)")

    def close(self) -> None:
        """End of the pytest run: say why the gates failed it (the terminal's last lines, after pytest's
        counts), close the results file, remove the run directory."""
        if self._undecided_part is not None:
            self._say(f"sab: {self._undecided_part}: its gates are not decided here; sab merge decides them over "
                      "every part's output directory", yellow=True, bold=True)
        closing = terminal.take_closing(self.config)  # a stop's or a signal's, unless a reason says it
        for reason in [*self.exit_reasons, *([closing] if closing and closing not in self.exit_reasons else [])]:
            self._say(f"sab: {reason}" if reason.startswith("exit status") else f"sab: exit status 1: {reason}",
                      red=True, bold=True)
        if self.writer is not None:
            self.writer.close()
        if self._run_state is not None:
            self._run_state.remove()
        if self.claim is not None:
            self.claim.release()
        files.restore_sigterm(self._sigterm)

    # selection --------------------------------------------------------------------------------
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        if session.items:  # without xdist; under xdist the controller collects nothing
            self.selected = case_ids(item.nodeid for item in session.items)

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        if self.selected is None:
            self.selected = case_ids(ids)

    def _full_selection(self) -> list[str]:
        """The case ids of the settings' whole selection (subset, sample, and the shard of it that
        ``--sab-shard`` runs), before pytest's own. A part pytest-split or pytest-shard cut is its
        own whole: what it collected, so that it is complete, not a rerun of part of the selection."""
        if self.sharder is not None:
            return list(self.selected or [])
        try:
            cases = run_cases(self.config, self.settings, self.own, self.selected)
        except SabError:
            return []
        if self.settings.shard is None:
            return [c.sample_id for c in cases]
        keep = take({c.id for c in cases}, *self.settings.shard)  # a shard holds every repeat of its cases
        return sorted(c.sample_id for c in cases if c.id in keep)

    def run_status(self) -> RunStatus:
        """What kind of run this was, for the summary and the table (see ``summary.run_status``)."""
        stop = self.run_state.stopped() if self._run_state is not None else None
        return run_status(self.records, selected=self.selected, full=self._full_selection(),
                          stop=stop if stop is not None and stop.reason != INTERRUPTED else self._output_stop,
                          interrupted=self.interrupted, unreported=self._unreported)

    # results -----------------------------------------------------------------------------------
    def _keep(self, case_id: str, record: StoredRecord) -> None:
        """Write ``record``'s line and count it as the case's, with no stop signal between the two.

        A record is counted only once its line is written, so that the summary's counts are the
        file's. When the file cannot be written (disk full, read-only), the run stops
        (``_output_failed``); the case is not counted and ``--sab-resume`` redoes it."""
        with files.stop_signals_held():
            if record.get("resumed"):
                self.records[case_id] = record  # already a line of the results file
                self._to_live_log(case_id, record)
                return
            if self._output_stop is not None:
                return
            try:
                if self.writer is None:
                    self._open_writer()
                assert self.writer is not None
                self.writer.write(record)
            except OSError as exc:
                self._output_failed(exc)
                return
            self.records[case_id] = record
            self._to_live_log(case_id, record)

    def _to_live_log(self, case_id: str, record: StoredRecord) -> None:
        if self.live_log is not None:
            self.live_log.add(case_id, record)

    def _output_failed(self, exc: OSError) -> None:
        """The results file cannot take a line: say so once, stop the run (no further case starts,
        in any process), keep what was written."""
        path = self.settings.out_dir / files.RESULTS_NAME
        written = self.writer.written if self.writer is not None else 0
        message = (f"could not write {path}: {exc.strerror or exc}. The {written} result(s) written before are "
                   "kept; the run stops. Free space (or make the file writable) and run the same command with "
                   "--sab-resume to finish it")
        self._output_stop = Stop(OUTPUT_FAILED, message)
        if self.writer is not None:
            self.writer.abandon()
        if self.run_state is not None:
            self.run_state.request_stop(OUTPUT_FAILED, message)
        stop_scheduling(self.config, self.session, f"sab-pytest: {message}")
        self._say(f"sab: error: {message}", red=True, bold=True)

    def _open_writer(self) -> None:
        if self.claim is None:  # turned on mid-session, without the checks before the first case
            self.claim = outdir.claim(self.settings.out_dir, outdir.new_run_id())
        self.writer = files.ResultsWriter(self.settings.out_dir / files.RESULTS_NAME, self.redact,
                                          resume=self.settings.resume, run_id=self.claim.run_id)
        if self.writer.set_aside is not None:
            self._note(f"the results file ended in a line cut short (a crash mid-write); it was moved to "
                       f"{self.writer.set_aside} and the case is run again")

    def _announce_fallback(self, record: StoredRecord) -> None:
        """Say once on the terminal that the interactive agents fell back to the text protocol (a
        worker found that the server ignores tools; its records carry the sentence)."""
        agent = record.get("agent") or {}
        reason = (agent.get("episode") or {}).get("fallback") if isinstance(agent, dict) else None
        if reason and reason not in self._announced:
            self._announced.add(reason)
            self._note(reason)

    def _note(self, text: str) -> None:
        self._say(f"sab: note: {text}")

    def _say(self, line: str, **markup: bool) -> None:
        terminal.say(self.config, line, **markup)

    def _meta(self, case_id: str) -> CaseMeta:
        if self._case_meta is None:
            try:
                self._case_meta = dataset.load(self.settings.data_dir, allow_modified=True).by_id()
            except SabError:
                self._case_meta = {}
        return case_meta(case_id, {**self._case_meta, **self.own.by_id()})  # a crashed case: rare

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "teardown" and (case := CASE_ID.search(report.nodeid)):
            record = self.records.get(case.group(1))  # the testcase closes on this report: its facts first
            annotate_case(self.config, report, None if record is None else self.redact(junit.case_facts(record)))
        props = report.user_properties
        # what a worker's ``sab_verdict`` attached: its record, as the JSON object the report carried
        sent = cast("StoredRecord | None", next((v for k, v in props if k == RECORD_KEY), None))
        if sent is not None:
            # keep the big record out of JUnit XML: it gets the scalar properties only
            report.user_properties = [(k, v) for k, v in props if k != RECORD_KEY]
            case_id = sample_id(sent)
            if report.when != "setup" or report.outcome == "rerun":
                return  # the record is the setup's; pytest-rerunfailures runs a "rerun" again: the last one counts
            if case_id not in self.records:  # (a rerun of a case with a verdict sends the same record again)
                self._keep(case_id, sent)
                self._announce_fallback(sent)
            return
        match = CASE_ID.search(report.nodeid)
        if match and report.failed and report.when in ("setup", "???") and match.group(1) not in self.records:
            # no record: the worker crashed mid-case, or setup failed before evaluation
            kind = ErrorKind.WORKER_CRASH if report.when == "???" else ErrorKind.SETUP
            text = str(report.longrepr).strip().splitlines()[-1] if report.longrepr else "no details"
            case_id, repeat = split_sample_id(match.group(1))
            lost = crashed(self._meta(case_id), kind, text, run_key=self.settings.run_key(),
                           run_settings=self.settings.run_settings(), repeat=repeat)
            self._keep(match.group(1), lost)

    def pytest_report_teststatus(self, report: pytest.TestReport, config: pytest.Config) -> Any:
        """A case whose worker died under it (xdist reports it with ``when="???"``) is an ERROR, as in
        JUnit, not a FAILED: nothing was judged, it says nothing of the model."""
        if report.when == "???" and report.failed and CASE_ID.search(report.nodeid):
            return "error", "E", "ERROR"
        return None

    @pytest.hookimpl(tryfirst=True)  # before xdist starts its workers (its hook is trylast)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        """The run-level checks (inputs, selection, output directory, a resume's settings, THOR
        servers, endpoints), once, before any case: a problem is one usage error (exit 4), not one
        per worker or per case."""
        self.session = session
        self._sigterm = files.sigterm_as_interrupt()
        if self.checked:
            return

        s = self.settings
        self.own = check_own_cases(self.config, s)  # the team's own case files first: an error writes nothing
        if s.estimate:
            self._estimate(session)
        run_id = None
        try:
            if s.resume:
                run_id = files.check_resumable(s.out_dir / files.RESULTS_NAME, s.run_settings(), s.run_key())
            workers = getattr(session.config.option, "numprocesses", None)
            warnings = [check_engines(s, workers if isinstance(workers, int) and workers > 0 else 1)]
            check_baseline_overlap(s, check_inputs(s, paper=self.own.paper, own=self.own.cases), self.baseline)
            for line in baseline_differences(s, self.baseline):
                self._say(f"sab: the baseline differs: {line}", yellow=True)
            warnings += [modified_data_warning(s), identical_repeats_warning(s)]
            for warning in filter(None, warnings):
                self._say(f"sab: warning: {warning}", yellow=True)  # now, before the cases
            self.claim = outdir.claim(s.out_dir, run_id or outdir.new_run_id())
        except SabError as exc:
            raise aliases.usage_error(self.config, exc) from None
        if self.claim.note:
            self._note(self.claim.note)
        self._endpoints_checked = endpoint_check(session.config, s, self.run_state)
        if s.inspect_log is not None and s.inspect_log.suffix.lower() == ".eval":
            first = {"run_id": self.claim.run_id, "model": s.model, "strategy": s.strategy,
                     "settings": s.describe()}
            with contextlib.suppress(OSError):  # no writer process: the log is written whole at the end
                self.live_log = LiveLog(s.inspect_log, s.data_dir, self.redact, first)
        if s.inspect_log is not None and self.live_log is None:  # the import, seconds long, while the cases run
            preload()
        self.checked = True

    def _estimate(self, session: pytest.Session) -> None:
        """``--sab-estimate``: print the run's expected calls, tokens and cost, and run nothing
        (no endpoint check either: no model is called)."""
        try:
            est = estimate(self.settings, run_cases(self.config, self.settings, self.own, None))
        except SabError as exc:
            raise aliases.usage_error(self.config, exc) from None
        terminal.print_estimate(session.config, render(est), est)

    @pytest.hookimpl(tryfirst=True)  # before xdist's loop schedules the first item, or pytest's runs it
    def pytest_runtestloop(self, session: pytest.Session) -> None:
        """No case calls a model before the endpoint check has passed; a failed one is the run's
        usage error (exit 4), like every other run-level check."""
        wait, self._endpoints_checked = self._endpoints_checked, None
        if wait is None:
            return
        try:
            wait()
        except SabError as exc:
            raise aliases.usage_error(self.config, exc) from None

    # end of session ------------------------------------------------------------------------------
    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int):
        if self.records or self.interrupted or self._output_stop is not None:
            try:
                self._finish(session)
            except (SabError, OSError) as exc:  # reports must never hide the run's own outcome
                what = f"{exc.filename}: {exc.strerror}" if isinstance(exc, OSError) and exc.filename else str(exc)
                self._say(f"sab-pytest: could not write the summary and reports: {what}", red=True)

        pending = pending_note(self.settings.out_dir) if self.settings.batch else None
        self.exit_reasons[:0] = [f"exit status 2: {pending}"] if pending else []
        if (self._output_stop is not None or pending) and session.exitstatus in (pytest.ExitCode.OK,
                                                                                 pytest.ExitCode.TESTS_FAILED):
            session.exitstatus = pytest.ExitCode.INTERRUPTED  # not every case has its line: never a pass
        if self.live_log is not None:  # no summary closed it (no case ran, or the files could not be written)
            self.live_log.drop()
        return (yield)

    def _adopt_kept(self) -> None:
        """Records of cases a process finished whose items never reported them (the run stopped,
        or a worker died, while its runner was ahead of its items): kept in the run directory by
        ``Runtime.run_case``, written here like any other. Read only when cases are missing."""
        if self._run_state is None or (self.selected is not None and len(self.records) >= len(self.selected)):
            return
        wanted = set(self.selected) if self.selected is not None else None
        for record in self._run_state.kept():
            if not isinstance(record.get("case"), dict) or "id" not in record["case"]:
                continue
            case_id = sample_id(record)
            if case_id not in self.records and (wanted is None or case_id in wanted):
                self._keep(case_id, record)
                self._unreported += case_id in self.records

    def _finish(self, session: pytest.Session) -> None:
        self._adopt_kept()
        end = RunEnd(self.records, self.run_status(), full_selection=self._full_selection(),
                     run_id=self.claim.run_id if self.claim else None,
                     unrecorded=self._run_state.unrecorded_usage() if self._run_state is not None else None,
                     baseline=self.baseline, shard_info=self._shard_info)
        done = finish_run(self.settings, end, RunFiles(self.redact, self.writer, self.live_log))
        self.summary, self.html_written = done.summary, done.html_written
        if batch := cast(dict[str, Any], done.summary).get("batch"):
            self._say(batch_line(batch))
        if done.html_error is not None:
            self._say(f"sab-pytest: --sab-html: could not write {self.settings.html}: {done.html_error}", red=True)
        if done.inspect_log_error is not None:
            self._say(f"sab-pytest: --sab-inspect-log: could not write {self.settings.inspect_log}: "
                      f"{done.inspect_log_error}", red=True)
        elif self.settings.inspect_log is not None:
            self._say(f"sab: Inspect log: {self.settings.inspect_log} (inspect view --log-dir "
                      f"{self.settings.inspect_log.parent})")
        _junit_suite_properties(self.config, junit.junit_suite_properties(done.summary), self.redact)
        drop_earlier_attempts(self.config, lambda nodeid: CASE_ID.search(nodeid) is not None)
        part = self._part_name()
        reasons = report_gates(self.config, done.summary, self.redact, part=part)
        if self.settings.gates and session.exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):
            if part is None:  # a part's gates are the merge's to decide
                ok = gates_hold(done.summary)
                session.exitstatus = pytest.ExitCode.OK if ok else pytest.ExitCode.TESTS_FAILED
                self.exit_reasons = [] if ok else reasons
            unusable = [g["usage_error"] for g in done.summary["gates"] if g.get("usage_error")]
            for problem in unusable:  # runs too far apart to pair: a usage error, not a verdict on the model
                self._say(f"sab-pytest: --sab-baseline: {problem}", red=True)
            if unusable:
                session.exitstatus = pytest.ExitCode.USAGE_ERROR
        if self.settings.gates and part is not None:  # said last, under -q too: never a bare "gate FAIL"
            self._undecided_part = part
        terminal.publish_job_summary(self.config, self.settings, done.summary, part, html_written=self.html_written)

    def _part_name(self) -> str | None:
        """'part K/N of a run cut by SHARDER' when this run is such a part, else None (also for 1 of
        1, the whole run)."""
        sharder, k, n = self.sharder or ("--sab-shard", *(self.settings.shard or (1, 1)))
        return f"part {k}/{n} of a run cut by {sharder}" if n > 1 else None

    def _shard_info(self, finished: int) -> dict[str, Any] | None:
        """What ``--sab-shard`` ran (the shard filter's record of it), or the part another sharder
        cut (``shard.part``); None without shards."""
        if self.sharder is not None:
            try:
                whole = [c.id for c in select_cases(self.settings)]
            except SabError:
                whole = []
            return part(*self.sharder, whole, len(self.selected) if self.selected is not None else finished)
        shard_filter = self.config.pluginmanager.get_plugin("sab-shard")
        if shard_filter is None:
            return None
        k, n = self.settings.shard or (0, 0)
        return shard_filter.info or {"index": k, "count": n, "selected": None, "cases": finished, "selection": None}

    def pytest_report_header(self, config: pytest.Config) -> list[str]:
        line = terminal.header_line(self.settings)
        if self.sharder is not None:
            line += f", part {self.sharder[1]}/{self.sharder[2]} cut by {self.sharder[0]}"
        return [line]

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_terminal_summary(self, terminalreporter: Any):
        """The metrics table, after pytest's own failure report and short summary (the outermost
        wrapper finishes last), so that it is what a reader sees right above the final counts."""
        yield
        if self.summary is not None:
            terminal.write_table(terminalreporter, self.summary, self.settings, html_written=self.html_written)



def _junit_suite_properties(config: pytest.Config, props: list[tuple[str, str]], redact: files.Redactor) -> None:
    """Suite-level JUnit properties from the controller (``record_testsuite_property`` cannot, under xdist)."""
    xml = log_xml(config)
    if xml is None:
        return
    for name, value in props:
        xml.add_global_property(name, redact(value))


