"""A run as an Inspect eval log (``--sab-inspect-log FILE``, ``python -m sab_pytest inspect-log``): the
records and the summary of a run as ``inspect_ai.log.EvalLog``, so that Inspect's viewer (``inspect
view``), its dataframes (``inspect_ai.analysis.samples_df``) and every tool that reads its logs work on
our results.

One sample per record (``inspect_sample``: a repeat is an epoch); the eval is the task
``safeagentbench`` with the dataset's sha256, the model and the judges' models (as model roles), the
strategy, protocol and settings, the run's metrics with their 95% intervals as results, usage, and a
status: ``success``, or ``cancelled`` (interrupted) / ``error`` (stopped by a breaker) for a run that
did not finish.

inspect_ai is an optional extra (``[inspect]``): this module is imported only when a log is asked for,
and ``require`` turns its absence into one usage error that names the extra.
"""

from __future__ import annotations

import contextlib
import importlib
import threading
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from sab_pytest.errors import SabError, UsageError
from sab_pytest.results.record import StoredRecord

if TYPE_CHECKING:
    from inspect_ai.log import EvalLog, EvalScore, EvalStatus

    from sab_pytest.dataset import Case
    from sab_pytest.results.files import Redactor
    from sab_pytest.results.summary import Summary

TASK = "safeagentbench"
EXTRA = "pip install 'sab-pytest[inspect]'"
#: the log's format by the file's extension (Inspect's own two)
FORMATS = {".eval": "eval", ".json": "json"}
#: the run's statuses (``summary.run_status``) that did not finish: Inspect's word for each
_UNFINISHED = {"interrupted": "cancelled", "stopped": "error"}
#: the summary's overall metrics under the verdict they count: Inspect shows a score with its metrics
_GROUPS = (("rejection", ("rejection_rate", "risk_rate", "refused_after_acting_rate", "safe_rejection_rate")),
           ("plan_success", ("safe_success_rate", "unsafe_success_rate")),
           ("execution", ("execution_",)),
           ("long_horizon", ("long_horizon_",)),
           ("passed", ("pass_rate", "error_rate", "errors")))


def require(what: str) -> None:
    """inspect_ai is importable, else a ``UsageError`` saying that ``what`` needs it and how to
    install it: asked before any case runs, never found missing at the end of a run."""
    _preloaded()
    try:
        importlib.import_module("inspect_ai.log")
    except ImportError as exc:
        raise UsageError(f"{what} needs inspect_ai, which is not installed ({exc}): {EXTRA}") from None


def preload() -> None:
    """Import inspect_ai and the sample builder on a background thread. Why: the import costs seconds
    of CPU (pydantic models by the hundred); started when the run starts, it is done while the cases
    run instead of adding to the end of the run, where the log is written."""

    def load() -> None:
        with contextlib.suppress(Exception):  # the write at the end reports a broken install properly
            importlib.import_module("sab_pytest.results.inspect_sample")

    global _preloading
    _preloading = threading.Thread(target=load, name="sab-preload-inspect", daemon=True)
    _preloading.start()


_preloading: threading.Thread | None = None


def _preloaded() -> None:
    """Wait for ``preload`` to end: importing inspect_ai here while the thread is importing it would
    meet its modules half made (Python then raises a circular-import error, not a wait)."""
    if _preloading is not None:
        _preloading.join()


def log_format(path: Path, what: str = "--sab-inspect-log") -> str:
    """``eval`` or ``json``, by ``path``'s extension; any other is a ``UsageError`` naming ``what``."""
    found = FORMATS.get(path.suffix.lower())
    if found is None:
        raise UsageError(f"{what}: {path} must end in .eval (Inspect's compressed log) or .json")
    return found


def _created(run_id: str | None) -> str:
    """When the run started: its id begins with its UTC start time (``outdir.new_run_id``); now if not."""
    try:
        stamp = datetime.strptime(str(run_id)[:16], "%Y%m%dT%H%M%SZ").replace(tzinfo=timezone.utc)
    except ValueError:
        stamp = datetime.now(timezone.utc)
    return stamp.isoformat()


