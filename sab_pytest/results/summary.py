"""The run summary (``sab-summary.json``): settings, metrics, gates, usage, provenance."""

from __future__ import annotations

import platform
from importlib import metadata
from typing import Any

from sab_pytest import __version__
from sab_pytest.results import gates, metrics
from sab_pytest.results.record import SCHEMA, sample_id
from sab_pytest.settings import Settings


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
    from sab_pytest import dataset
    from sab_pytest.errors import SabError

    try:
        data = dataset.load(settings.data_dir, allow_modified=True)
    except SabError:
        return {}, []
    return data.sha256, data.modified_files()


def _usage(records: list[dict[str, Any]], settings: Settings) -> dict[str, Any]:
    """Run totals: the per-case ``models.usage_totals`` added up; cost bills API calls only."""
    totals: dict[str, Any] = {}
    for r in records:
        for key, value in (r.get("usage") or {}).items():
            totals[key] = totals.get(key, 0) + value
    for key in ("calls", "api_calls", "failed_calls", "errors", "cache_hits", "prompt_tokens", "completion_tokens",
                "billed_prompt_tokens", "billed_completion_tokens"):
        totals.setdefault(key, 0)
    totals["latency_s"] = round(totals.get("latency_s", 0.0), 3)
    if "rate_limit_wait_s" in totals:
        totals["rate_limit_wait_s"] = round(totals["rate_limit_wait_s"], 1)
    totals["cost_usd"] = None
    if settings.prices:
        from sab_pytest.models import parse_prices

        prices = parse_prices(settings.prices)
        totals["cost_usd"] = round(prices.usd(totals["billed_prompt_tokens"], totals["billed_completion_tokens"]), 6)
    return totals


def run_status(records: dict[str, dict[str, Any]], *, selected: list[str] | None, full: list[str],
               stop: Any = None, interrupted: bool = False) -> dict[str, Any]:
    """What kind of run produced ``records`` (case id -> record), so that nobody mistakes a part
    for the whole:

    * ``stopped``: the breaker stopped it (``stop``: the endpoint kept failing);
    * ``interrupted``: Ctrl-C, ``-x``/``--maxfail`` or a lost worker left selected cases not run;
    * ``rerun``: pytest selected part of the settings' cases (``--lf``, ``-k``, ``-m``, node ids,
      deselection); the summary covers only those, ``full_selection`` says of how many (with
      ``--sab-resume`` the caller merges the earlier verdicts in and sets ``merged``);
    * ``resumed``: verdicts of an earlier run were reused (``reused`` says how many);
    * ``complete``: every case of the selection has a verdict made in this run.

    ``not_run`` counts selected cases without a record: they are the ones ``--sab-resume`` does.
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
            "stop_message": getattr(stop, "message", None)}


def _baseline_note(baseline: gates.Baseline | None, summary: dict[str, Any] | None) -> dict[str, Any] | None:
    """Which run the baseline gates compared with (enough to find it again)."""
    if baseline is None:
        return None
    summary = summary or {}
    return {"source": baseline.source, "model": summary.get("model"), "cases": summary.get("cases"),
            "dataset_sha256": summary.get("dataset_sha256"), "per_case": baseline.records is not None}


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


def build_summary(records: list[dict[str, Any]], settings: Settings, run: dict[str, Any] | None = None, *,
                  baseline: gates.Baseline | None = None, baseline_summary: dict[str, Any] | None = None,
                  shard: dict[str, Any] | None = None,
                  dataset: tuple[dict[str, str], list[str]] | None = None) -> dict[str, Any]:
    """The summary of ``records``. ``run`` says what kind of run it was (``run_status``);
    ``baseline`` (with the baseline run's own summary) feeds the baseline gates; ``shard`` is what
    ``--sab-shard`` ran (``shard.describe``); ``dataset`` (per-file sha256, modified files) given,
    as a merge does on a machine that may lack the files, skips reading the dataset."""
    full = metrics.compute(records)
    decided = gates.check_gates([gates.parse_gate(g) for g in settings.gates], full, records=records,
                                baseline=baseline, alpha=settings.alpha, gate_on=settings.gate_on)
    flat = {name: {k: entry.get(k) for k in ("value", "n", "k", "ci95") if k in entry}
            for name, entry in full["overall"].items()}
    unreachable = sorted(({"id": r["case"]["id"], "reason": r["unreachable_goal"]}
                          for r in records if r.get("unreachable_goal")), key=lambda d: d["id"])
    sha, modified = _dataset_provenance(settings) if dataset is None else dataset
    if run is None:
        run = run_status({sample_id(r): r for r in records}, selected=None, full=[])
    return {
        "schema": SCHEMA,
        "run": run,
        "model": settings.model,
        "strategy": settings.strategy if settings.strategy_applies else "-",
        "guard": settings.guard_model_name if settings.guard != "off" else "off",
        "safety_hint": settings.safety_hint,
        "judge": settings.judge_model,
        "judges": ({j: {"model": m, "temperature": settings.judge_temperatures[j]}
                    for j, m in settings.judge_models.items()} if settings.judge_model != "rules" else None),
        "judge_prompts": settings.judge_prompts if settings.judge_model != "rules" else None,
        "engine": settings.engine if settings.execute else "off",
        "pictures": pictures(settings),
        "subset": settings.subset,
        "sample": settings.sample,
        "seed": settings.seed,
        "shard": shard,
        "cases": full["cases"],
        "repeats": full["repeats"],  # --sab-repeat K > 1: K, cases, flaky_cases, per-case pass_fraction
        "errors": full["errors"],
        "error_kinds": full["error_kinds"],
        "metrics": flat,
        "metrics_full": full,
        "gates": decided,
        "gates_passed": all(g["passed"] for g in decided) and full["errors"] == 0 if decided else None,
        "alpha": settings.alpha,
        "baseline": _baseline_note(baseline, baseline_summary),
        "usage": _usage(records, settings),
        "unreachable_goals": unreachable,
        "versions": _versions(),
        "dataset_sha256": sha,
        "dataset_modified": modified,
        "settings": {k: v for k, v in settings.describe().items() if k not in ("extra",)},
    }
