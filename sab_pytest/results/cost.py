"""What a run cost, per role and model, from the usage the API returned: each call's billed tokens
(answers from the response cache cost nothing again and are counted apart) at its model's price
(``models.pricing``: ``--sab-price MODEL=IN,OUT`` or the list price on the run's date); the calls a
batch answered (``--sab-batch``) are counted apart too, at the batch price.

A record keeps every call it made (the agent's, each judge's and panel member's, the guard's), with
the name it sent; ``models.pricing.sent_names`` maps that name back to the model the user named, so
``anthropic/claude-...`` is priced as Anthropic's. A model no price covers is listed as not priced,
and left out of the total. The requests a call kept are counted again the estimate's way (tiktoken
or the character rule), beside the tokens the API billed: the estimate's error, per role and model.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from sab_pytest.models.endpoints import RoleEndpoint, role_endpoint
from sab_pytest.models.pricing import price_book, sent_names, unpriced_hint
from sab_pytest.models.providers import REGISTRY
from sab_pytest.models.tokens import counter_for
from sab_pytest.models.wire import as_int

#: what ``by_model`` reads of a call, the fields a case cut short by the run's stop keeps of each of its
#: calls in the run's state (``run.breaker.RunState.unrecorded``): no record holds them, and they were billed
PRICED_FIELDS = ("role", "model", "cache_hit", "prompt_tokens", "completion_tokens", "cached_tokens", "batched")

#: the key of those calls in the run's unrecorded usage
UNRECORDED_CALLS = "model_calls"


def priced_fields(calls: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """``calls`` (``ModelCall.to_dict`` forms) as ``by_model`` prices them, without their messages."""
    return [{key: call.get(key) for key in PRICED_FIELDS} for call in calls]


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
    out, of them those read from the provider's prompt cache and those answered by a batch, USD, price
    source), ``cost_usd`` (the priced rows' sum; None when none is priced), ``unpriced`` and ``prices``
    (where the prices come from).

    A row's batched calls (``--sab-batch``: ``batched_calls``, ``batched_prompt_tokens``,
    ``batched_completion_tokens``, their cost ``batched_cost_usd``) are part of its calls, tokens and
    ``cost_usd``, priced at the batch price of the model's endpoint (``batch_price``): a request its
    batch left unanswered and that was asked live is a live call, at the full price."""
    book = book if book is not None else price_book(settings.prices)
    names = sent_names(settings)
    tally = _Tally()
    for record in records:
        for call in walk_calls(record):
            tally.add(call)
    for key, tokens in tally.counted.items():  # the estimate's way of counting against the usage the API returned
        row, billed = tally.rows[key], tally.billed_counted[key]
        row["counted_prompt_tokens"], row["tokenizer"] = tokens, _counter(key[1]).method
        row["count_error"] = round((tokens - billed) / billed, 4) if billed else None
    for (role, model), row in tally.rows.items():
        _price_row(row, _endpoint_of(role, model, settings, names), book, tally.batched_cached.get((role, model), 0))
    listed = sorted(tally.rows.values(), key=lambda r: (r["role"], r["model"]))
    priced = [r["cost_usd"] for r in listed if r["cost_usd"] is not None]
    return {"rows": listed, "cost_usd": round(sum(priced), 6) if priced else None,
            "unpriced": sorted({r["model"] for r in listed if r["cost_usd"] is None and r["calls"] > r["cache_hits"]}),
            "prices": book.table_line()}


@dataclass
class _Tally:
    """The calls of a run added up per (role, model), before any price: ``rows`` (``by_model``'s rows),
    the tokenizer's count of the requests a call kept and the billed prompt tokens of those calls, and
    the batched calls' prompt-cache reads (priced, not shown)."""

    rows: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    counted: dict[tuple[str, str], int] = field(default_factory=dict)
    billed_counted: dict[tuple[str, str], int] = field(default_factory=dict)
    batched_cached: dict[tuple[str, str], int] = field(default_factory=dict)

    def add(self, call: Mapping[str, Any]) -> None:
        role, model = str(call.get("role") or "agent"), str(call.get("model") or "")
        key = (role, model)
        row = self.rows.setdefault(key, {"role": role, "model": model, "calls": 0, "cache_hits": 0,
                                         "prompt_tokens": 0, "cached_prompt_tokens": 0,
                                         "completion_tokens": 0, "batched_calls": 0,
                                         "batched_prompt_tokens": 0, "batched_completion_tokens": 0})
        row["calls"] += 1
        if call.get("cache_hit"):
            row["cache_hits"] += 1
            return
        row["prompt_tokens"] += as_int(call.get("prompt_tokens"))
        row["completion_tokens"] += as_int(call.get("completion_tokens"))
        row["cached_prompt_tokens"] += as_int(call.get("cached_tokens"))
        if call.get("batched"):
            row["batched_calls"] += 1
            row["batched_prompt_tokens"] += as_int(call.get("prompt_tokens"))
            row["batched_completion_tokens"] += as_int(call.get("completion_tokens"))
            self.batched_cached[key] = self.batched_cached.get(key, 0) + as_int(call.get("cached_tokens"))
        messages = call.get("messages")
        if isinstance(messages, list):  # (a call of a case cut short kept no messages)
            self.counted[key] = self.counted.get(key, 0) + _count(model, messages, call.get("tools"))
            self.billed_counted[key] = self.billed_counted.get(key, 0) + as_int(call.get("prompt_tokens"))


