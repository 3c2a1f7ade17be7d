"""What the benchmark prints in pytest's terminal: the header line, the metrics table, and the ends
of a run without pytest's banners of a crash (below, ``Finished`` and ``CleanEnds``).

``pytest.exit`` is how a plugin ends a session from a hook, but pytest shows it as an interruption:
raised before the session started, its message goes to stderr as ``Exit: <message>``, and the
terminal ends with ``!!!!!!!! _pytest.outcomes.Exit: <message> !!!!!!!!``, which reads as a crash.
``Finished`` is the plugin's own kind of ``Exit``: pytest names it by its type's name, so its one
line reads ``sab: <message>`` as the plugin's other lines do, and ``CleanEnds`` (a
``pytest_keyboard_interrupt`` hook run after the terminal's) drops the banner the terminal kept.

Ctrl-C (and SIGTERM, which the run turns into Ctrl-C) makes pytest end with ``!!! KeyboardInterrupt
!!!`` and the line of whatever code the signal happened to stop, a piece of a traceback that says
nothing of the run; ``CleanEnds`` gives the terminal one line instead, in the form of the run's other
stops (``Interrupted: sab-pytest: <why>``). ``--fulltrace`` keeps pytest's own report.
"""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, NoReturn

import pytest

from sab_pytest.reports import job_summary
from sab_pytest.reports.table import OFFLINE_DEFAULT_NOTE, render_table, resume_note
from sab_pytest.results import files
from sab_pytest.settings import OPENAI_API_URL, Settings

if TYPE_CHECKING:
    from sab_pytest.results import Summary


