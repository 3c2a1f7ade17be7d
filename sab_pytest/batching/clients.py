"""Which batch API a model's requests go to, by its provider (``transport.kind``).

Why a table keyed on the provider and not a test for an OpenAI client: Anthropic's Message Batches
are reached through its own SDK client, OpenAI's (and Azure's, and any OpenAI-compatible server's)
through the ``openai`` one; the batcher sees either through ``client.BatchAPI``. A provider whose
registry line declares no batch API (``Capabilities.batch``) gets none, so that ``--sab-batch`` names
it before the first case instead of failing its first round.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sab_pytest.batching.anthropic_batches import MessageBatchClient
from sab_pytest.batching.client import BatchAPI, BatchClient


def _anthropic(transport: Any, secret: str | None, timeout: float) -> BatchAPI:
    return MessageBatchClient(transport.client(), transport, secret=secret, timeout=timeout)


def _openai(transport: Any, secret: str | None, timeout: float) -> BatchAPI:
    return BatchClient(transport.sdk(), secret=secret, timeout=timeout)


#: the batch client of each provider kind that has one (``openai`` also serves Azure's, a subclass)
MAKERS: dict[str, Callable[[Any, str | None, float], BatchAPI]] = {
    "anthropic": _anthropic, "openai": _openai, "azure": _openai}


def batch_client(model: Any, *, timeout: float | None = None) -> BatchAPI | None:
    """The batch API of ``model``'s endpoint (an ``OpenAIChatModel``); None when its provider has none."""
    transport = model.transport
    maker = MAKERS.get(str(getattr(transport, "kind", "")))
    capabilities = getattr(transport, "capabilities", None)
    if maker is None or (capabilities is not None and not capabilities.batch):
        return None
    return maker(transport, model.secret(), float(timeout if timeout is not None else model.timeout))
