"""What the benchmark prints in pytest's terminal: the header line and the metrics table."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from sab_pytest.reports.table import OFFLINE_DEFAULT_NOTE, render_table, resume_note
from sab_pytest.results import files
from sab_pytest.settings import OPENAI_API_URL, Settings

if TYPE_CHECKING:
    import pytest

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
    models, temps = s.judge_models, s.judge_temperatures
    parts = [f"{j}: {m}" for j, m in models.items() if m != s.judge_model]
    if len(set(temps.values())) == 1:
        parts.append(f"T={next(iter(temps.values())):g}")
    else:
        parts += [f"{j} T={t:g}" for j, t in temps.items()]
    if s.judge_prompts != "own":
        parts.append(f"{s.judge_prompts} prompts")
    return f"{s.judge_model} ({', '.join(parts)})"


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
