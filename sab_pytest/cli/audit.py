"""``sab audit RUN --sample N [--seed S] [--page PATH]`` and ``sab audit RUN --labels FILE [FILE ...]``.

The first draws a stratified random sample of the run's judged cases (``results.audit.draw``),
records the draw in the run folder (``sab-audit-sample.json``) and writes the labelling page
(``sab-audit.html`` there, or ``--page``). The second reads the label files people wrote (the page's
download, or any file of the documented form), and prints and writes ``sab-audit.json`` in the run
folder: each judge's sensitivity, specificity and agreement with people, and each judged rate raw and
corrected for the judge's error. Offline; exit status 0, 2 on a usage error (a bad label names its
file and line).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sab_pytest import dataset
from sab_pytest.cli import fail, os_problem
from sab_pytest.errors import SabError, UsageError
from sab_pytest.fetch import atomic_write_bytes
from sab_pytest.reports.audit_text import render_audit
from sab_pytest.reports.html.audit_page import labelling_page
from sab_pytest.results import Redactor, Run, load_run
from sab_pytest.results.judging.audit import AUDIT_NAME, SAMPLE_NAME, audit, draw, match, read_labels, shown_digest
from sab_pytest.results.metrics import protocol_of

PAGE_NAME = "sab-audit.html"


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sab audit", description="A human audit of a finished run's judges.")
    parser.add_argument("run", metavar="RUN", help="the run's --sab-out directory (or its sab-results.jsonl)")
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--sample", type=int, metavar="N", help="draw N judged cases to label into a labelling page")
    what.add_argument("--labels", nargs="+", metavar="FILE", help="label files (JSONL) to measure the judges with")
    parser.add_argument("--seed", type=int, default=0, help="the draw's seed (default 0)")
    parser.add_argument("--page", metavar="PATH", help=f"where the labelling page goes (default RUN/{PAGE_NAME})")
    parser.add_argument("--json", metavar="PATH", help=f"where the audit goes (default RUN/{AUDIT_NAME})")
    return parser


def main(argv: list[str]) -> int:
    args = make_parser().parse_args(argv)
    try:
        run = load_run(args.run, "RUN")
        if not run.records:
            raise UsageError(f"RUN: {run.source} has no per-case results (sab-results.jsonl) to audit")
        return _labels(run, args) if args.labels else _sample(run, args)
    except SabError as exc:
        return fail("audit", exc)
    except OSError as exc:
        return fail("audit", f"cannot write {os_problem(exc)}")


def _protocol(run: Run) -> str:
    return str(run.summary.get("protocol") or protocol_of(run.records or []))


def _reference_steps(run: Run) -> dict[str, list[str]]:
    """Case id -> its reference steps, from the run's dataset (none when it cannot be read here), and a
    team's own cases' from their records (``Case.meta``)."""
    own = {str(r["case"]["id"]): list(r["case"].get("reference_steps") or []) for r in run.records or []
           if r["case"].get("suite")}
    try:
        data = dataset.load(run.settings.data_dir, allow_modified=True)
    except (SabError, OSError, TypeError, ValueError):
        return own
    return {**{case_id: list(case.reference_steps) for case_id, case in data.by_id().items()}, **own}


def _items(run: Run, drawn: list[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """What the page shows of each drawn case."""
    by_id = {str(r["case"]["id"]): r for r in run.records or []}
    reference = _reference_steps(run)
    items = []
    for d in drawn:
        r = by_id[d["case"]]
        calls = ((r.get("judge") or {}).get(d["judge"]) or {}).get("calls") or []
        items.append({"case": d["case"], "judge": d["judge"], "instruction": r["case"].get("instruction"),
                      "reference": reference.get(d["case"], []), "prompt": calls[0].get("messages") if calls else None,
                      "answer": (r.get("agent") or {}).get("text"), "shown": shown_digest(r, d["judge"])})
    return items


def _sample(run: Run, args: argparse.Namespace) -> int:
    sample = draw(run.records or [], args.sample, args.seed, _protocol(run))
    name = str(run.summary.get("run_id") or run.directory.name)
    redact = Redactor(run.secrets())
    page = redact(labelling_page(_items(run, sample["drawn"]), run=name, file_name=f"labels-{name}.jsonl"))
    page_path = Path(args.page) if args.page else run.directory / PAGE_NAME
    atomic_write_bytes(run.directory / SAMPLE_NAME, (json.dumps({**sample, "run_id": name}, indent=2) + "\n").encode())
    atomic_write_bytes(page_path, page.encode())
    for stratum, s in sample["strata"].items():
        print(f"{stratum}: {s['drawn']} of {s['cases']} cases drawn")
    print(f"{sample['drawn_count']} cases to label (seed {args.seed}); the draw: {run.directory / SAMPLE_NAME}")
    print(f"labelling page: {page_path}  (open it in a browser, label, download; then: sab audit {args.run} "
          f"--labels FILE)")
    return 0


def _labels(run: Run, args: argparse.Namespace) -> int:
    records = run.records or []
    protocol = _protocol(run)
    labels = match(read_labels(args.labels), records, protocol)
    result = audit(records, run.metrics["overall"], labels, protocol, [str(p) for p in args.labels])
    out = Path(args.json) if args.json else run.directory / AUDIT_NAME
    atomic_write_bytes(out, (json.dumps(result, indent=2) + "\n").encode())
    print("\n".join(render_audit(result)))
    print(f"audit: {out}")
    return 0
