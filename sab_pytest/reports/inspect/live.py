"""The ``.eval`` log of ``--sab-inspect-log`` written while the run goes, by a process of its own fed
each case's record as it is kept, so that the end of the run only closes the log.

Why a process: importing inspect_ai and writing a sample with Inspect's recorder (validating,
condensing, a zstd frame per member) cost seconds of CPU for the whole benchmark. At the end of the
run they are seconds the user waits for after the last case; on a thread of the run's controller they
contend for its interpreter lock with the work of the run (one process running the cases under
``-n 0``, xdist's event loop under ``-n``). A process of its own runs beside them, on a core the run
leaves free when there is one. The log on disk is also a running eval that ``inspect view`` shows
before the run ends; a run killed outright leaves it so.

The log written this way must be the one ``inspect_log.write`` writes from the finished run: at the
end, ``LiveLog.finish`` checks that the run's records are exactly the ones fed, each once (a case
redone after a crash, or a resume folding in earlier verdicts, breaks that), and otherwise stops the
writer, removes its file and says False; the caller then writes the whole log from the records, as
it also does when the writer failed. A log given up (that, or a run that ends before its first case)
is not the writer's to close: it is stopped at once rather than told, since a writer still importing
inspect_ai would keep the run waiting seconds for a file that is then removed. Only the ``.eval``
format is fed: a ``.json`` log is one document, written at the end (a fraction of a second).

The writer reads JSON lines on its standard input: ``{"first": SUMMARY}`` (what the log's spec says
until the end), ``{"record": RECORD}`` per record, then ``{"end": SUMMARY, "completed": ISO}``. It
exits 0 when the log is closed, 1 (the reason on standard error, which the run does not show: it
then writes the log whole and reports what fails there) if not.
"""

from __future__ import annotations

import contextlib
import json
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO, cast

from sab_pytest.reports.inspect import adapter as inspect_adapter
from sab_pytest.reports.inspect import log as inspect_log
from sab_pytest.results.files import json_line
from sab_pytest.results.record import StoredRecord, stamped

if TYPE_CHECKING:
    from sab_pytest.results.files import Redactor
    from sab_pytest.results.summary import Summary

#: how long ``finish`` waits for the writer to close the log before it writes the log whole itself
CLOSE_TIMEOUT_S = 300.0


