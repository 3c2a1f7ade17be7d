"""Model clients.

``ChatModel`` is the one interface agents and LLM judges talk to: a list of OpenAI-format chat
messages in, one ``ModelCall`` out. ``OpenAIChatModel`` is the OpenAI-compatible client (retries,
cache, usage).

Why the client retries by itself (the SDK runs with ``max_retries=0``): a case has a time budget
(``CallContext``), and only a loop we own can stop retrying when the budget is spent, classify
failures the SDK cannot see (an invalid JSON body or an empty answer with status 200) and keep
credentials out of every message. The SDK is used only for transport and auth; we pass plain float
timeouts and build no httpx/httpx2 objects, so openai 1.x, 2.x (httpx) and 3.x (httpx2) all work.

The package's modules, one role each: ``protocols`` (what callers need of a model, a breaker,
call slots), ``spec`` (model names and prices), ``context`` (the per-case context: budget, failure
log, stop signal, repeat; models bound to it), ``wire`` (answers parsed, secrets scrubbed),
``transport`` (the SDK client, one attempt, the one classification of its errors), ``retrying``
(the retry loop: back-off from ``sab_pytest.retry``, hung endpoints, the breaker), ``pacing`` (rate
limits: the run-wide send schedule from the server's headers, the wait after a 429),
``cached`` (answers through the response cache), ``client`` (the façade), ``preflight`` (the
endpoint check), ``usage`` (token and cost totals). The names below are the package's public API:
the rest of the code imports them from here.
"""

from sab_pytest.models.client import OpenAIChatModel, make_chat_model
from sab_pytest.models.context import CallContext, CaseModel, FailureLog, for_case
from sab_pytest.models.interfaces import Breaker, ChatModel, Slots
from sab_pytest.models.spec import Prices, parse_model_spec, parse_prices, provider_of
from sab_pytest.models.usage import add_failures, cost, truncation_note, usage_totals
from sab_pytest.models.wire import PREFLIGHT_TIMEOUT_S, elide_images, parse_retry_after, preload_sdk, scrub

__all__ = [
    "PREFLIGHT_TIMEOUT_S",
    "Breaker",
    "CallContext",
    "CaseModel",
    "ChatModel",
    "FailureLog",
    "OpenAIChatModel",
    "Prices",
    "Slots",
    "add_failures",
    "cost",
    "elide_images",
    "for_case",
    "make_chat_model",
    "parse_model_spec",
    "parse_prices",
    "parse_retry_after",
    "preload_sdk",
    "provider_of",
    "scrub",
    "truncation_note",
    "usage_totals",
]
