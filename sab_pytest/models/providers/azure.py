"""Azure OpenAI (``--model azure/<deployment>``): the OpenAI-compatible provider with the openai SDK's
``AzureOpenAI`` client, which sends each request to ``<endpoint>/openai/deployments/<deployment>/...``
with ``?api-version=`` and the key in the ``api-key`` header.

Configured as the SDK reads it: ``AZURE_OPENAI_ENDPOINT`` (or the role's base URL),
``AZURE_OPENAI_API_KEY``, ``OPENAI_API_VERSION``. An endpoint ending in ``/openai/v1`` is Azure's v1
API: OpenAI's own client and URL shape, no API version, the deployment as the model. Without a key,
``AZURE_OPENAI_AD_TOKEN`` is used if set (the SDK reads it), else a Microsoft Entra ID token from
``azure-identity`` (an optional extra, ``pip install 'sab-pytest[azure]'``): the identity of the
machine, the CLI login or the environment's service principal.

Content-filter refusals (HTTP 400 ``content_filter``, ``finish_reason: content_filter``) are
classified by the OpenAI-compatible provider, which meets them too (``ErrorKind.CONTENT_FILTER``).
"""

from __future__ import annotations

import os
from typing import Any

from sab_pytest.errors import UsageError
from sab_pytest.models.provider import Capabilities, Endpoint
from sab_pytest.models.providers.openai_compat import OpenAICompatProvider

ENTRA_SCOPE = "https://cognitiveservices.azure.com/.default"


def is_v1(endpoint: str) -> bool:
    """Whether ``endpoint`` is Azure's v1 API (``https://<resource>.openai.azure.com/openai/v1/``)."""
    return endpoint.rstrip("/").endswith("/openai/v1")


class AzureProvider(OpenAICompatProvider):
    """The OpenAI-compatible provider on an Azure OpenAI resource."""

    kind = "azure"
    needs_key = False  # an Entra ID token stands in for a missing key

    def __init__(self, endpoint: Endpoint, capabilities: Capabilities) -> None:
        url = endpoint.base_url or os.environ.get("AZURE_OPENAI_ENDPOINT")
        if not url:
            raise UsageError("azure/<deployment>: no endpoint; set AZURE_OPENAI_ENDPOINT "
                             "(https://<resource>.openai.azure.com) or give the role's --base-url")
        if not is_v1(url) and not os.environ.get("OPENAI_API_VERSION"):
            raise UsageError("azure/<deployment>: set OPENAI_API_VERSION (e.g. 2024-10-21), or use the v1 "
                             "endpoint https://<resource>.openai.azure.com/openai/v1/, which needs none")
        super().__init__(url, endpoint.key, endpoint.timeout, capabilities)

    def _new_client(self) -> Any:
        import openai

        key = self.key.reveal()
        options: dict[str, Any] = {"max_retries": 0, "timeout": self.timeout}
        assert self.base_url is not None
        if is_v1(self.base_url):
            return openai.OpenAI(base_url=self.base_url, api_key=key or _token_provider(), **options)
        if key:
            options["api_key"] = key
        elif not os.environ.get("AZURE_OPENAI_AD_TOKEN"):
            options["azure_ad_token_provider"] = _token_provider()
        return openai.AzureOpenAI(azure_endpoint=self.base_url, **options)


def _token_provider() -> Any:
    """A callable that returns a fresh Entra ID token for Azure OpenAI (``azure-identity``)."""
    try:
        from azure.identity import DefaultAzureCredential, get_bearer_token_provider
    except ImportError:
        raise UsageError("azure/<deployment> without AZURE_OPENAI_API_KEY needs an Entra ID token: install "
                         "azure-identity (pip install 'sab-pytest[azure]') or set AZURE_OPENAI_API_KEY") from None
    return get_bearer_token_provider(DefaultAzureCredential(), ENTRA_SCOPE)


def make(endpoint: Endpoint, capabilities: Capabilities) -> AzureProvider:
    """The provider of the registry's ``azure`` line."""
    return AzureProvider(endpoint, capabilities)