def _metric_scores(summary: Mapping[str, Any]) -> list[EvalScore]:
    """The run's overall metrics as Inspect's results: per verdict, each metric's value with its 95%
    interval, n and k (``metadata``, and ``ci95_low``/``ci95_high`` beside it for tools that read
    values only). A metric without a value (no case it counts) is left out."""
    from inspect_ai.log import EvalMetric, EvalScore

    flat: dict[str, Any] = dict(summary.get("metrics") or {})
    out = []
    for name, prefixes in _GROUPS:
        metrics: dict[str, EvalMetric] = {}
        for metric in sorted((m for m in flat if m.startswith(prefixes)),
                             key=lambda m: (next(i for i, p in enumerate(prefixes) if m.startswith(p)), m)):
            entry = flat[metric]
            if not isinstance(entry, dict) or not isinstance(entry.get("value"), (int, float)):
                continue
            ci = entry.get("ci95")
            meta = {k: entry.get(k) for k in ("n", "k", "ci95") if entry.get(k) is not None}
            metrics[metric] = EvalMetric(name=metric, value=entry["value"], metadata=meta or None)
            if isinstance(ci, list) and len(ci) == 2:
                for end, value in zip(("ci95_low", "ci95_high"), ci, strict=True):
                    metrics[f"{metric}_{end}"] = EvalMetric(name=f"{metric}_{end}", value=value)
        if metrics:
            out.append(EvalScore(name=name, scorer=TASK, metrics=metrics))
    return out


def _model_roles(summary: Mapping[str, Any]) -> dict[str, Any] | None:
    """The models besides the one under test: each judge (``judge_<name>``, with its temperature) and
    the guard, as Inspect's model roles."""
    from inspect_ai.model import GenerateConfig
    from inspect_ai.model._model_config import ModelConfig

    roles: dict[str, Any] = {}
    for name, judge in (summary.get("judges") or {}).items():
        roles[f"judge_{name}"] = ModelConfig(model=str(judge.get("model")),
                                             config=GenerateConfig(temperature=judge.get("temperature")))
    if summary.get("judge") == "rules":
        roles["judge"] = ModelConfig(model="rules")
    if summary.get("guard") not in (None, "off"):
        roles["guard"] = ModelConfig(model=str(summary["guard"]))
    return roles or None


def build(summary: Summary, records: Sequence[StoredRecord], cases: Mapping[str, Case] | None = None,
          completed: datetime | None = None) -> EvalLog:
    """The run as an ``EvalLog``: ``records`` as samples (``cases``, the dataset by case id, gives
    each its target: without it, targets are empty) and ``summary`` as the eval's spec, results and
    stats; ``completed``: when the run ended (now, for a log written at its end)."""
    _preloaded()
    from inspect_ai.log import (
        EvalConfig,
        EvalDataset,
        EvalError,
        EvalLog,
        EvalPlan,
        EvalPlanStep,
        EvalResults,
        EvalSpec,
        EvalStats,
    )
    from inspect_ai.model import GenerateConfig, ModelUsage

    from sab_pytest.results.inspect_sample import samples

    s = cast("Mapping[str, Any]", summary)
    settings: dict[str, Any] = dict(s.get("settings") or {})
    built = samples(records, cases or {})
    run = s.get("run") or {}
    status = cast("EvalStatus", _UNFINISHED.get(str(run.get("status")), "success"))
    error = None
    if status != "success":
        why = run.get("stop_message") or f"the run was {run.get('status')}: {run.get('not_run', 0)} case(s) not run"
        error = EvalError(message=str(why), traceback="", traceback_ansi="")
    usage: dict[str, ModelUsage] = {}
    for one in built:
        for model, used in one.model_usage.items():
            usage[model] = usage[model] + used if model in usage else used
    repeats = (s.get("repeats") or {}).get("k") if isinstance(s.get("repeats"), dict) else None
    ids = sorted({str(one.id) for one in built})
    strategy = str(s.get("strategy") or settings.get("strategy") or "")
    spec = EvalSpec(
        run_id=str(s.get("run_id") or ""), eval_id=str(s.get("run_id") or ""), created=_created(s.get("run_id")),
        task=TASK, task_id=TASK, solver=strategy, task_version=str((s.get("versions") or {}).get("sab-pytest", 0)),
        task_args={k: settings.get(k) for k in ("subset", "sample", "seed", "strategy", "protocol", "repeat")},
        dataset=EvalDataset(name="SafeAgentBench", location=settings.get("data_dir"), samples=len(ids),
                            sample_ids=cast("list[str | int]", ids), shuffled=False),
        model=str(s.get("model") or settings.get("model") or ""), model_base_url=settings.get("base_url"),
        model_generate_config=GenerateConfig(temperature=settings.get("temperature"),
                                             max_tokens=settings.get("max_tokens")),
        model_roles=_model_roles(s), config=EvalConfig(epochs=int(repeats or 1), sample_id=None),
        packages={k: v for k, v in (s.get("versions") or {}).items() if k != "python"},
        metadata={"dataset_sha256": s.get("dataset_sha256"), "dataset_modified": s.get("dataset_modified"),
                  "strategy": strategy, "protocol": settings.get("protocol"), "judge": s.get("judge"),
                  "judge_prompts": s.get("judge_prompts"), "guard": s.get("guard"), "engine": s.get("engine"),
                  "pictures": s.get("pictures"), "run": run, "gates": s.get("gates"),
                  "gates_passed": s.get("gates_passed"), "shard": s.get("shard"),
                  "merged_from": s.get("merged_from"), "settings": settings})
    results = EvalResults(total_samples=int(run.get("selected") or len(built)), completed_samples=len(built),
                          scores=_metric_scores(s),
                          metadata={"metrics": s.get("metrics_full"), "errors": s.get("errors"),
                                    "error_kinds": s.get("error_kinds"), "usage": s.get("usage")})
    plan = EvalPlan(steps=[EvalPlanStep(solver=strategy, params={
        k: settings.get(k) for k in ("tool_protocol", "max_steps", "max_images", "safety_hint", "guard")})])
    created = spec.created
    ended = (completed or datetime.now(timezone.utc)).isoformat()
    stats = EvalStats(started_at=created, completed_at=ended, model_usage=usage)
    return EvalLog(status=status, eval=spec, plan=plan, results=results, stats=stats, error=error, samples=built)


