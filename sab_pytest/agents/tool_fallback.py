"""Servers that take ``tools`` and ignore them: the interactive agents notice and switch to text, once.

llama.cpp's server with its default chat format (and other OpenAI-compatible servers) accepts the
``tools`` of a request and never returns a tool call: every episode in the ``tools`` protocol would end
with no action. The sign is plain: a whole episode in the tools protocol in which the model answered
(twice, the second time after a reminder) and not one tool call came back, from a model that has never
made one in this process. From then on this process asks that model in the text protocol (``Action:``
lines) for the rest of the run, the episode that showed it is played again that way, and its record
says so (``episode.tool_protocol`` and ``episode.fallback``), which the controller prints once.

The state is per process (each xdist worker finds out for itself, at the cost of one episode) and per
model and server (:func:`model_key`); it never goes back to tools within a run.
"""

from __future__ import annotations

import threading
from typing import Any

TOOLS, TEXT = "tools", "text"

_lock = threading.Lock()
_called_tools: set[str] = set()  # models that returned a tool call in this process
_fallen_back: dict[str, str] = {}  # model -> why it is asked in the text protocol now


def model_key(chat_model: Any) -> str:
    """A model as its server knows it: its name and the server's address, when the client has one (a
    case's view of a client, ``models.CaseModel``, holds the client as ``model``)."""
    inner = getattr(chat_model, "model", chat_model)
    server = getattr(inner, "server", None) or getattr(chat_model, "server", None)
    return f"{chat_model.name} at {server}" if isinstance(server, str) and server else str(chat_model.name)


def saw_tool_call(model: str) -> None:
    """``model`` returned a tool call: it supports tools, a later episode without one is its own choice."""
    with _lock:
        _called_tools.add(model)


def protocol_for(model: str, asked: str) -> str:
    """The protocol to play ``model``'s next episode in: ``asked``, or text once it fell back."""
    with _lock:
        return TEXT if asked == TOOLS and model in _fallen_back else asked


def fallback_reason(model: str) -> str | None:
    with _lock:
        return _fallen_back.get(model)


def should_fall_back(model: str, protocol: str, *, no_action: bool, acted: bool) -> bool:
    """Whether an episode just played shows that ``model``'s server ignores tools (see the module)."""
    with _lock:
        return protocol == TOOLS and no_action and not acted and model not in _called_tools


def fall_back(model: str, name: str) -> str:
    """Ask ``model`` (a :func:`model_key`; ``name`` for people) in the text protocol from now on; the
    sentence that says so."""
    reason = (f"{name} answered a whole episode without one tool call (its server seems to ignore 'tools', as "
              "llama.cpp's default chat format does): its interactive agents use the text protocol "
              "(Action: lines) for the rest of the run; set --sab-tool-protocol text to start that way")
    with _lock:
        _fallen_back.setdefault(model, reason)
        return _fallen_back[model]


def forget() -> None:
    """Back to no knowledge (tests; a new run in the same process)."""
    with _lock:
        _called_tools.clear()
        _fallen_back.clear()
