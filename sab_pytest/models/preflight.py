"""The endpoint check made before any case: one tiny chat completion per endpoint, its failures
turned into one ``UsageError`` that names the URL, what happened and the likely cause."""

from __future__ import annotations

from typing import Protocol

from sab_pytest.errors import UsageError
from sab_pytest.models.provider import Provider
from sab_pytest.models.wire import CAUSE_BODY, CAUSE_SILENT, CAUSE_URL, Failure, is_completion, shorten, status_cause
from sab_pytest.retry import wait

PAUSE_S = 1.0  # the longest pause between two attempts (a quarter of the timeout when shorter)


class Endpoint(Protocol):
    """What the check needs of the client (``client.ChatClient``; not imported: no cycle)."""

    name: str
    api_key_env: str
    transport: Provider

    @property
    def server(self) -> str: ...

    def secret(self) -> str | None: ...


def check_endpoint(model: Endpoint, timeout: float, attempts: int) -> None:
    """One tiny chat completion (``max_tokens=1``, a few tokens in all) with ``model``.

    Turns what would otherwise fail every case one by one into one ``UsageError`` naming the
    URL, what happened and its likely cause: no key, a URL that does not answer or never answers a
    chat call, a rejected key, a model the server does not serve, HTTP 5xx to chat calls (the
    server is failing: "check --base-url" would mislead), a body that is not a chat completion.
    ``timeout`` bounds each attempt; a failure that may be passing is tried ``attempts`` times in
    all. Answers that prove the endpoint works although this tiny request was not to its taste
    (400/422, 429) pass: the cases report any real problem.
    """
    secret = model.secret()
    if not secret and model.transport.needs_key:
        raise UsageError(
            f"no API key for model {model.name!r}: set {model.api_key_env} "
            f"(servers without auth accept any non-empty value, e.g. {model.api_key_env}=EMPTY)"
        )
    where = f"the model API at {model.server}"
    chat = f"a chat completion for model {model.name!r}"
    params = {"model": model.name, "messages": [{"role": "user", "content": "Say OK."}], "max_tokens": 1}
    problem, cause = "", ""
    for attempt in range(max(1, attempts)):
        if attempt:
            wait(min(PAUSE_S, timeout / 4))  # one short pause: a check, not a call to ride out an outage
        try:
            body = model.transport.probe(params, float(timeout))
        except Failure as failure:
            status = failure.status
            if status in (401, 403):
                raise UsageError(f"{where} rejected the key in {model.api_key_env} "
                                 f"(HTTP {status}): {failure.detail}") from None
            if status == 404:
                raise UsageError(f"{where} answered HTTP 404 to {chat} ({failure.detail}); check "
                                 "the model name and that --base-url ends where /chat/completions "
                                 "is served (usually .../v1)") from None
            if status is not None and status < 500 and status != 408:
                return  # alive, only picky
            if status is not None:
                problem = f"{where} answered HTTP {status} to {chat}: {failure.detail}"
                cause = status_cause(status) or CAUSE_SILENT
            elif failure.timed_out:
                problem, cause = f"{where} gave no answer to {chat} within {timeout:g}s", CAUSE_SILENT
            elif failure.kind == "connection":
                problem, cause = f"cannot reach the model API at {model.server}: {failure.detail}", CAUSE_URL
            else:
                problem, cause = f"{where} failed {chat}: {failure.message}", CAUSE_URL
            continue
        if is_completion(body):
            return
        problem = f"{where} answered {chat} with a body that is not a chat completion ({shorten(body)})"
        cause = CAUSE_BODY
    tries = f" ({attempts} attempts)" if attempts > 1 else ""
    raise UsageError(f"{problem}{tries}; no case was run; {cause}")