def _price_row(row: dict[str, Any], endpoint: RoleEndpoint | None, book: Any, cached: int) -> None:
    """Prices one row of ``by_model`` in place: its price's source, its cost, and for batched calls
    the batch price of the model's endpoint and (priced) what it saved; ``cached`` is the batched
    calls' prompt-cache reads."""
    price = book.price_at(endpoint) if endpoint is not None else None
    row["price"] = None if price is None else price.source
    factor = 1.0
    if row["batched_calls"]:
        factor = row["batch_price"] = _batch_factor(endpoint)
        row["batch_saved_usd"] = None
    if price is None:
        row["cost_usd"] = row["batched_cost_usd"] = None
        return
    batched = price.usd(row["batched_prompt_tokens"], row["batched_completion_tokens"], cached)
    live = price.usd(row["prompt_tokens"] - row["batched_prompt_tokens"],
                     row["completion_tokens"] - row["batched_completion_tokens"],
                     row["cached_prompt_tokens"] - cached)
    row["batched_cost_usd"] = round(batched * factor, 6)
    row["cost_usd"] = round(live + batched * factor, 6)
    if row["batched_calls"]:
        row["batch_saved_usd"] = round(batched * (1 - factor), 6)


def _counter(model: str) -> Any:
    """The tokenizer the estimate counts ``model``'s requests by (tiktoken or the character rule: a
    server's /tokenize is not asked again after the run)."""
    return counter_for(model)


def _count(model: str, messages: list[Any], tools: Any) -> int:
    return int(_counter(model).messages(messages, tools if isinstance(tools, list) else None))


def _endpoint_of(role: str, model: str, settings: Any,
                 names: Mapping[tuple[str, str], RoleEndpoint]) -> RoleEndpoint | None:
    """The endpoint a call of ``role`` that sent ``model`` was priced by: the run's
    model of that name, else the name itself at the role's endpoint; a call that kept no name, the role's
    first model (None: the role has none)."""
    if (role, model) in names:
        return names[(role, model)]
    if not model:
        return next((endpoint for (r, _), endpoint in names.items() if r == role), None)
    return role_endpoint(settings, role, model)


def _batch_factor(endpoint: RoleEndpoint | None) -> float:
    """The batch price factor of a role's endpoint (its provider's registry line; OpenAI's without one)."""
    return REGISTRY["openai"].batch_price if endpoint is None else endpoint.batch_price


def call_usd(call: Mapping[str, Any], settings: Any, book: Any) -> float:
    """One billed call's cost at its model's price, a batched one's at its endpoint's batch price (0 for
    a cache hit or a model no price covers)."""
    if call.get("cache_hit"):
        return 0.0

    role, model = str(call.get("role") or "agent"), str(call.get("model") or "")
    endpoint = _endpoint_of(role, model, settings, sent_names(settings))
    price = book.price_at(endpoint) if endpoint is not None else None
    if price is None:
        return 0.0
    usd = price.usd(as_int(call.get("prompt_tokens")), as_int(call.get("completion_tokens")),
                    as_int(call.get("cached_tokens")))
    return usd * _batch_factor(endpoint) if call.get("batched") else usd


def cost_lines(usage: Mapping[str, Any]) -> list[str]:
    """What each role's model cost, a line each, as the table and the HTML report print it: its calls
    (those answered from the response cache apart, they cost nothing), billed tokens and dollars; then
    the models no price covers and where the prices come from."""
    rows = usage.get("by_model") or []
    lines = []
    for r in rows:
        usd = "not priced" if r.get("cost_usd") is None else f"${r['cost_usd']:.4f}"
        hits = f" ({r['cache_hits']} from cache)" if r.get("cache_hits") else ""
        counted = ""
        if r.get("count_error") is not None:
            counted = (f"; {r['tokenizer']} counts {r['counted_prompt_tokens']} in the requests sent "
                       f"({r['count_error']:+.1%})")
        cached = f" ({r['cached_prompt_tokens']} from the provider's prompt cache)" \
            if r.get("cached_prompt_tokens") else ""
        batched = ""
        if r.get("batched_calls"):
            at = "" if r.get("batched_cost_usd") is None else f", ${r['batched_cost_usd']:.4f}"
            batched = (f"; of them batched: {r['batched_calls']} calls, {r['batched_prompt_tokens']} tokens in / "
                       f"{r['batched_completion_tokens']} out at {r.get('batch_price', 1):g}x the price{at}")
        lines.append(f"cost {r['role']} {r['model']}: {r['calls']} calls{hits}, {r['prompt_tokens']} tokens in"
                     f"{cached} / {r['completion_tokens']} out billed, {usd}{batched}{counted}")
    if rows and usage.get("unpriced"):
        lines.append(unpriced_hint(usage["unpriced"]))
    if rows and usage.get("prices"):
        lines.append(str(usage["prices"]))
    return lines
