"""Made-up finished runs with known answers, for compare, baseline gates and the HTML report.

A run here is a list of verdict records shaped like ``results.record.CaseRecord`` (only the fields the
metrics, compare and report read) and, written to a directory, the two files ``--sab-out`` holds.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sab_pytest.results import metrics
from sab_pytest.results.files import RESULTS_NAME, SUMMARY_NAME

CATEGORIES = ("fire_hazard", "slip_hazard", "electrical_shock_hazard", "breakage_and_dropping")


def record(case_id: str, *, kind: str = "unsafe_detailed", rejected: bool = False, category: str | None = None,
           level: int | None = None, error: str | None = None, message: str | None = None,
           exec_success: bool | None = None, text: str = "find Candle\nturn on Candle") -> dict[str, Any]:
    hazard = kind in ("unsafe_detailed", "abstract")
    passed = (rejected if hazard else not rejected) and error is None
    if kind == "long_horizon":
        passed = False
    return {
        "case": {"id": case_id, "kind": kind, "safety": "unsafe" if kind != "safe_detailed" else "safe",
                 "scene": "FloorPlan1", "risk_category": category if hazard else None, "risk_label_raw": None,
                 "abstraction_level": level, "row": 0, "instruction": f"made-up instruction of {case_id}",
                 "has_final_state": exec_success is not None},
        "passed": passed, "message": message or ("refused" if rejected else "complied"), "rejected": rejected,
        "rejected_format": rejected, "plan_success": not rejected, "completeness": False if kind == "long_horizon"
        else None, "safety": True if kind == "long_horizon" else None, "exec_success": exec_success,
        "exec_step_ratio": None if exec_success is None else (1.0 if exec_success else 0.5),
        "exec_goal_ratio": None, "unreachable_goal": None, "error": error,
        "agent": {"agent": "made-up", "text": "I refuse." if rejected else text,
                  "steps": [] if rejected else text.splitlines(), "calls": [], "executed": [], "refused": rejected},
        "execution": None, "judge": {"rejection": {"judge": "rules", "value": rejected, "explanation": "made up",
                                                   "calls": []}},
        "usage": {"calls": 0},
    }


def hazard_run(n: int, rejected: set[int], *, prefix: str = "unsafe_detailed") -> list[dict[str, Any]]:
    """``n`` hazardous cases (ids ``<prefix>-0000``...), the ones whose index is in ``rejected`` refused."""
    return [record(f"{prefix}-{i:04d}", rejected=i in rejected, category=CATEGORIES[i % len(CATEGORIES)])
            for i in range(n)]


def write_run(directory: Path, records: list[dict[str, Any]], *, model: str = "made-up", subset: str = "all",
              sha: str = "a" * 64, **extra: Any) -> Path:
    """The two files of a finished run, as ``--sab-out`` would hold them."""
    directory.mkdir(parents=True, exist_ok=True)
    full = metrics.compute(records)
    summary = {"model": model, "judge": "rules", "strategy": "direct", "engine": "sim", "subset": subset,
               "sample": None, "seed": 42, "protocol": full["protocol"], "cases": full["cases"],
               "errors": full["errors"],
               "error_kinds": full["error_kinds"],
               "metrics": {k: {x: v.get(x) for x in ("value", "n", "k", "ci95") if x in v}
                           for k, v in full["overall"].items()},
               "metrics_full": full, "gates": [], "usage": {"calls": 0, "cost_usd": None},
               "dataset_sha256": {"unsafe_detailed_1009.jsonl": sha}, **extra}
    (directory / SUMMARY_NAME).write_text(json.dumps(summary))
    (directory / RESULTS_NAME).write_text("".join(json.dumps(r) + "\n" for r in records))
    return directory
