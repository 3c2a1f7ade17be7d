"""The providers a model can be named by (``--model <provider>/<model>``), one registry line each.

A line names the provider, the module of this package that implements it (a module with
``make(endpoint, capabilities) -> Provider``, see ``models.provider``), the default base URL (None:
the module's own default), the environment variable that holds the key, and what the provider
accepts (``Capabilities``), and where it has a batch API, which one (``batch_api``: the batch wire format,
``openai`` or ``anthropic``, whose client ``batching.clients`` makes) and the part of the price a batched
token costs (``batch_price``). docs/providers.md shows the same table to users; adding a provider is
one module (or none, for another OpenAI-compatible server) and one line here.

Why the capabilities are declared and not found out: a provider that rejects ``seed`` or ``n``
would otherwise fail every case's first call; the client drops what the provider does not take,
with one note, before the request leaves.
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass

from sab_pytest.models.provider import Capabilities, Endpoint, Provider


@dataclass(frozen=True)
class ProviderInfo:
    """One registry line (see the module docstring)."""

    name: str
    module: str
    base_url: str | None
    key_env: str
    capabilities: Capabilities

    url_env: str | None = None  # the variable that overrides ``base_url`` (None: ``<NAME>_BASE_URL``)
    batch_api: str | None = None  # the batch wire format its batch API speaks (``openai``, ``anthropic``)
    batch_price: float = 0.5  # the part of the list price a batched token costs (docs/models.md)

    def __post_init__(self) -> None:
        if self.capabilities.batch != (self.batch_api is not None):  # one declaration, kept whole
            raise ValueError(f"provider {self.name!r}: Capabilities.batch and batch_api disagree")

    @property
    def base_url_env(self) -> str:
        """The variable that overrides the default base URL (``<NAME>_BASE_URL``, as inspect_ai reads
        them, unless the line names the one its SDK reads)."""
        return self.url_env or f"{self.name.upper()}_BASE_URL"

    def default_url(self) -> str | None:
        """The base URL when the role names none: the variable's, else the line's."""
        return os.environ.get(self.base_url_env) or self.base_url

    def make(self, endpoint: Endpoint) -> Provider:
        """The provider for ``endpoint``; its module is imported only now (an SDK that is an
        optional extra is needed only by a run that names its provider)."""
        module = importlib.import_module(f"{__name__}.{self.module}")
        provider: Provider = module.make(endpoint, self.capabilities)
        return provider


_COMPAT = "openai_compat"
_OPENAI_BATCHES = "openai"  # OpenAI's Batch API, which Azure, Together and Groq speak too
_LOCAL = Capabilities(n=False)  # self-hosted servers: one answer per request, no batch API

REGISTRY: dict[str, ProviderInfo] = {line.name: line for line in (
    ProviderInfo("openai", _COMPAT, None, "OPENAI_API_KEY", Capabilities(batch=True), batch_api=_OPENAI_BATCHES),
    ProviderInfo("azure", "azure", None, "AZURE_OPENAI_API_KEY", Capabilities(batch=True), "AZURE_OPENAI_ENDPOINT",
                 batch_api=_OPENAI_BATCHES),
    ProviderInfo("anthropic", "anthropic_messages", None, "ANTHROPIC_API_KEY", Capabilities(False, False, batch=True),
                 batch_api="anthropic"),
    ProviderInfo("gemini", _COMPAT, "https://generativelanguage.googleapis.com/v1beta/openai/", "GEMINI_API_KEY",
                 Capabilities(seed=False)),
    ProviderInfo("openrouter", _COMPAT, "https://openrouter.ai/api/v1", "OPENROUTER_API_KEY", Capabilities(n=False)),
    ProviderInfo("together", _COMPAT, "https://api.together.xyz/v1", "TOGETHER_API_KEY", Capabilities(batch=True),
                 batch_api=_OPENAI_BATCHES),
    ProviderInfo("groq", _COMPAT, "https://api.groq.com/openai/v1", "GROQ_API_KEY", Capabilities(n=False, batch=True),
                 batch_api=_OPENAI_BATCHES),
    ProviderInfo("deepseek", _COMPAT, "https://api.deepseek.com/v1", "DEEPSEEK_API_KEY",
                 Capabilities(seed=False, n=False, images=False)),
    ProviderInfo("vllm", _COMPAT, "http://localhost:8000/v1", "VLLM_API_KEY", Capabilities()),
    ProviderInfo("ollama", _COMPAT, "http://localhost:11434/v1", "OLLAMA_API_KEY", _LOCAL),
    ProviderInfo("llamacpp", _COMPAT, "http://localhost:8080/v1", "LLAMACPP_API_KEY", _LOCAL),
)}
