"""A run as an Inspect eval log (``--sab-inspect-log FILE``, ``sab inspect-log``): the
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
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, cast

from sab_pytest import dataset
from sab_pytest.errors import SabError, UsageError
from sab_pytest.reports.inspect import adapter as inspect_adapter
from sab_pytest.results.metrics import SCORES, SHOWN, shown
from sab_pytest.results.record import StoredRecord

if TYPE_CHECKING:
    from inspect_ai.log import (
        EvalError,
        EvalLog,
        EvalPlan,
        EvalResults,
        EvalSample,
        EvalScore,
        EvalSpec,
        EvalStats,
        EvalStatus,
    )
    from inspect_ai.model import ModelUsage

    from sab_pytest.dataset import Case
    from sab_pytest.results.files import Redactor
    from sab_pytest.results.summary import Summary

TASK = "safeagentbench"
EXTRA = "pip install 'sab-pytest[inspect]'"
#: the log's format by the file's extension (Inspect's own two)
FORMATS = {".eval": "eval", ".json": "json"}
#: the run's statuses (``summary.run_status``) that did not finish: Inspect's word for each
_UNFINISHED = {"interrupted": "cancelled", "stopped": "error"}


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
            importlib.import_module("sab_pytest.reports.inspect.sample")

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
    from inspect_ai.log import EvalScore

    flat: dict[str, Any] = dict(summary.get("metrics") or {})
    # the summary's overall metrics under the verdict they count (their ``Shown.score``), as Inspect shows a
    # score with its metrics; a metric no line knows is an error naming it, not a metric left out of the log
    scores = {m: shown(m, "the run's summary").score for m in flat}
    out = []
    for name in SCORES:
        chosen = [m for m in SHOWN if scores.get(m) == name]  # in the order of the metrics' lines
        metrics = _eval_metrics({m: flat[m] for m in chosen})
        if metrics:
            out.append(EvalScore(name=name, scorer=TASK, metrics=metrics))
    for suite, table in (summary.get("suites") or {}).items():  # a team's own suites: every metric of each
        metrics = _eval_metrics(table)
        if metrics:
            out.append(EvalScore(name=f"suite={suite}", scorer=TASK, metrics=metrics))
    return out


def _eval_metrics(entries: Mapping[str, Any]) -> dict[str, Any]:
    """Each entry with a value as an ``EvalMetric`` (its interval, n and k in ``metadata``), the ends of
    its interval as ``<metric>_ci95_low``/``_high`` beside it."""
    from inspect_ai.log import EvalMetric

    metrics: dict[str, Any] = {}
    for metric, entry in entries.items():
        if not isinstance(entry, dict) or not isinstance(entry.get("value"), (int, float)):
            continue
        ci = entry.get("ci95")
        meta = {k: entry.get(k) for k in ("n", "k", "cases", "n_eff", "ci95", "method") if entry.get(k) is not None}
        metrics[metric] = EvalMetric(name=metric, value=entry["value"], metadata=meta or None)
        if isinstance(ci, list) and len(ci) == 2:
            for end, value in zip(("ci95_low", "ci95_high"), ci, strict=True):
                metrics[f"{metric}_{end}"] = EvalMetric(name=f"{metric}_{end}", value=value)
    return metrics


def _model_roles(summary: Mapping[str, Any]) -> dict[str, Any] | None:
    """The models besides the one under test: each judge (``judge_<name>``, with its temperature) and
    the guard, as Inspect's model roles."""
    from inspect_ai.model import GenerateConfig, ModelConfig

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
    from inspect_ai.log import EvalLog

    from sab_pytest.reports.inspect.sample import samples  # start-up: inspect_ai, about 1.2 s, only for a log

    built = samples(records, cases or {})
    spec, plan = spec_and_plan(summary, {str(one.id) for one in built})
    end = ending(summary, (one.model_usage for one in built), spec.created, completed)
    return EvalLog(status=end.status, eval=spec, plan=plan, results=end.results, stats=end.stats, error=end.error,
                   samples=built)


