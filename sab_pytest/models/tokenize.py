"""A self-hosted server's own token count: ``POST /tokenize`` as llama.cpp's server and vLLM serve it.

Why ask the server: a self-hosted model's tokenizer is the server's (a Llama, Qwen or Mistral
vocabulary), which neither tiktoken nor four characters a token knows. Both servers serve the
endpoint at their root, beside ``/v1``: vLLM reads ``{"model", "prompt"}`` and answers a ``count``;
llama.cpp reads ``{"content"}`` and answers the ``tokens``. The first text asked tells which of the
two the server speaks; a server with neither (OpenAI's API, Ollama) answers 404 and the estimate
counts by the character rule. Only loopback or the user's own server is asked, never a hosted API
(the caller asks only for a base URL the user gave).
"""

from __future__ import annotations

import json
import math
import urllib.error
import urllib.request
from typing import Any

TIMEOUT_S = 10.0


def root_of(base_url: str) -> str:
    """The server's root from an OpenAI base URL (``http://host:8000/v1`` -> ``http://host:8000``)."""
    url = base_url.rstrip("/")
    return url[: -len("/v1")] if url.endswith("/v1") else url


def _post(url: str, body: dict[str, Any]) -> Any:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
        return json.loads(response.read())


def _count(answer: Any) -> int | None:
    """The token count of a tokenize answer: vLLM's ``count``, else the length of ``tokens``."""
    if isinstance(answer, dict):
        if isinstance(answer.get("count"), int):
            return int(answer["count"])
        if isinstance(answer.get("tokens"), list):
            return len(answer["tokens"])
    return None


def endpoint_counter(base_url: str, model: str) -> Any:
    """A ``tokens.TokenCounter`` asking the server at ``base_url`` (one request per distinct text), None
    when it has no tokenize endpoint in either wire format."""
    from sab_pytest.models.tokens import CHARS_PER_TOKEN, TokenCounter

    url = root_of(base_url) + "/tokenize"
    forms = (("vLLM", lambda text: {"model": model, "prompt": text, "add_special_tokens": False}),
             ("llama.cpp", lambda text: {"content": text, "add_special": False}))
    for name, form in forms:
        try:
            probe = _count(_post(url, form("hello")))
        except (OSError, ValueError, urllib.error.HTTPError):  # HTTPError is an OSError: 404, 400, refused
            continue
        if probe is None:
            continue

        def count(text: str, form: Any = form) -> int:
            try:
                found = _count(_post(url, form(text)))
            except (OSError, ValueError):
                found = None
            # a server that stops answering leaves the estimate standing: that text by the character rule
            return found if found is not None else math.ceil(len(text) / CHARS_PER_TOKEN)

        return TokenCounter(f"the server's /tokenize ({name}'s wire format)", count, framing=True)
    return None
