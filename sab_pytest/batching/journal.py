"""The batches a run submitted, in its ``--sab-out`` (``sab-batches.jsonl``), written as it submits.

Why a journal: a batch may take longer than the run may wait (a CI job's limit, Ctrl-C, the wait
limit). The provider keeps the batch; the journal keeps what it is: its id, its input file, the
custom_ids it carries. The same command run again with ``--sab-resume`` reads it, collects those
batches instead of sending their requests again, and marks each collected. One JSON object per
line, appended (each process of the run appends its own lines; a line is one ``write``):
``{"batch": ID, "input_file": ID, "server": URL, "model": NAME, "custom_ids": [...], "at": T}`` when
submitted, ``{"collected": ID, "status": STATUS, "at": T}`` when its answers were read, ``{"counts": {...},
"process": ID, "at": T}`` after each round (the summary adds up each process's latest).
"""

from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

JOURNAL_NAME = "sab-batches.jsonl"


@dataclass
class Submitted:
    """One submitted batch as the journal knows it."""

    batch: str
    input_file: str
    server: str
    model: str
    custom_ids: list[str]
    collected: str | None = None  # the status it was collected in, None while pending
    extra: dict[str, Any] = field(default_factory=dict)


class Journal:
    """The journal file of a run's output directory (None: kept in memory only, for tests)."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._memory: list[dict[str, Any]] = []

    @classmethod
    def of(cls, out_dir: Path) -> Journal:
        return cls(Path(out_dir) / JOURNAL_NAME)

    def _append(self, entry: dict[str, Any]) -> None:
        line = json.dumps({**entry, "at": round(time.time(), 3)}, separators=(",", ":")) + "\n"
        with self._lock:
            if self.path is None:
                self._memory.append(json.loads(line))
                return
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, line.encode())
                os.fsync(fd)
            finally:
                os.close(fd)

    def submitted(self, batch: str, input_file: str, server: str, model: str, custom_ids: list[str]) -> None:
        """Record a batch the moment the provider accepted it."""
        self._append({"batch": batch, "input_file": input_file, "server": server, "model": model,
                      "custom_ids": custom_ids})

    def collected(self, batch: str, status: str) -> None:
        self._append({"collected": batch, "status": status})

    def counted(self, process: str, counts: dict[str, int]) -> None:
        """A process's request counts so far (batched, retried live, failed; batched tokens)."""
        self._append({"counts": dict(counts), "process": process})

    def totals(self) -> dict[str, int]:
        """The counts of every process of every run on this journal (each process's latest line)."""
        latest = {e["process"]: e["counts"] for e in self.entries() if "counts" in e and "process" in e}
        totals: dict[str, int] = {}
        for counts in latest.values():
            for name, value in counts.items():
                totals[name] = totals.get(name, 0) + int(value)
        return totals

    def entries(self) -> list[dict[str, Any]]:
        if self.path is None:
            return list(self._memory)
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return []
        found = []
        for line in text.splitlines():
            try:
                found.append(json.loads(line))
            except ValueError:
                continue  # a line cut short by a crash: its batch is lost to the journal, not to the provider
        return found

    def batches(self) -> dict[str, Submitted]:
        """Every batch of the journal by id, with whether it was collected."""
        found: dict[str, Submitted] = {}
        for entry in self.entries():
            if "batch" in entry:
                found[entry["batch"]] = Submitted(entry["batch"], entry.get("input_file", ""), entry.get("server", ""),
                                                  entry.get("model", ""), list(entry.get("custom_ids") or []))
            elif entry.get("collected") in found:
                found[entry["collected"]].collected = str(entry.get("status"))
        return found

    def pending(self) -> list[Submitted]:
        return [b for b in self.batches().values() if b.collected is None]


def pending_note(out_dir: Path) -> str | None:
    """What to tell the user when a run ends with batches submitted and not collected; None when none."""
    waiting = Journal.of(out_dir).pending()
    if not waiting:
        return None
    lines = sum(len(b.custom_ids) for b in waiting)
    return (f"submitted, not finished: {len(waiting)} batch(es) ({lines} requests) are with the provider "
            f"(listed in {Path(out_dir) / JOURNAL_NAME}). Run the same command again with --sab-resume to collect "
            "them and finish the cases; nothing answered is sent again")
