"""Each role's endpoint resolved once (``models.endpoints``): the value the client, the prices, the batching
and the reports read, built from the provider registry and the run's settings."""

from __future__ import annotations

from pathlib import Path

import pytest

from sab_pytest.batching.clients import batch_client
from sab_pytest.models import ChatClient, ClientOptions, endpoints, spec
from sab_pytest.models.endpoints import resolve_endpoint, run_endpoints
from sab_pytest.models.provider import Capabilities
from sab_pytest.models.providers import REGISTRY, ProviderInfo
from sab_pytest.settings import OPENAI_API_URL
from sab_pytest.settings.resolution import resolve


def _settings(tmp_path: Path, **values: object):
    return resolve(values, user_cache=lambda: tmp_path)


def test_a_role_on_a_named_provider_gets_the_providers_url_key_and_batch_terms(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.setenv("GROQ_BASE_URL", "http://groq.test/v1")
    groq = resolve_endpoint("groq/llama-3.1-8b", role="judge", inherited_url=None, key_env="AGENT_KEY",
                            inherited_key_env="AGENT_KEY")
    assert (groq.provider, groq.name, groq.url, groq.key_env) == ("groq", "llama-3.1-8b", "http://groq.test/v1",
                                                                   "GROQ_API_KEY")
    assert groq.batch_api == "openai" and groq.batch_price == REGISTRY["groq"].batch_price
    deepseek = resolve_endpoint("deepseek/deepseek-chat")
    assert deepseek.batch_api is None and not deepseek.capabilities.seed
    # an unnamed model follows the URL it inherits, or the environment's, and is a server of the user's there
    assert resolve_endpoint("qwen", inherited_url="http://gpu:8000/v1").provider_label == "openai-compatible"
    assert resolve_endpoint("gpt-4o").provider_label == "openai" and resolve_endpoint("gpt-4o").shown == OPENAI_API_URL
    monkeypatch.setenv("OPENAI_BASE_URL", "http://proxy.test/v1")
    behind = resolve_endpoint("gpt-4o")
    assert (behind.url, behind.provider_label) == ("http://proxy.test/v1", "openai-compatible")


def test_a_registry_line_declares_its_batch_api_once() -> None:
    with pytest.raises(ValueError, match="batch"):
        ProviderInfo("x", "openai_compat", None, "X_KEY", Capabilities(batch=True))
    assert all(line.capabilities.batch == (line.batch_api is not None) for line in REGISTRY.values())


def test_the_runs_endpoints_parse_each_roles_spec_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    settings = _settings(tmp_path, model="qwen", base_url="http://gpu:8000/v1", judge_model="azure/j",
                         judge_panel=("detailed=gpt-4o,anthropic/claude-x",))
    parsed: list[str] = []
    real = spec.split_model_spec

    def counting(text: str, **kwargs: object) -> tuple[str | None, str]:
        parsed.append(text)
        return real(text, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(endpoints, "split_model_spec", counting)
    found = run_endpoints(settings)
    assert len(parsed) == len(found.roles)
    assert found.roles["agent"].url == "http://gpu:8000/v1" and found.roles["judge:abstract"].provider == "azure"
    # a panel member that names no provider follows the judges' endpoint: OpenAI's API, as --base-url is the agent's
    assert found.roles["judge:detailed:gpt-4o"].url == OPENAI_API_URL
    # a two-part name where a URL is in effect is a name that server knows (OpenRouter's), unless openai/ or azure/
    member = found.roles["judge:detailed:anthropic/claude-x"]
    assert (member.provider, member.name, member.url) == ("openai", "anthropic/claude-x", OPENAI_API_URL)


def test_the_client_is_built_on_the_endpoint_and_batches_by_its_registry_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    client = ChatClient(resolve_endpoint("deepseek/deepseek-chat"), ClientOptions(timeout=5.0), api_key="sk-x")
    assert (client.name, client.provider_name, client.base_url) == ("deepseek-chat", "deepseek",
                                                                     REGISTRY["deepseek"].base_url)
    assert batch_client(client) is None  # no batch API on DeepSeek's line
    with pytest.raises(Exception, match="not an http"):
        ChatClient(resolve_endpoint("qwen", role="agent", own_url="gpu:8000"), api_key="sk-x")
