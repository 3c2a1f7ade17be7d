"""How many tokens a request is, counted the way its model counts them, for ``--sab-estimate`` and
the estimate's error against the requests a run sent.

Why a model's own tokenizer: four characters a token is close for English prose under OpenAI's
tokenizers, but a plan, JSON tools and the paper's templates are not prose, and a budget in dollars
is only as good as its token count. So a model OpenAI's ``tiktoken`` names (``encoding_name_for_model``,
a local table) is counted with its encoding and the chat format's framing (each message's role and
separators, three tokens, and three that prime the answer, as OpenAI's cookbook counts them); a
self-hosted model whose server has a tokenize endpoint (llama.cpp's and vLLM's ``/tokenize``) by that
endpoint; any other by the character rule, and the estimate says which.

The encodings are pinned inputs like the dataset: tiktoken would download them on first use, so the
project hands it its own copy instead, checked by sha256 (``fetch``): from ``SAB_TIKTOKEN_CACHE`` (CI
points it at ``../shared/tiktoken``), else the project's cache, else a download into that cache.
Where none of them has the file (offline), or the model's encoding is not one of the pinned two, the
count falls back to the character rule with one line saying why, never an error: an estimate is
still worth having. ``tiktoken`` is imported only here, and only when a run is estimated or priced.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import threading
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from sab_pytest import fetch
from sab_pytest.errors import SabError, UsageError
from sab_pytest.models.stream import CHARS_PER_TOKEN, estimate_tokens

#: a picture's input tokens: OpenAI's price of a 512-pixel picture in detail (85 + 170 per tile, four tiles)
IMAGE_TOKENS = 765
#: a judge's answer in tokens: the one answer of a paper's judge the paper's code records (gpt-4's rating of a plan,
#: with its explanation, in the ``#### output`` comment of evaluator/detail_evaluate.py), 62 tokens in o200k_base
#: and in cl100k_base; ``test_tokens_prices`` recomputes it from the pinned file. The project's own corpus of judge
#: answers (tests/data/judge_answers.json, 14 tokens on average) is written to test verdict parsing, terse on
#: purpose, and would price the judges' answers at a quarter of what an explaining judge writes
JUDGE_OUTPUT_TOKENS = 62
#: the chat format's framing as OpenAI counts it: per message (its role and separators), and the answer's priming
PER_MESSAGE, PER_NAME, PER_REPLY = 3, 1, 3
#: the pinned encodings' override directory (laid out as tiktoken's cache: files named by the sha1 of their address)
ENV = "SAB_TIKTOKEN_CACHE"
URL = "https://openaipublic.blob.core.windows.net/encodings/{name}.tiktoken"
#: encoding -> the sha256 tiktoken itself checks its download against (tiktoken_ext.openai_public)
ENCODINGS = {"cl100k_base": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
             "o200k_base": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"}
HOW_TO_PROVIDE = (f"set {ENV} to a directory laid out as tiktoken's cache (the two encodings named by the sha1 "
                  "of their address), or run once with network access to cache them")


def pinned_encoding(name: str) -> fetch.PinnedFile:
    """The encoding ``name`` as a pinned file named as tiktoken's cache names it (the sha1 of its address)."""
    url = URL.format(name=name)
    return fetch.PinnedFile(hashlib.sha1(url.encode()).hexdigest(), url, ENCODINGS[name])


@dataclass
class TokenCounter:
    """Counts a request's input tokens: ``text(s)`` the tokens of a string; ``method`` says how, as the
    estimate prints it. ``note`` says why a model fell back to the character rule (the estimate prints the
    notes of all its models on one line)."""

    method: str
    text: Callable[[str], int]
    framing: bool = False  # the chat format's framing tokens are counted (a tokenizer's count; the rule has its own)
    note: str = ""
    _seen: dict[str, int] = field(default_factory=dict, repr=False)

    def messages(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None) -> int:
        """The tokens of a chat request: its messages' texts with their framing, its tools as JSON,
        ``IMAGE_TOKENS`` a picture."""
        if not self.framing:
            return char_count(messages, tools)
        total, pictures = PER_REPLY, 0
        if tools:
            total += self._cached(json.dumps(tools))
        for message in messages:
            total += PER_MESSAGE + self._cached(str(message.get("role") or ""))
            if message.get("name"):
                total += PER_NAME + self._cached(str(message["name"]))
            content = message.get("content")
            if isinstance(content, str):
                total += self._cached(content)
            elif isinstance(content, list):
                for part in content:
                    if isinstance(part, dict):
                        pictures += part.get("type") == "image_url"
                        total += self._cached(str(part.get("text") or ""))
            for call in message.get("tool_calls") or ():
                total += self._cached(json.dumps(call.get("function") or call))
        return total + pictures * IMAGE_TOKENS

    def _cached(self, text: str) -> int:
        """A text's tokens, remembered: the system prompts and templates of a run repeat in every call."""
        if not text:
            return 0
        found = self._seen.get(text)
        if found is None:
            found = self.text(text)
            if len(self._seen) < 50_000:
                self._seen[text] = found
        return found


