"""One run per output directory, and the run id that ties a results file to its summary.

Two runs writing one ``--sab-out`` at once would mix silently: the results file would hold one
run's cases and the summary the other's, and every reader (report, compare, merge, baseline gates)
would take the pair as one run. So a run claims its output directory before its first case: it
holds a file lock on ``sab-run.lock`` there for its whole length (``filelock``'s, on the descriptor it
keeps: ``flock`` on POSIX, ``LockFileEx`` on Windows). The lock file says who holds it (run id, pid,
host, start time), so a second run is refused with a message naming the holder.

Why a lock and not "a lock file exists": the kernel drops the lock when its process dies,
``kill -9`` included, so a lock left by a dead run is told apart from a live one without guessing
from pids (which are reused, and mean nothing on another host). A file left behind is taken over,
with a note naming the run that left it.

The run id is stamped on every record the run writes and on its summary; a resume keeps the id of
the file it resumes. ``check_same_run`` is what readers call on a pair.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import socket
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import filelock

from sab_pytest.errors import UsageError

if TYPE_CHECKING:
    from sab_pytest.results.record import StoredRecord
    from sab_pytest.results.summary import Summary

LOCK_NAME = "sab-run.lock"


def new_run_id() -> str:
    """A run id: when it started (UTC, sortable) and 6 random hex digits."""
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + "-" + secrets.token_hex(3)


def _holder_text(info: Mapping[str, Any]) -> str:
    started = info.get("started")
    when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(started)) if isinstance(started, (int, float)) else "?"
    return f"run {info.get('run_id', '?')}, pid {info.get('pid', '?')} on {info.get('host', '?')}, started {when}"


@dataclass
class Claim:
    """This process's hold on an output directory (``release`` it at the end of the run)."""

    directory: Path
    run_id: str
    note: str | None = None  # set when a lock left by a dead run was taken over
    _fd: int | None = field(default=None, repr=False)

    def release(self) -> None:
        """Remove the lock file and drop the lock (the file first: a run that opens it after the
        unlink locks a file nobody else sees, and ``claim`` checks for that)."""
        if self._fd is None:
            return
        with contextlib.suppress(OSError):
            os.unlink(self.directory / LOCK_NAME)
        with contextlib.suppress(OSError):
            os.close(self._fd)
        self._fd = None


def claim(directory: Path, run_id: str, *, option: str = "--sab-out") -> Claim:
    """Hold ``directory`` for this run, or raise ``UsageError`` naming the run that holds it.

    Creates the directory when needed (an unwritable place is a ``UsageError`` naming it).
    """
    path = directory / LOCK_NAME
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"{option} {directory}: cannot create the output directory: {exc.strerror or exc}") from None
    for _ in range(5):  # the holder may remove the file between our open and our lock: then try again
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise UsageError(f"{option} {directory}: cannot write there: {exc.strerror or exc}") from None
        try:
            locked = filelock.lock_descriptor(fd, blocking=False)
        except OSError:
            locked = False
        if not locked:
            holder = _read_fd(fd)
            os.close(fd)
            raise UsageError(
                f"{option} {directory}: another run is writing its results there ({_holder_text(holder)}). "
                f"Wait for it to end, or give this run another {option}") from None
        try:
            same = os.fstat(fd).st_ino == os.stat(path).st_ino
        except OSError:
            same = False
        if not same:
            os.close(fd)
            continue
        left = _read_fd(fd)
        info = {"run_id": run_id, "pid": os.getpid(), "host": socket.gethostname(), "started": time.time()}
        try:
            os.ftruncate(fd, 0)
            os.lseek(fd, 0, os.SEEK_SET)  # (not os.pwrite: POSIX only, as the lock no longer is)
            os.write(fd, json.dumps(info).encode())
        except OSError as exc:
            os.close(fd)
            raise UsageError(f"{option} {directory}: cannot write {path}: {exc.strerror or exc}") from None
        note = (f"{path} was left by a run that no longer runs ({_holder_text(left)}); taken over"
                if left else None)
        return Claim(directory, run_id, note, fd)
    raise UsageError(f"{option} {directory}: could not take {path}: other runs keep replacing it")


def _read_fd(fd: int) -> dict[str, Any]:
    try:
        os.lseek(fd, 0, os.SEEK_SET)
        data = json.loads(os.read(fd, 4096) or b"{}")
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def run_id_of(records: Iterable[StoredRecord], path: Path) -> str | None:
    """The run id the records of ``path`` carry (None when none carries one: older files); a file
    holding several is a ``UsageError``, since resuming it would stamp one run's id on another's."""
    ids = {r["run_id"] for r in records if r.get("run_id")}
    if len(ids) > 1:
        raise UsageError(f"{path} holds the results of {len(ids)} different runs ({', '.join(sorted(ids))}); "
                         "it cannot be resumed as one run")
    return next(iter(ids), None)


def check_same_run(summary: Summary, records: Iterable[StoredRecord], summary_path: Path,
                   results_path: Path) -> None:
    """Refuse a summary and a results file written by different runs (``UsageError`` naming both).

    Files written before run ids existed carry none and pass; a record without an id next to a
    summary with one does not (it was written by something else).
    """
    run_id = summary.get("run_id")
    if not run_id:
        return
    others: dict[str, int] = {}
    for record in records:
        other = record.get("run_id") or "none"
        if other != run_id:
            others[other] = others.get(other, 0) + 1
    if others:
        what = ", ".join(f"{n} of run {rid}" for rid, n in sorted(others.items()))
        raise UsageError(f"{summary_path} is the summary of run {run_id}, but {results_path} holds records "
                         f"of another run ({what}): the two files do not belong together (a run still in "
                         "progress, or two runs on one --sab-out)")
