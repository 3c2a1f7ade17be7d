"""``POST /tokenize`` of the fake server, in the wire format of the two self-hosted servers that have
one, so the estimate's tokenize client is tested against what it will meet:

* llama.cpp's server: ``{"content": TEXT, "add_special": bool, "with_pieces": bool}`` answered with
  ``{"tokens": [ids]}`` (with pieces: ``[{"id": n, "piece": "..."}]``);
* vLLM's: ``{"model": M, "prompt": TEXT, "add_special_tokens": bool}`` (or ``"messages"``, rendered by the
  model's chat template) answered with ``{"count": n, "max_model_len": N, "tokens": [ids], "token_strs": null}``;
  a body without ``prompt`` or ``messages`` is a 400 in vLLM's error shape.

The fake's tokenizer splits a text into words and punctuation marks, one token each: a count any
test can work out by hand, unlike four characters a token.
"""

from __future__ import annotations

import json
import re
import zlib
from typing import Any

PATH = "/tokenize"
FORMATS = ("llama.cpp", "vllm")
MAX_MODEL_LEN = 32768
_PIECES = re.compile(r"\w+|[^\w\s]")


def pieces(text: str) -> list[str]:
    """The fake tokenizer's tokens of ``text``: its words and punctuation marks."""
    return _PIECES.findall(text)


def _ids(found: list[str]) -> list[int]:
    return [zlib.crc32(piece.encode()) % 50000 for piece in found]


def _error(status: int, message: str, shape: str) -> tuple[int, dict[str, str], bytes]:
    if shape == "vllm":
        body: dict[str, Any] = {"object": "error", "message": message, "type": "BadRequestError", "code": status}
    else:
        body = {"error": {"code": status, "message": message, "type": "invalid_request_error"}}
    return status, {"Content-Type": "application/json"}, json.dumps(body).encode()


def answer(body: Any, shape: str) -> tuple[int, dict[str, str], bytes]:
    """The answer of a ``shape`` server (``llama.cpp`` or ``vllm``) to a tokenize request's ``body``."""
    if not isinstance(body, dict):
        return _error(400, "the body must be a JSON object", shape)
    if shape == "llama.cpp":
        content = body.get("content")
        if not isinstance(content, str):
            return _error(400, "\"content\" must be provided", shape)
        found = pieces(content)
        tokens: list[Any] = _ids(found)
        if body.get("with_pieces"):
            tokens = [{"id": i, "piece": p} for i, p in zip(tokens, found, strict=True)]
        return 200, {"Content-Type": "application/json"}, json.dumps({"tokens": tokens}).encode()
    if isinstance(body.get("messages"), list):  # the chat template: each message's role and text, then the prompt
        text = "".join(f"<|{m.get('role')}|>{_text(m.get('content'))}" for m in body["messages"] if isinstance(m, dict))
        found = pieces(text + ("<|assistant|>" if body.get("add_generation_prompt", True) else ""))
    elif isinstance(body.get("prompt"), str):
        found = pieces(body["prompt"])
    else:
        return _error(400, "1 validation error: the request needs 'prompt' or 'messages'", shape)
    return 200, {"Content-Type": "application/json"}, json.dumps(
        {"count": len(found), "max_model_len": MAX_MODEL_LEN, "tokens": _ids(found), "token_strs": None}).encode()


def checked(shape: str | None) -> str | None:
    """The server's ``tokenize`` option: None (no endpoint, as OpenAI's API) or one of ``FORMATS``."""
    if shape is not None and shape not in FORMATS:
        raise ValueError(f"tokenize={shape!r}: one of {', '.join(FORMATS)}")
    return shape


def route(request: Any, shape: str | None) -> tuple[int, dict[str, str], bytes] | None:
    """The answer to ``POST /tokenize`` where the server has the endpoint (``shape``), else None."""
    if shape is None or request.method != "POST" or request.path != PATH:
        return None
    return answer(request.body, shape)


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "".join(str(part.get("text") or "") for part in content if isinstance(part, dict))
    return str(content or "")