def char_count(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None) -> int:
    """The character rule: characters / ``CHARS_PER_TOKEN`` (each message's framing four characters),
    and ``IMAGE_TOKENS`` a picture."""
    chars = len(json.dumps(tools)) if tools else 0
    pictures = 0
    for message in messages:
        content = message.get("content")
        if isinstance(content, str):
            chars += len(content)
        elif isinstance(content, list):
            parts = [part for part in content if isinstance(part, dict)]
            pictures += sum(1 for part in parts if part.get("type") == "image_url")
            chars += sum(len(str(part.get("text") or "")) for part in parts)
        chars += 4  # the role and the message's framing
    return math.ceil(chars / CHARS_PER_TOKEN) + pictures * IMAGE_TOKENS


def char_rule(note: str = "") -> TokenCounter:
    """The character rule as a ``TokenCounter``."""
    return TokenCounter(f"about {CHARS_PER_TOKEN:g} characters per token", estimate_tokens,
                   note=note)


_LOADING = threading.Lock()


def encoding_for(model: str) -> str | None:
    """The tiktoken encoding of an OpenAI model name (tiktoken's own table, no file read), None when
    tiktoken does not name one or is not installed."""
    try:
        import tiktoken
    except ImportError:
        return None
    try:
        return tiktoken.encoding_name_for_model(model)
    except KeyError:
        return None


@cache
def tiktoken_counter(encoding: str) -> TokenCounter:
    """A ``TokenCounter`` on the pinned ``encoding``; the character rule, with its one line, where the
    encoding is not pinned or its file cannot be had."""
    if encoding not in ENCODINGS:
        return char_rule(f"tiktoken encoding {encoding!r} is not one of the pinned {', '.join(ENCODINGS)}")
    try:
        directory = encodings_dir([encoding])
    except SabError as exc:
        return char_rule(f"tiktoken encoding {encoding} not available ({exc})")
    import tiktoken

    with _LOADING:  # tiktoken reads its cache directory from the environment: point it at the checked copy
        before = os.environ.get("TIKTOKEN_CACHE_DIR")
        os.environ["TIKTOKEN_CACHE_DIR"] = str(directory)
        try:
            coder = tiktoken.get_encoding(encoding)
        finally:
            if before is None:
                os.environ.pop("TIKTOKEN_CACHE_DIR", None)
            else:
                os.environ["TIKTOKEN_CACHE_DIR"] = before
    return TokenCounter(f"tiktoken {encoding}", lambda text: len(coder.encode(text, disallowed_special=())),
                   framing=True)


def encodings_dir(names: list[str]) -> Path:
    """The directory holding the pinned ``names``, each checked by sha256: ``SAB_TIKTOKEN_CACHE``, else
    the project's cache (downloaded into it when missing)."""
    files = [pinned_encoding(name) for name in names]
    override = os.environ.get(ENV)
    path = Path(override).expanduser() if override else None
    if path is not None and not path.is_dir():
        raise UsageError(f"{ENV}={override} is not a directory")
    paths = fetch.resolve(files, override=path, cache_dir=fetch.cache_root() / "tiktoken", what="tiktoken's encodings",
                          how_to_provide=HOW_TO_PROVIDE, verify_override=True)
    return paths[files[0].name].parent


def counter_for(model: str, base_url: str | None = None) -> TokenCounter:
    """How ``model`` (served at ``base_url``, None: its provider's API) counts tokens: tiktoken where it
    names the model's encoding, else the server's tokenize endpoint, else the character rule."""
    encoding = encoding_for(model)
    if encoding is not None:
        return tiktoken_counter(encoding)
    if base_url:
        found = endpoint_counter(base_url, model)
        if found is not None:
            return found
    return char_rule()


# -- a self-hosted server's own count: ``POST /tokenize`` --------------------------------------------
#
# A self-hosted server's own token count: ``POST /tokenize`` as llama.cpp's server and vLLM serve it.
#
# Why ask the server: a self-hosted model's tokenizer is the server's (a Llama, Qwen or Mistral
# vocabulary), which neither tiktoken nor four characters a token knows. Both servers serve the
# endpoint at their root, beside ``/v1``: vLLM reads ``{"model", "prompt"}`` and answers a ``count``;
# llama.cpp reads ``{"content"}`` and answers the ``tokens``. The first text asked tells which of the
# two the server speaks; a server with neither (OpenAI's API, Ollama) answers 404 and the estimate
# counts by the character rule. Only loopback or the user's own server is asked, never a hosted API
# (the caller asks only for a base URL the user gave).

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


def endpoint_counter(base_url: str, model: str) -> TokenCounter | None:
    """A ``tokens.TokenCounter`` asking the server at ``base_url`` (one request per distinct text), None
    when it has no tokenize endpoint in either wire format."""
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
            return found if found is not None else estimate_tokens(text)

        return TokenCounter(f"the server's /tokenize ({name}'s wire format)", count, framing=True)
    return None
