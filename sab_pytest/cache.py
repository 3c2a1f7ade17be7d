"""Response cache for model calls: one JSON file per request, safe across xdist processes.

Why: a benchmark run is ~1000 cases x several calls. Re-running after an interruption, a crash or
``--lf`` must not pay for (or wait on) answers already received. Nothing within a run depends on
it (the case runner overlaps latency by itself); the in-flight claim below only keeps processes
that share a cache at the same time (xdist workers, shards on one machine) from paying twice for
the same request.

Key: sha256 of the canonical JSON of everything that determines the answer (model, normalised
base URL, messages, sampling parameters, tools...). Runtime knobs (timeouts, retries) and
credentials are never part of the key, so changing them keeps the cache, and no key ever lands on
disk. Only successful answers are stored.

Layout: ``DIR/<key[:2]>/<key>.json``, written atomically (temp file + ``os.replace``), so readers
see a whole entry or none. In-flight calls are coordinated with ``DIR/<key[:2]>/<key>.lock``,
created with ``O_EXCL``: whoever creates it calls the API; others wait (bounded) for the JSON to
appear. A lock whose owner process is dead, or which is older than the budget its owner declared,
is taken over. The protocol is best effort: when two processes race on a takeover, the worst
outcome is one duplicate API call, never a corrupt entry.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import json
import math
import os
import socket
import threading
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from sab_pytest.fetch import atomic_write_bytes, cache_root
from sab_pytest.retry import RetryPolicy, wait

SCHEMA_VERSION = 1
DEFAULT_BASE_URL = "https://api.openai.com/v1"
UNREADABLE_LOCK_GRACE_S = 5.0  # a lock file still being written is empty for a moment
# how often a waiter looks for another owner's answer: 5 ms at first, then every 50 ms at most
POLL = RetryPolicy(base=0.005, factor=1.5, cap=0.05, jitter=1.0)
_HOST = socket.gethostname()


def default_cache_dir() -> Path:
    return cache_root() / "responses"


def normalise_base_url(url: str | None) -> str:
    """The part of a base URL that identifies the server: scheme, host, port, path.

    Credentials embedded in the URL (``user:pass@``), query and fragment are dropped so that they
    can neither split the cache nor be written into it.
    """
    parts = urlsplit((url or DEFAULT_BASE_URL).strip())
    host = (parts.hostname or "").lower()
    default_port = {"http": 80, "https": 443}.get(parts.scheme.lower())
    try:
        port = parts.port
    except ValueError:
        port = None
    netloc = host if port in (None, default_port) else f"{host}:{port}"
    return urlunsplit((parts.scheme.lower(), netloc, parts.path.rstrip("/"), "", ""))


def canonical_json(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False).encode("utf-8")


def request_key(material: Mapping[str, Any]) -> str:
    """sha256 over the canonical JSON of the request ``material`` (plus the schema version)."""
    return hashlib.sha256(canonical_json({"schema": SCHEMA_VERSION, **material})).hexdigest()


def _pid_alive(pid: int) -> bool:
    """Whether ``pid`` runs on this host. A zombie (exited, not yet reaped by its parent, as xdist
    workers or bench processes can be for a while) counts as dead: it will never release a lock."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OSError:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True  # no /proc (macOS): trust kill()
    return stat[stat.rfind(")") + 2:][:1] not in ("Z", "X")


@dataclass(eq=False)
class Claim:
    """The right to make the call for ``key``; ``release`` when done (success or not)."""

    key: str
    path: Path
    nonce: str
    pid: int = field(default_factory=os.getpid)

    def release(self) -> None:
        """Remove the lock if it is still ours (it may have been taken over as stale)."""
        with _held_lock:
            _held.discard(self)
        if self.pid != os.getpid():
            return  # a forked child must not drop its parent's locks
        raw = _read(self.path)
        if raw is not None and self.nonce.encode() in raw:
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()


_held: set[Claim] = set()
_held_lock = threading.Lock()


def release_claims() -> int:
    """Release this process's claims; returns how many.

    Run at interpreter exit (a stopped run leaves calls in flight on daemon threads), so that
    other workers waiting for those answers can make the calls themselves at once instead of
    waiting for the lock to go stale.
    """
    with _held_lock:
        chosen = list(_held)
    for claim in chosen:
        claim.release()
    return len(chosen)


atexit.register(release_claims)


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except (FileNotFoundError, NotADirectoryError):
        return None


