"""``--sab-batch`` in a process's runtime: which clients batch, the rounds between parked cases, the
check before the first case, and what a round's stop tells the user.

Why here and not in the runtime: batch mode is a few decisions on top of a runtime that works the
same either way (its clients get a hook, its runner gets rounds); kept apart, the runtime's own
logic stays as it is and this one place says what batch mode changes.

* The clients that batch: every judge's, and a text planner's agent (each of its calls one round:
  a one-shot planner's plan, then the judges'). An interactive agent's and the guard's stay live:
  their answer decides the next step.
* A round (``between_rounds``): the process's ``Batcher.flush``. When it stops waiting (the wait
  limit, Ctrl-C, another stop), the run stops as ``batch_pending``: the journal lists the batches,
  and the same command with ``--sab-resume`` collects them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from sab_pytest.batching.batcher import Batcher, ModelHook
from sab_pytest.batching.clients import batch_client
from sab_pytest.batching.journal import Journal, pending_note
from sab_pytest.errors import BATCH_PENDING
from sab_pytest.models import ChatClient, run_endpoints
from sab_pytest.models.pricing import price_book
from sab_pytest.models.providers import REGISTRY
from sab_pytest.results.cost import call_usd, walk_calls

#: a ``run.runtime.Runtime`` (named so, not imported: the runtime imports this module)
Runtime = Any


def batching_clients(runtime: Runtime) -> list[ChatClient]:
    """The process's clients whose requests go to batches (distinct, in a stable order)."""
    models = runtime.models
    chosen: list[Any] = list(models.judges.values())
    for panel in models.panels.values():
        chosen.extend(panel)
    if models.agent is not None and not runtime.settings.interactive:
        chosen.append(models.agent)
    seen: dict[int, ChatClient] = {}
    for model in chosen:
        if isinstance(model, ChatClient):  # an API client (a dry or offline model has no endpoint)
            seen.setdefault(id(model), model)
    return list(seen.values())


def attach(runtime: Runtime, say: Callable[[str], None] = lambda _: None) -> Batcher | None:
    """Give the batching clients their hook to this process's batcher (None: not a batch run)."""
    s = runtime.settings
    if not s.batch:
        return None
    breaker = runtime.breaker
    batcher = Batcher(Journal.of(s.out_dir), retry=s.batch_retry, wait_s=s.batch_wait_s, say=say,
                      stopped=lambda: runtime.stop.is_set() or (breaker is not None and breaker.stopped() is not None))
    for model in batching_clients(runtime):
        client = batch_client(model) if model.cache is not None else None
        if client is None or model.cache is None:
            continue  # no response cache (its answers could not come back), or no batch API (``unsupported``)
        model.batching = ModelHook(batcher, client, model.cache)
    return batcher


def between_rounds(runtime: Runtime, batcher: Batcher) -> Callable[[], bool]:
    """The case runner's round: one ``flush``; a round that stopped waiting stops the run as
    ``batch_pending`` with the message that says how to collect."""

    def round_() -> bool:
        done = batcher.flush()
        batcher.count()
        if done:
            return True
        note = pending_note(runtime.settings.out_dir) or "submitted, not finished"
        if runtime.breaker is not None:
            runtime.breaker.request_stop(BATCH_PENDING, note)
        return False

    return round_


def unsupported(models: Iterable[ChatClient]) -> list[str]:
    """Problems to report before the first case: each endpoint that would batch and has no Batch API."""
    problems, asked = [], set()
    for model in models:
        if model.server in asked:
            continue
        asked.add(model.server)
        client = batch_client(model, timeout=min(model.timeout, 30.0))
        if client is None:
            problems.append(f"--sab-batch: model {model.name!r} is on a provider with no batch API this run can send "
                            f"to ({model.provider_name}; OpenAI's Batch API, Azure's and Anthropic's Message Batches "
                            "can): run without --sab-batch; no case was run")
            continue
        if not client.supported():
            problems.append(f"--sab-batch: {model.server or 'the endpoint'} (model {model.name!r}) has no Batch API "
                            "(its batch listing, GET /batches or /messages/batches, answers none; llama.cpp, vLLM and "
                            "Ollama have none): run without "
                            "--sab-batch, or give the judges an endpoint that batches; no case was run")
    return problems


