"""A run's files: ``sab-results.jsonl`` (one line per finished case, flushed as it finishes) and
``sab-summary.json``; reading them back, resuming and compacting.

Every string that leaves the process through here passes ``Redactor`` first, which replaces the
values of the API keys in use, so a key can never reach a report even if a server echoed it.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from sab_pytest.errors import UsageError
from sab_pytest.fetch import atomic_write_bytes
from sab_pytest.results.outdir import run_id_of
from sab_pytest.results.record import StoredRecord, read_record, sample_id, stamped

if TYPE_CHECKING:
    from sab_pytest.results.summary import Summary

RESULTS_NAME = "sab-results.jsonl"
SUMMARY_NAME = "sab-summary.json"
REDACTED = "[REDACTED]"


class Redactor:
    """Replaces known secret values (API keys) in any JSON-like value."""

    def __init__(self, secrets: Iterable[str | None] = ()) -> None:
        self.secrets = sorted({s for s in secrets if s and len(s) >= 6}, key=len, reverse=True)

    def text(self, value: str) -> str:
        for secret in self.secrets:
            if secret in value:
                value = value.replace(secret, REDACTED)
        return value

    def __call__(self, value: Any) -> Any:
        if not self.secrets:
            return value
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {self(k): self(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self(v) for v in value]
        return value

    def json(self, value: Any, **dumps: Any) -> str:
        """``json.dumps(self(value), **dumps)``, without walking ``value`` when no secret is in it.

        Why: a record or a summary is tens of thousands of values, and walking them in Python costs
        more than serializing them; a secret in ``value`` shows in its JSON text as the secret's own
        JSON escaping (JSON escapes character by character), so one search of that text says
        whether there is anything to redact."""
        text = json.dumps(value, **dumps)
        ascii_only = dumps.get("ensure_ascii", True)
        if not any(json.dumps(secret, ensure_ascii=ascii_only)[1:-1] in text for secret in self.secrets):
            return text
        return json.dumps(self(value), **dumps)


_NOTHING_TO_REDACT = Redactor()
SYNC_EVERY_S = 1.0


class ResultsWriter:
    """Appends one JSON line per finished case and flushes it at once, so a crash of the process
    loses nothing. It is also synced to disk (against a crash of the machine), at most once per
    ``SYNC_EVERY_S`` and at ``close``: a sync per line would cost the controller, which writes
    every worker's records, a couple of milliseconds per case.

    An existing results file from an earlier run is kept as ``sab-results.jsonl.1`` (the one
    before that as ``.2`` ...) rather than overwritten.
    """

    def __init__(self, path: Path, redact: Redactor, *, resume: bool = False, run_id: str | None = None) -> None:
        self.path = path
        self.redact = redact
        self.run_id = run_id  # stamped on every line (``outdir``: readers match it with the summary's)
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists() and path.stat().st_size and not resume:
            _rotate(path)
        #: where a torn last line (a crash mid-write) was set aside, if there was one
        self.set_aside: Path | None = repair_torn_tail(path)
        self._fh: IO[str] | None = open(path, "a", encoding="utf-8")  # noqa: SIM115 - lives for the session
        self._synced = time.monotonic()
        self.written = 0  # lines written whole by this writer

    def write(self, record: StoredRecord) -> None:
        if self._fh is None:
            return
        if self.run_id is not None:
            record = stamped(record, run_id=self.run_id)
        self._fh.write(json_line(record, self.redact))
        self._fh.flush()
        self.written += 1
        if time.monotonic() - self._synced >= SYNC_EVERY_S:
            os.fsync(self._fh.fileno())
            self._synced = time.monotonic()

    def abandon(self) -> None:
        """After a failed write: close the file without writing what its buffer still holds (the
        write that failed would only fail again, or add a second torn piece)."""
        if self._fh is None:
            return
        fh, self._fh = self._fh, None
        with contextlib.suppress(OSError):
            os.close(fh.fileno())
        with contextlib.suppress(OSError, ValueError):
            fh.close()

    def close(self) -> None:
        if self._fh is not None:
            self._fh.flush()
            os.fsync(self._fh.fileno())
            self._fh.close()
            self._fh = None


#: the signals that stop a run (Ctrl-C, ``kill``): held back while a record is being kept
STOP_SIGNALS = frozenset({signal.SIGINT, signal.SIGTERM})


@contextlib.contextmanager
def stop_signals_held() -> Iterator[None]:
    """Hold Ctrl-C and SIGTERM back for the block, then handle them as before.

    A record counted as finished and its line in the results file go together: a KeyboardInterrupt
    raised between the two (Python raises it at any line) would leave a verdict counted in the
    summary but missing from the file. The handlers are swapped, not the signal mask, because a
    process signal reaches whichever thread does not block it (xdist's controller has several),
    and Python then runs the handler in the main thread all the same. Outside the main thread,
    where no handler can be set, nothing is held.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[tuple[int, Any]] = []
    previous: dict[int, Any] = {}
    for stop in STOP_SIGNALS:
        if signal.getsignal(stop) is not None:  # None: set outside Python, so it could not be put back
            previous[stop] = signal.signal(stop, lambda number, frame: caught.append((number, frame)))
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
        for number, frame in caught:
            handler = previous[number]
            if callable(handler):
                handler(number, frame)
            elif handler == signal.SIG_DFL:
                signal.raise_signal(number)


_UNSET = object()


def sigterm_as_interrupt() -> Any:
    """Make SIGTERM stop the run as Ctrl-C does (``KeyboardInterrupt``): the summary is written, the
    not-run cases counted, ``--sab-resume`` suggested. A CI job that is cancelled or times out gets
    SIGTERM; by default it would kill the controller with nothing said. Only when SIGTERM has its
    default handler, in the main thread; returns what to hand ``restore_sigterm``."""
    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGTERM) != signal.SIG_DFL:
        return _UNSET

    def stop(_number: int, _frame: Any) -> None:
        raise KeyboardInterrupt("SIGTERM")

    return signal.signal(signal.SIGTERM, stop)


