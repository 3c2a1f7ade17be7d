"""Combine the output directories of the parts of one run into one run: ``--sab-shard K/N`` runs,
or the groups pytest-split or pytest-shard cut (their summaries record which sharder made them).

A merge is refused, with every reason named, when the shards cannot form one run: a directory that
is not a shard, shards of different settings or dataset, shards of different selections (other
``-k``/``-m``/sample), a shard given twice, a shard missing, or a case in two shards. Otherwise the
records are pooled and the summary, metrics and gates are computed from them exactly as a single run
computes them (so four shards merged give the metrics of one run, to the last digit).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sab_pytest.errors import USAGE_EXIT, UsageError
from sab_pytest.fetch import atomic_write_bytes
from sab_pytest.results import files, outdir
from sab_pytest.results.load import load_run, settings_of
from sab_pytest.results.record import StoredRecord, sample_id, stamped
from sab_pytest.results.summary import build_summary

if TYPE_CHECKING:
    from sab_pytest.results.summary import MergedSummary, RunStatus, Summary

#: settings that may differ between the jobs of one matrix: where things are on each machine, and
#: how a job ran rather than what it computed
LOCAL_SETTINGS = frozenset({"out_dir", "cache_dir", "data_dir", "thor_scenes", "thor_executable", "shard",
                            "resume", "concurrency", "extra", "upstream_dir", "no_job_summary"})


class MergeError(UsageError):
    """The shards cannot be merged; the message lists every reason."""


@dataclass(frozen=True)
class RunDir:
    """A finished run's output directory as merge sees it."""

    path: Path
    summary: Summary
    records: list[StoredRecord]


def read_run(directory: str | Path) -> RunDir:
    """One shard's output directory (``runs.load_run``: each case once, its last record winning)."""
    path = Path(directory)
    if not (path / files.SUMMARY_NAME).is_file():
        raise MergeError(f"{path}: no {files.SUMMARY_NAME} (not a run's output directory, or the run wrote "
                         "no results)")
    run = load_run(path, "merge")
    return RunDir(path, run.summary, run.records or [])


def _block(run: RunDir) -> dict[str, Any]:
    """A shard's ``shard`` block (``problems`` names a run without one before anything reads it)."""
    return run.summary.get("shard") or {}


def _shard(run: RunDir) -> tuple[int, int]:
    info = _block(run)
    return int(info["index"]), int(info["count"])


def _sharder(run: RunDir) -> str:
    """Who cut the part: ``--sab-shard`` (also a summary written before sharders were named), or another plugin."""
    return str(_block(run).get("sharder") or "--sab-shard")


def problems(runs: list[RunDir]) -> list[str]:
    """Every reason these runs are not the complete set of shards of one run (empty: mergeable)."""
    if not runs:
        return ["no shard directories given"]
    out = [f"{r.path}: not a shard (its run had no --sab-shard, pytest-split or pytest-shard)"
           for r in runs if not r.summary.get("shard")]
    if out:
        return out
    first = runs[0]
    sharders = {_sharder(r) for r in runs}
    if len(sharders) > 1:
        out.append("parts cut by different sharders: " + ", ".join(f"{r.path} by {_sharder(r)}" for r in runs))
    counts = {_shard(r)[1] for r in runs}
    if len(counts) > 1:
        out.append("shard counts differ: " + ", ".join(f"{r.path} is {'/'.join(map(str, _shard(r)))}" for r in runs))
    selections = {_block(r).get("selection") for r in runs}
    if len(selections) > 1:
        out.append("shards selected different cases (other -k, -m, --sab-subset, --sab-sample or --sab-seed?): "
                   + ", ".join(f"{r.path} selected {_block(r).get('selected')} cases "
                               f"({_block(r).get('selection')})" for r in runs))
    base = first.summary.get("settings") or {}
    for run in runs[1:]:
        other = run.summary.get("settings") or {}
        for key in sorted((set(base) | set(other)) - LOCAL_SETTINGS):
            if base.get(key) != other.get(key):
                out.append(f"settings differ: {key} is {base.get(key)!r} in {first.path} but {other.get(key)!r} "
                           f"in {run.path}")
        if run.summary.get("dataset_sha256") != first.summary.get("dataset_sha256"):
            out.append(f"dataset differs: {first.path} and {run.path} ran on files with different sha256")
    by_index: dict[int, list[RunDir]] = {}
    for run in runs:
        by_index.setdefault(_shard(run)[0], []).append(run)
    for index, group in sorted(by_index.items()):
        if len(group) > 1:
            out.append(f"shard {index}/{_shard(group[0])[1]} given {len(group)} times: "
                       + ", ".join(str(r.path) for r in group))
    if len(counts) == 1:
        n = counts.pop()
        missing = [f"{k}/{n}" for k in range(1, n + 1) if k not in by_index]
        if missing:
            out.append("missing shard(s): " + ", ".join(missing))
    owner: dict[str, Path] = {}
    for run in runs:
        for record in run.records:
            cid = sample_id(record)
            if cid in owner and owner[cid] != run.path:
                out.append(f"case {cid} is in both {owner[cid]} and {run.path}")
            owner.setdefault(cid, run.path)
    return out


