"""The provider interface: what the model layer needs of one endpoint of one provider, and what the
provider can do (``Capabilities``).

Why an interface: the retry loop, the rate-limit pacing, the call slots and the endpoint check work
for any provider when they see only this protocol, ``Answer`` (``wire``) and ``Failure`` (the one
classification of what went wrong, the project's error kinds follow from it). A provider's SDK, its
URL shape, its auth header and its wire format stay inside its own module of ``models.providers``,
and a new provider is one module there plus one line of its registry (``providers.REGISTRY``).

Requests cross the interface in the OpenAI chat-completions shape (``messages`` with text and
``image_url`` parts, ``tools`` as function definitions, ``max_tokens``, sampling keys): it is the
shape the agents and judges write, and a provider that speaks another translates it both ways.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from sab_pytest.models.wire import Answer


@dataclass(frozen=True)
class Capabilities:
    """What a provider accepts, consulted before a request is sent instead of found out by failing:
    a request key the provider does not take is dropped (``drop_unsupported``) with one note.

    ``stream_usage``: a streamed answer ends with its token usage (else usage is estimated);
    ``batch``: the provider has a batch API that ``--sab-batch`` can send to (``batching.clients``
    picks it by provider; a role on a provider without one is named before the first case).
    """

    seed: bool = True
    n: bool = True
    tools: bool = True
    images: bool = True
    stream_usage: bool = True
    batch: bool = False

    def unsupported(self, params: Mapping[str, Any]) -> list[str]:
        """The keys of ``params`` this provider would reject."""
        dropped = [key for key, able in (("seed", self.seed), ("n", self.n)) if key in params and not able]
        if not self.tools:
            dropped += [key for key in ("tools", "tool_choice") if key in params]
        return dropped


class Provider(Protocol):
    """One endpoint of one provider, shared by a process's threads.

    ``attempt`` is one request: the ``Answer``, or a ``wire.Failure`` that says whether retrying may
    help, how long the server asked to wait and the likely cause (the retry loop decides the rest).
    ``each`` runs at every sign of life from the server (a streamed chunk) and may raise to leave.
    ``observe`` hears the headers of every answer and HTTP error (the rate-limit pacing reads them).
    ``answered`` and ``streams`` are what calls learnt of the server, kept for later calls.
    """

    kind: str
    capabilities: Capabilities
    needs_key: bool  # False: the provider has keyless auth of its own (Azure's Entra ID token)
    answered: bool
    streams: bool | None
    observe: Callable[[Mapping[str, str]], None] | None

    def attempt(self, params: dict[str, Any], timeout: float,
                each: Callable[[], None] | None = None) -> Answer: ...

    def probe(self, params: dict[str, Any], timeout: float) -> str:
        """One request without streaming for the endpoint check: the raw body of the answer, or a
        ``Failure`` (classified as ``attempt``'s, without what earlier calls learnt)."""
        ...

    def list_models(self, timeout: float) -> list[str] | None:
        """The model ids the endpoint lists (``GET /v1/models`` or the provider's own listing); None
        when it does not answer the listing."""
        ...


@dataclass(frozen=True)
class Endpoint:
    """Where and how a provider is reached, as resolved for one role: the base URL (None: the
    provider's SDK default), the API key (None: the provider's keyless auth, where it has one) and
    the timeout of one request."""

    base_url: str | None
    key: Any  # a ``wire.Secret``
    timeout: float


#: builds a provider for an endpoint (each provider module has one, ``make``)
Maker = Callable[[Endpoint], Provider]
