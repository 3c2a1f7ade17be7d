"""A fake OpenAI-compatible HTTP server for tests, benches and offline demos.

Why a real server and not a mock transport: the openai SDK changed its HTTP library between major
versions (httpx in 1.x/2.x, httpx2 in 3.x), so transport-level mocks tie the tests to one SDK. A
loopback server exercises exactly what production does (sockets, status codes, headers, timeouts,
dropped connections) with any SDK version, and needs nothing beyond the standard library.

The server binds ``127.0.0.1``, serves ``POST /v1/chat/completions`` for any model (``served_as`` names one),
``GET /v1/models`` (``models``; 404 without), ``POST /tokenize`` (``tokenize``: llama.cpp's or vLLM's form,
``fake_tokenize``) and Azure's shape (``fake_azure``) from a thread, records every request, answers from a script:

* a FIFO queue of replies (``enqueue``), consumed first;
* ordered rules (``add_rule``) matching a substring of the last user message or a predicate,
  optionally limited to ``times`` uses;
* a ``responder`` function ``request -> Reply | str | None``;
* else the default reply (a deterministic answer derived from the last user message).

A ``Reply`` can be a normal answer, a tool call (``Reply.tool("execute", action="find Apple")``,
sent as OpenAI ``tool_calls`` with ``finish_reason: "tool_calls"``) or a fault: an HTTP error with ``Retry-After`` /
``retry-after-ms``, a slow answer, a dropped connection, an invalid JSON body, empty content or
``finish_reason: "length"``, with chosen usage numbers.

Streaming (``stream=True``) and one-slot answering (``slots=1``): see ``fake_stream``; the Batch API (files,
batches; ``batch=False``: 404, as a server without one): see ``fake_batch``. Before the script (``fake_limits``):
``rpm=`` (with ``burst=``) limits chat requests per minute (HTTP 429 with ``Retry-After``, ``retry-after-ms``,
``x-ratelimit-*``); ``hang_after=N`` answers N chat requests, then never again (the connection stays open).

Run ``sab fake-openai --port 8099 --script demo.json`` for a manual demo;
the script is JSON with the keys ``latency``, ``api_key``, ``models``, ``served_as``, ``queue``, ``rules``
(``{"contains": ..., "matches": REGEX, "times": ..., "reply": {...}}``), ``default``, ``batch`` and ``stochastic``
(``{"refuse": 0.55, "seed": 1}``: a model that refuses with that probability per call, seeded, see
``StochasticRefusal``); reply objects use the field names of ``Reply``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import socket
import threading
import time
import urllib.parse
from collections import deque
from collections.abc import Callable
from dataclasses import fields
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from sab_pytest.testing import fake_anthropic, fake_azure, fake_tokenize
from sab_pytest.testing.fake_anthropic import is_chat
from sab_pytest.testing.fake_azure import is_models
from sab_pytest.testing.fake_batch import FakeBatchAPI
from sab_pytest.testing.fake_batch import error_answer as _json_error
from sab_pytest.testing.fake_limits import HANG_S, HangAfter, RateLimit
from sab_pytest.testing.fake_replies import (
    RecordedRequest,
    Reply,
    Rule,
    StochasticRefusal,
    default_answer,
)
from sab_pytest.testing.fake_stream import OneSlot, client_gone, wants_stream, write_stream


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    request_queue_size = 256  # benches open dozens of connections at once; the default 5 drops SYNs
    allow_reuse_address = True
    owner: FakeOpenAIServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Clients that hang up (timeouts, dropped keep-alive connections) are normal here."""
        if self.owner.verbose:
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, like real API servers
    wbufsize = -1  # buffered: headers and body leave in one segment (see setup)
    server: _Server

    def setup(self) -> None:
        super().setup()
        # Without this, Nagle's algorithm on our side and delayed ACKs on the client's add ~40 ms to
        # every keep-alive answer, which would swamp the latencies the benches measure.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:
        if self.server.owner.verbose:
            print(f"[fake-openai] {self.address_string()} {format % args}", flush=True)

    def do_GET(self) -> None:
        self._handle()

    do_POST = do_GET

    def _handle(self) -> None:
        arrived = time.monotonic()
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = None
        path, _, query = self.path.partition("?")
        headers = {k.lower(): v for k, v in self.headers.items()}
        request = RecordedRequest(method=self.command, path=path, headers=headers, body=body, raw_body=raw,
                                  received_at=time.monotonic(), query=dict(urllib.parse.parse_qsl(query)))
        owner = self.server.owner
        self._counted = is_chat(request.path)
        if self._counted:
            owner._count_in_flight(+1)
        try:
            self._send(owner._respond(request), arrived)
        finally:
            self._answered()

    def _answered(self) -> None:
        """The request leaves the in-flight count before its answer is written, so a client that
        sends its next request as soon as it reads the answer is never counted twice."""
        if getattr(self, "_counted", False):
            self._counted = False
            self.server.owner._count_in_flight(-1)

    def _send(self, reply: Reply | tuple[int, dict[str, str], bytes], arrived: float) -> None:
        """Answer now, or in turn when the server has ``slots`` (``fake_stream.OneSlot``): a queued
        request whose client closed the connection never gets its turn, one whose client merely
        stopped waiting does (the server cannot tell)."""
        slots = self.server.owner.one_slot
        if slots is None or not isinstance(reply, Reply) or reply.status != 200:
            self._send_now(reply, arrived)
            return
        with slots.turn(lambda: client_gone(self.connection), self.server.owner._stopping) as mine:
            if not mine:
                self.close_connection = True
                return
            self._send_now(reply, time.monotonic(), slots.answer_s if reply.delay is None else reply.delay, spread=True)

    def _send_now(self, reply: Reply | tuple[int, dict[str, str], bytes], arrived: float,
                  delay: float | None = None, spread: bool = False) -> None:
        """Answer ``delay`` seconds after the request ``arrived``: the time this server spent
        reading and scripting it is part of the latency, as it is for a real API (under load, a
        busy test process would otherwise make every answer late by its own work). Streamed, the
        first chunk comes after ``delay`` (``spread``: the chunks share it, as a generating server's)."""
        owner = self.server.owner
        if isinstance(reply, tuple):
            status, headers, payload, delay = *reply, 0.0
        else:
            if delay is None:
                delay = owner.latency if reply.delay is None else reply.delay
            status, headers, payload = reply.status, reply.headers, b""
            streamed, usage = wants_stream(reply.request.body if reply.request else None)
            if streamed and owner.streaming is True and status == 200 and reply.body is None and not reply.drop:
                self._stream(reply, delay - (time.monotonic() - arrived), usage, spread)
                return
        delay -= time.monotonic() - arrived
        if delay > 0 and owner._stopping.wait(delay):
            self.close_connection = True
            return
        self._answered()
        if isinstance(reply, Reply):
            if reply.drop:
                self.close_connection = True
                # shut the socket down now: the client sees end-of-stream with no response at all
                with contextlib.suppress(OSError):
                    self.connection.shutdown(socket.SHUT_RDWR)
                return
            payload = owner._payload(reply)
        try:
            self.send_response(status)
            if not any(name.lower() == "content-type" for name in headers):  # a reply may name its own
                self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(payload)
            self.wfile.flush()
        except OSError:  # the client gave up (timeout) before we answered
            self.close_connection = True

    def _stream(self, reply: Reply, seconds: float, usage: bool, spread: bool) -> None:
        """Stream ``reply`` as server-sent events, the first after ``seconds`` (``spread``: the
        chunks share them), then ``token_s`` apart; stop as soon as the client closes the stream."""
        owner = self.server.owner
        spread = spread and owner.token_s is None  # an explicit token_s paces the chunks instead
        chunks = fake_anthropic.chunks(reply, usage, paced=spread or bool(owner.token_s))  # OpenAI's or Anthropic's
        gap = owner.token_s or 0.0
        if spread:
            seconds = gap = max(0.0, seconds) / len(chunks)
        if owner._stopping.wait(max(0.0, seconds)):
            self.close_connection = True
            return
        self._answered()
        try:
            self.send_response(reply.status)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            for name, value in reply.headers.items():
                self.send_header(name, value)
            self.end_headers()
        except OSError:
            self.close_connection = True
            return
        if not write_stream(self.wfile, chunks, lambda: not owner._stopping.wait(gap),
                            lambda: client_gone(self.connection)):
            self.close_connection = True
            with owner._lock:
                owner.streams_closed += 1