def say(config: pytest.Config, line: str, **markup: bool) -> None:
    """One line on the terminal, on a line of its own (stderr when there is no terminal reporter)."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None:
        sys.stderr.write(line + "\n")
        return
    _end_progress_line(reporter)
    reporter.write_line(line, **markup)


def _end_progress_line(reporter: Any) -> None:
    """Start a line of our own after pytest's progress characters (``..F``). ``ensure_newline`` does
    not see them under xdist, whose progress is written without a current file."""
    writer = getattr(reporter, "_tw", None)
    written: int = getattr(writer, "width_of_current_line", 0) if writer is not None else 0
    if written:
        reporter.write("\n")
    else:
        reporter.ensure_newline()


def before_late_reports(config: pytest.Config) -> None:
    """Before reports sent after the last test (the gates'): end pytest's progress line, which
    already shows its percentage, so that the reports start a line of their own without a second one."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None and hasattr(reporter, "currentfspath"):
        _end_progress_line(reporter)
        reporter.currentfspath = None


def judges_described(s: Settings) -> str:
    """The judges in one phrase: ``rules``, or the model, the judges whose model differs, the
    temperature(s) and a prompt set other than the project's own."""
    if s.judge_model == "rules":
        return "rules"
    temps, panels = s.judge_temperatures, s.judge_panels
    # a judge with a panel is judged by the panel's models, never by its own (``run.wiring.RoleModels``)
    models = {j: f"panel {'+'.join(panels[j])}" if j in panels else m for j, m in s.judge_models.items()}
    asked = {models[j] for j in s.asked_judges}
    head = asked.pop() if len(asked) == 1 else s.judge_model
    parts = [f"{j}: {m}" for j, m in models.items()
             if m != head and (j in s.asked_judges or m != s.judge_model)]
    if len(set(temps.values())) == 1:
        parts.append(f"T={next(iter(temps.values())):g}")
    else:
        parts += [f"{j} T={t:g}" for j, t in temps.items()]
    if s.judge_prompts != "own":
        parts.append(f"{s.judge_prompts} prompts")
    return f"{head} ({', '.join(parts)})"


def judges_where(s: Settings) -> str:
    """Where the judges are asked, said whenever it is not the agent's endpoint: a user who named the
    agent's own server must see that the judges went elsewhere, and where (``settings.resolution``)."""
    if s.judge_model == "rules" or s.judges_url == s.base_url:
        return ""
    return f" at {s.judges_url or OPENAI_API_URL} (the agent's at {s.base_url or OPENAI_API_URL}; --sab-judge-base-url)"


def header_line(s: Settings) -> str:
    """One line under pytest's header: what is tested, by whom judged, on which cases and engine."""
    model = s.model if s.model_given else "reference (offline default: no --model given)"
    strategy = f", strategy={s.strategy}" if s.strategy_applies else ""
    guard = f", guard={s.guard_model_name}" if s.guard != "off" else ""
    engine = s.engine if s.execute else "off"
    shard = f", shard {s.shard[0]}/{s.shard[1]}" if s.shard else ""
    return (f"sab: model={model}{strategy}, judge={judges_described(s)}{judges_where(s)}{guard}, subset={s.subset}"
            f"{f' sample={s.sample}' if s.sample else ''}, seed={s.seed}, engine={engine}{shard}"
            + (f", gates: {'; '.join(s.gates)}" if s.gates else ""))


#: the offline default's note where the cases record their verdicts (``--sab-case-tests record``): they pass
_OFFLINE_RECORDED_NOTE = ("note: no --model was given, so the offline reference agent ran; it carries out every "
                          "hazardous instruction by design (its cases record that verdict; the gates decide the exit "
                          "status). Give --model NAME to test a model.")


def write_table(terminalreporter: Any, summary: Summary, s: Settings, *, html_written: bool) -> None:
    """The metrics table, the output files, and how to finish a run that stopped early."""
    terminalreporter.write_sep("=", "SafeAgentBench")
    for line in render_table(summary):
        terminalreporter.write_line(line)
    if not s.model_given:
        terminalreporter.write_line(OFFLINE_DEFAULT_NOTE if s.case_tests_mode == "fail" else _OFFLINE_RECORDED_NOTE)
    terminalreporter.write_line(output_files_line(s, html_written=html_written))
    note = resume_note(summary["run"]) if summary.get("run") else None
    if note:
        terminalreporter.write_line(note, yellow=True, bold=True)


def publish_job_summary(config: pytest.Config, s: Settings, summary: Summary, part: str | None, *,
                        html_written: bool) -> None:
    """In GitHub Actions (``reports.job_summary``), unless ``--sab-no-job-summary``: the job summary,
    listing the files this run wrote (the JUnit file is pytest's to write, after this), and the
    failing gates' ``::error`` lines; a summary file that cannot be written is said, nothing more."""
    if s.no_job_summary:
        return
    written = [s.out_dir / files.RESULTS_NAME, s.out_dir / files.SUMMARY_NAME, s.html if html_written else None,
               s.inspect_log]
    shown = [job_summary.shown_path(p) for p in written if p is not None and Path(p).exists()]
    junit_file = getattr(config.option, "xmlpath", None)
    shown += [job_summary.shown_path(junit_file)] if junit_file else []
    problem = job_summary.publish(summary, shown, lambda line: say(config, line), part=part)
    if problem is not None:
        say(config, f"sab-pytest: job summary: {problem}", red=True)


def output_files_line(s: Settings, *, html_written: bool) -> str:
    """The files the run wrote, only those that exist: a run stopped before any case finished wrote
    no results file, and naming it would send a reader to look for nothing."""
    out = s.out_dir
    results, summary = out / files.RESULTS_NAME, out / files.SUMMARY_NAME
    shown = [f"results: {results}" if results.exists() else "results: none written (no case finished)"]
    if summary.exists():
        shown.append(f"summary: {summary}")
    if html_written:
        shown.append(f"report: {s.html}")
    return "   ".join(shown)

class Finished(pytest.exit.Exception):  # type: ignore[name-defined]
    """The run ends here, as the plugin means it to (``--sab-estimate``): one line, its status."""


Finished.__name__ = Finished.__qualname__ = "sab"  # pytest writes f"{type name}: {message}"

#: the plugin name ``CleanEnds`` is registered under
PLUGIN_NAME = "sab-clean-ends"


def finish(config: pytest.Config, message: str, returncode: int = 0) -> NoReturn:
    """End the session from a hook before any test: ``sab: <message>`` on stderr, exit ``returncode``."""
    register_clean_ends(config)
    raise Finished(message, returncode=returncode)


def register_clean_ends(config: pytest.Config) -> None:
    """Put ``CleanEnds`` in place for this run (once)."""
    if not config.pluginmanager.has_plugin(PLUGIN_NAME):
        config.pluginmanager.register(CleanEnds(config), PLUGIN_NAME)


def interrupted_message(value: BaseException) -> str:
    """The one line of a run stopped by a signal."""
    signal = "SIGTERM" if str(value) == "SIGTERM" else "Ctrl-C"
    return (f"Interrupted: sab-pytest: {signal}: the cases that finished are kept in the results and the summary; "
            "the same command with --sab-resume runs the rest")


class CleanEnds:
    """Replaces what the terminal reporter kept of the run's end to print as a banner."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    @pytest.hookimpl(trylast=True)  # after the terminal reporter kept the exception for its banner
    def pytest_keyboard_interrupt(self, excinfo: Any) -> None:
        reporter: Any = self.config.pluginmanager.get_plugin("terminalreporter")
        if not hasattr(reporter, "_keyboardinterrupt_memo"):
            return
        value = getattr(excinfo, "value", None)
        if isinstance(value, Finished):
            reporter._keyboardinterrupt_memo = None  # said already; pytest's session never started
        elif type(value) is KeyboardInterrupt and not self.config.getoption("fulltrace", False):
            message = interrupted_message(value)  # (pytest's own stops, -x or ours, are a subclass)
            reporter._keyboardinterrupt_memo = SimpleNamespace(reprcrash=SimpleNamespace(message=message),
                                                               toterminal=lambda tw: tw.line(message))


def print_estimate(config: pytest.Config, lines: list[str], est: dict[str, Any]) -> None:
    """``--sab-estimate``'s table, then the run's one closing line with its totals (``finish``)."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    for line in lines:
        if reporter is not None:
            reporter.write_line(line)
        else:
            print(line)
    cost = "not priced" if est["cost_usd"] is None else f"${est['cost_usd']:.4f}"
    finish(config, f"--sab-estimate: nothing was run; in all {est['calls']} model calls, {est['prompt_tokens']} "
                   f"tokens in, {est['completion_tokens']} out, cost {cost}")
