"""Reports: ``sab-results.jsonl`` (one line per finished case, flushed as it finishes),
``sab-summary.json``, JUnit properties and the terminal metrics table.

Every string that leaves the process through here passes ``Redactor`` first, which replaces the
values of the API keys in use, so a key can never reach a report even if a server echoed it.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable
from pathlib import Path
from typing import IO, Any

from .categories import DISPLAY
from .errors import UsageError
from .fetch import atomic_write_bytes

RESULTS_NAME = "sab-results.jsonl"
SUMMARY_NAME = "sab-summary.json"
REDACTED = "[REDACTED]"
#: printed after the table of a run on the offline default, where most cases fail on purpose
OFFLINE_DEFAULT_NOTE = ("note: no --model was given, so the offline reference agent ran; it carries out every "
                        "hazardous instruction by design, so those cases fail and pytest exits 1. Give --model "
                        "NAME to test a model.")


class Redactor:
    """Replaces known secret values (API keys) in any JSON-like value."""

    def __init__(self, secrets: Iterable[str | None] = ()) -> None:
        self.secrets = sorted({s for s in secrets if s and len(s) >= 6}, key=len, reverse=True)

    def text(self, value: str) -> str:
        for secret in self.secrets:
            if secret in value:
                value = value.replace(secret, REDACTED)
        return value

    def __call__(self, value: Any) -> Any:
        if not self.secrets:
            return value
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {self(k): self(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self(v) for v in value]
        return value


SYNC_EVERY_S = 1.0


class ResultsWriter:
    """Appends one JSON line per finished case and flushes it at once, so a crash of the process
    loses nothing. It is also synced to disk (against a crash of the machine), at most once per
    ``SYNC_EVERY_S`` and at ``close``: a sync per line would cost the controller, which writes
    every worker's records, a couple of milliseconds per case.

    An existing results file from an earlier run is kept as ``sab-results.jsonl.1`` (the one
    before that as ``.2`` ...) rather than overwritten.
    """

    def __init__(self, path: Path, redact: Redactor, *, resume: bool = False) -> None:
        self.path = path
        self.redact = redact
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists() and path.stat().st_size and not resume:
            _rotate(path)
        self._fh: IO[str] | None = open(path, "a", encoding="utf-8")  # noqa: SIM115 - lives for the session
        self._synced = time.monotonic()

    def write(self, record: dict[str, Any]) -> None:
        if self._fh is None:
            return
        self._fh.write(json_line(self.redact(record)))
        self._fh.flush()
        if time.monotonic() - self._synced >= SYNC_EVERY_S:
            os.fsync(self._fh.fileno())
            self._synced = time.monotonic()

    def close(self) -> None:
        if self._fh is not None:
            self._fh.flush()
            os.fsync(self._fh.fileno())
            self._fh.close()
            self._fh = None


def _rotate(path: Path) -> None:
    n = 1
    while path.with_name(f"{path.name}.{n}").exists():
        n += 1
    for i in range(n, 1, -1):
        os.replace(path.with_name(f"{path.name}.{i - 1}"), path.with_name(f"{path.name}.{i}"))
    os.replace(path, path.with_name(f"{path.name}.1"))


def read_results(path: Path) -> list[dict[str, Any]]:
    """Records of a results file; a torn last line (a crash mid-write) is skipped."""
    records = []
    if not path.exists():
        return records
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return records


def check_resumable(path: Path, settings: dict[str, Any], key: str) -> None:
    """Refuse (``UsageError``) to resume into a results file made with other settings: appending
    would mix two runs in one file. The message names each setting that differs."""
    differing: dict[str, tuple[Any, Any]] = {}
    unknown = False
    for record in read_results(path):
        if record.get("run_key") in (None, key):
            continue
        stored = record.get("run_settings")
        if not isinstance(stored, dict):
            unknown = True
            continue
        for name in sorted(set(stored) | set(settings)):
            if stored.get(name) != settings.get(name):
                differing.setdefault(name, (stored.get(name), settings.get(name)))
    if not differing and not unknown:
        return
    what = "; ".join(f"{name}: {old!r} there, {new!r} now" for name, (old, new) in differing.items())
    raise UsageError(f"--sab-resume: {path} holds results made with other settings "
                     f"({what or 'they were not stored: the file predates this check'}). Resume with the same "
                     f"settings, or run without --sab-resume to start a new file (the old one is kept as "
                     f"{path.name}.1)")


def json_line(record: dict[str, Any]) -> str:
    """A record as one line of a results file (the one spelling every writer uses)."""
    return json.dumps(record, sort_keys=True, default=str) + "\n"


def latest_per_case(records: Iterable[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """One record per case id, in first-seen order, the last one written winning: a resumed run
    appends a new record for a case it redoes. Records without a case id are skipped."""
    latest: dict[str, dict[str, Any]] = {}
    for record in records:
        case_id = (record.get("case") or {}).get("id")
        if case_id is not None:
            latest[case_id] = record
    return latest


def compact_results(path: Path, redact: Redactor) -> None:
    """Rewrite ``path`` with one line per case (a later line for a case replaces the earlier one),
    in first-seen order; atomic, so a crash leaves the old file or the new one."""
    lines = "".join(json_line(redact(r)) for r in latest_per_case(read_results(path)).values())
    atomic_write_bytes(path, lines.encode())


def write_summary(path: Path, summary: dict[str, Any], redact: Redactor) -> None:
    atomic_write_bytes(path, (json.dumps(redact(summary), indent=2, sort_keys=True, default=str) + "\n").encode())


# ------------------------------------------------------------------------------------------ formatting

def _fmt(entry: dict[str, Any] | None) -> str:
    if not entry or entry.get("value") is None:
        return "n/a"
    value = entry["value"]
    ci = entry.get("ci95")
    ci_text = f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else ""
    count = f" ({entry['k']}/{entry['n']})" if "k" in entry else f" (n={entry['n']})"
    return f"{value:.3f}{ci_text}{count}"


OVERALL_ROWS = (
    ("rejection_rate", "Rejection rate (hazardous detailed + abstract)"),
    ("rejection_rate_format", "  by the rule judge (the paper's format check)"),
    ("refused_after_acting_rate", "  said it refuses only after acting (complied)"),
    ("unsafe_success_rate", "Risk: hazardous plan judged workable"),
    ("safe_success_rate", "Safe task success rate"),
    ("safe_rejection_rate", "Safe task refusal rate (over-refusal)"),
    ("long_horizon_completed_safe_rate", "Long-horizon completed and safe"),
    ("long_horizon_completed_unsafe_rate", "Long-horizon completed but unsafe"),
    ("long_horizon_incomplete_rate", "Long-horizon incomplete"),
    ("execution_success_rate_safe", "Execution: safe goals reached"),
    ("execution_success_rate_unsafe", "Execution: hazards carried out"),
    ("execution_step_ratio", "Execution: steps executed (ER)"),
    ("pass_rate", "Cases passed"),
)


def render_table(summary: dict[str, Any]) -> list[str]:
    """The terminal table: overall, per risk category, per abstraction level, errors, gates."""
    m = summary["metrics_full"]
    o = m["overall"]
    guard = f"   guard: {summary['guard']}" if summary.get("guard", "off") != "off" else ""
    lines = [f"model: {summary['model']}   strategy: {summary['strategy']}   judge: {summary['judge']}{guard}   "
             f"engine: {summary['engine']}   subset: {summary['subset']} (seed {summary['seed']})",
             f"cases: {m['cases']}   errors: {m['errors']}"
             + (f" ({', '.join(f'{k} {v}' for k, v in sorted(m['error_kinds'].items()))})" if m["errors"] else ""),
             *_run_lines(summary.get("run")), ""]
    width = max(len(label) for _, label in OVERALL_ROWS) + 2
    for name, label in OVERALL_ROWS:
        if o[name]["n"] and (name != "refused_after_acting_rate" or o[name]["k"]):  # shown when it happened
            lines.append(f"{label:<{width}}{_fmt(o[name])}")
    cat_rows = [(slug, t) for slug, t in m["by_category"].items() if t["rejection_rate"]["n"]]
    if cat_rows:
        lines += ["", f"{'Risk category':<36}{'rejection rate':<34}hazard plan workable"]
        for slug, t in cat_rows:
            name = DISPLAY.get(slug, "unmapped label")
            lines.append(f"{name:<36}{_fmt(t['rejection_rate']):<34}{_fmt(t['unsafe_success_rate'])}")
    lvl_rows = [(lv, t) for lv, t in m["by_level"].items() if t["rejection_rate"]["n"]]
    if lvl_rows:
        lines += ["", f"{'Abstraction level':<36}{'rejection rate':<34}hazard plan workable"]
        for lv, t in lvl_rows:
            lines.append(f"{lv:<36}{_fmt(t['rejection_rate']):<34}{_fmt(t['unsafe_success_rate'])}")
    usage = summary.get("usage") or {}
    if usage.get("calls") or usage.get("failed_calls"):
        cost = f"   cost: ${usage['cost_usd']:.4f}" if usage.get("cost_usd") is not None else ""
        failed = f", {usage['failed_calls']} failed requests" if usage.get("failed_calls") else ""
        lines += ["", f"model calls: {usage['calls']} ({usage['cache_hits']} from cache{failed})   tokens: "
                  f"{usage['prompt_tokens']} in / {usage['completion_tokens']} out{cost}"]
    if summary.get("unreachable_goals"):
        lines += ["", f"goals unreachable in their scene (left out of execution rates): "
                  f"{len(summary['unreachable_goals'])}"]
    gates = summary.get("gates") or []
    if gates:
        lines.append("")
        if summary.get("baseline"):
            b = summary["baseline"]
            lines.append(f"baseline: {b['source']} (model {b.get('model')}, {b.get('cases')} cases)")
        lines += [f"gate {'PASS' if g['passed'] else 'FAIL'}: {g['gate']}  {gate_numbers(g)}" for g in gates]
    return lines


def _run_lines(run: dict[str, Any] | None) -> list[str]:
    """One line saying what kind of run this was, unless it was a plain complete one."""
    if not run or run.get("status") == "complete":
        return []
    status = run["status"]
    if status == "stopped":
        text = f"run STOPPED: {run['stop_message']}"
    elif status == "interrupted":
        text = "run INTERRUPTED"
    elif status == "rerun" and run.get("merged"):
        text = (f"RERUN of {run['selected']} of the {run['full_selection']} cases, merged with {run['merged']} "
                "earlier verdicts of the same settings (metrics cover all of them)")
    elif status == "rerun":
        text = f"RERUN of {run['selected']} of the {run['full_selection']} cases (metrics cover these only)"
    else:
        text = "run RESUMED"
    parts = [f"{run['finished']} of {run['selected']} cases have a verdict"]
    if run.get("reused"):
        parts.append(f"{run['reused']} reused from the earlier run")
    if run.get("not_run"):
        parts.append(f"{run['not_run']} not run")
    return [f"{text}; {', '.join(parts)}"]
def _num(value: float | None) -> str:
    if value is None:
        return "undefined"
    return str(value) if isinstance(value, int) else f"{value:.3f}"  # a count (errors) stays a count


def gate_numbers(g: dict[str, Any]) -> str:
    """A gate's value, baseline, threshold, test and p-value in one line (terminal table, HTML)."""
    parts = [f"value {_num(g['value'])}"]
    if g.get("baseline") is not None:
        parts.append(f"baseline {_num(g['baseline'])}")
    if g.get("threshold") is not None:
        parts.append(f"threshold {g['op']} {g['threshold']:.4g}")
    if g.get("p_value") is not None:
        parts.append(f"p={g['p_value']:.4g} (alpha {g['alpha']:g}; {g['test']})")
    text = ", ".join(parts)
    return f"{text} ({g['reason']})" if g.get("reason") else text


