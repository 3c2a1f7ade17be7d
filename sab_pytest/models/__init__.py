"""Model clients.

``ChatModel`` is the one interface agents and LLM judges talk to: a list of OpenAI-format chat
messages in, one ``ModelCall`` out. ``ChatClient`` is the client of every provider (retries,
cache, usage); the provider a model names (``azure/<deployment>``, ``anthropic/...``, none: OpenAI's
API or the OpenAI-compatible server at the base URL) is reached through the ``provider.Provider``
interface, one module of ``providers`` each.

Why the client retries by itself (the SDKs run with ``max_retries=0``): a case has a time budget
(``CallContext``), and only a loop we own can stop retrying when the budget is spent, classify
failures the SDK cannot see (an invalid JSON body or an empty answer with status 200) and keep
credentials out of every message. The SDKs are used only for transport and auth; we pass plain float
timeouts and build no httpx/httpx2 objects, so openai 1.x, 2.x (httpx) and 3.x (httpx2) all work.

The package's modules, one role each: ``interfaces`` (what callers need of a model, a breaker,
call slots), ``provider`` (what the client needs of a provider, and what a provider accepts),
``providers`` (the registry and one module per provider: ``openai_compat``, the SDK client, one
attempt and the one classification of its errors; ``azure``; ``anthropic_messages``), ``spec`` (model
names, their providers, prices), ``context`` (the per-case context: budget, failure log, stop
signal, repeat; models bound to it), ``wire`` (answers parsed, secrets scrubbed), ``retrying``
(the retry loop: back-off from ``sab_pytest.retry``, hung endpoints, the breaker), ``pacing`` (rate
limits: the run-wide send schedule from the server's headers, the wait after a 429),
``cached`` (answers through the response cache), ``endpoints`` (each role's endpoint, resolved once),
``client`` (the façade), ``preflight`` (the endpoint check), ``usage`` (token and cost totals). The
names below are the package's public API: the rest of the code imports them from here.
"""

from sab_pytest.models.client import ChatClient, ClientOptions, RunServices, chat_client, make_chat_model
from sab_pytest.models.context import CallContext, CaseModel, FailureLog, for_case
from sab_pytest.models.endpoints import RoleEndpoint, RunEndpoints, capabilities_of, provider_of, run_endpoints
from sab_pytest.models.interfaces import Breaker, ChatModel, Slots
from sab_pytest.models.spec import Prices, parse_model_spec, parse_prices
from sab_pytest.models.usage import add_failures, cost, truncation_note, usage_totals
from sab_pytest.models.wire import PREFLIGHT_TIMEOUT_S, elide_images, parse_retry_after, preload_sdk, scrub

__all__ = [
    "PREFLIGHT_TIMEOUT_S", "Breaker", "CallContext", "CaseModel", "ChatClient", "ChatModel", "ClientOptions",
    "FailureLog", "Prices", "RoleEndpoint", "RunEndpoints", "RunServices", "Slots", "add_failures", "capabilities_of",
    "chat_client", "cost", "elide_images", "for_case", "make_chat_model", "parse_model_spec", "parse_prices",
    "parse_retry_after", "preload_sdk", "provider_of", "run_endpoints", "scrub", "truncation_note", "usage_totals",
]
