"""The run's settings: one table declares every option once (``table``), with what an option is
(``spec``), parsers of values written as text (``text``) and the values that follow from other
options (``resolution``). Every layer may read this package; it imports nothing above ``errors``.

The names below are the ones the rest of the project uses. They are loaded on first use: every
pytest run of the environment imports this package for ``flags`` (the options as pytest registers
them, generated from the table), and most of those runs never need the table itself, whose
dataclasses cost more to build than anything else the inert plugin does. ``resolution`` is imported
by those who build settings from what a user wrote (it is not re-exported).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sab_pytest.settings.judging import (
        JUDGE_PROMPTS,
        JUDGES,
        OPENAI_API_URL,
        PAPER_GUARD_MODEL,
        PAPER_JUDGE_MAX_TOKENS,
        PAPER_JUDGE_MODELS,
        PAPER_JUDGE_TEMPERATURE,
    )
    from sab_pytest.settings.spec import Option, setting
    from sab_pytest.settings.table import (
        ACTION_FORMATS,
        CASE_TESTS,
        DEFAULT_ALPHA,
        DEFAULT_API_KEY_ENV,
        DEFAULT_MAX_FAILURES,
        ENGINES,
        GATE_ON,
        GUARDS,
        INTERACTIVE_STRATEGIES,
        OFFLINE_MODELS,
        PROTOCOLS,
        VISUAL_STRATEGIES,
        Settings,
        check_options,
        options,
        run_setting_sides,
    )

__all__ = [
    "ACTION_FORMATS",
    "CASE_TESTS",
    "DEFAULT_ALPHA",
    "DEFAULT_API_KEY_ENV",
    "DEFAULT_MAX_FAILURES",
    "ENGINES",
    "GATE_ON",
    "GUARDS",
    "INTERACTIVE_STRATEGIES",
    "JUDGES",
    "JUDGE_PROMPTS",
    "OFFLINE_MODELS",
    "OPENAI_API_URL",
    "PAPER_GUARD_MODEL",
    "PAPER_JUDGE_MAX_TOKENS",
    "PAPER_JUDGE_MODELS",
    "PAPER_JUDGE_TEMPERATURE",
    "PROTOCOLS",
    "VISUAL_STRATEGIES",
    "Option",
    "Settings",
    "check_options",
    "options",
    "run_setting_sides",
    "setting",
]


#: the names ``judging`` holds (the rest of ``__all__`` but ``spec``'s are ``table``'s)
_JUDGING = ("JUDGES", "JUDGE_PROMPTS", "OPENAI_API_URL", "PAPER_GUARD_MODEL", "PAPER_JUDGE_MAX_TOKENS",
            "PAPER_JUDGE_MODELS", "PAPER_JUDGE_TEMPERATURE")


def __getattr__(name: str) -> Any:
    """A name of ``__all__``, from ``spec`` or ``table`` (imported then, once)."""
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = "spec" if name in ("Option", "setting") else "judging" if name in _JUDGING else "table"
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
