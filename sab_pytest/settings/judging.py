"""Who judges a run: the judges it asks, their models, panels, temperatures and endpoint, and the guard's
model, derived from the settings a user gave (``JudgeRoles``, a base of ``Settings``), with the paper's
judge constants they start from.

Kept apart from the table of options, which declares what a user may set; the rules by which the judges
follow from those settings (the paper's models by default, no rejection judge under ``paper``, the
judges' own endpoint) live here, one place to read them.
"""

from __future__ import annotations

import os

from sab_pytest.settings import text as setting_text

#: the LLM judges: did it refuse; plan success of a detailed / an abstract task; long-horizon completeness+safety
JUDGES = ("rejection", "detailed", "abstract", "long_horizon")
#: the paper's judge models, as its evaluator code sets them (``detail_evaluate.compute_SR_llm`` defaults to gpt-4;
#: the others, and App. B, to gpt-4o-2024-08-06); the paper has no rejection judge: ours (``sab``) takes App. B's
PAPER_JUDGE_MODELS = {"rejection": "gpt-4o-2024-08-06", "detailed": "gpt-4", "abstract": "gpt-4o-2024-08-06",
                      "long_horizon": "gpt-4o-2024-08-06"}
#: the paper's judges all sample at temperature 0.2 (``call_gpt``'s default in every evaluator)
PAPER_JUDGE_TEMPERATURE = 0.2
JUDGE_PROMPTS = ("own", "upstream")
#: the most tokens a judge may answer with: the paper's evaluators ask for 1024 (both protocols; the agent's
#: ``--sab-max-tokens`` is the agent's alone)
PAPER_JUDGE_MAX_TOKENS = 1024
#: OpenAI's API, the paper's judges' provider: the judges' endpoint unless given (``resolution.judge_endpoint``)
OPENAI_API_URL = "https://api.openai.com/v1"
#: the environment's OpenAI endpoint (a proxy, a gateway): every client of the openai SDK reads it, so do the
#: judges; read by ``openai_url`` alone (``models.endpoints`` resolves each role's endpoint through it)
OPENAI_URL_ENV = "OPENAI_BASE_URL"


def openai_url(own: str | None, inherited: str | None = None) -> str | None:
    """The endpoint of a role whose model names no provider (OpenAI's API or a server that speaks it): its
    own URL, else the one it follows (another role's), else the environment's; None: the SDK's default,
    OpenAI's API. The one read of the environment for an endpoint: the endpoint resolver
    (``models.endpoints``), the judges' default (``resolution.judge_endpoint``) and the agent's family
    under the paper's protocol (``Settings.agent_family``) all take the URL from here."""
    return own or inherited or os.environ.get(OPENAI_URL_ENV) or None


#: ThinkSafe's guard model under ``--sab-protocol paper`` (the paper's section 4.4 ran it on GPT-4)
PAPER_GUARD_MODEL = "gpt-4"


class JudgeRoles:
    """The judges and the guard of a run, from the settings fields below (``Settings`` declares them)."""

    protocol: str
    base_url: str | None
    judge_model: str
    judge_for: tuple[str, ...]
    judge_panel: tuple[str, ...]
    judge_temperature: str
    judge_base_url: str | None
    judge_url_default: str | None
    guard: str
    guard_model: str | None

    @property
    def judge_models(self) -> dict[str, str]:
        """judge -> model: ``--judge-model`` for each, then ``--sab-judge-for`` entries over it."""
        return setting_text.judge_models(self.judge_model, self.judge_for, JUDGES)

    @property
    def asked_judges(self) -> dict[str, str]:
        """judge -> model of the judges a run asks (none with the rule judge): under ``paper`` no rejection judge."""
        if self.judge_model == "rules":
            return {}
        return {j: m for j, m in self.judge_models.items() if not (self.protocol == "paper" and j == "rejection")}

    @property
    def judge_panels(self) -> dict[str, tuple[str, ...]]:
        """judge -> its panel's models, for the asked judges given one (``--sab-judge-panel``)."""
        panels = setting_text.judge_panels(self.judge_panel, JUDGES)
        return {j: models for j, models in panels.items() if j in self.asked_judges}

    @property
    def judges_url(self) -> str | None:
        """The judges' and the guard's endpoint: ``--judge-base-url``, else ``resolution.judge_endpoint``'s
        (OpenAI's where ``--base-url`` is the agent's own), else the agent's. A judge model that names its
        provider (``azure/j``) goes to that provider's instead, unless ``--judge-base-url`` is given."""
        return self.judge_base_url or self.judge_url_default or self.base_url

    @property
    def judge_temperatures(self) -> dict[str, float]:
        """judge -> temperature, from ``--sab-judge-temperature`` ("0.2" or "detailed=0.2,rejection=0")."""
        return setting_text.judge_temperatures(self.judge_temperature, PAPER_JUDGE_TEMPERATURE, JUDGES)

    @property
    def guard_model_name(self) -> str:
        """``--sab-guard-model``; else the paper's GPT-4 under ``paper`` (offline, with the rule judge, the
        keyword guard stays), else the judge model."""
        if self.guard_model:
            return self.guard_model
        if self.protocol == "paper" and self.judge_model != "rules":
            return PAPER_GUARD_MODEL
        return self.judge_model

    @property
    def guard_uses_api(self) -> bool:
        """Whether the guard is a model called over an API (not off, not the offline keyword rule)."""
        return self.guard != "off" and self.guard_model_name != "rules"

