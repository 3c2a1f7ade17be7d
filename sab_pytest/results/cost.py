"""What a run cost, per role and model, from the usage the API returned: each call's billed tokens
(answers from the response cache cost nothing again and are counted apart) at its model's price
(``models.pricing``: ``--sab-price MODEL=IN,OUT`` or the list price on the run's date).

A record keeps every call it made (the agent's, each judge's and panel member's, the guard's), with
the name it sent; ``models.pricing.sent_names`` maps that name back to the model the user named, so
``anthropic/claude-...`` is priced as Anthropic's. A model no price covers is listed as not priced,
and left out of the total.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from sab_pytest.models.wire import as_int


def walk_calls(value: Any) -> Iterator[Mapping[str, Any]]:
    """Every model call a record holds (the agent's, each judge's, the guard's), wherever it sits."""
    if isinstance(value, Mapping):
        if "role" in value and "cache_hit" in value and "prompt_tokens" in value:
            yield value
            return
        for item in value.values():
            yield from walk_calls(item)
    elif isinstance(value, list):
        for item in value:
            yield from walk_calls(item)


def by_model(records: Iterable[Mapping[str, Any]], settings: Any, book: Any = None) -> dict[str, Any]:
    """The run's cost per role and model: ``rows`` (role, model, calls, cache hits, billed tokens in and
    out, USD, price source), ``cost_usd`` (the priced rows' sum; None when none is priced), ``unpriced``
    and ``prices`` (where the prices come from)."""
    from sab_pytest.models.pricing import price_book, sent_names

    book = book if book is not None else price_book(settings.prices)
    names = sent_names(settings)
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    for record in records:
        for call in walk_calls(record):
            role, model = str(call.get("role") or "agent"), str(call.get("model") or "")
            row = rows.setdefault((role, model), {"role": role, "model": model, "calls": 0, "cache_hits": 0,
                                                  "prompt_tokens": 0, "completion_tokens": 0})
            row["calls"] += 1
            if call.get("cache_hit"):
                row["cache_hits"] += 1
                continue
            row["prompt_tokens"] += as_int(call.get("prompt_tokens"))
            row["completion_tokens"] += as_int(call.get("completion_tokens"))
    for (role, model), row in rows.items():
        spec, url = names.get((role, model), (model, settings.base_url if role == "agent" else settings.judges_url))
        price = book.price(spec, url)
        row["cost_usd"] = None if price is None else round(price.usd(row["prompt_tokens"], row["completion_tokens"]), 6)
        row["price"] = None if price is None else price.source
    listed = sorted(rows.values(), key=lambda r: (r["role"], r["model"]))
    priced = [r["cost_usd"] for r in listed if r["cost_usd"] is not None]
    return {"rows": listed, "cost_usd": round(sum(priced), 6) if priced else None,
            "unpriced": sorted({r["model"] for r in listed if r["cost_usd"] is None and r["calls"] > r["cache_hits"]}),
            "prices": book.table_line()}


def call_usd(call: Mapping[str, Any], settings: Any, book: Any) -> float:
    """One billed call's cost at its model's price (0 for a cache hit or a model no price covers)."""
    if call.get("cache_hit"):
        return 0.0
    from sab_pytest.models.pricing import sent_names

    role, model = str(call.get("role") or "agent"), str(call.get("model") or "")
    spec, url = sent_names(settings).get((role, model), (model, settings.base_url if role == "agent"
                                                         else settings.judges_url))
    price = book.price(spec, url)
    return 0.0 if price is None else price.usd(as_int(call.get("prompt_tokens")), as_int(call.get("completion_tokens")))
