"""How the fake server answers like a self-hosted one: as a stream of server-sent events (``stream=True``:
text and tool-call deltas, usage in the last chunk when ``stream_options.include_usage`` asks), and
with one slot (``slots=1``: requests are answered in turn, each taking ``answer_s`` seconds).

Why: llama.cpp, vLLM and Ollama answer by streaming, and a small llama.cpp server has a single slot.
A request whose client gave up still takes its turn there (the server does not know), unless the
client closed the connection, which a streaming server notices: ``OneSlot`` and ``stream_chunks``
behave the same way, so tests meet what a real server does to a run that times out and retries.
"""

from __future__ import annotations

import contextlib
import json
import re
import select
import socket
import threading
from collections.abc import Callable, Iterator
from typing import Any


def client_gone(sock: socket.socket) -> bool:
    """Whether the client closed its end of ``sock`` (readable with nothing to read, or an error)."""
    try:
        readable, _, _ = select.select([sock], [], [], 0)
        if not readable:
            return False
        return sock.recv(1, socket.MSG_PEEK) == b""
    except (OSError, ValueError):
        return True


class OneSlot:
    """A server's answering slots (``size``, 1 for a small llama.cpp server), taken in arrival order.

    ``turns``: answers started; ``skipped``: queued requests whose client closed the connection before
    their turn (they never get one); ``closed``: streams the client closed while they were answered."""

    def __init__(self, size: int = 1, answer_s: float = 1.0) -> None:
        self.size = max(1, int(size))
        self.answer_s = float(answer_s)
        self.turns = 0
        self.skipped = 0
        self.closed = 0
        self._busy = 0
        self._queue: list[object] = []
        self._cond = threading.Condition()

    @contextlib.contextmanager
    def turn(self, gone: Callable[[], bool], stopping: threading.Event) -> Iterator[bool]:
        """Wait for this request's turn; yields True while it holds a slot, False when its client
        closed the connection (or the server stops) before the turn came."""
        ticket = object()
        with self._cond:
            self._queue.append(ticket)
            while not (self._busy < self.size and self._queue[0] is ticket):
                self._cond.wait(0.05)
                if stopping.is_set() or gone():
                    self._queue.remove(ticket)
                    self.skipped += 1
                    self._cond.notify_all()
                    break
            else:
                self._queue.pop(0)
                self._busy += 1
                self.turns += 1
                ticket = None
        if ticket is not None:
            yield False
            return
        try:
            yield True
        finally:
            with self._cond:
                self._busy -= 1
                self._cond.notify_all()


#: chunks one streamed text is cut into at the most: a server sends about a token a chunk, but a
#: scripted answer of a megabyte (a test of long answers) as 200,000 chunks, each with its pause,
#: would take minutes to send and prove nothing more than 2,000 larger ones do
MAX_PIECES = 2000
#: the same for a stream whose chunks nothing paces (no ``token_s``, no one-slot answer time spread
#: over them): the client then meets them back to back, and how finely the text is cut changes only
#: the work per chunk (the SDK builds an object for each: with the server's share, most of a
#: millisecond of the test process's CPU). A few pieces still make it a stream the client must join.
UNPACED_PIECES = 3


def _pieces(text: str, most: int) -> list[str]:
    """``text`` cut as a tokenizer would roughly cut it (a word with its trailing space), words
    grouped evenly when there are more than ``most``."""
    words = re.findall(r"\S+\s*|\s+", text)
    if len(words) <= most:
        return words
    size = -(-len(words) // most)
    return ["".join(words[i:i + size]) for i in range(0, len(words), size)]


def stream_chunks(completion: dict[str, Any], include_usage: bool, *, paced: bool = True) -> list[dict[str, Any]]:
    """A chat completion (the non-streamed body) as the ``chat.completion.chunk`` events that stream
    it: the role, the text a piece at a time (``MAX_PIECES`` at the most; ``UNPACED_PIECES`` when
    nothing will pace the chunks), each tool call as a header delta and two argument deltas, the
    finish reason, and (``include_usage``) a last chunk with no choices and the usage."""
    base = {key: completion[key] for key in ("id", "created", "model")}
    base["object"] = "chat.completion.chunk"
    choice = completion["choices"][0]
    message = choice["message"]

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    pieces = _pieces(message.get("content") or "", MAX_PIECES if paced else UNPACED_PIECES)
    chunks = [chunk({"role": "assistant", "content": ""})] + [chunk({"content": piece}) for piece in pieces]
    for index, call in enumerate(message.get("tool_calls") or []):
        arguments = call["function"]["arguments"]
        half = len(arguments) // 2
        chunks.append(chunk({"tool_calls": [{"index": index, "id": call["id"], "type": "function",
                                             "function": {"name": call["function"]["name"], "arguments": ""}}]}))
        for part in (arguments[:half], arguments[half:]):
            chunks.append(chunk({"tool_calls": [{"index": index, "function": {"arguments": part}}]}))
    chunks.append(chunk({}, choice["finish_reason"]))
    if include_usage:
        chunks.append({**base, "choices": [], "usage": completion["usage"]})
    return chunks


def wants_stream(body: Any) -> tuple[bool, bool]:
    """Whether a request body asks for a stream, and for usage in its last chunk."""
    if not isinstance(body, dict) or body.get("stream") is not True:
        return False, False
    options = body.get("stream_options")
    return True, isinstance(options, dict) and options.get("include_usage") is True


def write_stream(wfile: Any, chunks: list[Any], gap: Callable[[], bool], gone: Callable[[], bool]) -> bool:
    """Write ``chunks`` as server-sent events in HTTP chunked encoding, calling ``gap`` before each
    (it sleeps; False: the server stops); returns False when the client closed the stream first,
    which a server notices and stops generating for. Chunks given as bytes are events encoded in
    another provider's format (``fake_anthropic``'s named events): sent as they are, with no
    OpenAI ``[DONE]`` after them."""
    events = [c if isinstance(c, bytes) else f"data: {json.dumps(c)}\n\n".encode() for c in chunks]
    if not any(isinstance(c, bytes) for c in chunks):
        events.append(b"data: [DONE]\n\n")
    try:
        for index, event in enumerate(events):
            if index and (not gap() or gone()):
                return False
            wfile.write(f"{len(event):x}\r\n".encode() + event + b"\r\n")
            wfile.flush()
        wfile.write(b"0\r\n\r\n")
        wfile.flush()
    except OSError:
        return False
    return True
