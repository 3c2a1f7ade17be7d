"""The run summary (``sab-summary.json``): settings, metrics, gates, usage, provenance; its type,
and the one function that builds it.

``Summary`` names every top-level key a run writes, so that the type checker sees each one its
readers use (the table, JUnit, the HTML report, compare, merge). A summary read back from a file
is what some version wrote: an older one may lack later keys (``run_id``, ``repeats``,
``pictures`` ...), and a run known only by its results file has ``metrics_full`` and ``cases``
alone (``load.load_run``); readers take such keys with ``.get``. The nested tables (metrics, usage,
gates) stay plain JSON objects: their keys are made by ``metrics``/``gates`` from tables of names.
"""

from __future__ import annotations

import platform
from collections.abc import Mapping, Sequence
from importlib import metadata
from typing import Any, TypedDict

from sab_pytest import __version__, dataset
from sab_pytest.errors import SabError, UsageError
from sab_pytest.models import run_endpoints
from sab_pytest.protocol import comparability, deviations
from sab_pytest.results import gates, metrics
from sab_pytest.results.cost import UNRECORDED_CALLS, by_model
from sab_pytest.results.judging import audit
from sab_pytest.results.judging.agreement import panel_agreement
from sab_pytest.results.judging.served import served_models
from sab_pytest.results.record import SCHEMA, StoredRecord, failed, sample_id
from sab_pytest.settings import Settings
from sab_pytest.thor.execute import described


class _RunCounts(TypedDict):
    status: str  # complete, rerun, resumed, interrupted, stopped (``run_status``)
    selected: int
    full_selection: int
    finished: int
    reused: int
    not_run: int
    partial_selection: bool
    stop_reason: str | None
    stop_message: str | None


class RunStatus(_RunCounts, total=False):
    """The summary's ``run`` block: what kind of run produced it (``run_status``)."""

    merged: int  # a rerun's earlier verdicts folded in; set by ``run_status``, absent in a merge of shards
    errored: int  # of ``finished``, the records that are errors, not verdicts (``--sab-resume`` redoes them too)
    unreported: int  # of ``finished``, records of cases whose test pytest never ran to the end (not in its counts)


class WhatRan(TypedDict):
    """The keys of ``sab-summary.json`` that say what was run (``_what_ran``)."""

    model: str
    strategy: str
    guard: str
    safety_hint: bool
    judge: str
    judges: dict[str, dict[str, Any]] | None
    endpoints: dict[str, str]  # role -> where its requests went (a URL, or a named provider's endpoint)
    served_models: dict[str, dict[str, dict[str, int]]]  # role -> asked -> named by the answers -> count
    panel: dict[str, dict[str, Any]]  # judge -> its panel's agreement (``agreement.panel_agreement``)
    providers: dict[str, str]  # role -> the provider that answers it (``models.provider_of``)
    not_sent: dict[str, list[str]]  # role -> request keys its provider does not take, left out
    judge_prompts: str | None
    engine: str
    execution: dict[str, Any] | None  # what ran the plans and scored the goals (``thor.controllers.described``)
    pictures: dict[str, Any] | None
    subset: str
    sample: int | None
    seed: int


class Summary(WhatRan):
    """``sab-summary.json``: every key ``build_summary`` writes."""

    schema: int
    run_id: str | None  # the run whose results file this summarises (``outdir``); None for a run without one
    run: RunStatus
    shard: dict[str, Any] | None  # what --sab-shard ran (``run.shard.describe``)
    cases: int
    repeats: dict[str, Any] | None
    errors: int
    content_filtered: int  # cases the provider's content filter refused: neither verdicts nor errors
    error_kinds: dict[str, int]
    metrics: dict[str, dict[str, Any]]  # the overall metrics, flat
    #: per suite of a team's own cases (``owncases.files``), its metrics as flat as ``metrics``; {} without them
    suites: dict[str, dict[str, dict[str, Any]]]
    metrics_full: dict[str, Any]  # ``metrics.compute``
    gates: list[dict[str, Any]]
    audit: dict[str, Any] | None  # --sab-audit: what the labels say of the judges and the corrected rates
    gates_passed: bool | None
    alpha: float
    baseline: dict[str, Any] | None
    usage: dict[str, Any]
    unreachable_goals: list[dict[str, Any]]
    versions: dict[str, str]
    dataset_sha256: dict[str, str]
    dataset_modified: list[str]
    settings: dict[str, Any]
    protocol: str  # --sab-protocol: paper or sab (a summary without it was made under sab)
    deviations: list[dict[str, str]]  # each difference from the paper in force (``protocol.deviations``)
    comparability: str  # comparable with Table 2, or how many differences and where (``protocol.comparability``)