def _status(summary: Summary) -> str | None:
    run = summary.get("run")
    return run.get("status") if run else None


def merged_run(runs: list[RunDir]) -> RunStatus | None:
    """The merged ``run`` block: ``complete`` only if every shard says so, else the first other
    status; counts added up. None if no shard says what kind of run it was. (A shard's block is
    read with ``.get``: an older version's may lack keys.)"""
    found = [r.summary.get("run") for r in runs]
    if all(b is None for b in found):
        return None
    blocks: list[Mapping[str, Any]] = [b or {} for b in found]
    statuses: list[Any] = [b.get("status") for b in blocks]

    def total(key: str) -> int:
        return sum(int(b.get(key) or 0) for b in blocks)

    stopped = next((b for b in blocks if b.get("stop_reason")), {})
    merged: RunStatus = {
        "status": next((s for s in statuses if s != "complete"), "complete"), "selected": total("selected"),
        "full_selection": total("full_selection"), "finished": total("finished"), "reused": total("reused"),
        "not_run": total("not_run"), "partial_selection": any(b.get("partial_selection") for b in blocks),
        "stop_reason": stopped.get("stop_reason"), "stop_message": stopped.get("stop_message")}
    if all("errored" in b for b in blocks):  # shards written before errors were counted: not known
        merged["errored"] = total("errored")
    return merged


def merge(runs: list[RunDir], out_dir: Path) -> MergedSummary:
    """Check, pool and summarise; write the results file and summary into ``out_dir``; return the summary."""
    reasons = problems(runs)
    if reasons:
        raise MergeError("cannot merge:\n  " + "\n  ".join(reasons))

    records = sorted((r for run in runs for r in run.records), key=lambda r: r["case"]["id"])
    settings = dataclasses.replace(settings_of(runs[0].summary), out_dir=out_dir)
    first = runs[0].summary
    run_id = outdir.new_run_id()  # the merged records are one run's now
    expected = sum(int(_block(r).get("cases") or 0) for r in runs)
    summary: MergedSummary = {
        **build_summary(records, settings, run=merged_run(runs), run_id=run_id,
                        dataset=(first.get("dataset_sha256") or {}, first.get("dataset_modified") or [])),
        "merged_from": [{"dir": str(r.path), "shard": r.summary["shard"], "cases": len(r.records),
                         "status": _status(r.summary), "run_id": r.summary.get("run_id")}
                        for r in sorted(runs, key=_shard)],
        "missing_results": max(0, expected - len(records))}
    redact = files.Redactor(settings.secrets())
    held = outdir.claim(out_dir, run_id, option="--sab-out")
    records = [stamped(r, run_id=run_id) for r in records]
    try:
        # one atomic write (the per-line fsync of a live run buys nothing here), lines as ResultsWriter writes them
        lines = "".join(files.json_line(r, redact) for r in records)
        atomic_write_bytes(out_dir / files.RESULTS_NAME, lines.encode())
        files.write_summary(out_dir / files.SUMMARY_NAME, summary, redact)
    finally:
        held.release()
    return summary


def exit_status(summary: MergedSummary) -> int:
    """The single run's exit status: with gates, 0 only if every gate holds and nothing errored;
    without, 0 only if every case passed. An incomplete merge (a shard interrupted) is never 0; a
    gate that cannot be decided (``usage_error``) is pytest's usage error, 4, as in the single run."""
    if any(g.get("usage_error") for g in summary.get("gates") or []):
        return USAGE_EXIT
    if summary.get("missing_results") or (summary.get("run") or {}).get("status", "complete") != "complete":
        return 1
    if summary.get("gates"):
        return 0 if summary.get("gates_passed") else 1
    passed = summary["metrics"]["pass_rate"]
    return 0 if summary["errors"] == 0 and passed["k"] == passed["n"] else 1
