"""Test helpers shipped with the package, so that users' and the project's tests share them.

``fake_openai_server()`` is the fixture factory: a context manager that starts the fake
OpenAI-compatible server on loopback and stops it afterwards. The plugin's conftest exposes it as
a fixture; it is usable without pytest too (benches, demos).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sab_pytest.testing.fake_openai import FakeOpenAIServer
from sab_pytest.testing.fake_replies import RecordedRequest, Reply, Rule

__all__ = ["FakeOpenAIServer", "RecordedRequest", "Reply", "Rule", "fake_openai_server"]


@contextmanager
def fake_openai_server(**options: Any) -> Iterator[FakeOpenAIServer]:
    """Start a ``FakeOpenAIServer(**options)`` on 127.0.0.1 and yield it; always stopped on exit.

    Example fixture::

        @pytest.fixture
        def fake_openai():
            with fake_openai_server() as server:
                yield server
    """
    server = FakeOpenAIServer(**options)
    server.start()
    try:
        yield server
    finally:
        server.stop()