class MergedSummary(Summary):
    """The summary of shards merged into one run (``merge.merge``)."""

    merged_from: list[dict[str, Any]]  # per shard: its directory, shard, cases, status and run id
    missing_results: int  # selected cases no shard has a result for


def _versions() -> dict[str, str]:
    out = {"sab-pytest": __version__, "python": platform.python_version()}
    for dist in ("pytest", "pytest-xdist", "openai", "ai2thor"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = "not installed"
    return out


def _dataset_provenance(settings: Settings) -> tuple[dict[str, str], list[str]]:
    """Per-file sha256 of the dataset, and the files that differ from the pins (accepted only with
    --sab-allow-modified-data)."""
    try:
        data = dataset.load(settings.data_dir, allow_modified=True)
    except SabError:
        return {}, []
    return data.sha256, data.modified_files()


UNRECORDED_KEYS = ("calls", "api_calls", "failed_calls", "errors", "prompt_tokens", "completion_tokens",
                   "billed_prompt_tokens", "billed_completion_tokens", "rate_limited", "abandoned_calls")


def _usage(records: Sequence[StoredRecord], settings: Settings,
           unrecorded: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Run totals: the per-case ``models.usage_totals`` added up; cost bills API calls only.
    ``unrecorded``: the calls of cases the run's stop cut short, made and billed though no case has
    a record, counted in (``calls_of_cases_not_run`` says how many)."""
    totals: dict[str, Any] = {}
    for r in records:
        for key, value in (r.get("usage") or {}).items():
            totals[key] = totals.get(key, 0) + value
    for key in ("calls", "api_calls", "failed_calls", "errors", "cache_hits", "prompt_tokens", "completion_tokens",
                "billed_prompt_tokens", "billed_completion_tokens"):
        totals.setdefault(key, 0)
    if unrecorded:
        for key in UNRECORDED_KEYS:
            if unrecorded.get(key):
                totals[key] = totals.get(key, 0) + unrecorded[key]
        totals["calls_of_cases_not_run"] = unrecorded.get("calls", 0)
    totals["latency_s"] = round(totals.get("latency_s", 0.0), 3)
    if "rate_limit_wait_s" in totals:
        totals["rate_limit_wait_s"] = round(totals["rate_limit_wait_s"], 1)

    cut_short = {"calls": list((unrecorded or {}).get(UNRECORDED_CALLS) or [])}  # billed too, in no record
    cost = by_model([*records, cut_short], settings)  # each role's model at its price: --sab-price or list price
    totals["cost_usd"] = cost["cost_usd"]
    totals["by_model"], totals["unpriced"], totals["prices"] = cost["rows"], cost["unpriced"], cost["prices"]
    return totals


def endpoints(settings: Settings) -> dict[str, str]:
    """Where each role's requests go: the URL its client is given (``models.endpoints``: the SDK's default
    spelt out as OpenAI's API; a provider it names, ``--judge-model groq/j``, at that provider's URL)."""
    return {role: endpoint.shown for role, endpoint in run_endpoints(settings).reported().items()}


def run_status(records: Mapping[str, StoredRecord], *, selected: list[str] | None, full: list[str],
               stop: Any = None, interrupted: bool = False, unreported: int = 0) -> RunStatus:
    """What kind of run produced ``records`` (case id -> record), so that nobody mistakes a part
    for the whole:

    * ``stopped``: the breaker stopped it (``stop``: the endpoint kept failing);
    * ``interrupted``: Ctrl-C, ``-x``/``--maxfail`` or a lost worker left selected cases not run;
    * ``rerun``: pytest selected part of the settings' cases (``--lf``, ``-k``, ``-m``, node ids,
      deselection); the summary covers only those, ``full_selection`` says of how many (with
      ``--sab-resume`` the caller merges the earlier verdicts in and sets ``merged``);
    * ``resumed``: verdicts of an earlier run were reused (``reused`` says how many);
    * ``complete``: every case of the selection has a verdict made in this run.

    ``not_run`` counts selected cases without a record; ``errored`` the records that are errors:
    ``--sab-resume`` redoes both. ``unreported``: records the caller took from the run directory for
    cases whose test pytest skipped or never reported (the runner was ahead of the tests), which
    pytest's own counts leave out.
    """
    chosen = selected if selected is not None else list(records)
    not_run = [case_id for case_id in chosen if case_id not in records]
    reused = sum(1 for r in records.values() if r.get("resumed"))
    partial = bool(full) and len(set(chosen) & set(full)) < len(full)
    if stop is not None:
        status = "stopped"
    elif interrupted or not_run:
        status = "interrupted"
    elif partial:
        status = "rerun"
    elif reused:
        status = "resumed"
    else:
        status = "complete"
    return {"status": status, "selected": len(chosen), "full_selection": len(full) or len(chosen),
            "finished": len(records), "reused": reused, "not_run": len(not_run),
            "partial_selection": partial, "merged": 0, "stop_reason": getattr(stop, "reason", None),
            "stop_message": getattr(stop, "message", None),
            "errored": sum(1 for r in records.values() if failed(r)), "unreported": unreported}


def _baseline_note(baseline: gates.Baseline | None, summary: Summary | None) -> dict[str, Any] | None:
    """Which run the baseline gates compared with (enough to find it again)."""
    if baseline is None:
        return None
    found: Mapping[str, Any] = summary or {}
    return {"source": baseline.source, "model": found.get("model"), "cases": found.get("cases"),
            "dataset_sha256": found.get("dataset_sha256"), "per_case": baseline.records is not None}


#: Why results of visual agents on schematic pictures are not the paper's numbers (shown with them).
SCHEMATIC_NOTE = ("visual results made on schematic pictures (labelled boxes of the embedded engine, not AI2-THOR "
                  "camera images) are not comparable with the paper's")


def pictures(settings: Settings) -> dict[str, Any] | None:
    """The kind of picture a visual strategy (basic, pca, map_vlm) looked at, and whether its results
    compare with the paper's, which its agents made on AI2-THOR's rendered frames; None when the
    strategy is shown no pictures."""
    if not settings.visual:
        return None
    comparable = settings.pictures == "rendered"
    return {"kind": settings.pictures, "comparable_with_paper": comparable,
            "note": None if comparable else SCHEMATIC_NOTE}


def _baseline_as(baseline: gates.Baseline | None, protocol: str) -> gates.Baseline | None:
    """The baseline read under this run's protocol, so that a gate compares one definition: from its
    records when at hand, else its summary's table carried over (``metrics.as_protocol``)."""
    if baseline is None:
        return None
    made = baseline.metrics["protocol"]
    if made == protocol:
        return baseline
    if baseline.records:
        return gates.Baseline(metrics.compute(baseline.records, protocol), baseline.records, baseline.source)
    return gates.Baseline(metrics.as_protocol({**baseline.metrics, "protocol": made}, protocol), None, baseline.source)


