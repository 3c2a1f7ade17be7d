"""A model client of the fake server for unit tests: short timeouts and back-off, so retries cost
milliseconds."""

from __future__ import annotations

from typing import Any

from sab_pytest.models import ChatClient, chat_client
from sab_pytest.testing import FakeOpenAIServer


def fast_model(server: FakeOpenAIServer, api_key: str, **options: Any) -> ChatClient:
    """``ChatClient`` on ``server`` (model ``gpt-4o`` unless ``model=`` is given), 3 retries."""
    settings: dict[str, Any] = {"base_url": server.url, "api_key": api_key, "timeout": 2.0, "max_retries": 3,
                                "backoff_base": 0.01, "backoff_max": 0.05}
    settings.update(options)
    return chat_client(settings.pop("model", "gpt-4o"), **settings)


def answered_once(client: ChatClient, server: FakeOpenAIServer) -> ChatClient:
    """``client`` after one answered call, with the server's records then cleared: the endpoint has
    answered before, as anywhere after the start of a run. Until its first answer a client sends one
    call alone and holds every other until that call is answered or fails (the answer brings the
    rate limit's schedule, ``models.pacing``), and a refused connection may be a server still
    starting rather than one gone."""
    client.complete([{"role": "user", "content": "the first call of the run"}])
    server.reset()
    return client
