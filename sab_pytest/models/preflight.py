"""The endpoint check made before any case: one tiny chat completion per endpoint, its failures
turned into one ``UsageError`` that names the URL, what happened and the likely cause."""

from __future__ import annotations

import time
from typing import Any, Protocol

from sab_pytest.errors import UsageError
from sab_pytest.models.wire import (
    CAUSE_BODY,
    CAUSE_SILENT,
    CAUSE_URL,
    connection_reason,
    error_text,
    is_completion,
    scrub,
    shorten,
    status_cause,
)


class Endpoint(Protocol):
    """What the check needs of the client (``client.OpenAIChatModel``; not imported: no cycle)."""

    name: str
    api_key_env: str

    @property
    def server(self) -> str: ...

    def secret(self) -> str | None: ...

    def _sdk_client(self) -> Any: ...


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
    import openai

    secret = model.secret()
    if not secret:
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
            time.sleep(min(1.0, timeout / 4))
        try:
            raw = model._sdk_client().chat.completions.with_raw_response.create(**params, timeout=float(timeout))
            body = raw.text
        except openai.APIStatusError as exc:
            status = exc.status_code
            if status in (401, 403):
                raise UsageError(f"{where} rejected the key in {model.api_key_env} "
                                 f"(HTTP {status}): {error_text(exc, secret)}") from None
            if status == 404:
                raise UsageError(f"{where} answered HTTP 404 to {chat} ({error_text(exc, secret)}); check "
                                 "the model name and that --base-url ends where /chat/completions "
                                 "is served (usually .../v1)") from None
            if status < 500 and status != 408:
                return  # alive, only picky
            problem = f"{where} answered HTTP {status} to {chat}: {error_text(exc, secret)}"
            cause = status_cause(status) or CAUSE_SILENT
            continue
        except openai.APITimeoutError:
            problem, cause = f"{where} gave no answer to {chat} within {timeout:g}s", CAUSE_SILENT
            continue
        except openai.APIConnectionError as exc:
            problem = f"cannot reach the model API at {model.server}: {connection_reason(exc, secret)}"
            cause = CAUSE_URL
            continue
        except openai.OpenAIError as exc:
            problem = f"{where} failed {chat}: {type(exc).__name__}: {scrub(str(exc), secret)}"
            cause = CAUSE_URL
            continue
        if is_completion(body):
            return
        problem = f"{where} answered {chat} with a body that is not a chat completion ({shorten(body)})"
        cause = CAUSE_BODY
    tries = f" ({attempts} attempts)" if attempts > 1 else ""
    raise UsageError(f"{problem}{tries}; no case was run; {cause}")