def batch_usage(settings: Any, usage: Mapping[str, Any]) -> dict[str, Any]:
    """The summary's ``batch``: requests batched, retried live and failed, batched and live tokens, and
    with prices what the batch price saved (``usage``: the summary's, whose rows per role and model price
    each batched call at the batch price already, and say what that saved)."""
    totals = Journal.of(settings.out_dir).totals()
    batched_in, batched_out = totals.get("batched_prompt_tokens", 0), totals.get("batched_completion_tokens", 0)
    factor = judges_batch_price(settings)
    found: dict[str, Any] = {
        "batches": totals.get("batches", 0), "batched": totals.get("batched", 0),
        "retried_live": totals.get("retried_live", 0), "failed": totals.get("failed", 0),
        "batched_prompt_tokens": batched_in, "batched_completion_tokens": batched_out,
        "live_prompt_tokens": max(0, int(usage.get("billed_prompt_tokens", 0)) - batched_in),
        "live_completion_tokens": max(0, int(usage.get("billed_completion_tokens", 0)) - batched_out),
        "price_factor": factor, "saved_usd": None}
    saved = [r["batch_saved_usd"] for r in usage.get("by_model") or () if r.get("batch_saved_usd") is not None]
    if saved:
        found["saved_usd"] = round(sum(saved), 6)
    return found


def judges_batch_price(settings: Any) -> float:
    """The batch price factor the run's batches are priced at: the judges' provider's (OpenAI's without
    a judge model), from the endpoints the run resolved."""
    judges = run_endpoints(settings).judges
    return judges[0].batch_price if judges else REGISTRY["openai"].batch_price


def batch_line(batch: Mapping[str, Any]) -> str:
    """The terminal's line about a batch run."""
    saved = f"; saved ${batch['saved_usd']:.4f} at {batch['price_factor']:g}x the price" if batch["saved_usd"] else ""
    return (f"sab: batch: {batch['batched']} request(s) answered in {batch['batches']} batch(es), "
            f"{batch['retried_live']} retried live, {batch['failed']} failed; tokens batched "
            f"{batch['batched_prompt_tokens']} in / {batch['batched_completion_tokens']} out, live "
            f"{batch['live_prompt_tokens']} in / {batch['live_completion_tokens']} out{saved}")


def batched_roles(settings: Any) -> tuple[str, ...]:
    """The roles whose requests ``--sab-batch`` sends in batches (none without it)."""
    if not settings.batch:
        return ()
    return ("judge",) if settings.interactive else ("judge", "agent")


def priced_usd(settings: Any, record: Mapping[str, Any]) -> float:
    """What a finished case's batched calls cost (``--sab-budget``): each call a batch answered, at its
    model's price times the batch price. Its live calls, a request its batch left unanswered and that
    was asked live among them, were priced by the budget's gate as they were made: not counted again."""
    book = price_book(settings.prices)
    return sum(call_usd(c, settings, book) for c in walk_calls(record) if c.get("batched"))


def batch_estimate(settings: Any, est: Mapping[str, Any]) -> dict[str, Any]:
    """``--sab-estimate`` under ``--sab-batch``: the roles batched, the price factor, the cost without
    batches and what they save on the priced models (None when none of them is priced)."""
    roles = [role for role in batched_roles(settings) if role in est["roles"]]
    factor = judges_batch_price(settings)
    costs = [r["cost_usd"] for r in est.get("rows", []) if r["role"] in roles and r["cost_usd"] is not None]
    saved = round(sum(costs) * (1 - factor), 6) if costs and est["cost_usd"] is not None else None
    return {"roles": roles, "price_factor": factor, "full_cost_usd": est["cost_usd"], "saved_usd": saved}


def estimate_line(batch: Mapping[str, Any]) -> str:
    """The estimate's line about batches."""
    line = (f"batch (--sab-batch): {', '.join(batch['roles']) or 'no role'} through the Batch API at "
            f"{batch['price_factor']:g}x the price")
    if batch["saved_usd"] is not None:
        line += (f": cost ${batch['full_cost_usd'] - batch['saved_usd']:.4f} instead of ${batch['full_cost_usd']:.4f}"
                 f", saving ${batch['saved_usd']:.4f}")
    return line