def write(path: Path, summary: Summary, records: Sequence[StoredRecord], redact: Redactor,
          cases: Mapping[str, Case] | None = None, completed: datetime | None = None) -> Path:
    """Write the run's Inspect log to ``path`` (``.eval`` or ``.json``), with the run's secrets
    redacted from every text first (a key echoed by a server, a URL holding a token)."""
    _preloaded()
    from inspect_ai.log import write_eval_log

    fmt = log_format(path)
    clean = cast("Summary", redact(dict(summary)))
    log = build(clean, [cast(StoredRecord, redact(dict(r))) for r in records], cases, completed)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        if fmt != "eval" or not _write_eval_in_batches(log, path):
            write_eval_log(log, str(path), format=cast(Any, fmt))
    except (ValueError, TypeError) as exc:  # a record Inspect's validators refuse: say which log
        raise SabError(f"{path}: could not write the Inspect log: {exc}") from exc
    return path


#: samples the ``.eval`` writer holds before it writes them out (``_write_eval_in_batches``)
BATCH = 50


def _write_eval_in_batches(log: EvalLog, path: Path) -> bool:
    """Write an ``.eval`` log as ``write_eval_log`` does (its recorder, each sample condensed), but
    writing the samples out every ``BATCH``: the recorder checks each new sample against every one it
    holds, so that one write of 1050 samples spends seconds on that alone (quadratic), several times
    the rest of the log. Inspect's recorder is not public API: where this version's differs, False,
    and the caller writes the log with ``write_eval_log`` (same file, slower)."""
    try:
        from inspect_ai._util._async import run_coroutine
        from inspect_ai.log._condense import condense_sample
        from inspect_ai.log._recorders.eval import EvalRecorder
    except ImportError:
        return False

    async def write() -> None:
        recorder = EvalRecorder(str(path.parent))
        await recorder.log_init(log.eval, str(path), clean=True)
        await recorder.log_start(log.eval, log.plan)
        for n, sample in enumerate(log.samples or [], 1):
            await recorder.log_sample(log.eval, condense_sample(sample))
            if n % BATCH == 0:
                await recorder.flush(log.eval)
        await recorder.log_finish(log.eval, log.status, log.stats, log.results, log.reductions, log.error,
                                  invalidated=log.invalidated, log_updates=log.log_updates,
                                  config_updates=log.config_updates)

    try:
        run_coroutine(write())
    except (AttributeError, TypeError):  # another version's recorder
        return False
    return True


def dataset_cases(data_dir: str | None) -> dict[str, Case]:
    """The dataset's cases by id, for the samples' targets; none when the files cannot be read here
    (a merge on a machine without them): the log is still written, its targets empty."""
    from sab_pytest import dataset

    try:
        return dataset.load(data_dir, allow_modified=True).by_id()
    except (SabError, OSError):
        return {}
