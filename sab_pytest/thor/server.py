"""The THOR server: ``sab thor-server`` serves N engines to benchmark runs over HTTP.

A GPU host runs it (see ``thor/`` at the top of the repository); CI jobs run ``pytest --thor remote
--thor-url http://HOST:9100`` and each running case leases one engine (``remote.py``). The JSON API
mirrors ai2thor's ``Controller``; every path but ``/health`` needs ``Authorization: Bearer TOKEN``
when the server has a token::

    GET    /health                       {"status", "engines", "free", "broken", "backend", "pictures", ...}
    POST   /leases                       {"client"} -> 201 {"lease", "engine", "ttl"}; 503 no free engine
    DELETE /leases/ID                    release
    POST   /leases/ID/heartbeat          keep an idle lease (any request does too)
    POST   /leases/ID/reset              {"seq", "scene", "init"} -> event (delta)
    POST   /leases/ID/step               {"seq", "action": {"action": NAME, ...args}} -> event (delta)
    GET    /leases/ID/metadata           event (full metadata)
    GET    /leases/ID/frame?seq=N        image/png of the last event's frame

Leases, locking, crash recovery and retry safety are in ``pool.py``; the metadata delta in ``wire.py``.

HTTP stack: Werkzeug (which ai2thor brings) routes, waitress serves: pure Python, installs anywhere the
benchmark does, and threaded, as a server whose every engine call blocks (under a per-engine lock) wants.

Binds 127.0.0.1 unless ``--host`` says otherwise; anything else only with a token (``--token``, ``$SAB_THOR_TOKEN``).
"""

from __future__ import annotations

import argparse
import hmac
import io
import ipaddress
import json
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from sab_pytest.errors import UsageError
from sab_pytest.settings import options
from sab_pytest.thor import FRAME_SIZE, scenes, wire
from sab_pytest.thor.local import start
from sab_pytest.thor.pool import Lease, Pool, PoolError, Reaper
from sab_pytest.thor.sim import Controller as SimController

log = logging.getLogger("sab_pytest.thor.server")
BACKENDS = ("ai2thor", "sim")


# ---------------------------------------------------------------------------------------- engines

def engine_factory(backend: str, *, width: int = FRAME_SIZE, height: int = FRAME_SIZE, scenes_dir: str | None = None,
                   platform: str = "CloudRendering", executable: str | None = None) -> Callable[[], Any]:
    """A function that starts one engine of ``backend`` (ai2thor's Controller, or the embedded one)."""
    if backend == "sim":
        source = scenes.SceneSource(scenes_dir)
        return lambda: SimController(width=width, height=height, scenes=source)
    if backend == "ai2thor":
        import ai2thor.platform

        platform_cls = getattr(ai2thor.platform, platform, None)
        if platform_cls is None:
            raise UsageError(f"--platform: ai2thor has no platform {platform!r}")
        kwargs: dict[str, Any] = {"platform": platform_cls, "width": width, "height": height,
                                  "renderDepthImage": False, "renderInstanceSegmentation": False}
        return lambda: start(executable or None, scenes_dir=scenes_dir, **kwargs)
    raise UsageError(f"--backend: unknown backend {backend!r}; choose one of {', '.join(BACKENDS)}")


def pictures_of(backend: str, executable: str | None = None) -> str:
    """What the engines draw (clients mark results with it): the embedded engine's boxes, also behind
    ai2thor's client as ``sab-thor-standin``, are ``schematic``; AI2-THOR's Unity build ``rendered``."""
    return "schematic" if backend == "sim" or os.path.basename(executable or "").startswith("sab-thor-standin") \
        else "rendered"


def _check_event(event: Any) -> Any:
    """An event without objects is a silent failure (the port answered those with zeros): refuse it."""
    metadata = getattr(event, "metadata", None)
    if not isinstance(metadata, dict) or not metadata.get("objects"):
        raise RuntimeError("the engine answered with an event that has no objects")
    return event


