"""The batch client of a model client's endpoint, by the batch API its provider's registry line names
(``ProviderInfo.batch_api``, carried by the role's ``RoleEndpoint``).

Why keyed on the batch wire format and not on the provider: the registry says which providers have a
batch API and which format it speaks (Anthropic's Message Batches through its own SDK; OpenAI's Batch
API, which Azure, Together and Groq speak too, through the ``openai`` one); this module only knows how
to reach each format (``client.BatchAPI``). A provider whose line declares no batch API gets none, so
that ``--sab-batch`` names it before the first case instead of failing its first round.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sab_pytest.batching.anthropic_batches import MessageBatchClient
from sab_pytest.batching.client import BatchAPI, BatchClient
from sab_pytest.models import ChatClient


def _anthropic(transport: Any, secret: str | None, timeout: float) -> BatchAPI:
    return MessageBatchClient(transport.client(), transport, secret=secret, timeout=timeout)


def _openai(transport: Any, secret: str | None, timeout: float) -> BatchAPI:
    return BatchClient(transport.sdk(), secret=secret, timeout=timeout)


#: the batch client of each batch wire format (``ProviderInfo.batch_api``); a transport of the provider's
#: module hands over its SDK client (``sdk()``, Anthropic's ``client()``)
MAKERS: dict[str, Callable[[Any, str | None, float], BatchAPI]] = {"anthropic": _anthropic, "openai": _openai}


def batch_client(model: ChatClient, *, timeout: float | None = None) -> BatchAPI | None:
    """The batch API of ``model``'s endpoint; None when its provider has none."""
    api = model.endpoint.batch_api
    if api is None:
        return None
    return MAKERS[api](model.transport, model.secret(), float(timeout if timeout is not None else model.timeout))
