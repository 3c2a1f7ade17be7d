"""Who answered: per role, the models each request asked for and the models the answers named.

Why: an OpenAI-compatible server may answer a model name it does not serve as its own model (llama.cpp
does), so the name a run sends is no proof of who judged. Every answer's ``model`` field is kept on its
call (``ModelCall.served_model``); this module adds them up over a run's records for the summary, and
names each role answered by another model than it asked for. A dated snapshot of the model asked for
(``gpt-4o`` answered as ``gpt-4o-2024-08-06``) is the same model.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

#: role -> model asked for -> model the answers named -> answers
Served = dict[str, dict[str, dict[str, int]]]


def _calls(record: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    """Every model call a record holds: the agent's, then each judge part's."""
    agent = record.get("agent") or {}
    yield from agent.get("calls") or []
    for part in (record.get("judge") or {}).values():
        if isinstance(part, Mapping):
            yield from part.get("calls") or []


def served_models(records: Iterable[Mapping[str, Any]]) -> Served:
    """The models the answers of ``records`` named, by role and model asked for (answers that named
    none are not counted)."""
    out: Served = {}
    for record in records:
        for call in _calls(record):
            served = call.get("served_model") if isinstance(call, Mapping) else None
            if not served:
                continue
            asked = out.setdefault(str(call.get("role") or "agent"), {}).setdefault(str(call.get("model")), {})
            asked[str(served)] = asked.get(str(served), 0) + 1
    return out


def same_model(asked: str, served: str) -> bool:
    """``served`` is ``asked`` or a dated snapshot of it (``gpt-4`` answered as ``gpt-4-0613``)."""
    return served == asked or served.startswith(f"{asked}-")


def other_models(served: Served) -> list[str]:
    """One line per role and model asked for whose answers named another model."""
    lines = []
    for role, by_asked in served.items():
        for asked, named in by_asked.items():
            others = {m: n for m, n in named.items() if not same_model(asked, m)}
            if others:
                shown = ", ".join(f"{m!r} ({n})" for m, n in sorted(others.items(), key=lambda kv: -kv[1]))
                lines.append(f"{role} requests for {asked!r} were answered as {shown} of {sum(named.values())}")
    return lines