class FakeOpenAIServer:
    """The fake server; use as a context manager (``with FakeOpenAIServer() as srv: srv.url``)."""

    def __init__(self, *, latency: float = 0.0, api_key: str | None = None,
                 models: tuple[str, ...] | list[str] | None = None, port: int = 0,
                 responder: Callable[[RecordedRequest], Reply | str | None] | None = None,
                 default: Reply | None = None, verbose: bool = False, rpm: float | None = None,
                 burst: int | None = None, hang_after: int | None = None, streaming: bool | str = True,
                 token_s: float | None = None, slots: int | None = None, answer_s: float = 1.0,
                 served_as: str | None = None, batch: bool = True, tokenize: str | None = None) -> None:
        """Parameters: a fake server's knobs, each keyword-only with a default that serves like a
        plain OpenAI-compatible server; a test turns the one or two it is about."""
        self.latency = latency
        self.api_key = api_key  # when set, requests must carry "Bearer <api_key>" (Azure's paths: api-key)
        self.models, self.served_as = (list(models) if models is not None else None), served_as
        self.responder = responder
        self.default = default or Reply()
        self.verbose = verbose
        self.rate_limit = RateLimit(rpm, burst) if rpm else None  # 429s beyond ``rpm`` chat requests a minute
        self.hang = HangAfter(hang_after) if hang_after is not None else None  # no answer after N chat requests
        self.streaming = streaming  # for stream=True: True streams, False answers one JSON body, "error": HTTP 400
        self.token_s = token_s  # seconds between streamed chunks (None: 0, or one-slot's answer_s spread)
        self.one_slot = OneSlot(slots, answer_s) if slots else None  # answers in turn, ``answer_s`` each
        self.streams_closed = 0  # streams the client closed before their end
        self.requests: list[RecordedRequest] = []
        self.errors: list[str] = []  # exceptions raised by scripted responders
        self.in_flight = 0  # chat requests received and not yet answered
        self.max_in_flight = 0  # the most chat requests in flight at once (reset by ``reset``)
        self._queue: deque[Reply] = deque()
        self._rules: list[Rule] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._port = port
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self.batch = FakeBatchAPI(self._pick, self._payload) if batch else None  # files and batches
        self.tokenize = fake_tokenize.checked(tokenize)  # POST /tokenize in llama.cpp's or vLLM's form (None: 404)

    # -- lifecycle -------------------------------------------------------------------------------
    def start(self) -> FakeOpenAIServer:
        server = _Server(("127.0.0.1", self._port), _Handler)
        server.owner = self
        self._server = server
        self._stopping.clear()
        self._thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="fake-openai", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving; sleeping (slow) replies are woken and dropped so that this never hangs."""
        self._stopping.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("the fake server is not running")
        return self._server.server_address[1]

    @property
    def url(self) -> str:
        """Base URL for the openai SDK (``.../v1``); without ``/v1``, Azure's endpoint (``fake_azure``)."""
        return f"http://127.0.0.1:{self.port}/v1"

    # -- scripting -------------------------------------------------------------------------------
    def enqueue(self, *replies: Reply | str) -> None:
        """Replies for the next chat requests, in order, before rules and the responder."""
        with self._lock:
            self._queue.extend(r if isinstance(r, Reply) else Reply(content=r) for r in replies)

    def add_rule(self, reply: Reply | str | Callable[[RecordedRequest], Reply | str], *,
                 contains: str | None = None, match: Callable[[RecordedRequest], bool] | None = None,
                 times: int | None = None) -> Rule:
        rule = Rule(reply=Reply(content=reply) if isinstance(reply, str) else reply,
                    contains=contains, match=match, times=times)
        with self._lock:
            self._rules.append(rule)
        return rule

    def reset(self) -> None:
        """Forget recorded requests, queue and rules (the server keeps running)."""
        with self._lock:
            self.requests.clear()
            self.errors.clear()
            self.max_in_flight = self.in_flight
            self._queue.clear()
            self._rules.clear()

    @property
    def chat_requests(self) -> list[RecordedRequest]:
        with self._lock:
            return [r for r in self.requests if is_chat(r.path)]

    # -- answering ------------------------------------------------------------------------------
    def _count_in_flight(self, delta: int) -> None:
        with self._lock:
            self.in_flight += delta
            self.max_in_flight = max(self.max_in_flight, self.in_flight)

    def _respond(self, request: RecordedRequest) -> Reply | tuple[int, dict[str, str], bytes]:
        with self._lock:
            self.requests.append(request)
        if self.verbose:
            print(f"[fake-openai] {request.summary()}", flush=True)
        if (denied := fake_azure.refusal(request, self.api_key)) is not None:  # Azure's shape and key, or Bearer
            return denied
        routed = fake_tokenize.route(request, self.tokenize) or (self.batch.route(request) if self.batch else None)
        if routed is not None:
            return routed
        if request.method == "GET" and is_models(request.path) and self.models is not None:
            data = [{"id": m, "object": "model", "created": 0, "owned_by": "fake"} for m in self.models]
            return 200, {}, json.dumps({"object": "list", "data": data}).encode()
        if request.method != "POST" or not is_chat(request.path):
            return _json_error(404, f"no route for {request.method} {request.path}", "not_found")
        if not isinstance(request.body, dict) or not isinstance(request.body.get("messages"), list):
            return _json_error(400, "body must be JSON with a 'messages' list", "invalid_request")
        if self.streaming == "error" and wants_stream(request.body)[0]:
            return _json_error(400, "streaming is not supported by this server (fake)", "invalid_request")
        if self.hang is not None and self.hang.hangs():
            return Reply(delay=HANG_S)
        if self.rate_limit is not None:
            refused = self.rate_limit.take()
            if refused is not None:
                return refused
        try:
            reply = self._pick(request)
        except Exception as exc:  # a broken script must show up in the test, not hang it
            self.errors.append(f"{type(exc).__name__}: {exc}")
            return _json_error(500, f"fake server script failed: {exc}", "script_error")
        if self.rate_limit is not None:
            reply.headers = {**self.rate_limit.headers(), **reply.headers}
        return reply

    def _pick(self, request: RecordedRequest) -> Reply:
        with self._lock:
            if self._queue:
                return self._with_request(self._queue.popleft(), request)
            for rule in self._rules:
                if rule.applies(request):
                    rule.used += 1
                    chosen = rule.reply
                    break
            else:
                chosen = None
        if chosen is not None:
            answer = chosen if isinstance(chosen, Reply) else chosen(request)
            return self._with_request(answer if isinstance(answer, Reply) else Reply(content=answer), request)
        if self.responder is not None:
            responded = self.responder(request)
            if responded is not None:
                return self._with_request(responded if isinstance(responded, Reply) else Reply(content=responded),
                                          request)
        return self._with_request(self.default, request)

    def _with_request(self, reply: Reply, request: RecordedRequest) -> Reply:
        """Bind the request to the reply so that callable/default content can be computed."""
        bound = Reply(**{f.name: getattr(reply, f.name) for f in fields(Reply)})
        content = bound.content
        if callable(content):
            content = content(request)
        bound.content = default_answer(request) if content is None else content
        bound.request, bound.served_as = request, self.served_as
        return bound

    def _payload(self, reply: Reply) -> bytes:
        if isinstance(reply.body, (bytes, str)):
            return reply.body if isinstance(reply.body, bytes) else reply.body.encode()
        if reply.body is not None:
            return json.dumps(reply.body).encode()
        return json.dumps(fake_anthropic.answer_of(reply)).encode()