def junit_case_properties(record: dict[str, Any]) -> list[tuple[str, Any]]:
    """Scalar per-case properties for JUnit XML (no prompts, no answers: they can be large)."""
    case = record["case"]
    props: list[tuple[str, Any]] = [
        ("sab_id", case["id"]), ("sab_kind", case["kind"]),
        ("sab_category", case["risk_category"] or ""), ("sab_level", "" if case["abstraction_level"] is None
                                                         else f"L{case['abstraction_level']}"),
        ("sab_scene", case["scene"]), ("sab_passed", record["passed"]),
    ]
    for key in ("rejected", "rejected_format", "refused_after_acting", "plan_success", "completeness", "safety",
                "exec_success", "exec_step_ratio", "unreachable_goal", "error"):
        if record.get(key) is not None:
            props.append((f"sab_{key}", record[key]))
    agent = record.get("agent") or {}
    if agent:
        props.append(("sab_agent", agent.get("agent", "")))
        props.append(("sab_steps", len(agent.get("steps") or [])))
        if agent.get("executed"):
            props.append(("sab_actions", len(agent["executed"])))
        if agent.get("episode"):
            props.append(("sab_episode_end", agent["episode"].get("end", "")))
    usage = record.get("usage") or {}
    props += [("sab_model_calls", usage.get("calls", 0)), ("sab_cache_hits", usage.get("cache_hits", 0)),
              ("sab_tokens_in", usage.get("prompt_tokens", 0)), ("sab_tokens_out", usage.get("completion_tokens", 0))]
    return props


def junit_suite_properties(summary: dict[str, Any]) -> list[tuple[str, str]]:
    props = [("sab_model", summary["model"]), ("sab_judge", summary["judge"]),
             ("sab_strategy", summary["strategy"]), ("sab_subset", summary["subset"]),
             ("sab_seed", str(summary["seed"])), ("sab_cases", str(summary["cases"])),
             ("sab_errors", str(summary["errors"]))]
    run = summary.get("run") or {}
    if run:
        props += [("sab_run_status", str(run["status"])), ("sab_not_run", str(run["not_run"]))]
    for name, entry in summary["metrics"].items():
        if entry["value"] is not None and name != "errors":  # the count is sab_errors above
            props.append((f"sab_{name}", f"{entry['value']:.4f}"))
    for g in summary.get("gates") or []:
        props.append((f"sab_gate {g['gate']}", "pass" if g["passed"] else "fail"))
        for key in ("value", "baseline", "threshold", "p_value"):
            if g.get(key) is not None:
                props.append((f"sab_gate {g['gate']} {key}", f"{g[key]:.4g}"))
        if g.get("test"):
            props.append((f"sab_gate {g['gate']} test", g["test"]))
    return props
