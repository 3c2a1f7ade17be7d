"""Usage and cost: the token and call totals of a case's model calls (records or ``ModelCall``s),
the failed attempts the case's ``FailureLog`` counted, and the cost at given prices."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from sab_pytest.models.context import FailureLog
from sab_pytest.models.spec import Prices
from sab_pytest.models.wire import as_int
from sab_pytest.outcome import ModelCall


def _field(call: ModelCall | Mapping[str, Any], name: str) -> Any:
    return call.get(name) if isinstance(call, Mapping) else getattr(call, name, None)


def usage_totals(calls: Iterable[ModelCall | Mapping[str, Any]]) -> dict[str, Any]:
    """Token and call counts over ``calls`` (``ModelCall`` objects or their ``to_dict`` form).

    ``prompt_tokens``/``completion_tokens`` count every answer used; the ``billed_*`` figures only
    the answers that came from the API in this run (cache hits cost nothing again). ``latency_s``
    sums the time callers waited; ``api_latency_s`` only that of calls that went to the API.
    Requests that got no answer are not calls here; ``add_failures`` counts them in. ``calls_by_<role>``
    counts the calls of each role (``agent``, ``judge``, ``guard``): roles may each have a provider
    of their own, and a bill or a rate limit is read per provider.
    """
    totals: dict[str, Any] = {"calls": 0, "api_calls": 0, "cache_hits": 0, "errors": 0, "failed_calls": 0,
                              "truncated": 0,
                              "prompt_tokens": 0, "completion_tokens": 0, "billed_prompt_tokens": 0,
                              "billed_completion_tokens": 0, "latency_s": 0.0, "api_latency_s": 0.0}
    for call in calls:
        totals["calls"] += 1
        by_role = f"calls_by_{_field(call, 'role') or 'agent'}"
        totals[by_role] = totals.get(by_role, 0) + 1
        prompt = as_int(_field(call, "prompt_tokens"))
        completion = as_int(_field(call, "completion_tokens"))
        totals["latency_s"] += float(_field(call, "latency_s") or 0.0)
        totals["prompt_tokens"] += prompt
        totals["completion_tokens"] += completion
        if _field(call, "error"):
            totals["errors"] += 1
        if _field(call, "finish_reason") == "length":
            totals["truncated"] += 1
        if _field(call, "cache_hit"):
            totals["cache_hits"] += 1
        else:
            totals["api_calls"] += 1
            totals["billed_prompt_tokens"] += prompt
            totals["billed_completion_tokens"] += completion
            totals["api_latency_s"] += float(_field(call, "latency_s") or 0.0)
    totals["latency_s"] = round(totals["latency_s"], 6)
    totals["api_latency_s"] = round(totals["api_latency_s"], 6)
    return totals


def truncation_note(totals: Mapping[str, Any]) -> str:
    """A note for a case whose answers were cut at max tokens (``finish_reason=length``; llama.cpp
    also shrinks max tokens silently to fit its context): a verdict read from a cut answer may
    say less than the model meant, so the case says so; "" when none was cut."""
    cut = as_int(totals.get("truncated"))
    if not cut:
        return ""
    return f" [{cut} answer{'s' if cut > 1 else ''} cut at max tokens (finish_reason=length)]"


def add_failures(totals: dict[str, Any], log: FailureLog | None) -> dict[str, Any]:
    """``totals`` with the failed requests of ``log`` counted: each failed attempt is a request the
    API received (``api_calls``, ``failed_calls``), each call that failed for good an ``errors``.
    Rate-limited requests are requests too (``api_calls``), counted apart (``rate_limited``, with
    ``rate_limit_wait_s`` of back-off), never as failed; so are requests the case stopped waiting
    for when its time ran out (``abandoned_calls``: the server had them, and may bill them). The
    apart keys appear only when there were some."""
    if log is not None:
        totals["api_calls"] = totals.get("api_calls", 0) + log.failed_attempts + log.rate_limited + log.abandoned
        if log.abandoned:
            totals["abandoned_calls"] = totals.get("abandoned_calls", 0) + log.abandoned
        totals["failed_calls"] = totals.get("failed_calls", 0) + log.failed_attempts
        totals["errors"] = totals.get("errors", 0) + log.failed_calls
        if log.rate_limited:
            totals["rate_limited"] = totals.get("rate_limited", 0) + log.rate_limited
            totals["rate_limit_wait_s"] = round(totals.get("rate_limit_wait_s", 0.0) + log.rate_limit_wait_s, 3)
    return totals


def cost(calls: Iterable[ModelCall | Mapping[str, Any]], prices: Prices) -> float:
    """USD paid for ``calls`` in this run (cache hits excluded)."""
    totals = usage_totals(calls)
    return prices.usd(totals["billed_prompt_tokens"], totals["billed_completion_tokens"])
