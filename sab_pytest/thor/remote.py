"""``RemoteEngine``: the ``Engine`` interface over the THOR server (``--thor remote``).

Each engine object leases one engine of the pool spread over ``--thor-url URL[,URL...]`` (the URL
with the most free engines first), so every running case has an engine of its own, and releases it
on ``stop()``. ``reset``, ``step``, ``last_event.metadata`` and ``last_event.frame`` (an HxWx3 uint8
array, fetched as PNG only when read) behave as ai2thor's Controller does, including ``ValueError``
for an unknown action, so the planner, the agents and the state check cannot tell it from a local
engine.

What is retried, and why it is safe:

* a dropped connection, a refused connection or a timeout: the same request is sent again (up to
  four more times, with back-off; a second timeout ends it, as a hung server will not answer a third
  time). A reset is idempotent; a step carries its sequence number and the server answers a repeated
  number from its record, so a step is never run twice;
* a lease the server no longer knows (the server restarted, or reclaimed a silent lease): ``reset``
  leases again, from any URL, and goes on; a ``step`` cannot (the episode it belongs to is gone) and
  raises ``InfraError("engine")``, so the case is reported as an engine error and the run goes on;
* an engine that crashed and was restarted by the server: ``InfraError("engine")`` for the running
  case, and the next case's reset works again.

HTTP: the standard library's ``http.client`` with one keep-alive connection per engine: the
fewest layers per call on loopback (a ``GET /health`` took 0.4 ms at the median against 0.7 ms
with the httpx2 client that comes with openai, whose difference is most of the embedded engine's
own step), and nothing to import for runs that never use a remote engine.
"""

from __future__ import annotations

import contextlib
import http.client
import io
import json
import os
import random
import socket
import threading
import time
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

from sab_pytest.errors import InfraError, UsageError
from sab_pytest.retry import RetryPolicy, wait
from sab_pytest.thor import wire

_TRANSPORT_ERRORS = (OSError, http.client.HTTPException)  # ConnectionError, TimeoutError, socket errors
# at once first (most often a keep-alive connection the server closed when idle), then 0.2, 0.5, 1 s
RETRY = RetryPolicy(first=0.0, base=0.2, factor=2.5, cap=1.0, jitter=1.0)
TRIES = 5  # the first request and four retries


#: how long a lease waits for a free engine before the case errors as ``engine`` (all are leased)
LEASE_WAIT_S = 60.0


def parse_urls(value: str | Sequence[str] | None, *, option: str = "--thor-url") -> list[str]:
    """``http://host:port[,http://...]`` -> normalised base URLs; UsageError naming ``option``."""
    items = value.split(",") if isinstance(value, str) else list(value or [])
    urls = []
    for raw in (item.strip() for item in items):
        if not raw:
            continue
        parts = urlsplit(raw if "://" in raw else f"http://{raw}")
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise UsageError(f"{option}: {raw!r} is not an http(s)://HOST:PORT address of a THOR server")
        try:
            port = parts.port
        except ValueError as exc:
            raise UsageError(f"{option}: {raw!r}: {exc}") from None
        if parts.path not in ("", "/") or parts.query:
            raise UsageError(f"{option}: {raw!r}: give the server's base address only, without a path")
        host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
        urls.append(f"{parts.scheme}://{host}:{port or wire.DEFAULT_PORT}")
    if not urls:
        raise UsageError(f"{option}: no THOR server address given (or set ${wire.URL_ENV})")
    return urls


def token_from_env() -> str | None:
    return os.environ.get(wire.TOKEN_ENV) or None