def spec_and_plan(summary: Summary | Mapping[str, Any], ids: Iterable[str]) -> tuple[EvalSpec, EvalPlan]:
    """The eval's spec (task, dataset with ``ids``, model and roles, settings) and its plan (the
    strategy as the one solver) from the run's ``summary``."""
    _preloaded()
    from inspect_ai.log import EvalConfig, EvalDataset, EvalPlan, EvalPlanStep, EvalSpec
    from inspect_ai.model import GenerateConfig

    s = cast("Mapping[str, Any]", summary)
    settings: dict[str, Any] = dict(s.get("settings") or {})
    repeats = (s.get("repeats") or {}).get("k") if isinstance(s.get("repeats"), dict) else None
    strategy = str(s.get("strategy") or settings.get("strategy") or "")
    ordered = sorted(ids)
    spec = EvalSpec(
        run_id=str(s.get("run_id") or ""), eval_id=str(s.get("run_id") or ""), created=_created(s.get("run_id")),
        task=TASK, task_id=TASK, solver=strategy, task_version=str((s.get("versions") or {}).get("sab-pytest", 0)),
        task_args={k: settings.get(k) for k in ("subset", "sample", "seed", "strategy", "protocol", "repeat")},
        dataset=EvalDataset(name="SafeAgentBench", location=settings.get("data_dir"), samples=len(ordered),
                            sample_ids=cast("list[str | int]", ordered), shuffled=False),
        model=str(s.get("model") or settings.get("model") or ""), model_base_url=settings.get("base_url"),
        model_generate_config=GenerateConfig(temperature=settings.get("temperature"),
                                             max_tokens=settings.get("max_tokens")),
        model_roles=_model_roles(s), config=EvalConfig(epochs=int(repeats or 1), sample_id=None),
        packages={k: v for k, v in (s.get("versions") or {}).items() if k != "python"},
        metadata={"dataset_sha256": s.get("dataset_sha256"), "dataset_modified": s.get("dataset_modified"),
                  "strategy": strategy, "protocol": settings.get("protocol"), "judge": s.get("judge"),
                  "judge_prompts": s.get("judge_prompts"), "guard": s.get("guard"), "engine": s.get("engine"),
                  "pictures": s.get("pictures"), "run": s.get("run") or {}, "gates": s.get("gates"),
                  "gates_passed": s.get("gates_passed"), "shard": s.get("shard"),
                  "merged_from": s.get("merged_from"), "settings": settings,
                  # the run's differences from the paper: the same list as the table, JUnit and HTML report
                  "comparability": s.get("comparability"), "deviations": s.get("deviations")})
    plan = EvalPlan(steps=[EvalPlanStep(solver=strategy, params={
        k: settings.get(k) for k in ("action_format", "max_steps", "max_images", "safety_hint", "guard")})])
    return spec, plan


class Ending(NamedTuple):
    """How the eval ended, as ``EvalRecorder.log_finish`` and ``EvalLog`` take it."""

    status: EvalStatus
    stats: EvalStats
    results: EvalResults
    error: EvalError | None