def load_script(server: FakeOpenAIServer, script: dict[str, Any]) -> None:
    """Apply a JSON script (see the module docstring) to ``server``."""
    if "latency" in script:
        server.latency = float(script["latency"])
    if "api_key" in script:
        server.api_key = script["api_key"]
    server.models = list(script["models"]) if "models" in script else server.models
    server.served_as = str(script["served_as"]) if "served_as" in script else server.served_as
    if "default" in script:
        server.default = Reply.from_json(script["default"])
    if "stochastic" in script:  # {"refuse": P, "seed": S}: refuse with probability P per call, else a plan
        spec = script["stochastic"]
        server.responder = StochasticRefusal(float(spec["refuse"]), seed=int(spec.get("seed", 0)))
    if "batch" in script and server.batch is not None:  # the Batch API's knobs (``FakeBatchAPI.configure``)
        server.batch.configure(script["batch"])
    server.enqueue(*(Reply.from_json(r) for r in script.get("queue", [])))
    for rule in script.get("rules", []):
        pattern = re.compile(rule["matches"]) if rule.get("matches") else None
        match = (lambda request, p=pattern: bool(p.search(request.last_user_message))) if pattern else None
        server.add_rule(Reply.from_json(rule.get("reply", {})), contains=rule.get("contains"), match=match,
                        times=rule.get("times"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="sab fake-openai",
                                     description="Serve a fake OpenAI-compatible API on 127.0.0.1.")
    parser.add_argument("--port", type=int, default=0, help="port (default: a free one)")
    parser.add_argument("--script", type=Path, help="JSON script: latency, api_key, models, queue, rules")
    parser.add_argument("--latency", type=float, help="seconds before each answer (overrides the script)")
    parser.add_argument("--quiet", action="store_true", help="do not print requests")
    parser.add_argument("--rpm", type=float, help="chat requests per minute before HTTP 429 (default: no limit)")
    parser.add_argument("--burst", type=int, help="with --rpm: requests allowed at once (default: 1 s worth)")
    parser.add_argument("--hang-after", type=int, metavar="N", help="answer N chat requests, then never again")
    parser.add_argument("--slots", type=int, metavar="N", help="answer N requests at a time, in turn (llama.cpp)")
    parser.add_argument("--answer-s", type=float, default=1.0, help="with --slots: seconds per answer (default 1)")
    parser.add_argument("--token-s", type=float, help="seconds between streamed words (unset, no --slots: 3 pieces)")
    parser.add_argument("--no-stream", action="store_true", help="answer stream=True requests with one JSON body")
    args = parser.parse_args(argv)
    server = FakeOpenAIServer(port=args.port, verbose=not args.quiet, rpm=args.rpm, burst=args.burst,
                              hang_after=args.hang_after, slots=args.slots, answer_s=args.answer_s,
                              token_s=args.token_s, streaming=not args.no_stream)
    if args.script:
        load_script(server, json.loads(args.script.read_text()))
    if args.latency is not None:
        server.latency = args.latency
    with server:
        print(f"fake OpenAI server on {server.url} (Ctrl-C to stop)", flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass
    return 0

