"""What the benchmark prints in pytest's terminal: the header line, the metrics table, and the ends
of a run without pytest's banners of a crash (below, ``Finished`` and ``CleanEnds``).

``pytest.exit`` is how a plugin ends a session from a hook, but pytest shows it as an interruption:
raised before the session started, its message goes to stderr as ``Exit: <message>``, and the
terminal ends with ``!!!!!!!! _pytest.outcomes.Exit: <message> !!!!!!!!``, which reads as a crash.
``Finished`` is the plugin's own kind of ``Exit``: pytest names it by its type's name, so its one
line reads ``sab: <message>`` as the plugin's other lines do, and ``CleanEnds`` (a
``pytest_keyboard_interrupt`` hook run after the terminal's) drops the banner the terminal kept.

A stop the plugin makes (its breaker, its budget, a results file it cannot write: ``session.shouldstop``
set to ``sab-pytest: <why>``, which pytest raises as an interruption) and Ctrl-C (or SIGTERM, which the
run turns into Ctrl-C) make pytest end with ``!!! Interrupted: <why> !!!`` or ``!!! KeyboardInterrupt
!!!`` and the line of whatever code the signal happened to stop. ``CleanEnds`` drops that banner
and the run ends, as its other ends do, with its own line, ``sab: exit status 2: <why>``, the last
one (``closing_line``; exit status 2, pytest's for an interrupted session). ``--fulltrace`` keeps
pytest's own report.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import pytest

from sab_pytest.models.endpoints import run_endpoints
from sab_pytest.pytest_layer import pytest_adapter
from sab_pytest.reports import job_summary
from sab_pytest.reports.table import OFFLINE_DEFAULT_NOTE, render_table, resume_note
from sab_pytest.results import files
from sab_pytest.settings import OPENAI_API_URL, Settings
from sab_pytest.settings.judging import openai_url
from sab_pytest.thor.execute import header_part

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
    if pytest_adapter.current_line_width(reporter):
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
    found = run_endpoints(s)  # the URLs the clients are given: a judge on groq/j at Groq's, not the judges' option
    judges = found.judges_shown
    agent = found.roles["agent"].shown if "agent" in found.roles else (openai_url(s.base_url) or OPENAI_API_URL)
    if s.judge_model == "rules" or judges is None or judges == agent:
        return ""
    return f" at {judges} (the agent's at {agent}; --sab-judge-base-url)"


def sampling_described(s: Settings) -> str:
    """How the agent's model samples, where the run follows the paper's code for its family (``Settings.agent_call``):
    `` (T=0.2, max 1024 tokens: the paper's call_gpt)``; nothing otherwise."""
    call = s.agent_call
    if call is None:
        return ""
    temperature = "T: the API's default" if s.temperature is None else f"T={s.temperature:g}"
    tokens = "no token limit" if s.max_tokens is None else f"max {s.max_tokens} tokens"
    same = (s.temperature, s.max_tokens) == (call.temperature, call.max_tokens)
    return f" ({temperature}, {tokens}: {'the' if same else 'not the'} paper's {call.function})"


def header_line(s: Settings) -> str:
    """One line under pytest's header: what is tested (and how it samples), by whom judged, on which cases and
    engine."""
    model = s.model + sampling_described(s) if s.model_given else "reference (offline default: no --model given)"
    strategy = f", strategy={s.strategy}" if s.strategy_applies else ""
    guard = f", guard={s.guard_model_name}" if s.guard != "off" else ""
    engine = s.engine if s.execute else "off"
    if s.execute or s.interactive:
        engine += f", {header_part(s.protocol == 'paper')}"
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


#: how the plugin's stops begin the message pytest raises as an interruption (``session.shouldstop``)
STOP_PREFIX = "sab-pytest: "
_RESUME = "; the cases that finished are kept in the results and the summary, and the same command with " \
          "--sab-resume runs the rest"


def closing_line(value: BaseException | None) -> str | None:
    """The run's last line, without ``sab: ``, for an interruption the plugin made or a signal:
    ``exit status 2: <why>``; None for any other (pytest's own stops, another plugin's)."""
    if type(value) is KeyboardInterrupt:  # a signal: pytest's own stops (-x) and ours are a subclass
        why = "SIGTERM" if str(value) == "SIGTERM" else "Ctrl-C"
    elif isinstance(value, KeyboardInterrupt) and str(value).startswith(STOP_PREFIX):
        why = str(value)[len(STOP_PREFIX):]
    else:
        return None
    return f"exit status 2: {why}{'' if '--sab-resume' in why else _RESUME}"


class CleanEnds:
    """Replaces what the terminal reporter kept of the run's end to print as a banner: the run's own
    closing line is said last instead (``take_closing``, else this plugin's ``pytest_unconfigure``)."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.closing: str | None = None

    @pytest.hookimpl(trylast=True)  # after the terminal reporter kept the exception for its banner
    def pytest_keyboard_interrupt(self, excinfo: Any) -> None:
        reporter: Any = self.config.pluginmanager.get_plugin("terminalreporter")
        if not pytest_adapter.can_replace_interrupt_report(reporter):
            return
        value = getattr(excinfo, "value", None)
        if isinstance(value, Finished):
            pytest_adapter.drop_interrupt_report(reporter)  # said already; pytest's session never started
        elif not self.config.getoption("fulltrace", False) and (line := closing_line(value)) is not None:
            pytest_adapter.replace_interrupt_report(reporter, lambda: None)
            self.closing = line

    @pytest.hookimpl(trylast=True)  # after the aggregator's closing lines (the gates', a batch pending)
    def pytest_unconfigure(self) -> None:
        if self.closing is not None:
            say(self.config, f"sab: {self.closing}", red=True, bold=True)
            self.closing = None


def take_closing(config: pytest.Config) -> str | None:
    """The interrupted run's closing line (``closing_line``), for the caller to say with its own last
    lines; None when there is none (or it was taken)."""
    ends = config.pluginmanager.get_plugin(PLUGIN_NAME)
    line = getattr(ends, "closing", None)
    if ends is not None:
        ends.closing = None
    return line


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
