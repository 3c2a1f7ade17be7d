"""The run's settings: one table declares every option once (``table``), with what an option is
(``spec``), parsers of values written as text (``text``) and the values that follow from other
options (``resolution``). Every layer may read this package; it imports nothing above ``errors``.

The names below are the ones the rest of the project uses; ``resolution`` is imported by those who
build settings from what a user wrote (it is not re-exported, so reading the table stays cheap).
"""

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
    JUDGE_PROMPTS,
    JUDGES,
    OFFLINE_MODELS,
    PAPER_GUARD_MODEL,
    PAPER_JUDGE_MAX_TOKENS,
    PAPER_JUDGE_MODELS,
    PAPER_JUDGE_TEMPERATURE,
    PROTOCOLS,
    VISUAL_STRATEGIES,
    Settings,
    check_options,
    options,
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
    "setting",
]