def role_providers(settings: Settings) -> dict[str, str]:
    """Which provider answers each role: roles may each name their own (``--judge-model azure/j``)."""
    return {role: endpoint.provider_label for role, endpoint in run_endpoints(settings).reported().items()}


def not_sent(settings: Settings) -> dict[str, list[str]]:
    """Request keys the run means to send that a role's provider does not take, and the client leaves
    out (``models.provider.Capabilities``): with ``--sab-repeat``, the ``seed`` that makes each
    repeat a sample of its own. Said in the summary because the repeats of such a role differ only
    as much as the provider's own sampling makes them."""
    if settings.repeat <= 1:
        return {}
    return {role: ["seed"] for role, endpoint in run_endpoints(settings).reported().items()
            if not endpoint.capabilities.seed}


def judge_audit(records: list[StoredRecord], full: dict[str, Any], settings: Settings) -> dict[str, Any] | None:
    """With ``--sab-audit``: the audit of the run's judges by its label files (``audit.audit``), its
    corrected rates also put in ``full["corrected"]``, where a gate's ``@corrected`` reads them. Labels
    that cannot be read or do not fit the run (found only once its cases are known, or at a merge on a
    machine without the files) leave ``{"error": ...}``: the summary is still written, and a corrected
    gate is undefined, saying why."""
    if not settings.audit:
        return None
    try:
        labels = audit.match(audit.read_labels(settings.audit), records, settings.protocol)
    except UsageError as exc:
        return {"error": f"--sab-audit: {exc}", "labels": list(settings.audit)}
    result = audit.audit(records, full["overall"], labels, settings.protocol, settings.audit)
    full["corrected"] = {name: m["corrected"] for name, m in result["metrics"].items()}
    suites = full.get("by_suite") or {}
    if suites:  # a team's own suites: each one's corrected rates, for a gate's METRIC[suite=NAME]@corrected
        full["corrected_by_suite"] = {
            suite: audit.corrected_rates([r for r in records if r["case"].get("suite") == suite], labels,
                                         settings.protocol) for suite in suites}
    return result