def _answer(lease: Lease, event: Any, *, full: bool) -> bytes:
    """Encode ``event`` for the lease's client, as a delta on what it already has unless ``full``."""
    metadata = event.metadata
    objects = metadata["objects"]
    base = None if full else lease.base
    seq = lease.seq + 1
    body = {"seq": seq, "base": None if base is None else lease.seq,
            "metadata": {k: v for k, v in metadata.items() if k != "objects"},
            "objects": wire.encode_objects(objects, base)}
    try:
        answer = _json(body)
    except (TypeError, ValueError) as exc:  # the action ran, but its event cannot be sent: the episode is lost
        lease.lost = f"an event of this episode could not be encoded as JSON ({exc}); call reset(scene)"
        lease.has_episode = False
        raise PoolError(500, wire.ENGINE_FAILED, lease.lost) from exc
    lease.seq, lease.base, lease.answer = seq, wire.index_objects(objects), answer
    return answer


def _json(body: Any) -> bytes:
    # metadata is a tree (JSON from Unity, or the embedded engine's dicts): skip the cycle check (8% faster)
    return json.dumps(body, separators=(",", ":"), check_circular=False).encode()


def _png(frame: Any) -> bytes:
    import numpy as np
    from PIL import Image

    if frame is None:
        raise PoolError(409, wire.STALE_FRAME, "this event has no frame (the engine renders none)")
    buf = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(frame, dtype=np.uint8)).save(buf, format="PNG", compress_level=1)
    return buf.getvalue()


# ------------------------------------------------------------------------------------------ HTTP app

