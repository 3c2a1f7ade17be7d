"""Test helpers shipped with the package, so that users' and the project's tests share them.

``fake_openai_server()`` is the fixture factory: a context manager that starts the fake
OpenAI-compatible server on loopback and stops it afterwards. The plugin's conftest exposes it as
a fixture; it is usable without pytest too (benches, demos).

The server classes are imported lazily so that ``python -m sab_pytest.testing.fake_openai`` does
not find its own module already imported (runpy warns about that).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sab_pytest.testing.fake_openai import FakeOpenAIServer
    from sab_pytest.testing.fake_replies import RecordedRequest, Reply, Rule

__all__ = ["FakeOpenAIServer", "RecordedRequest", "Reply", "Rule", "fake_openai_server"]


def __getattr__(name: str) -> Any:
    if name == "FakeOpenAIServer":
        from sab_pytest.testing import fake_openai

        return fake_openai.FakeOpenAIServer
    if name in ("RecordedRequest", "Reply", "Rule"):
        from sab_pytest.testing import fake_replies

        return getattr(fake_replies, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@contextmanager
def fake_openai_server(**options: Any) -> Iterator[FakeOpenAIServer]:
    """Start a ``FakeOpenAIServer(**options)`` on 127.0.0.1 and yield it; always stopped on exit.

    Example fixture::

        @pytest.fixture
        def fake_openai():
            with fake_openai_server() as server:
                yield server
    """
    from sab_pytest.testing.fake_openai import FakeOpenAIServer

    server = FakeOpenAIServer(**options)
    server.start()
    try:
        yield server
    finally:
        server.stop()