def restore_sigterm(previous: Any) -> None:
    if previous is not _UNSET and previous is not None and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, previous)


TORN_SUFFIX = ".torn"


def repair_torn_tail(path: Path) -> Path | None:
    """Make ``path`` end at a line's end before anything is appended to it.

    A crash (``kill -9``, a full disk) can cut the last line short. Appending to it would glue the
    next record onto the torn one, and the reader would then drop both. So the tail after the last
    newline is looked at: a whole record that only lacks its newline gets one; anything else is
    moved, byte for byte, to ``<name>.torn`` beside the file (appended, so nothing is ever lost) and
    cut off. Returns the ``.torn`` file when something was set aside, else None.
    """
    try:
        size = path.stat().st_size
    except OSError:
        return None
    if size == 0:
        return None
    with open(path, "r+b") as fh:
        start = size
        block = 1 << 16
        while start > 0:  # find the last newline, reading backwards a block at a time
            begin = max(0, start - block)
            fh.seek(begin)
            chunk = fh.read(start - begin)
            if begin + len(chunk) == size and chunk.endswith(b"\n"):
                return None  # ends cleanly
            cut = chunk.rfind(b"\n")
            if cut >= 0:
                start = begin + cut + 1
                break
            start = begin
        fh.seek(start)
        tail = fh.read()
        if _whole_record(tail):
            fh.seek(0, os.SEEK_END)
            fh.write(b"\n")
            return None
        aside = path.with_name(path.name + TORN_SUFFIX)
        with open(aside, "ab") as out:
            out.write(tail + b"\n")
            out.flush()
            os.fsync(out.fileno())
        fh.truncate(start)
        fh.flush()
        os.fsync(fh.fileno())
    return aside


def _whole_record(line: bytes) -> bool:
    try:
        data = json.loads(line)
    except ValueError:  # JSONDecodeError, or UnicodeDecodeError for a cut multi-byte character
        return False
    return isinstance(data, dict) and "case" in data