class App:
    """The WSGI application: routing, authentication, JSON in and out. Engine logic is in ``Pool``."""

    def __init__(self, pool: Pool, *, token: str | None, backend: str, pictures: str = "rendered") -> None:
        from werkzeug.routing import Map, Rule

        self.pool = pool
        self.token = token
        self.backend = backend
        self.pictures = pictures
        self.urls = Map([
            Rule("/health", endpoint="health", methods=["GET"]),
            Rule("/leases", endpoint="lease", methods=["POST"]),
            Rule("/leases/<lease_id>", endpoint="release", methods=["DELETE"]),
            Rule("/leases/<lease_id>/heartbeat", endpoint="heartbeat", methods=["POST"]),
            Rule("/leases/<lease_id>/reset", endpoint="reset", methods=["POST"]),
            Rule("/leases/<lease_id>/step", endpoint="step", methods=["POST"]),
            Rule("/leases/<lease_id>/metadata", endpoint="metadata", methods=["GET"]),
            Rule("/leases/<lease_id>/frame", endpoint="frame", methods=["GET"]),
        ])

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        from werkzeug.exceptions import HTTPException
        from werkzeug.wrappers import Request, Response

        request = Request(environ)
        request.max_content_length = 1 << 20  # a step is a few hundred bytes; refuse floods early
        try:
            endpoint, args = self.urls.bind_to_environ(environ).match()
            self._authorize(request, endpoint)
            result = getattr(self, "on_" + endpoint)(request, **args)
            if isinstance(result, Response):
                response = result
            else:
                status, body = result if isinstance(result, tuple) else (200, result)
                response = Response(body if isinstance(body, bytes) else _json(body), status=status,
                                    mimetype="application/json")
        except PoolError as exc:
            response = _error(exc.status, exc.kind, str(exc))
        except ValueError as exc:  # ai2thor's answer to an invalid action or argument
            response = _error(400, wire.INVALID_ACTION, str(exc))
        except TypeError as exc:  # an unknown initialization parameter
            response = _error(400, wire.INVALID_CALL, str(exc))
        except HTTPException as exc:
            response = _error(exc.code or 500, wire.BAD_REQUEST, exc.description or exc.name)
        except Exception as exc:  # a bug of the server: say so, keep serving
            log.exception("internal error on %s %s", request.method, request.path)
            response = _error(500, "server_error", f"{type(exc).__name__}: {exc}")
        return response(environ, start_response)

    def _authorize(self, request: Any, endpoint: str) -> None:
        given = request.headers.get("Authorization")
        if self.token is None or (endpoint == "health" and given is None):
            return  # health answers without a token (for container health checks); a wrong one is refused
        scheme, _, value = (given or "").partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(value.strip().encode(), self.token.encode()):
            raise PoolError(401, wire.UNAUTHORIZED, "missing or wrong token (Authorization: Bearer ...; the "
                            f"client reads ${wire.TOKEN_ENV})")

    @staticmethod
    def _body(request: Any) -> dict[str, Any]:
        try:
            body = json.loads(request.get_data() or b"{}")
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise PoolError(400, wire.BAD_REQUEST, f"request body is not JSON: {exc}") from None
        if not isinstance(body, dict):
            raise PoolError(400, wire.BAD_REQUEST, "request body must be a JSON object")
        return body

    # endpoints -----------------------------------------------------------------------------------
    def on_health(self, request: Any) -> tuple[int, dict[str, Any]]:
        counts = self.pool.counts()
        ok = counts["broken"] < counts["engines"]
        return (200 if ok else 503), {"status": "ok" if ok else "unavailable", "protocol": wire.PROTOCOL,
                                      "backend": self.backend, "pictures": self.pictures,
                                      "auth": self.token is not None, "ttl": self.pool.ttl, **counts}

    def on_lease(self, request: Any) -> tuple[int, dict[str, Any]]:
        client = str(self._body(request).get("client") or request.remote_addr or "")
        lease = self.pool.acquire(client)
        return 201, {"lease": lease.id, "engine": lease.slot.index, "ttl": self.pool.ttl,
                     "protocol": wire.PROTOCOL}

    def on_release(self, request: Any, lease_id: str) -> dict[str, Any]:
        self.pool.get(lease_id)  # 404 for an unknown lease
        self.pool.release(lease_id)
        return {"released": True}

    def on_heartbeat(self, request: Any, lease_id: str) -> dict[str, Any]:
        self.pool.get(lease_id)
        return {"ttl": self.pool.ttl}

    def on_reset(self, request: Any, lease_id: str) -> bytes:
        body = self._body(request)
        scene, init, seq = body.get("scene"), body.get("init") or {}, body.get("seq")
        if scene is not None and not isinstance(scene, str):
            raise PoolError(400, wire.BAD_REQUEST, f"scene must be a string, got {scene!r}")
        if not isinstance(init, dict):
            raise PoolError(400, wire.BAD_REQUEST, "init must be an object of initialization parameters")

        def run(engine: Any, lease: Lease) -> bytes:
            repeat = _repeated(lease, seq)
            if repeat is not None:
                return repeat
            event = _check_event(engine.reset(scene, **init))
            lease.has_episode, lease.lost = True, None
            return _answer(lease, event, full=False)  # a delta too: scenes repeat, their objects keep their ids

        return self.pool.call(lease_id, run, episode=False)

    def on_step(self, request: Any, lease_id: str) -> bytes:
        body = self._body(request)
        action, seq = body.get("action"), body.get("seq")
        if not isinstance(action, dict) or "action" not in action:
            raise PoolError(400, wire.BAD_REQUEST, 'step needs {"action": {"action": NAME, ...arguments}}')

        def run(engine: Any, lease: Lease) -> bytes:
            repeat = _repeated(lease, seq)
            if repeat is not None:
                return repeat
            event = _check_event(engine.step(action))  # ValueError: not consumed, retry-safe by itself
            return _answer(lease, event, full=False)

        return self.pool.call(lease_id, run)

    def on_metadata(self, request: Any, lease_id: str) -> bytes:
        return self.pool.call(lease_id, lambda engine, lease: _answer(lease, engine.last_event, full=True))

    def on_frame(self, request: Any, lease_id: str) -> Any:
        from werkzeug.wrappers import Response

        wanted = request.args.get("seq", type=int)

        def run(engine: Any, lease: Lease) -> bytes:
            if wanted is not None and wanted != lease.seq:
                raise PoolError(409, wire.STALE_FRAME, f"the frame of event {wanted} is gone; the engine is at "
                                f"event {lease.seq}")
            return _png(engine.last_event.frame)

        return Response(self.pool.call(lease_id, run), mimetype="image/png")


