"""Rate limits paced, not hammered: one run-wide schedule of requests per endpoint, set from what the
server says about its limit, and the wait of a call the server refused anyway (``throttle``).

Why: hosted APIs count a refused request against the per-minute limit, so a client that learns the
limit only from HTTP 429s (and then waits and tries again) spends part of the limit on refusals and
can get its key throttled harder. The server tells its limit on every answer, in OpenAI's headers:
``x-ratelimit-limit-requests`` (per minute), ``-remaining-requests`` and ``-reset-requests`` (the
time until the limit is whole again, ``"1s"``, ``"6m0s"``, ``"20ms"``), the same for ``-tokens``,
and ``Retry-After`` on a refusal. ``RatePacer`` turns them into a schedule that every call of the
run follows before it sends: one request per ``1 / rate`` seconds (a little under the stated rate,
``MARGIN``; a schedule up to ``CATCH_UP_S`` behind, because a loaded machine woke its threads late,
is made up at once, as the server's own bucket refilled meanwhile; after an idle time it starts
afresh, with no burst), a hold until the reset when the server says nothing is left (requests or tokens), and
a hold for ``Retry-After`` when it refused one.

Why one schedule for the whole run and not 1/N of the limit per xdist worker: workers do not run
the same number of calls at the same time (one is on its long-horizon case while another waits for
its judges); a fixed share would leave the busy worker at 1/N of the rate while the idle one's share
goes unused, and N is not known to a client. So the schedule (the next free send time, the rate,
the hold) lives in one small file of the run directory, read and advanced under a file lock
(one lock per request: cheap next to an HTTP round trip); each call reserves the next free time and
sleeps until then. A missing or garbled file reads as "nothing known": the file steers speed only.
Without a directory (a client used alone) the same schedule is kept in the process.

The key is the server (its base URL): a limit counts every model of an endpoint that shares it
(OpenAI counts per model, so two models there are paced at the lower of their two limits; safe).
Once the endpoint answered without limit headers nothing is paced, so an endpoint without limits
costs one unlocked read per request.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import filelock

from sab_pytest import retry
from sab_pytest.errors import InfraError
from sab_pytest.fetch import atomic_write_bytes
from sab_pytest.models.context import CallContext
from sab_pytest.models.interfaces import Breaker, Slots
from sab_pytest.models.wire import CAUSE_RATE, Failure, parse_duration, parse_retry_after

MARGIN = 0.97  # the share of the stated rate the run sends at: clock jitter must not cost a 429
CATCH_UP_S = 0.25  # a schedule behind by at most this much (threads woken late) is made up at once
PROBE_S = 5.0  # before any answer of the endpoint, one call goes first; another after this long (or its failure)
POLL_S = 0.05  # how often calls held back for the first answer look again
WINDOW_S = 60.0  # x-ratelimit-limit-requests counts requests per minute (OpenAI's RPM)


def _number(headers: Mapping[str, str], name: str) -> float | None:
    with contextlib.suppress(TypeError, ValueError):
        value = float(headers.get(name) or "")
        if math.isfinite(value) and value >= 0:
            return value
    return None


class RatePacer:
    """The send schedule of one endpoint (see the module docstring).

    ``observe(headers)`` learns from any answer or refusal; ``reserve()`` books the next send time
    and returns the seconds to wait for it (0: send now; None: the endpoint's first answer is
    awaited, ask again after ``POLL_S``). State: ``seen`` (an answer came), ``probe`` (when the
    first call went), ``rate`` (requests a second, absent until the server states a limit),
    ``next`` (the earliest ``time.time()`` of the next send) and ``hold`` (no send before this
    ``time.time()``).
    """

    def __init__(self, server: str, directory: Path | None = None) -> None:
        self.server = server
        name = hashlib.sha256(server.encode()).hexdigest()[:12]
        self.path = directory / f"rate-{name}.json" if directory is not None else None
        self._lock_path = directory / f"rate-{name}.lock" if directory is not None else None
        self._local: dict[str, Any] = {}
        self._thread_lock = threading.Lock()
        self.paced = 0  # requests of this process that waited for their time (tests and the bench)
        self.booked = 0.0  # the send time last booked by this process

    def observe(self, headers: Mapping[str, str]) -> None:
        """Learn the limit from an answer's (or refusal's) headers: the rate, and a hold until the
        reset when nothing is left of the requests or tokens, or for ``Retry-After`` when sent."""
        limit = _number(headers, "x-ratelimit-limit-requests")
        rate = limit * MARGIN / WINDOW_S if limit else None
        now = time.time()
        hold = 0.0
        for kind in ("requests", "tokens"):
            left = _number(headers, f"x-ratelimit-remaining-{kind}")
            reset = parse_duration(headers.get(f"x-ratelimit-reset-{kind}"))
            if left is not None and left < 1 and reset is not None:
                # the reset is when the limit is whole again; the next request is due one step in
                step = WINDOW_S / limit if kind == "requests" and limit else reset
                hold = max(hold, now + min(reset, step))
        told = parse_retry_after(headers)
        if told is not None:
            hold = max(hold, now + told)
        known = self._read()
        if known.get("seen") and (rate is None or rate == known.get("rate")) and hold <= float(known.get("hold", 0.0)):
            return  # nothing new: most answers restate the same limit, and cost no lock
        with self._state() as state:
            state["seen"] = 1
            if rate is not None:
                state["rate"] = rate
            if hold > float(state.get("hold", 0.0)):
                state["hold"] = hold

    def failed(self) -> None:
        """An attempt got no answer (a timeout, a dropped connection, an error without headers).
        Before the endpoint's first answer that attempt was the one call sent alone: the next may
        go at once (still one at a time), rather than ``PROBE_S`` after it; the call that failed
        retries after its own back-off, and a run whose first call met a passing fault does not
        stand still for the rest of ``PROBE_S``."""
        if self._read().get("seen"):
            return  # the common case costs one unlocked read
        with self._state() as state:
            if not state.get("seen"):
                state["probe"] = 0.0

    def reserve(self) -> float | None:
        """Book the next send time of the run for this request; the seconds to wait until then
        (None: wait for the endpoint's first answer, then ask again)."""
        now = time.time()
        known = self._read()
        if known.get("seen") and not known.get("rate") and float(known.get("hold", 0.0)) <= now:
            return 0.0  # no limit stated: the common case of a local server costs one read
        with self._state() as state:
            now = time.time()
            if not state.get("seen"):
                if now - float(state.get("probe", 0.0)) < PROBE_S:
                    return None
                state["probe"] = now  # this call goes first
                return 0.0
            rate = state.get("rate")
            at = float(state.get("next", 0.0))
            if at < now - CATCH_UP_S:  # idle since: start afresh
                at = now
            at = max(at, float(state.get("hold", 0.0)))
            if rate:
                state["next"] = at + 1.0 / float(rate)
        self.booked = at
        wait = max(0.0, at - now)
        if wait > 0:
            self.paced += 1
        return wait

    def rate(self) -> float | None:
        """Requests a second the run sends at (None: no limit stated yet)."""
        value = self._read().get("rate")
        return float(value) if value else None

    # -- the state: one JSON file of the run directory, or a dict of this process -----------------
    def _read(self) -> dict[str, Any]:
        if self.path is None:
            return self._local
        try:
            data = json.loads(self.path.read_bytes())
        except (OSError, ValueError):
            return {}
        if not isinstance(data, dict):
            return {}
        return {k: v for k, v in data.items() if isinstance(v, (int, float)) and math.isfinite(v) and v >= 0}

    @contextlib.contextmanager
    def _state(self) -> Iterator[dict[str, Any]]:
        """The state to change in place, under a lock across threads and (with a directory) processes."""
        with self._thread_lock:
            if self.path is None or self._lock_path is None:
                yield self._local
                return
            with contextlib.suppress(OSError):
                self.path.parent.mkdir(parents=True, exist_ok=True)
            try:
                fh = open(self._lock_path, "a+b")  # noqa: SIM115
            except OSError:  # no run directory left (a run being torn down): pace this process alone
                yield self._local
                return
            with fh:
                filelock.lock_descriptor(fh.fileno())  # released when ``fh`` closes
                state = self._read()
                yield state
                with contextlib.suppress(OSError):
                    atomic_write_bytes(self.path, json.dumps(state).encode())


def throttle(failure: Failure, waited: float, rounds: int, ctx: CallContext, *, where: str, ceiling: float,
             policy: retry.RetryPolicy, slots: Slots | None, breaker: Breaker | None) -> float:
    """Wait out one rate-limited answer (HTTP 429, or 503 with Retry-After) of the call ``where``
    names; returns the call's back-off so far (``waited`` before it).

    Parameters: the failure and the call's back-off so far, then, by keyword, what the retrying
    client holds for the wait (its name, ceiling, policy, slots and breaker); its one caller,
    ``RetryLoop._throttle``, passes its own attributes.

    Why apart from retries: a 429 says "slow down", not "broken". So the wait is what the server
    asked (``Retry-After``, else the ``x-ratelimit-reset-*`` of the used-up limit, else exponential
    backoff by ``policy``), with a spread so that calls told the same instant do not all come back
    at it (the run's schedule, ``RatePacer``, has heard the same headers and holds every call); the
    process's calls in flight shrink (``slots.congested``); the case's budget is not charged; the
    breaker neither hears of it nor cuts it short (its wait still wakes when the run stops). The one
    bound is the ``ceiling`` of back-off per call (``--sab-rate-limit-wait``), after which the call
    fails for good, saying so (and counts for the breaker like any call that failed for good: an
    endpoint that serves nobody for that long is not serving the run).
    """
    if slots is not None:
        slots.congested()
    told = failure.retry_after
    least = told if told is not None else policy.step(rounds)
    left = ceiling - waited
    if least > left:
        ctx.failures.rate_limit(0.0)
        asks = f"the server asks to wait {told:.0f}s, more than" if told is not None else "no time left of"
        raise InfraError("model_api", f"{where}: still rate limited after {waited:.0f}s of back-off for this "
                         f"call ({failure.message}); {asks} the {left:.0f}s left of the {ceiling:g}s one call "
                         f"may wait (--sab-rate-limit-wait); {CAUSE_RATE}") from None
    pause = min(left, policy.pause(rounds, told))
    ctx.failures.rate_limit(pause)
    ctx.extend(pause)  # back-pressure is not the case's work
    retry.wait(pause, breaker)
    return waited + pause