class ResponseCache:
    """Successful model answers on disk, keyed by ``request_key``; see the module docstring."""

    def __init__(self, root: Path | str) -> None:
        self.root = Path(root).expanduser()

    def __repr__(self) -> str:
        return f"ResponseCache({str(self.root)!r})"

    def path_for(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def lock_path_for(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.lock"

    # -- entries --------------------------------------------------------------------------------
    def get(self, key: str) -> dict[str, Any] | None:
        """The stored entry for ``key``, or None (missing, unreadable or not ours)."""
        raw = _read(self.path_for(key))
        if raw is None:
            return None
        try:
            entry = json.loads(raw)
        except ValueError:
            return None
        if not isinstance(entry, dict) or entry.get("key") != key or entry.get("schema") != SCHEMA_VERSION:
            return None
        return entry

    def put(self, key: str, entry: Mapping[str, Any]) -> Path:
        """Store a successful answer atomically; returns the file written."""
        record = {**entry, "key": key, "schema": SCHEMA_VERSION, "stored_at": time.time()}
        path = self.path_for(key)
        atomic_write_bytes(path, json.dumps(record, ensure_ascii=False, indent=1).encode("utf-8"))
        return path

    # -- in-flight coordination -----------------------------------------------------------------
    def try_claim(self, key: str, budget_s: float) -> Claim | None:
        """Create ``key.lock`` exclusively; None when a live owner already holds it.

        ``budget_s`` is how long this owner may take at most; past it, others may take over.
        """
        lock = self.lock_path_for(key)
        lock.parent.mkdir(parents=True, exist_ok=True)
        for _ in range(4):
            nonce = uuid.uuid4().hex
            now = time.time()
            content = canonical_json({"pid": os.getpid(), "host": _HOST, "nonce": nonce, "created": now,
                                      "expires_at": now + max(budget_s, 0.0)})
            try:
                fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                raw = _read(lock)
                if raw is None:
                    continue  # released between our attempt and the read: try again
                if self._is_stale(lock, raw) and self._take_over(lock, raw):
                    continue
                if raw != _read(lock):
                    continue  # changed under us (released or re-claimed): look again
                return None
            with os.fdopen(fd, "wb") as fh:
                fh.write(content)
            claim = Claim(key=key, path=lock, nonce=nonce)
            with _held_lock:
                _held.add(claim)
            return claim
        return None

    def holder(self, key: str) -> dict[str, Any] | None:
        """Who holds the lock of ``key`` (pid, host, expires_at), if anyone."""
        raw = _read(self.lock_path_for(key))
        return _parse_lock(raw) if raw is not None else None

    def wait_for(self, key: str, deadline: float | None) -> dict[str, Any] | None:
        """Wait while another owner makes the call for ``key``.

        Returns the entry when it appears; None when the lock disappears without an entry (the
        owner failed) or becomes stale, meaning "claim it yourself now". ``deadline`` is a
        ``time.monotonic()`` value; past it, ``TimeoutError``.
        """
        lock = self.lock_path_for(key)
        looks = 0
        while True:
            entry = self.get(key)
            if entry is not None:
                return entry
            raw = _read(lock)
            if raw is None or self._is_stale(lock, raw):
                return self.get(key)
            pause = POLL.pause(looks)
            looks += 1
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"waited for another process's call {key[:12]}... past the deadline")
                pause = min(pause, left)
            wait(pause)

    @staticmethod
    def _is_stale(lock: Path, raw: bytes) -> bool:
        info = _parse_lock(raw)
        if info is None:  # empty or garbage: being written right now, or left by a crash mid-write
            try:
                return time.time() - lock.stat().st_mtime > UNREADABLE_LOCK_GRACE_S
            except FileNotFoundError:
                return False
        if info.get("host") == _HOST and isinstance(info.get("pid"), int) and not _pid_alive(info["pid"]):
            return True
        expires = info.get("expires_at")
        return not isinstance(expires, (int, float)) or not math.isfinite(expires) or time.time() > expires

    @staticmethod
    def _take_over(lock: Path, seen: bytes) -> bool:
        """Remove a stale lock, making sure it is the one judged stale and not a fresh claim."""
        grave = lock.with_name(f"{lock.name}.stale-{os.getpid()}-{uuid.uuid4().hex[:8]}")
        try:
            os.rename(lock, grave)
        except FileNotFoundError:
            return True  # someone else removed it: the caller simply retries the claim
        moved = _read(grave)
        if moved != seen:  # we moved a claim made after our look: put it back if still possible
            with contextlib.suppress(OSError):
                os.link(grave, lock)
        with contextlib.suppress(FileNotFoundError):
            grave.unlink()
        return moved == seen


def _parse_lock(raw: bytes) -> dict[str, Any] | None:
    try:
        info = json.loads(raw)
    except ValueError:
        return None
    return info if isinstance(info, dict) else None