def _repeated(lease: Lease, seq: Any) -> bytes | None:
    """The recorded answer when ``seq`` repeats the last request; a PoolError when it is out of order."""
    if not isinstance(seq, int) or isinstance(seq, bool):
        raise PoolError(400, wire.BAD_REQUEST, "seq must be an integer")
    if seq == lease.seq and lease.answer is not None:
        return lease.answer
    if seq != lease.seq + 1:
        raise PoolError(409, wire.BAD_REQUEST, f"request {seq} out of order: the last answered was {lease.seq}")
    return None


def _error(status: int, kind: str, message: str) -> Any:
    from werkzeug.wrappers import Response

    return Response(_json({"error": {"type": kind, "message": message}}), status=status,
                    mimetype="application/json")


# ------------------------------------------------------------------------------------------- server

def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a host name: it may resolve to anything


def check_bind(host: str, token: str | None) -> None:
    """Refuse to serve engines beyond this machine without a token."""
    if not is_loopback(host) and not token:
        raise UsageError(f"--host {host}: binding beyond loopback needs a token (--token or ${wire.TOKEN_ENV}); "
                         "without one anyone who reaches the port could drive the engines")


@dataclass
class ServerConfig:
    host: str = "127.0.0.1"
    port: int = wire.DEFAULT_PORT
    engines: int = 1
    backend: str = "ai2thor"
    token: str | None = None
    ttl: float = 60.0
    width: int = FRAME_SIZE
    height: int = FRAME_SIZE
    scenes_dir: str | None = None
    platform: str = "CloudRendering"
    executable: str | None = None
    threads: int | None = None


