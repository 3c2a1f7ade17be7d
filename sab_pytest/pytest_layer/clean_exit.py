"""Ends of a run that are not failures, without pytest's ``Exit`` banner.

``pytest.exit`` is how a plugin ends a session from a hook, but pytest shows it as an interruption:
raised before the session started, its message goes to stderr as ``Exit: <message>``, and the
terminal ends with ``!!!!!!!! _pytest.outcomes.Exit: <message> !!!!!!!!``, which reads as a crash.
``Finished`` is the plugin's own kind of ``Exit``: pytest names it by its type's name, so its one
line reads ``sab: <message>`` as the plugin's other lines do, and ``_ForgetBanner`` (a
``pytest_keyboard_interrupt`` hook run after the terminal's) drops the banner the terminal kept."""

from __future__ import annotations

from typing import Any, NoReturn

import pytest


class Finished(pytest.exit.Exception):  # type: ignore[name-defined]
    """The run ends here, as the plugin means it to (``--sab-estimate``): one line, its status."""


Finished.__name__ = Finished.__qualname__ = "sab"  # pytest writes f"{type name}: {message}"


def finish(config: pytest.Config, message: str, returncode: int = 0) -> NoReturn:
    """End the session from a hook before any test: ``sab: <message>`` on stderr, exit ``returncode``."""
    if not config.pluginmanager.has_plugin(_ForgetBanner.NAME):
        config.pluginmanager.register(_ForgetBanner(config), _ForgetBanner.NAME)
    raise Finished(message, returncode=returncode)


class _ForgetBanner:
    """Drops the terminal's banner of a ``Finished``, which has said its one line already."""

    NAME = "sab-clean-exit"

    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    @pytest.hookimpl(trylast=True)  # after the terminal reporter kept the exception for its banner
    def pytest_keyboard_interrupt(self, excinfo: Any) -> None:
        reporter: Any = self.config.pluginmanager.get_plugin("terminalreporter")
        if isinstance(getattr(excinfo, "value", None), Finished) and hasattr(reporter, "_keyboardinterrupt_memo"):
            reporter._keyboardinterrupt_memo = None