class _Http:
    """One keep-alive connection to one server, reopened after any transport error."""

    def __init__(self, url: str, token: str | None, timeout: float) -> None:
        self.url = url
        parts = urlsplit(url)
        cls = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
        host = parts.hostname or ""  # parse_urls made every URL an http(s)://HOST:PORT
        self._make = lambda: cls(host, parts.port, timeout=timeout)
        self._conn: http.client.HTTPConnection | None = None
        self._headers = {"Content-Type": "application/json"}
        if token:
            self._headers["Authorization"] = f"Bearer {token}"

    def once(self, method: str, path: str, body: Any = None) -> tuple[int, bytes]:
        """One request; transport errors propagate (after closing the connection)."""
        data = None if body is None else json.dumps(body, separators=(",", ":")).encode()
        if self._conn is None:
            self._conn = self._make()
            self._conn.connect()
            self._conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            self._conn.request(method, path, body=data, headers=self._headers)
            response = self._conn.getresponse()
            return response.status, response.read()
        except BaseException:
            self.close()
            raise

    def call(self, method: str, path: str, body: Any = None, *, tries: int = TRIES) -> tuple[int, bytes]:
        """``once`` retried on transport errors; InfraError("engine") when the server stays unreachable."""
        timeouts = 0
        last: BaseException | None = None
        attempt = 0
        for attempt in range(tries):
            try:
                return self.once(method, path, body)
            except _TRANSPORT_ERRORS as exc:
                last = exc
                timeouts += isinstance(exc, TimeoutError)
                if timeouts >= 2:
                    break  # a server that hangs twice will not answer a third time; do not wait minutes more
                if attempt + 1 < tries:
                    wait(RETRY.pause(attempt))
        raise InfraError("engine", f"THOR server {self.url} unreachable ({type(last).__name__}: {last}) "
                         f"after {attempt + 1} tries")

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def _error(data: bytes) -> tuple[str, str]:
    try:
        err = json.loads(data)["error"]
        return str(err["type"]), str(err["message"])
    except (ValueError, KeyError, TypeError):
        return "http", data[:200].decode("utf-8", "replace")


def health(url: str, token: str | None, *, timeout: float = 10.0, tries: int = 1) -> dict[str, Any]:
    """The server's ``/health`` answer; UsageError when it cannot be used (down, token refused)."""
    conn = _Http(url, token, timeout)
    try:
        status, data = conn.call("GET", "/health", tries=tries)
    except InfraError as exc:
        raise UsageError(f"--thor-url {url}: the THOR server cannot be reached: {exc.args[0]}") from None
    finally:
        conn.close()
    if status == 401:
        raise UsageError(f"--thor-url {url}: the THOR server refused the token: set ${wire.TOKEN_ENV} to its token")
    try:
        info = json.loads(data)
    except ValueError:
        raise UsageError(f"--thor-url {url}: answered {status} with something that is not a THOR server's "
                         "health") from None
    if not isinstance(info, dict) or "engines" not in info:
        raise UsageError(f"--thor-url {url}: this is not a THOR server (no engine count in /health)")
    if info.get("protocol") != wire.PROTOCOL:
        raise UsageError(f"--thor-url {url}: protocol {info.get('protocol')} differs from this client's "
                         f"{wire.PROTOCOL}: install the same sab-pytest on the THOR host")
    if info.get("auth") and not token:
        raise UsageError(f"--thor-url {url}: the THOR server requires a token: set ${wire.TOKEN_ENV}")
    if status != 200:
        raise UsageError(f"--thor-url {url}: the THOR server has no running engine ({info.get('broken')} of "
                         f"{info.get('engines')} failed to start)")
    return info


def served_pictures(urls: str | Sequence[str], *, timeout: float = 5.0) -> str | None:
    """What the servers' engines draw (``schematic`` or ``rendered``, from ``/health``), when every server says
    and they agree; None otherwise (an older server, one that cannot be reached: the preflight tells that)."""
    kinds = set()
    for url in parse_urls(urls):
        try:
            info = health(url, token_from_env(), timeout=timeout)
        except UsageError:
            return None
        kinds.add(info.get("pictures") or {"sim": "schematic"}.get(str(info.get("backend"))))
    return kinds.pop() if len(kinds) == 1 and None not in kinds else None


def preflight(urls: str | Sequence[str], workers: int = 1, episodes: int = 1) -> str | None:
    """Fail once, clearly, before any case when the pool cannot serve a run: every URL must answer
    its health check with the token accepted and an engine running (else UsageError). Returns a
    warning when fewer engines are free than the run holds at once (``workers`` x ``episodes``, the
    engines each worker leases at the same time), since the others would wait for a lease, up to a
    minute per case, then error; else None."""
    token = token_from_env()
    free = sum(int(health(url, token, tries=2).get("free") or 0) for url in parse_urls(urls))
    if free >= workers * episodes:
        return None
    each = f" x {episodes} episodes at once" if episodes > 1 else ""
    return (f"--thor remote: {free} THOR engine(s) free for {workers} worker(s){each}; the others wait for a "
            "lease (up to 60 s per case, then an engine error). Serve more engines, or run fewer workers or a "
            "lower --sab-concurrency.")


