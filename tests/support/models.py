"""A model client of the fake server for unit tests: short timeouts and back-off, so retries cost
milliseconds."""

from __future__ import annotations

from typing import Any

from sab_pytest.models import OpenAIChatModel
from sab_pytest.testing import FakeOpenAIServer


def fast_model(server: FakeOpenAIServer, api_key: str, **options: Any) -> OpenAIChatModel:
    """``OpenAIChatModel`` on ``server`` (model ``gpt-4o`` unless ``model=`` is given), 3 retries."""
    settings: dict[str, Any] = {"base_url": server.url, "api_key": api_key, "timeout": 2.0, "max_retries": 3,
                                "backoff_base": 0.01, "backoff_max": 0.05}
    settings.update(options)
    return OpenAIChatModel(settings.pop("model", "gpt-4o"), **settings)