class ThorServer:
    """The pool, its reaper and the waitress server, startable in a thread (tests) or in the foreground."""

    def __init__(self, config: ServerConfig) -> None:
        check_bind(config.host, config.token)
        if config.ttl <= 0:
            raise UsageError(f"--lease-ttl: expected a positive number of seconds, got {config.ttl}")
        self.config = config
        factory = engine_factory(config.backend, width=config.width, height=config.height,
                                 scenes_dir=config.scenes_dir, platform=config.platform,
                                 executable=config.executable)
        self.pool = Pool(factory, config.engines, ttl=config.ttl)
        self.pool.start()
        self.reaper = Reaper(self.pool, period=min(5.0, config.ttl / 4))
        from waitress.server import create_server

        self.app = App(self.pool, token=config.token, backend=config.backend,
                       pictures=pictures_of(config.backend, config.executable))
        self.http = create_server(self.app, host=config.host, port=config.port,
                                  threads=config.threads or config.engines + 4, ident="sab-thor")
        # (leave waitress's asyncore_loop_timeout alone: a short one made the idle server spin at 40% CPU)
        self._thread: threading.Thread | None = None
        self._closing = False

    @property
    def url(self) -> str:
        host = self.http.effective_host
        return f"http://{f'[{host}]' if ':' in host else host}:{self.http.effective_port}"

    def serve_forever(self) -> None:
        self.reaper.start()
        self.http.run()

    def _serve_until_closed(self) -> None:
        try:
            self.serve_forever()
        except OSError:
            if not self._closing:  # closing sockets under the running loop ends it this way
                raise

    def start(self) -> ThorServer:
        """Serve from a background thread (for tests and benchmarks)."""
        self._thread = threading.Thread(target=self._serve_until_closed, name="sab-thor-http", daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        from waitress.wasyncore import close_all

        self._closing = True
        self.reaper.stop()
        self.http.task_dispatcher.shutdown(timeout=2)
        if self._thread is not None and self._thread.is_alive():
            try:  # woken by its trigger, the loop closes its own sockets at once (not when its 1 s select ends)
                self.http.trigger.pull_trigger(lambda: close_all(self.http._map))
            except OSError:  # a trigger closed already: closed from here, they end the loop at its next select
                close_all(self.http._map)
            self._thread.join(timeout=5)
        close_all(self.http._map)
        self.pool.stop()


def make_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="sab thor-server",
                                description="Serve AI2-THOR engines to sab-pytest runs (--thor remote).")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1; anything else "
                   "needs a token)")
    p.add_argument("--port", type=int, default=wire.DEFAULT_PORT, help=f"port (default {wire.DEFAULT_PORT})")
    p.add_argument("--engines", type=int, default=None,
                   help="engines to serve, one lease each (default $SAB_THOR_ENGINES, else 1)")
    p.add_argument("--backend", choices=BACKENDS, default="ai2thor",
                   help="ai2thor (Controller with a Unity build; default) or sim (the embedded engine, for tests)")
    p.add_argument("--token", default=None, help=f"bearer token clients must send (default ${wire.TOKEN_ENV}; "
                   "prefer the variable: a command line is visible to every user of the host)")
    p.add_argument("--lease-ttl", type=float, default=60.0, help="seconds without a request or heartbeat after "
                   "which a lease is reclaimed (default 60)")
    p.add_argument("--width", type=int, default=FRAME_SIZE, help=f"frame width (default {FRAME_SIZE}, as the paper's)")
    p.add_argument("--height", type=int, default=FRAME_SIZE, help=f"frame height (default {FRAME_SIZE})")
    scenes = dict(options())["thor_scenes"]  # the run's own --thor-scenes: the same dumps, the same default
    p.add_argument(*scenes.flags, **scenes.argument, dest="scenes", default=None)
    p.add_argument("--platform", default="CloudRendering", help="ai2thor backend: ai2thor.platform class "
                   "(default CloudRendering: Vulkan, no X display)")
    p.add_argument("--executable", default=None, metavar="PATH",
                   help="ai2thor backend: a local Unity build (local_executable_path) instead of the pinned one")
    p.add_argument("--threads", type=int, default=None, help="HTTP worker threads (default engines + 4)")
    return p


def parse_args(argv: Sequence[str] | None) -> ServerConfig:
    p = make_parser()
    ns = p.parse_args(argv)
    if ns.engines is None:
        env = os.environ.get("SAB_THOR_ENGINES") or "1"
        if not env.strip().isdigit():
            p.error(f"$SAB_THOR_ENGINES: expected a number of engines, got {env!r}")
        ns.engines = int(env)
    if ns.engines < 1:
        p.error(f"--engines: expected at least 1, got {ns.engines}")
    return ServerConfig(host=ns.host, port=ns.port, engines=ns.engines, backend=ns.backend,
                        token=ns.token or os.environ.get(wire.TOKEN_ENV) or None, ttl=ns.lease_ttl,
                        width=ns.width, height=ns.height,
                        scenes_dir=ns.scenes or os.environ.get("SAB_THOR_SCENES") or None,
                        platform=ns.platform, executable=ns.executable, threads=ns.threads)


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s sab-thor %(levelname)s %(message)s")
    config = parse_args(argv)
    try:
        server = ThorServer(config)
    except UsageError as exc:
        print(f"sab thor-server: error: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # an engine that cannot start: say which, exit non-zero
        print(f"sab thor-server: error: could not start the {config.backend} engines: {type(exc).__name__}: {exc}",
              file=sys.stderr)
        return 1
    log.info("serving %d %s engine(s) on %s (token %s, lease ttl %.0f s)", config.engines, config.backend,
             server.url, "required" if config.token else "not required", config.ttl)
    print(f"sab thor-server: listening on {server.url}", flush=True)
    # docker stop sends SIGTERM: leave through the same path as Ctrl-C, so the engines are stopped
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(0))
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.pool.stop()
    return 0

