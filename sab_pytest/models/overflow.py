"""A request that does not fit the server's context window, read from the server's error text.

Why: a self-hosted server with a small context (llama.cpp ``--n_ctx 512``) refuses every request
whose prompt plus ``max_tokens`` exceeds it, with HTTP 400. Retrying the same request cannot help,
and ten such refusals in a row must not stop the run as if the endpoint were down. Two cases:
only the completion budget does not fit (ask again once with the room that is left), or the prompt
itself does not fit (one clear error for the case, ``ErrorKind.CONTEXT_OVERFLOW``). The servers
word it differently; each known wording is one pattern here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MIN_ROOM = 32  # fewest tokens left for an answer that are worth asking again for

_LIMIT = [
    re.compile(r"maximum context length is (\d+)", re.I),  # OpenAI, vLLM
    re.compile(r"context window of (\d+)", re.I),  # llama-cpp-python
    re.compile(r"available context size \((\d+) tokens?\)", re.I),  # llama.cpp server
    re.compile(r"context length of (?:only )?(\d+)", re.I),
]
_PROMPT = [
    re.compile(r"\((\d+) in the messages", re.I),  # OpenAI, older vLLM
    re.compile(r"(?:request|prompt) has (\d+) (?:input )?tokens", re.I),  # vLLM
    re.compile(r"messages resulted in (\d+) tokens", re.I),  # OpenAI
    re.compile(r"requested tokens \((\d+)\) exceed context window", re.I),  # llama-cpp-python: the prompt alone
    re.compile(r"request \((\d+) tokens?\) exceeds the available context", re.I),  # llama.cpp server
]
_COMPLETION = [
    re.compile(r"(\d+) in the completion", re.I),
    re.compile(r"'?max_tokens'? is too large: (\d+)", re.I),
]
_ANY = re.compile(r"context (?:length|window|size)|prompt too long|input length exceeds|too many tokens", re.I)


def _first(patterns: list[re.Pattern[str]], text: str) -> int | None:
    for pattern in patterns:
        found = pattern.search(text)
        if found:
            return int(found.group(1))
    return None


@dataclass(frozen=True)
class Overflow:
    """The server's context ``limit`` and the request's ``prompt`` and ``completion`` token counts,
    where the server said them (None: it did not)."""

    limit: int | None
    prompt: int | None
    completion: int | None

    def room(self) -> int | None:
        """Tokens left for the answer beside the prompt; None when the prompt itself does not fit
        (or the server did not say enough to tell)."""
        if self.limit is None or self.prompt is None or self.prompt >= self.limit:
            return None
        return self.limit - self.prompt

    def describe(self) -> str:
        """The sizes, as far as the server gave them."""
        prompt = f"the prompt is {self.prompt} tokens" if self.prompt is not None else "the prompt's size is unknown"
        limit = f"the server's context is {self.limit} tokens" if self.limit is not None else \
            "the server did not say its context size"
        return f"{prompt}, {limit}"


def parse_overflow(text: str) -> Overflow | None:
    """The ``Overflow`` an HTTP 400 error text describes, None when it is about something else."""
    limit, prompt = _first(_LIMIT, text), _first(_PROMPT, text)
    if limit is None and prompt is None and not _ANY.search(text):
        return None
    if limit is None and not _ANY.search(text):
        return None
    return Overflow(limit=limit, prompt=prompt, completion=_first(_COMPLETION, text))
