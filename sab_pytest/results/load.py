"""Load a finished run from its files: the one place that knows what a run directory holds.

A run is what ``--sab-out DIR`` wrote: ``sab-summary.json`` (settings, metrics, gates, provenance)
and ``sab-results.jsonl`` (one record per case). The report, compare and baseline gates accept a
run directory, a summary file or a results file; whatever is missing is rebuilt from what is there
(metrics from the records), and a path that holds neither is a ``UsageError`` naming it.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from sab_pytest.errors import UsageError
from sab_pytest.results import metrics
from sab_pytest.results.files import RESULTS_NAME, SUMMARY_NAME, latest_per_case, read_results
from sab_pytest.results.outdir import check_same_run
from sab_pytest.results.record import StoredRecord, check_summary_schema
from sab_pytest.settings import Settings

if TYPE_CHECKING:
    from sab_pytest.results.summary import Summary


@dataclass(frozen=True)
class Run:
    """One finished run: its summary (rebuilt from the records when absent) and, when at hand, its records.

    The summary is what some version wrote (``summary.Summary``: an older file may lack later keys),
    or for a run known only by its results file no more than ``metrics_full`` and ``cases``: read
    any other key with ``.get``."""

    source: Path
    summary: Summary
    records: list[StoredRecord] | None

    @property
    def metrics(self) -> dict[str, Any]:
        """``metrics.compute`` output (``load_run`` rebuilds it from the records when the summary lacks it)."""
        return self.summary["metrics_full"]

    @property
    def directory(self) -> Path:
        """The run's folder, where files made from it go by default (the report, the Inspect log)."""
        return self.source if self.source.is_dir() else self.source.parent

    @property
    def settings(self) -> Settings:
        """The ``Settings`` the run was made with (``settings_of``)."""
        return settings_of(self.summary)

    def secrets(self) -> list[str]:
        """Values of the keys and tokens the run named, as set here, so that what is made from the run
        (a page, a log, a comparison) never shows them."""
        return self.settings.secrets()


def settings_of(summary: Summary) -> Settings:
    """The ``Settings`` a summary was written with (fields this version does not know are ignored)."""
    names = {f.name for f in dataclasses.fields(Settings)}
    values = {k: v for k, v in (summary.get("settings") or {}).items() if k in names}
    for key in ("out_dir", "cache_dir"):
        if values.get(key) is not None:
            values[key] = Path(values[key])
    values["gates"] = tuple(values.get("gates") or ())
    values["judge_for"] = tuple(values.get("judge_for") or ())
    values["shard"] = None
    return Settings(**values)


#: run settings in which a baseline may differ and still measure the same thing: the model under test (a
#: release gate compares two models) and where models and data are found (the dataset has its own check)
COMPARABLE_ANYWAY = ("model", "base_url", "judge_base_url", "data_dir")


def setting_differences(current: Settings, baseline: Settings,
                        names: tuple[str, str] = ("baseline", "this run"), *,
                        keys: Collection[str] | None = None) -> list[str]:
    """The settings that change verdicts (``Settings.run_settings``) in which ``baseline`` differs from
    ``current``, one line each, besides ``COMPARABLE_ANYWAY``: a judge model, strategy, protocol,
    judge prompts, temperature or action format of its own makes its numbers another measurement of
    the same agent, which is what a gate's baseline is. ``keys``: only these (``sab board`` compares
    different agents, and checks the measurement's settings alone). ``names`` label the two values
    (baseline's first), so that ``compare`` says "A ..., B ..."."""
    mine, theirs = current.run_settings(), baseline.run_settings()
    return [f"{key}: {names[0]} {theirs.get(key, '(not set)')!r}, {names[1]} {mine.get(key, '(not set)')!r}"
            for key in sorted(set(mine) | set(theirs))
            if (key in keys if keys is not None else key not in COMPARABLE_ANYWAY) and mine.get(key) != theirs.get(key)]


def _read_summary(path: Path, what: str) -> Summary:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UsageError(f"{what}: cannot read {path}: {exc.strerror or exc}") from None
    except json.JSONDecodeError as exc:
        raise UsageError(f"{what}: {path}:{exc.lineno}: not valid JSON ({exc.msg})") from None
    if not isinstance(data, dict) or "metrics" not in data:
        raise UsageError(f"{what}: {path} is not a sab-summary.json (no 'metrics' in it)")
    try:
        check_summary_schema(data, path)
    except UsageError as exc:
        raise UsageError(f"{what}: {exc}") from None
    return cast("Summary", data)


def load_run(path: str | Path, what: str = "run") -> Run:
    """A run from a directory, a ``sab-summary.json`` or a ``sab-results.jsonl``; ``what`` names the
    option or argument in error messages."""
    path = Path(path)
    if path.is_dir():
        summary_path, results_path = path / SUMMARY_NAME, path / RESULTS_NAME
    elif path.is_file() and path.suffix == ".jsonl":
        summary_path, results_path = path.with_name(SUMMARY_NAME), path
    elif path.is_file():
        summary_path, results_path = path, path.with_name(RESULTS_NAME)
    else:
        raise UsageError(f"{what}: {path} does not exist (expected a run directory written by --sab-out, "
                         f"or its {SUMMARY_NAME} or {RESULTS_NAME})")
    try:
        records = read_results(results_path) if results_path.is_file() else None
    except UsageError as exc:
        raise UsageError(f"{what}: {exc}") from None
    summary = _read_summary(summary_path, what) if summary_path.is_file() else None
    if records is not None and summary is not None:
        try:
            check_same_run(summary, records, summary_path, results_path)
        except UsageError as exc:
            raise UsageError(f"{what}: {exc}") from None
    if records is not None:
        records = list(latest_per_case(records).values())
    if summary is not None:
        if "metrics_full" not in summary:
            if not records:
                raise UsageError(f"{what}: {summary_path} has no per-group metrics ('metrics_full') and there is "
                                 f"no {RESULTS_NAME} beside it to rebuild them from")
            summary["metrics_full"] = metrics.compute(records)  # once, not at every use
    elif records:
        summary = cast("Summary", {"metrics_full": metrics.compute(records), "cases": len(records)})
    else:
        raise UsageError(f"{what}: {path} holds neither {SUMMARY_NAME} nor a non-empty {RESULTS_NAME}")
    return Run(source=path, summary=summary, records=records)


