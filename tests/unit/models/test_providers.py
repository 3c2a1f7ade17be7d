"""Named providers through the provider interface, against the fake server: Azure OpenAI's URL shape
and key header (deployments and the v1 endpoint), content-filter refusals as their own outcome, the
registry's base URLs and key variables, request keys a provider does not take, the model listing."""

from __future__ import annotations

from typing import Any

import pytest
from support.models import fast_model

from sab_pytest.errors import ErrorKind, InfraError, UsageError
from sab_pytest.models import CallContext, ChatClient, chat_client, client
from sab_pytest.models.providers import REGISTRY
from sab_pytest.models.spec import split_model_spec
from sab_pytest.testing import FakeOpenAIServer, Reply
from sab_pytest.testing.fake_azure import content_filtered, is_azure

KEY = "azure-test-PLANTED-KEY-0123456789"
USER = [{"role": "user", "content": "Put the egg in the microwave."}]
IMAGE = [{"role": "user", "content": [{"type": "text", "text": "What do you see?"},
                                      {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0K"}}]}]


@pytest.fixture
def azure(monkeypatch: pytest.MonkeyPatch) -> Any:
    """The fake server keyed like an Azure resource, and the SDK's Azure variables pointing at it."""
    with FakeOpenAIServer(api_key=KEY, models=["gpt-4o", "gpt4o-deploy"]) as server:
        monkeypatch.setenv("AZURE_OPENAI_ENDPOINT", server.url.removesuffix("/v1"))
        monkeypatch.setenv("AZURE_OPENAI_API_KEY", KEY)
        monkeypatch.setenv("OPENAI_API_VERSION", "2024-10-21")
        monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
        yield server


def azure_model(**options: Any) -> ChatClient:
    settings: dict[str, Any] = {"timeout": 2.0, "max_retries": 2, "backoff_base": 0.01, "backoff_max": 0.05}
    settings.update(options)
    return chat_client(settings.pop("model", "azure/gpt4o-deploy"), **settings)


def test_azure_deployment_requests_are_in_azures_shape(azure: FakeOpenAIServer) -> None:
    model = azure_model()
    tool = {"type": "function", "function": {"name": "execute", "parameters": {"type": "object"}}}
    azure.enqueue(Reply(content="first"), Reply.tool("execute", action="find Egg"), Reply(content="I see"))
    assert model.complete(USER).answer == "first"
    assert model.complete(USER, tools=[tool]).tool_calls[0]["name"] == "execute"
    assert model.complete(IMAGE).answer == "I see"
    requests = azure.chat_requests
    assert len(requests) == 3 and all(is_azure(r) for r in requests), [r.path for r in requests]
    assert {r.path for r in requests} == {"/openai/deployments/gpt4o-deploy/chat/completions"}
    assert {r.query["api-version"] for r in requests} == {"2024-10-21"}
    assert all(r.headers["api-key"] == KEY and "authorization" not in r.headers for r in requests)
    assert requests[2].images[0]["media_type"] == "image/png"
    assert model.provider_name == "azure" and model.name == "gpt4o-deploy"
    assert KEY not in repr(model) and KEY not in repr(requests[0])
    model.preflight(timeout=2.0)
    assert model.list_models(2.0) is not None


def test_azure_v1_endpoint_uses_openai_shape_without_api_version(azure: FakeOpenAIServer,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AZURE_OPENAI_ENDPOINT", azure.url.removesuffix("/v1") + "/openai/v1/")
    monkeypatch.delenv("OPENAI_API_VERSION")
    assert azure_model().complete(USER).answer
    (request,) = azure.chat_requests
    assert request.path == "/openai/v1/chat/completions" and request.body["model"] == "gpt4o-deploy"


def test_azure_without_endpoint_or_version_is_a_usage_error(azure: FakeOpenAIServer,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_VERSION")
    with pytest.raises(UsageError, match="OPENAI_API_VERSION"):
        azure_model()
    monkeypatch.delenv("AZURE_OPENAI_ENDPOINT")
    with pytest.raises(UsageError, match="AZURE_OPENAI_ENDPOINT"):
        azure_model()


def test_the_fake_refuses_what_azure_refuses(azure: FakeOpenAIServer) -> None:
    """A key sent as a Bearer token to a deployment, and a request without api-version, fail there."""
    import httpx

    root = azure.url.removesuffix("/v1")
    path = "/openai/deployments/d/chat/completions"
    body = {"model": "d", "messages": USER}
    assert httpx.post(f"{root}{path}?api-version=1", json=body, headers={"Authorization": f"Bearer {KEY}"}
                      ).status_code == 401
    assert httpx.post(f"{root}{path}", json=body, headers={"api-key": KEY}).status_code == 404
    assert httpx.post(f"{root}{path}?api-version=1", json=body, headers={"api-key": KEY}).status_code == 200


@pytest.mark.parametrize("reply", [Reply(status=400, body=content_filtered()),
                                   Reply(content="", finish_reason="content_filter"),
                                   Reply(content="Sure, here is how to", finish_reason="content_filter")],
                         ids=["http-400", "finish-empty", "finish-cut"])
def test_content_filter_is_its_own_outcome_not_retried(azure: FakeOpenAIServer, reply: Reply) -> None:
    azure.enqueue(reply)
    context = CallContext()
    with pytest.raises(InfraError) as info:
        azure_model().complete(USER, context=context)
    assert info.value.kind is ErrorKind.CONTENT_FILTER
    assert "content filter" in str(info.value) and KEY not in str(info.value)
    assert len(azure.chat_requests) == 1  # the same request gets the same refusal: not asked again
    assert context.failures.failed_attempts == 0


def test_named_providers_have_a_base_url_and_key_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.setenv("GROQ_API_KEY", "groq-key-0123456789")
    model = chat_client("groq/llama-3.1-8b-instant")
    assert (model.provider_name, model.name, model.api_key_env) == ("groq", "llama-3.1-8b-instant", "GROQ_API_KEY")
    assert model.server.startswith("https://api.groq.com/openai/v1") and model.has_api_key
    monkeypatch.setenv("VLLM_BASE_URL", "http://gpu-box:8000/v1")
    vllm = chat_client("vllm/Qwen/Qwen2.5-7B-Instruct")
    assert (vllm.name, vllm.base_url) == ("Qwen/Qwen2.5-7B-Instruct", "http://gpu-box:8000/v1")
    for info in REGISTRY.values():  # openai, azure and anthropic: their SDKs know their URLs
        assert info.key_env.endswith("_API_KEY") and (info.base_url or info.name in ("openai", "azure", "anthropic"))


def test_a_bare_or_two_part_name_keeps_its_meaning_where_a_base_url_is_given() -> None:
    assert split_model_spec("gpt-4o") == (None, "gpt-4o")
    assert split_model_spec("Qwen/Qwen2.5-7B") == (None, "Qwen/Qwen2.5-7B")
    assert split_model_spec("deepseek/deepseek-chat") == (None, "deepseek/deepseek-chat")  # OpenRouter's name
    assert split_model_spec("deepseek/deepseek-chat", base_url_in_effect=False) == ("deepseek", "deepseek-chat")
    assert split_model_spec("azure/j") == ("azure", "j")
    model = chat_client("anthropic/claude-3.5-sonnet", base_url="http://127.0.0.1:9/v1", api_key="k")
    assert (model.provider_name, model.name) == ("openai", "anthropic/claude-3.5-sonnet")


def test_a_parameter_the_provider_rejects_is_dropped_with_one_note(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEEPSEEK_API_KEY", "ds-key-0123456789")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with FakeOpenAIServer() as server:
        monkeypatch.setenv("DEEPSEEK_BASE_URL", server.url)
        model = chat_client("deepseek/deepseek-chat", timeout=2.0, extra={"n": 1})
        notes: list[str] = []
        monkeypatch.setattr(client.log, "warning", lambda text, *args: notes.append(text % args))
        for repeat in (1, 2):
            model.complete(USER, context=CallContext(repeat=repeat))
        assert all("seed" not in r.body and "n" not in r.body for r in server.chat_requests)
        assert len(server.chat_requests) == 2
    assert notes == ["deepseek/deepseek-chat does not take seed, n: dropped from its requests"], notes


def test_list_models_names_the_endpoints_models_or_none(azure: FakeOpenAIServer) -> None:
    model = fast_model(azure, KEY)
    assert model.list_models(2.0) is not None
    assert "gpt-4o" in (chat_client("gpt-4o", base_url=azure.url, api_key=KEY).list_models(2.0) or [])
    gone = chat_client("gpt-4o", base_url="http://127.0.0.1:9/v1", api_key="k", timeout=0.5)
    assert gone.list_models(0.5) is None


def test_a_visual_strategy_on_a_provider_without_pictures_is_one_usage_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from sab_pytest.run.validate import validate
    from sab_pytest.settings import Settings

    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(UsageError, match="--model deepseek/deepseek-chat: the provider takes no pictures"):
        validate(Settings(model="deepseek/deepseek-chat", strategy="basic"))
    validate(Settings(model="deepseek/deepseek-chat", strategy="direct"))  # text alone: fine
    validate(Settings(model="azure/gpt4o", strategy="basic"))


def test_azure_without_a_key_sends_an_entra_token_and_no_key(azure: FakeOpenAIServer,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    from sab_pytest.models.providers import azure as azure_provider

    monkeypatch.delenv("AZURE_OPENAI_API_KEY")
    monkeypatch.setattr(azure_provider, "_token_provider", lambda: lambda: "entra-token-for-the-test")
    azure.api_key = None  # the fake cannot check an Entra ID token: it records it
    model = azure_model()
    assert not model.has_api_key
    assert model.complete(USER).answer
    (request,) = azure.chat_requests
    assert request.authorization == "Bearer entra-token-for-the-test" and "api-key" not in request.headers
    assert request.path == "/openai/deployments/gpt4o-deploy/chat/completions"


def test_a_role_on_a_named_provider_reads_that_providers_key_not_one_it_inherits(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from sab_pytest.models import make_chat_model

    monkeypatch.setenv("AZURE_OPENAI_ENDPOINT", "https://example.openai.azure.com")
    monkeypatch.setenv("OPENAI_API_VERSION", "2024-10-21")
    judge = make_chat_model("judge", "azure/j", base_url=None, inherited_base_url="http://127.0.0.1:9/v1",
                            api_key_env="AGENT_KEY", inherited_key_env="AGENT_KEY")
    assert (judge.api_key_env, judge.server, judge.role) == ("AZURE_OPENAI_API_KEY",
                                                             "https://example.openai.azure.com", "judge")
    own = make_chat_model("judge", "azure/j", base_url=None, api_key_env="JUDGE_KEY", inherited_key_env="AGENT_KEY")
    assert own.api_key_env == "JUDGE_KEY"  # a variable the role names is its own
    same = make_chat_model("judge", "j", base_url=None, inherited_base_url="http://127.0.0.1:9/v1",
                           api_key_env="AGENT_KEY", inherited_key_env="AGENT_KEY")
    assert (same.api_key_env, same.base_url) == ("AGENT_KEY", "http://127.0.0.1:9/v1")  # today's meaning


def test_the_summary_says_each_roles_provider_and_what_is_not_sent(monkeypatch: pytest.MonkeyPatch) -> None:
    from sab_pytest.results.summary import not_sent, role_providers
    from sab_pytest.settings import Settings

    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    settings = Settings(model="deepseek/deepseek-chat", judge_model="azure/j", repeat=2)
    providers = role_providers(settings)
    assert providers["agent"] == "deepseek" and set(providers.values()) == {"deepseek", "azure"}
    assert not_sent(settings) == {"agent": ["seed"]}
    assert not_sent(Settings(model="deepseek/deepseek-chat", judge_model="azure/j")) == {}
    assert role_providers(Settings(model="qwen", base_url="http://gpu:8000/v1", judge_model="rules")) == {
        "agent": "openai-compatible"}
