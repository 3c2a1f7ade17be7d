"""The run summary (``sab-summary.json``): settings, metrics, gates, usage, provenance."""

from __future__ import annotations

import platform
from importlib import metadata
from typing import Any

from . import __version__, metrics
from .settings import Settings


def _versions() -> dict[str, str]:
    out = {"sab-pytest": __version__, "python": platform.python_version()}
    for dist in ("pytest", "pytest-xdist", "openai", "ai2thor"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = "not installed"
    return out


def _dataset_sha(settings: Settings) -> dict[str, str]:
    from . import dataset
    from .errors import SabError

    try:
        return dataset.load(settings.data_dir).sha256
    except SabError:
        return {}


def _usage(records: list[dict[str, Any]], settings: Settings) -> dict[str, Any]:
    """Run totals: the per-case ``models.usage_totals`` added up; cost bills API calls only."""
    totals: dict[str, Any] = {}
    for r in records:
        for key, value in (r.get("usage") or {}).items():
            totals[key] = totals.get(key, 0) + value
    for key in ("calls", "cache_hits", "prompt_tokens", "completion_tokens", "billed_prompt_tokens",
                "billed_completion_tokens"):
        totals.setdefault(key, 0)
    totals["latency_s"] = round(totals.get("latency_s", 0.0), 3)
    totals["cost_usd"] = None
    if settings.prices:
        from .models import parse_prices

        prices = parse_prices(settings.prices)
        totals["cost_usd"] = round(prices.usd(totals["billed_prompt_tokens"], totals["billed_completion_tokens"]), 6)
    return totals


def build_summary(records: list[dict[str, Any]], settings: Settings, shard: dict[str, Any] | None = None,
                  dataset_sha256: dict[str, str] | None = None) -> dict[str, Any]:
    """The summary of ``records``; ``shard`` is what ``--sab-shard`` ran (``shard.describe``), else None.
    ``dataset_sha256`` given (a merge, on a machine that may lack the files) skips reading the dataset."""
    full = metrics.compute(records)
    gates = metrics.check_gates([metrics.parse_gate(g) for g in settings.gates], full)
    flat = {name: {k: entry.get(k) for k in ("value", "n", "k", "ci95") if k in entry}
            for name, entry in full["overall"].items()}
    unreachable = sorted(({"id": r["case"]["id"], "reason": r["unreachable_goal"]}
                          for r in records if r.get("unreachable_goal")), key=lambda d: d["id"])
    return {
        "model": settings.model,
        "strategy": settings.strategy if not settings.offline_agent else "-",
        "safety_hint": settings.safety_hint,
        "judge": settings.judge_model,
        "engine": settings.engine if settings.execute else "off",
        "subset": settings.subset,
        "sample": settings.sample,
        "seed": settings.seed,
        "shard": shard,
        "cases": full["cases"],
        "errors": full["errors"],
        "error_kinds": full["error_kinds"],
        "metrics": flat,
        "metrics_full": full,
        "gates": gates,
        "gates_passed": all(g["passed"] for g in gates) and full["errors"] == 0 if gates else None,
        "usage": _usage(records, settings),
        "unreachable_goals": unreachable,
        "versions": _versions(),
        "dataset_sha256": _dataset_sha(settings) if dataset_sha256 is None else dataset_sha256,
        "settings": {k: v for k, v in settings.describe().items() if k not in ("extra",)},
    }