class LiveLog:
    """The run's side: starts the writer, sends it each record kept (``add``, from the process
    that keeps the records; a thread of its own does the sending, so a writer still importing never
    holds the run up), and closes the log with the run's summary (``finish``)."""

    def __init__(self, path: Path, data_dir: str | Path | None, redact: Redactor, first: Mapping[str, Any]) -> None:
        """``first``: what the log's spec says until the run ends (its id, model and settings), in the
        summary's keys; the records are stamped with its ``run_id``, as on the results file's lines."""
        self.path = path
        self._file = path.absolute()
        self._redact = redact
        self._run_id = str(first["run_id"]) if first.get("run_id") else None
        self._fed: dict[str, StoredRecord] = {}
        self._again = False  # a key fed twice: the writer would list both, the log is written whole
        self._lines: queue.SimpleQueue[str | None] = queue.SimpleQueue()
        self._broken = False  # the writer stopped reading (it failed): finish says False
        self._ended = False  # the last message was sent (finish), or the writer stopped (drop)
        self._before = _identity(self._file)  # a file there already is left alone unless the writer replaced it
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "sab_pytest.reports.inspect.live", str(self._file), str(data_dir or "")],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True,
            encoding="utf-8", start_new_session=True)  # Ctrl-C at the terminal is the run's, not the writer's:
        # the interrupted run sends its summary, which the writer must still be here to write
        self._sender = threading.Thread(target=self._send, name="sab-inspect-live", daemon=True)
        self._sender.start()
        self._lines.put(json.dumps({"first": self._redact(dict(first))}, default=str) + "\n")

    def add(self, key: str, record: StoredRecord) -> None:
        """The record kept for ``key`` (a case, or one repeat of it)."""
        if key in self._fed:
            self._again = True
            return
        self._fed[key] = record
        self._lines.put(json_line(cast(StoredRecord, {"record": stamped(record, run_id=self._run_id)}), self._redact))

    def finish(self, summary: Summary, records: Mapping[str, StoredRecord], completed: datetime | None = None) -> bool:
        """Close the log with the run's ``summary``: True when it is written and holds exactly
        ``records``; False when the run's records are not the ones fed (the writer is stopped and its
        file removed) or the writer failed, and the caller writes the log whole."""
        matches = (not self._again and len(records) == len(self._fed)
                   and all(self._fed.get(key) is record for key, record in records.items()))
        if not matches:
            self.drop()
            return False
        end = completed.isoformat() if completed else None
        return self._last({"end": self._redact(dict(summary)), "completed": end})

    def drop(self) -> None:
        """The run ends without this log (a usage error before its first case, a failure writing
        its files, records that are not the ones fed): the writer is stopped and the file it wrote
        removed. Nothing after ``finish``."""
        if self._ended:
            return
        self._ended = True
        self._lines.put(None)
        self._proc.kill()  # a blocked send then fails at once, and the sender ends
        self._sender.join()
        self._proc.wait()
        if self._file.exists() and _identity(self._file) != self._before:
            self._file.unlink()

    def _last(self, message: dict[str, Any]) -> bool:
        """Send the last message and wait for the writer to end: True when it closed the log."""
        if self._ended:
            return False
        self._ended = True
        self._lines.put(json.dumps(message, default=str) + "\n")
        self._lines.put(None)
        self._sender.join()
        try:
            self._proc.wait(timeout=CLOSE_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
            return False
        return not self._broken and self._proc.returncode == 0

    def _send(self) -> None:
        stdin = self._proc.stdin
        assert stdin is not None
        while (line := self._lines.get()) is not None:
            if self._broken:
                continue
            try:
                stdin.write(line)
                stdin.flush()
            except (BrokenPipeError, OSError, ValueError):
                self._broken = True
        with contextlib.suppress(BrokenPipeError, OSError):
            stdin.close()


def _identity(path: Path) -> tuple[int, int, int] | None:
    """What tells the file at ``path`` from another written there later (None: no file)."""
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_ino, st.st_mtime_ns, st.st_size


# ------------------------------------------------------------------------------------------ the writer
def _messages(stream: TextIO) -> Iterator[dict[str, Any]]:
    for line in stream:
        if line.strip():
            yield json.loads(line)


async def _write(path: Path, data_dir: str | None, messages: Iterator[dict[str, Any]]) -> bool:
    """Write the log from ``messages``; True when it was closed, False when they end first (the run
    was killed; a run that gives the log up stops this writer itself)."""
    from sab_pytest.reports.inspect.sample import sample  # start-up: inspect_ai, about 1.2 s, in the writer alone

    cases = inspect_log.dataset_cases(data_dir)
    file = inspect_log.EvalFile(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    first = next(messages)["first"]
    spec, plan = inspect_log.spec_and_plan(first, ())
    await file.open(spec, plan)
    ids: set[str] = set()
    usages = []  # each sample's, for the eval's usage (the samples are not kept: pictures)
    for message in messages:
        if "record" in message:
            record = cast(StoredRecord, message["record"])
            one = sample(record, cases.get(str(record["case"]["id"])), epoch=int(record.get("repeat") or 1))
            await file.add(one)
            ids.add(str(one.id))
            usages.append(one.model_usage)
        elif "end" in message:
            summary = message["end"]
            completed = datetime.fromisoformat(message["completed"]) if message.get("completed") else None
            final, plan = inspect_log.spec_and_plan(summary, ids)
            await file.close(final, plan, inspect_log.ending(summary, usages, spec.created, completed))
            return True
    return False  # the run ended without a word (killed): the log stays as written, a running eval


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # as in LiveLog: an interrupt is the run's to handle
    try:
        if not inspect_log.EvalFile.usable():
            print(inspect_adapter.describe_missing(), file=sys.stderr)
            return 1
        closed = inspect_adapter.run_coroutine(_write(Path(args[0]), args[1] or None, _messages(sys.stdin)))
    except Exception as exc:  # the run writes the log whole and reports what fails there
        print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    return 0 if closed else 1


if __name__ == "__main__":
    sys.exit(main())
