"""Model answers through the response cache: the stored answer, or the one another worker is
getting for the same request (waited for), or the claim that makes this call the one to ask the
API, stored when it answers. Why apart from the client: the cache's in-flight protocol (claim,
wait, take over a stale claim) is one concern; the façade only decides whether there is a cache."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from dataclasses import asdict
from typing import Any

from sab_pytest.cache import Claim, ResponseCache, request_key
from sab_pytest.errors import InfraError
from sab_pytest.models.context import CallContext
from sab_pytest.models.wire import Answer, as_int
from sab_pytest.retry import RetryPolicy, wait

# how gently a call claims again when the owner it waited for gave up or went stale, round after round
RECLAIM = RetryPolicy(base=0.001, cap=0.05, jitter=1.0)


def cached_answer(cache: ResponseCache, material: Mapping[str, Any], ctx: CallContext, call: Callable[[], Answer],
                  *, lock_budget: Callable[[], float], name: str) -> tuple[Answer, bool]:
    """The answer to the request ``material`` describes, and whether it came from the cache.
    ``call`` asks the API; ``lock_budget()`` is how long this call may hold the request's claim at
    most (others take over after it), asked at each claim: the case's time left shrinks while it
    waits. An unusable cache directory costs the cache, not the case."""
    key = request_key(material)
    try:
        found = _cached_or_claimed(cache, key, ctx, lock_budget, name)
    except OSError:  # an unusable cache directory must not fail the case: call without it
        return call(), False
    if isinstance(found, Claim):
        try:
            answer = call()
            with contextlib.suppress(OSError):  # a full disk costs a later re-call, not this answer
                store(cache, key, material, answer)
        finally:
            found.release()
        return answer, False
    return Answer(text=str(found.get("text", "")), finish_reason=found.get("finish_reason"),
                  prompt_tokens=as_int(found.get("prompt_tokens")),
                  completion_tokens=as_int(found.get("completion_tokens")),
                  tool_calls=found.get("tool_calls") or None, model=found.get("model") or None), True


def store(cache: ResponseCache, key: str, material: Mapping[str, Any], answer: Answer) -> None:
    """Keep ``answer`` as the cached answer to the request ``material`` (key ``key``): how a live
    answer is kept, and a batched one (``batching``), so that a case reads either the same way."""
    kept = {k: v for k, v in asdict(answer).items() if k != "queued_s"}  # the wait is the call's
    cache.put(key, {"request": dict(material), **kept})


def _cached_or_claimed(cache: ResponseCache, key: str, ctx: CallContext, lock_budget: Callable[[], float],
                       name: str) -> dict[str, Any] | Claim:
    """The stored answer for ``key`` (perhaps after waiting for another owner's call), or the
    claim that makes this thread the one to call the API."""
    rounds = 0
    while True:
        entry = cache.get(key)
        if entry is not None:
            return entry
        ctx.check()
        claim = cache.try_claim(key, lock_budget())
        if claim is not None:
            entry = cache.get(key)  # finished by someone between our look and our claim
            if entry is None:
                return claim
            claim.release()
            return entry
        try:
            entry = cache.wait_for(key, ctx.ends_at)
        except TimeoutError:
            raise InfraError("model_timeout", f"{name}: {ctx.bound()} spent waiting for the "
                             "same request made by another worker") from None
        if entry is not None:
            return entry
        if ctx.expired():
            raise InfraError("model_timeout", f"{name}: {ctx.bound()} spent before an answer")
        wait(RECLAIM.pause(rounds))  # the owner gave up or went stale: claim again, gently if this keeps happening
        rounds += 1