def flat_metrics(table: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """A metric table of ``metrics.compute`` as the summary's ``metrics`` gives it: each entry's numbers."""
    return {name: {k: entry.get(k) for k in ("value", "n", "k", "cases", "n_eff", "ci95", "method") if k in entry}
            for name, entry in table.items()}


def build_summary(records: list[StoredRecord], settings: Settings, run: RunStatus | None = None, *,
                  baseline: gates.Baseline | None = None, baseline_summary: Summary | None = None,
                  shard: dict[str, Any] | None = None, dataset: tuple[dict[str, str], list[str]] | None = None,
                  run_id: str | None = None, unrecorded: Mapping[str, Any] | None = None,
                  allowed_differences: Sequence[str] | None = None) -> Summary:
    """The summary of ``records``.

    Parameters: past ``settings``, each is an optional keyword that only some callers hold (a merge,
    a run compared with a baseline, a sharded part); a caller names the few it has.

    ``run`` says what kind of run it was (``run_status``); ``baseline`` (with the baseline run's own
    summary) feeds the baseline gates; ``shard`` is what ``--sab-shard`` ran (``shard.describe``);
    ``dataset`` (per-file sha256, modified files) given, as a merge does on a machine that may lack
    the files, skips reading the dataset; ``run_id`` is the run whose results file holds ``records``
    (the same id is on each of its lines); ``unrecorded`` the usage of calls no record holds
    (``_usage``); ``allowed_differences`` the baseline's settings that differ from this run's and were
    allowed (``load.setting_differences``), named on each gate that compares with it."""
    full = metrics.compute(records, settings.protocol)
    audited = judge_audit(records, full, settings)
    baseline = _baseline_as(baseline, settings.protocol)
    decided = _decided_gates(records, full, settings, baseline, allowed_differences)
    flat = flat_metrics(full["overall"])
    unreachable = sorted(({"id": r["case"]["id"], "reason": r["unreachable_goal"]}
                          for r in records if r.get("unreachable_goal")), key=lambda d: str(d["id"]))
    sha, modified = _dataset_provenance(settings) if dataset is None else dataset
    differences = deviations(settings)
    if run is None:
        run = run_status({sample_id(r): r for r in records}, selected=None, full=[])
    return {
        "schema": SCHEMA,
        "run_id": run_id,
        "run": run,
        **_what_ran(settings, records),
        "shard": shard,
        "cases": full["cases"],
        "repeats": full["repeats"],  # --sab-repeat K > 1: K, cases, flaky_cases, per-case pass_fraction
        "errors": full["errors"],
        "content_filtered": full["content_filtered"],
        "error_kinds": full["error_kinds"],
        "metrics": flat,
        "suites": {suite: flat_metrics(table) for suite, table in (full.get("by_suite") or {}).items()},
        "metrics_full": full,
        "gates": decided,
        "audit": audited,
        "gates_passed": all(g["passed"] for g in decided) and full["errors"] == 0 if decided else None,
        "alpha": settings.alpha,
        "baseline": _baseline_note(baseline, baseline_summary),
        "usage": _usage(records, settings, unrecorded),
        "unreachable_goals": unreachable,
        "versions": _versions(),
        "dataset_sha256": sha,
        "dataset_modified": modified,
        "settings": {k: v for k, v in settings.describe().items() if k not in ("extra",)},
        "protocol": settings.protocol,
        "deviations": [d.to_dict() for d in differences],
        "comparability": comparability(differences),
    }


def _what_ran(settings: Settings, records: list[StoredRecord]) -> WhatRan:
    """The summary's account of what was run: the model, strategy, guard and judges, their endpoints
    and the models that answered, the engine and its pictures, the subset and sample."""
    return {
        "model": settings.model,
        "strategy": settings.strategy if settings.strategy_applies else "-",
        "guard": settings.guard_model_name if settings.guard != "off" else "off",
        "safety_hint": settings.safety_hint,
        "judge": settings.judge_model,
        "judges": ({j: {"model": m, "temperature": settings.judge_temperatures[j]}
                    for j, m in settings.asked_judges.items()} if settings.judge_model != "rules" else None),
        "endpoints": endpoints(settings),
        "served_models": served_models(records),
        "panel": panel_agreement(records),
        "providers": role_providers(settings),
        "not_sent": not_sent(settings),
        "judge_prompts": settings.judge_prompts if settings.judge_model != "rules" else None,
        "engine": settings.engine if settings.execute else "off",
        "execution": described(settings.protocol == "paper") if settings.execute or settings.interactive else None,
        "pictures": pictures(settings),
        "subset": settings.subset,
        "sample": settings.sample,
        "seed": settings.seed,
    }


def _decided_gates(records: list[StoredRecord], full: dict[str, Any], settings: Settings,
                   baseline: gates.Baseline | None, allowed_differences: Sequence[str] | None) -> list[dict[str, Any]]:
    """Each gate of the run, decided on ``full`` (and on the baseline for the gates that compare),
    each comparing gate naming the baseline's settings that differ and were allowed."""
    decided = gates.check_gates([gates.parse_gate(g) for g in settings.gates], full, records=records,
                                baseline=baseline, alpha=settings.alpha, gate_on=settings.gate_on,
                                current=f"this run ({settings.out_dir})")
    for g in decided:  # compared although the baseline measured differently (--sab-baseline-mismatch allow)
        if gates.gate_kind(g["form"]).needs_baseline and allowed_differences:
            g["allowed_differences"] = list(allowed_differences)
    return decided