class RemoteEngine:
    """An engine leased from a THOR server pool; see the module docstring."""

    def __init__(self, urls: str | Sequence[str], *, token: str | None = None, timeout: float = 120.0,
                 lease_wait: float | None = None, client: str | None = None) -> None:
        self.urls = parse_urls(urls)
        self.token = token
        self.timeout = timeout
        self.lease_wait = LEASE_WAIT_S if lease_wait is None else lease_wait
        self.client = client or f"{socket.gethostname()}:{os.getpid()}:{os.environ.get('PYTEST_XDIST_WORKER', '-')}"
        self.last_event: Any = None
        self._http: _Http | None = None
        self._lease: str | None = None
        self._ttl = 60.0
        self._seq = 0  # number of the last answer received on this lease
        self._index: dict[str, Any] = {}  # objectId -> object of that answer (the base of the next delta)
        self._used = time.monotonic()
        self._beat_stop = threading.Event()
        self._beat: threading.Thread | None = None
        self._acquire()

    # ------------------------------------------------------------------------------- leasing
    @property
    def url(self) -> str | None:
        return self._http.url if self._http is not None else None

    def _acquire(self) -> None:
        """Lease an engine: the URL with the most free engines first; wait up to ``lease_wait`` if all are busy."""
        deadline = time.monotonic() + self.lease_wait
        while True:
            free: list[tuple[int, float, str]] = []
            problems = []
            for url in self.urls:
                try:
                    info = health(url, self.token, timeout=min(self.timeout, 10.0))
                    free.append((int(info.get("free") or 0), random.random(), url))
                except UsageError as exc:
                    problems.append(str(exc))
            if not free:
                raise InfraError("engine", "no THOR server reachable: " + "; ".join(problems))
            for count, _, url in sorted(free, reverse=True):
                if count <= 0:
                    continue
                conn = _Http(url, self.token, self.timeout)
                status, data = conn.call("POST", "/leases", {"client": self.client})
                if status == 201:
                    answer = json.loads(data)
                    self._http, self._lease, self._ttl = conn, answer["lease"], float(answer.get("ttl") or 60)
                    self._seq, self._index = 0, {}
                    self._start_heartbeat()
                    return
                conn.close()
                kind, message = _error(data)
                if kind != wire.NO_FREE_ENGINE:
                    raise InfraError("engine", f"THOR server {url} refused a lease: {message}")
            if time.monotonic() >= deadline:
                total = sum(1 for _ in free)
                raise InfraError("engine", f"no free engine on {total} THOR server(s) ({', '.join(self.urls)}) after "
                                 f"waiting {self.lease_wait:.0f} s: every engine is leased")
            time.sleep(0.25)

    def _start_heartbeat(self) -> None:
        if self._beat is None:
            self._beat = threading.Thread(target=self._heartbeat, name="sab-thor-heartbeat", daemon=True)
            self._beat.start()

    def _heartbeat(self) -> None:
        """Keep the lease while the case thinks (a model call can outlast the lease's TTL)."""
        while not self._beat_stop.wait(max(0.05, self._ttl / 3)):
            http_, lease = self._http, self._lease
            if http_ is None or lease is None or time.monotonic() - self._used < self._ttl / 3:
                continue
            conn = _Http(http_.url, self.token, 10.0)
            try:
                conn.once("POST", f"/leases/{lease}/heartbeat")
            except _TRANSPORT_ERRORS:
                pass  # the next request finds out and says so
            finally:
                conn.close()

    def _drop_lease(self) -> None:
        if self._http is not None:
            self._http.close()
        self._http, self._lease = None, None

    # ------------------------------------------------------------------------------- requests
    def _request(self, method: str, what: str, body: Any = None) -> tuple[int, bytes]:
        if self._http is None or self._lease is None:
            self._acquire()
        assert self._http is not None
        self._used = time.monotonic()
        try:
            status, data = self._http.call(method, f"/leases/{self._lease}/{what}", body)
        except InfraError:
            self._drop_lease()  # the server is gone: the next reset leases anew (and fails fast if all are down)
            raise
        self._used = time.monotonic()
        return status, data

    def _fail(self, status: int, data: bytes, doing: str) -> None:
        kind, message = _error(data)
        if kind == wire.INVALID_ACTION:
            raise ValueError(message)
        if kind == wire.INVALID_CALL:
            raise TypeError(message)
        url = self.url
        if kind == wire.UNKNOWN_LEASE:
            self._drop_lease()
            message = f"the THOR server lost this engine's lease ({message}): the episode is gone"
        raise InfraError("engine", f"THOR server {url}: {doing} failed [{status} {kind}]: {message}")

    def _event(self, data: bytes) -> Any:
        # start-up: ai2thor and Pillow, about 0.1 s; run.validate imports this module in every run
        from sab_pytest.thor.sim.controller import (
            SimEvent,  # ai2thor's Event with a frame drawn (here: fetched) on first read
        )

        answer = json.loads(data)
        metadata = answer["metadata"]
        try:
            if answer["base"] is not None and answer["base"] != self._seq:
                raise KeyError(answer["base"])
            objects = wire.decode_objects(answer["objects"], self._index if answer["base"] is not None else {})
        except KeyError:  # out of step with the server: take the full metadata instead
            status, data = self._request("GET", "metadata")
            if status != 200:
                self._fail(status, data, "metadata")
            return self._event(data)
        metadata["objects"] = objects
        self._seq = answer["seq"]
        self._index = wire.index_objects(objects)
        event = SimEvent(metadata)
        event._frame_source = _FrameFetch(self, self._lease, answer["seq"])
        self.last_event = event
        return event

    # ------------------------------------------------------------------------------- Engine API
    def reset(self, scene: str | None = None, **init_params: Any) -> Any:
        body = {"scene": scene, "init": init_params}
        for _ in range(2):  # a second time on a new lease if the server forgot this one
            if self._lease is None:
                self._acquire()  # numbering starts again on a new lease
            status, data = self._request("POST", "reset", {**body, "seq": self._seq + 1})
            if status == 200:
                return self._event(data)
            if _error(data)[0] != wire.UNKNOWN_LEASE:
                break
            self._drop_lease()
        self._fail(status, data, f"reset({scene!r})")
        raise AssertionError("unreachable")  # pragma: no cover

    def step(self, action: str | dict[str, Any] | None = None, **action_args: Any) -> Any:
        """Run one action on the server's engine; the same calling conventions as ai2thor's ``step``."""
        if self.last_event is None:
            raise RuntimeError("no episode on this engine: call reset(scene) first")
        if self._lease is None:
            raise InfraError("engine", "this engine's THOR server failed during the episode: the episode is gone "
                             "(the next reset leases an engine again)")
        args = dict(action) if isinstance(action, dict) else {"action": action}
        raise_for_failure = action_args.pop("raise_for_failure", False)
        args.update(action_args)
        status, data = self._request("POST", "step", {"seq": self._seq + 1, "action": args})
        if status != 200:
            self._fail(status, data, f"step {args.get('action')!r}")
        event = self._event(data)
        if raise_for_failure and not event.metadata.get("lastActionSuccess"):
            raise RuntimeError(event.metadata.get("errorMessage") or f"{args} failed")
        return event

    def frame(self, lease: str | None, seq: int) -> Any:
        import numpy as np
        from PIL import Image

        if lease != self._lease or self._http is None:
            raise InfraError("engine", "the frame of an event from an earlier lease is gone")
        status, data = self._http.call("GET", f"/leases/{lease}/frame?seq={seq}")
        if status != 200:
            self._fail(status, data, "frame")
        with Image.open(io.BytesIO(data)) as image:
            return np.asarray(image.convert("RGB"), dtype=np.uint8)

    def stop(self) -> None:
        """Release the lease (best effort: a server that is gone reclaims it by itself)."""
        self._beat_stop.set()
        http_, lease = self._http, self._lease
        if http_ is not None and lease is not None:
            with contextlib.suppress(*_TRANSPORT_ERRORS):
                http_.once("DELETE", f"/leases/{lease}")
        self._drop_lease()
        if self._beat is not None:
            self._beat.join(timeout=1)
            self._beat = None


class _FrameFetch:
    """Fetches one event's frame when it is first read."""

    def __init__(self, engine: RemoteEngine, lease: str | None, seq: int) -> None:
        self.engine, self.lease, self.seq = engine, lease, seq

    def __call__(self) -> Any:
        return self.engine.frame(self.lease, self.seq)