def _rotate(path: Path) -> None:
    n = 1
    while path.with_name(f"{path.name}.{n}").exists():
        n += 1
    for i in range(n, 1, -1):
        os.replace(path.with_name(f"{path.name}.{i - 1}"), path.with_name(f"{path.name}.{i}"))
    os.replace(path, path.with_name(f"{path.name}.1"))


def read_results(path: Path) -> list[StoredRecord]:
    """Records of a results file, each checked and read as the current schema (``record.read_record``:
    a line that is not a record, or a record of a newer schema, is a ``UsageError`` naming the file
    and line); a torn line (a crash mid-write) is skipped."""
    records: list[StoredRecord] = []
    if not path.exists():
        return records
    with open(path, "rb") as fh:
        for number, line in enumerate(fh, 1):
            try:
                data = json.loads(line)
            except ValueError:  # JSONDecodeError, or UnicodeDecodeError for a cut multi-byte character
                continue
            records.append(read_record(data, path, number))
    return records


def check_resumable(path: Path, settings: Mapping[str, Any], key: str) -> str | None:
    """Refuse (``UsageError``) to resume into a results file made with other settings: appending
    would mix two runs in one file. The message names each setting that differs. Returns the run
    id of the file's records (``outdir.run_id_of``), which the resumed run keeps."""
    differing: dict[str, tuple[Any, Any]] = {}
    unknown = False
    try:
        records = read_results(path)
    except UsageError as exc:
        raise UsageError(f"--sab-resume: {exc}") from None
    for record in records:
        if record.get("run_key") in (None, key):
            continue
        stored = record.get("run_settings")
        if not isinstance(stored, dict):
            unknown = True
            continue
        for name in sorted(set(stored) | set(settings)):
            if stored.get(name) != settings.get(name):
                differing.setdefault(name, (stored.get(name), settings.get(name)))
    if not differing and not unknown:
        try:
            return run_id_of(records, path)
        except UsageError as exc:
            raise UsageError(f"--sab-resume: {exc}") from None
    what = "; ".join(f"{name}: {old!r} there, {new!r} now" for name, (old, new) in differing.items())
    raise UsageError(f"--sab-resume: {path} holds results made with other settings "
                     f"({what or 'they were not stored: the file predates this check'}). Resume with the same "
                     f"settings, or run without --sab-resume to start a new file (the old one is kept as "
                     f"{path.name}.1)")


def json_line(record: StoredRecord, redact: Redactor | None = None) -> str:
    """A record as one line of a results file (the one spelling every writer uses), its secrets
    redacted by ``redact`` when given."""
    return (redact or _NOTHING_TO_REDACT).json(record, sort_keys=True, default=str) + "\n"


def latest_per_case(records: Iterable[StoredRecord]) -> dict[str, StoredRecord]:
    """One record per sample id (a case, or one repeat of it: ``record.sample_id``), in first-seen
    order, the last one written winning: a resumed run appends a new record for a case it redoes.
    Records without a case id are skipped."""
    latest: dict[str, StoredRecord] = {}
    for record in records:
        if (record.get("case") or {}).get("id") is not None:
            latest[sample_id(record)] = record
    return latest


def compact_results(path: Path, redact: Redactor, run_id: str | None = None) -> None:
    """Rewrite ``path`` with one line per case (a later line for a case replaces the earlier one),
    in first-seen order; atomic, so a crash leaves the old file or the new one. Records written
    before run ids existed get ``run_id``: a resume made them part of this run."""
    kept = list(latest_per_case(read_results(path)).values())
    if run_id is not None:
        kept = [r if r.get("run_id") else stamped(r, run_id=run_id) for r in kept]
    lines = "".join(json_line(r, redact) for r in kept)
    atomic_write_bytes(path, lines.encode())


def write_summary(path: Path, summary: Summary, redact: Redactor) -> None:
    atomic_write_bytes(path, (redact.json(summary, indent=2, sort_keys=True, default=str) + "\n").encode())
