"""Ends of a run without pytest's banners of a crash: ``--sab-estimate``'s, and Ctrl-C's.

``pytest.exit`` is how a plugin ends a session from a hook, but pytest shows it as an interruption:
raised before the session started, its message goes to stderr as ``Exit: <message>``, and the
terminal ends with ``!!!!!!!! _pytest.outcomes.Exit: <message> !!!!!!!!``, which reads as a crash.
``Finished`` is the plugin's own kind of ``Exit``: pytest names it by its type's name, so its one
line reads ``sab: <message>`` as the plugin's other lines do, and ``CleanEnds`` (a
``pytest_keyboard_interrupt`` hook run after the terminal's) drops the banner the terminal kept.

Ctrl-C (and SIGTERM, which the run turns into Ctrl-C) makes pytest end with ``!!! KeyboardInterrupt
!!!`` and the line of whatever code the signal happened to stop, a piece of a traceback that says
nothing of the run; ``CleanEnds`` gives the terminal one line instead, in the form of the run's other
stops (``Interrupted: sab-pytest: <why>``). ``--fulltrace`` keeps pytest's own report."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, NoReturn

import pytest


class Finished(pytest.exit.Exception):  # type: ignore[name-defined]
    """The run ends here, as the plugin means it to (``--sab-estimate``): one line, its status."""


Finished.__name__ = Finished.__qualname__ = "sab"  # pytest writes f"{type name}: {message}"

#: the plugin name ``CleanEnds`` is registered under
PLUGIN_NAME = "sab-clean-ends"


def finish(config: pytest.Config, message: str, returncode: int = 0) -> NoReturn:
    """End the session from a hook before any test: ``sab: <message>`` on stderr, exit ``returncode``."""
    register(config)
    raise Finished(message, returncode=returncode)


def register(config: pytest.Config) -> None:
    """Put ``CleanEnds`` in place for this run (once)."""
    if not config.pluginmanager.has_plugin(PLUGIN_NAME):
        config.pluginmanager.register(CleanEnds(config), PLUGIN_NAME)


def interrupted_message(value: BaseException) -> str:
    """The one line of a run stopped by a signal."""
    signal = "SIGTERM" if str(value) == "SIGTERM" else "Ctrl-C"
    return (f"Interrupted: sab-pytest: {signal}: the cases that finished are kept in the results and the summary; "
            "the same command with --sab-resume runs the rest")


class CleanEnds:
    """Replaces what the terminal reporter kept of the run's end to print as a banner."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    @pytest.hookimpl(trylast=True)  # after the terminal reporter kept the exception for its banner
    def pytest_keyboard_interrupt(self, excinfo: Any) -> None:
        reporter: Any = self.config.pluginmanager.get_plugin("terminalreporter")
        if not hasattr(reporter, "_keyboardinterrupt_memo"):
            return
        value = getattr(excinfo, "value", None)
        if isinstance(value, Finished):
            reporter._keyboardinterrupt_memo = None  # said already; pytest's session never started
        elif type(value) is KeyboardInterrupt and not self.config.getoption("fulltrace", False):
            message = interrupted_message(value)  # (pytest's own stops, -x or ours, are a subclass)
            reporter._keyboardinterrupt_memo = SimpleNamespace(reprcrash=SimpleNamespace(message=message),
                                                               toterminal=lambda tw: tw.line(message))
