"""Model clients.

``ChatModel`` is the one interface agents and LLM judges talk to: a list of OpenAI-format chat
messages in, one ``ModelCall`` out. The OpenAI-compatible client (retries, cache, usage) lives
here too.
"""

from __future__ import annotations

from typing import Any, Protocol

from .outcome import ModelCall


class ChatModel(Protocol):
    """A chat model: messages in, one answer out (recorded as a ``ModelCall``).

    Implementations raise ``InfraError("model_api", ...)`` when no answer can be had after their
    retries; they never return an empty answer silently.
    """

    name: str

    def complete(self, messages: list[dict[str, Any]], *, role: str = "agent",
                 max_tokens: int | None = None) -> ModelCall: ...
