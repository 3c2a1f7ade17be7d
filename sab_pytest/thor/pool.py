"""The THOR server's engines and leases, without HTTP: who holds which engine, and what happens when
an engine dies.

Rules, each answering a failure of the inspect_ai port's server (one global controller, one lock per
HTTP call, so two samples' episodes interleaved, and a crashed Unity answered with empty state):

* a client leases one engine; the lease id is a random secret that every request names;
* every engine call runs under that engine's lock, after checking that the lease still holds it, so
  two clients' requests never interleave on one engine;
* a lease not used for ``ttl`` seconds (no request, no heartbeat) is reclaimed, unless a call of it
  is still running; the next holder must ``reset`` before it can ``step``;
* an engine call that raises anything but ``ValueError`` (ai2thor's answer to a bad action) means the
  engine is broken: it is stopped and started again, and the lease is marked lost, so its holder gets
  a clear error on this and every later step until it resets; nothing answers with empty metadata;
* a step carries a sequence number; a repeated number gets the recorded answer instead of a second
  run of the action, so a client may retry a step whose answer it never got.
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sab_pytest.errors import describe
from sab_pytest.thor import wire

log = logging.getLogger("sab_pytest.thor.server")


class PoolError(Exception):
    """A refusal with the HTTP status and the ``wire`` error type that the server sends."""

    def __init__(self, status: int, kind: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.kind = kind


@dataclass
class Lease:
    id: str
    slot: Slot
    client: str
    expires: float
    busy: int = 0  # calls running now (a busy lease is never reclaimed)
    has_episode: bool = False  # reset was called since the lease began (or since the engine restarted)
    lost: str | None = None  # why the episode was lost (engine restarted), until the next reset
    seq: int = 0  # number of the last answered reset/step
    answer: bytes | None = None  # that answer, for a repeated request
    base: dict[str, Any] | None = None  # objectId -> object, as in the last answer (the client's copy)

    @property
    def tag(self) -> str:
        return f"lease {self.id[:6]}.. on engine {self.slot.index}"


@dataclass
class Slot:
    index: int
    engine: Any = None
    lock: threading.Lock = field(default_factory=threading.Lock)
    lease: Lease | None = None
    broken: str | None = None  # why the engine could not be started
    restarts: int = 0


class Pool:
    """N engines made by ``factory``; thread-safe."""

    def __init__(self, factory: Callable[[], Any], engines: int, *, ttl: float = 60.0) -> None:
        if engines < 1:
            raise ValueError(f"--engines: expected at least 1, got {engines}")
        self.factory = factory
        self.ttl = ttl
        self.slots = [Slot(i) for i in range(engines)]
        self.leases: dict[str, Lease] = {}
        self._lock = threading.Lock()  # guards leases and slot.lease; never held while an engine runs

    # ------------------------------------------------------------------------------- engines
    def start(self) -> None:
        """Start every engine now, so a server that cannot run one fails at start-up, not later."""
        for slot in self.slots:
            slot.engine = self.factory()

    def _restart(self, slot: Slot) -> None:
        """Stop the slot's engine (whatever state it is in) and start a new one; caller holds slot.lock."""
        old, slot.engine = slot.engine, None
        if old is not None:
            try:
                old.stop()
            except Exception as exc:  # a dead process may fail to stop; it is being replaced anyway
                log.info("engine %d: stop failed while restarting: %s", slot.index, exc)
        slot.restarts += 1
        try:
            slot.engine = self.factory()
            slot.broken = None
            log.warning("engine %d: restarted (restart #%d)", slot.index, slot.restarts)
        except Exception as exc:
            slot.broken = describe(exc)
            log.error("engine %d: could not be restarted: %s", slot.index, slot.broken)

    def _replace_dead(self, slot: Slot, tag: str) -> str | None:
        """If the slot's Unity process is gone: mark its lease's episode lost and restart the
        engine; why it was gone, or None. Caller holds slot.lock."""
        died = None if slot.engine is None else process_died(slot.engine)
        if died is None:
            return None
        log.error("%s: %s; restarting it", tag, died)
        if slot.lease is not None and slot.lease.has_episode:
            _lose(slot.lease, f"the engine's process died ({died}) and was restarted")
        self._restart(slot)
        return died

    def repair(self) -> None:
        """Restart idle engines whose Unity process died, and retry engines that could not be started
        (called by the reaper). A lease on a dead engine is marked lost, so its holder hears of it."""
        for slot in self.slots:
            if not slot.lock.acquire(blocking=False):
                continue  # busy: a call is running, and it will find out by itself
            try:
                if self._replace_dead(slot, f"engine {slot.index}") is None and slot.broken is not None:
                    self._restart(slot)
            finally:
                slot.lock.release()

    def stop(self) -> None:
        for slot in self.slots:
            with slot.lock:
                if slot.engine is not None:
                    try:
                        slot.engine.stop()
                    except Exception as exc:
                        log.info("engine %d: stop failed: %s", slot.index, exc)
                    slot.engine = None

    # -------------------------------------------------------------------------------- leases
    def counts(self) -> dict[str, int]:
        with self._lock:
            free = sum(1 for s in self.slots if s.lease is None and s.broken is None and s.engine is not None)
            broken = sum(1 for s in self.slots if s.broken is not None)
        return {"engines": len(self.slots), "free": free, "broken": broken}

    def acquire(self, client: str) -> Lease:
        with self._lock:
            for slot in self.slots:
                if slot.lease is None and slot.broken is None and slot.engine is not None:
                    lease = Lease(secrets.token_urlsafe(18), slot, client[:80], time.monotonic() + self.ttl)
                    slot.lease = lease
                    self.leases[lease.id] = lease
                    log.info("%s: leased by %s", lease.tag, lease.client or "a client")
                    return lease
            taken = sum(1 for s in self.slots if s.lease is not None)
        down = len(self.slots) - taken
        raise PoolError(503, wire.NO_FREE_ENGINE, f"no free engine: {taken} of {len(self.slots)} leased"
                        + (f", {down} not running" if down else ""))

    def get(self, lease_id: str) -> Lease:
        """The lease, its clock renewed; PoolError 404 when it is gone."""
        with self._lock:
            lease = self.leases.get(lease_id)
            if lease is None:
                raise PoolError(404, wire.UNKNOWN_LEASE, "unknown lease: released, reclaimed after its client "
                                "went silent, or the server restarted")
            lease.expires = time.monotonic() + self.ttl
            return lease

    def release(self, lease_id: str) -> None:
        with self._lock:
            lease = self.leases.pop(lease_id, None)
            if lease is not None and lease.slot.lease is lease:
                lease.slot.lease = None
        if lease is not None:
            log.info("%s: released", lease.tag)

    def reap(self, now: float | None = None) -> list[Lease]:
        """Reclaim leases whose client went silent; returns them."""
        now = time.monotonic() if now is None else now
        with self._lock:
            gone = [lease for lease in self.leases.values() if lease.expires < now and lease.busy == 0]
            for lease in gone:
                del self.leases[lease.id]
                if lease.slot.lease is lease:
                    lease.slot.lease = None
        for lease in gone:
            log.warning("%s: reclaimed, no request for %.0f s", lease.tag, self.ttl)
        return gone

    # ------------------------------------------------------------------------------ engine calls
    def call(self, lease_id: str, fn: Callable[[Any, Lease], Any], *, episode: bool = True) -> Any:
        """Run ``fn(engine, lease)`` under the engine's lock, if ``lease_id`` still holds it.

        ``episode`` calls (step, metadata, frame) need a reset first and fail while the episode is
        lost. ``ValueError`` and ``TypeError`` pass through (a bad action or parameter); any other
        exception restarts the engine.
        """
        lease = self.get(lease_id)
        with self._lock:
            lease.busy += 1
        try:
            with lease.slot.lock:
                slot = lease.slot
                if slot.lease is not lease:
                    raise PoolError(404, wire.UNKNOWN_LEASE, "unknown lease: reclaimed after its client went silent")
                if episode and lease.lost:
                    raise PoolError(409, wire.EPISODE_LOST, lease.lost)
                if episode and not lease.has_episode:
                    raise PoolError(409, wire.EPISODE_LOST, "no episode yet: call reset(scene) first")
                # found before the call, not by it: ai2thor would wait its full timeout on the pipe
                if self._replace_dead(slot, lease.tag) is not None and episode:
                    raise PoolError(502, wire.ENGINE_FAILED, str(lease.lost))
                if slot.engine is None:
                    raise PoolError(502, wire.ENGINE_FAILED, f"engine {slot.index} is not running: {slot.broken}")
                try:
                    return fn(slot.engine, lease)
                except (ValueError, TypeError, PoolError):
                    raise  # the caller's mistake (a bad action, an unknown parameter): the engine is fine
                except Exception as exc:
                    what = describe(exc)
                    log.error("%s: engine failed (%s); restarting it", lease.tag, what)
                    _lose(lease, f"the engine failed during an earlier request ({what}) and was restarted")
                    self._restart(slot)
                    raise PoolError(502, wire.ENGINE_FAILED,
                                    f"the engine failed ({what}); it was restarted and this episode is lost") from exc
        finally:
            with self._lock:
                lease.busy -= 1
                lease.expires = time.monotonic() + self.ttl


def _lose(lease: Lease, why: str) -> str:
    """Mark ``lease``'s episode lost for ``why``, until its next reset; the message its calls get."""
    lease.lost = f"{why}: this episode is lost; call reset(scene) to start a new one"
    lease.has_episode = False
    return lease.lost


def process_died(engine: Any) -> str | None:
    """Why ``engine``'s Unity process is gone, or None while it runs (or when it has none, as the embedded one)."""
    proc = getattr(getattr(engine, "server", None), "unity_proc", None)  # ai2thor's FIFO/WSGI server keeps it
    if proc is not None and hasattr(proc, "poll"):
        code = proc.poll()
        return None if code is None else f"Unity process {proc.pid} exited with status {code}"
    return None


class Reaper(threading.Thread):
    """Reclaims silent leases and retries broken engines every ``period`` seconds until stopped."""

    def __init__(self, pool: Pool, period: float) -> None:
        super().__init__(name="sab-thor-reaper", daemon=True)
        self.pool = pool
        self.period = period
        self._stop_event = threading.Event()

    def run(self) -> None:
        while not self._stop_event.wait(self.period):
            self.pool.reap()
            self.pool.repair()

    def stop(self) -> None:
        self._stop_event.set()