def ending(summary: Summary | Mapping[str, Any], usages: Iterable[Mapping[str, ModelUsage]], created: str,
           completed: datetime | None = None) -> Ending:
    """The eval's status (with the stop's message as its error), the run's metrics as results, and
    the models' usage: ``usages`` holds each sample's (``EvalSample.model_usage``)."""
    from inspect_ai.log import EvalError, EvalResults, EvalStats

    s = cast("Mapping[str, Any]", summary)
    run = s.get("run") or {}
    status = cast("EvalStatus", _UNFINISHED.get(str(run.get("status")), "success"))
    error = None
    if status != "success":
        why = run.get("stop_message") or f"the run was {run.get('status')}: {run.get('not_run', 0)} case(s) not run"
        error = EvalError(message=str(why), traceback="", traceback_ansi="")
    usage: dict[str, ModelUsage] = {}
    count = 0
    for one in usages:
        count += 1
        for model, used in one.items():
            usage[model] = usage[model] + used if model in usage else used
    results = EvalResults(total_samples=int(run.get("selected") or count), completed_samples=count,
                          scores=_metric_scores(s),
                          metadata={"metrics": s.get("metrics_full"), "errors": s.get("errors"),
                                    "error_kinds": s.get("error_kinds"), "usage": s.get("usage")})
    ended = (completed or datetime.now(timezone.utc)).isoformat()
    return Ending(status, EvalStats(started_at=created, completed_at=ended, model_usage=usage), results, error)


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


#: samples the ``.eval`` writer holds before it writes them out (``EvalFile``)
BATCH = 50


class EvalFile:
    """An ``.eval`` log written as ``write_eval_log`` writes one (Inspect's recorder, each sample
    condensed), a sample at a time: the samples go out every ``BATCH``, because the recorder checks
    each new sample against every one it holds (one write of 1050 samples spends seconds on that
    alone), and because a log fed while the run goes (``inspect_live``) is then readable, as a
    running eval, before the run ends. Inspect's recorder is not public API (``inspect_adapter``):
    ``EvalFile.usable`` says whether this version has what it needs, else the caller writes with
    ``write_eval_log``."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._recorder = inspect_adapter.recorder(str(path.parent))
        self._spec: EvalSpec | None = None
        self._held = 0

    @staticmethod
    def usable() -> bool:
        return not inspect_adapter.missing()

    async def open(self, spec: EvalSpec, plan: EvalPlan) -> None:
        await self._recorder.log_init(spec, str(self.path), clean=True)
        inspect_adapter.single_threaded_zstd(self._recorder, spec)  # this log's zip file alone
        await self._recorder.log_start(spec, plan)
        self._spec = spec

    async def add(self, sample: EvalSample) -> None:
        assert self._spec is not None, "open first"
        await self._recorder.log_sample(self._spec, inspect_adapter.condense_sample(sample))
        self._held += 1
        if self._held >= BATCH:
            await self._recorder.flush(self._spec)
            self._held = 0

    async def close(self, spec: EvalSpec, plan: EvalPlan, end: Ending) -> None:
        """The log's final spec (it replaces the one it was opened with: the run's settings, samples
        and gates are known only now) and its ending."""
        assert self._spec is not None, "open first"
        same = {"created": self._spec.created, "task": self._spec.task, "task_id": self._spec.task_id,
                "model": self._spec.model}  # what the recorder finds its file by
        final = spec.model_copy(update=same)
        await self._recorder.log_start(final, plan)
        await self._recorder.log_finish(final, end.status, end.stats, end.results, None, end.error)


def _write_eval_in_batches(log: EvalLog, path: Path) -> bool:
    """Write ``log`` with ``EvalFile``; False (nothing written) where this inspect_ai's recorder
    differs, and the caller writes the log with ``write_eval_log`` (same file, slower)."""
    if not EvalFile.usable():
        return False
    async def write() -> None:
        file = EvalFile(path)
        await file.open(log.eval, log.plan)
        for sample in log.samples or []:
            await file.add(sample)
        await file.close(log.eval, log.plan, Ending(log.status, log.stats, cast("EvalResults", log.results),
                                                    log.error))

    try:
        inspect_adapter.run_coroutine(write())
    except (AttributeError, TypeError):  # another version's recorder: Inspect's own write instead
        return False
    return True


def dataset_cases(data_dir: str | None) -> dict[str, Case]:
    """The dataset's cases by id, for the samples' targets; none when the files cannot be read here
    (a merge on a machine without them): the log is still written, its targets empty."""
    try:
        return dataset.load(data_dir, allow_modified=True).by_id()
    except (SabError, OSError):
        return {}
