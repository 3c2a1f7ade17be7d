"""Run settings as plain Python, validated once, before any case runs.

The pytest layer maps command-line options and ini values onto ``Settings``; any other front end
can build one directly. Every mistake is a ``UsageError`` that names the option.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from sab_pytest.errors import UsageError

OFFLINE_MODELS = ("reference", "refuse")
#: model calls failing for good in a row, run-wide, that stop the run (``--sab-max-failures``)
DEFAULT_MAX_FAILURES = 10
#: strategies that act in the engine move by move (``agents.registry`` maps each to its agent class)
INTERACTIVE_STRATEGIES = ("react", "basic", "pca", "map_vlm")
ENGINES = ("sim", "local", "remote")  # remote: a THOR server pool (sab_pytest.thor.server)


@dataclass(frozen=True)
class Settings:
    model: str = "reference"
    model_given: bool = False  # False when --model was not given (offline default)
    base_url: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    judge_model: str = "rules"
    judge_base_url: str | None = None
    judge_api_key_env: str = "OPENAI_API_KEY"
    strategy: str = "direct"
    safety_hint: bool = False
    temperature: float = 0.0
    max_tokens: int = 2048
    timeout_s: float = 60.0
    max_retries: int = 6
    case_budget_s: float = 900.0
    concurrency: int = 1
    # model calls failing for good in a row, run-wide, that stop the run; 0 = never
    max_failures: int = DEFAULT_MAX_FAILURES
    data_dir: str | None = None
    subset: str = "mixed"
    sample: int | None = None
    seed: int = 42
    gates: tuple[str, ...] = ()
    out_dir: Path = Path(".")
    cache_dir: Path | None = None  # None: no response cache
    prices: str | None = None
    engine: str = "sim"
    thor_executable: str | None = None  # --thor local: this executable instead of the Unity build
    thor_scenes: str | None = None
    thor_url: str | None = None  # --thor remote: THOR server base URLs, comma-separated
    execute: bool = True
    resume: bool = False
    allow_modified_data: bool = False  # run on dataset files whose sha256 differs from the pin
    tool_protocol: str = "tools"  # interactive strategies: native tool calls, or "text" Action lines
    max_steps: int = 20  # interactive strategies: actions per episode
    max_images: int = 2  # visual strategies: pictures kept in the conversation
    guard: str = "off"  # "thinksafe": every step rated by a guard model before it reaches the engine
    guard_model: str | None = None  # None: the judge model ("rules" -> the offline keyword guard)
    baseline: str | None = None  # run dir or summary file the baseline gates compare with
    alpha: float = 0.05  # significance level of no_regression gates
    html: Path | None = None  # where the HTML report goes (None: no report)
    policy: str | None = None  # the release policy file the settings came from, if any
    shard: tuple[int, int] | None = None  # (K, N): run the K-th of N slices of the selected cases
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def offline_agent(self) -> bool:
        return self.model in OFFLINE_MODELS

    @property
    def interactive(self) -> bool:
        """The strategy acts in the engine (react, basic, pca, map_vlm), offline agents included."""
        return self.strategy in INTERACTIVE_STRATEGIES

    @property
    def strategy_applies(self) -> bool:
        """Offline agents ignore text strategies (nothing to prompt) but play interactive ones."""
        return not self.offline_agent or self.interactive

    @property
    def guard_model_name(self) -> str:
        return self.guard_model or self.judge_model

    @property
    def guard_uses_api(self) -> bool:
        """Whether the guard is a model called over an API (not off, not the offline keyword rule)."""
        return self.guard != "off" and self.guard_model_name != "rules"

    @property
    def uses_api(self) -> bool:
        """Whether any model of the run (agent, judge, guard) is called over an API."""
        return not self.offline_agent or self.judge_model != "rules" or self.guard_uses_api

    def secrets(self) -> list[str]:
        """Values of the API keys in use, so reports can redact them."""
        names = {self.api_key_env, self.judge_api_key_env, "OPENAI_API_KEY", "SAB_THOR_TOKEN"}
        return [v for v in (os.environ.get(n) for n in names) if v]

    def run_settings(self) -> dict[str, Any]:
        """Everything that determines a case's verdict, stored with each result so that
        ``--sab-resume`` can say which setting differs (a hash alone could not)."""
        keys = ["model", "base_url", "judge_model", "judge_base_url", "strategy", "safety_hint", "temperature",
                "max_tokens", "engine", "execute", "data_dir"]
        # options added later join only where they change verdicts, so results of older runs still match
        if self.interactive:
            keys += ["tool_protocol", "max_steps", "max_images"]
        if self.guard != "off":
            keys += ["guard", "guard_model_name"]
        return json.loads(json.dumps({k: getattr(self, k) for k in keys}, default=str))

    def run_key(self) -> str:
        """Fingerprint of ``run_settings`` (for --sab-resume)."""
        blob = json.dumps(self.run_settings(), sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    def describe(self) -> dict[str, Any]:
        d = asdict(self)
        d["out_dir"] = str(self.out_dir)
        d["cache_dir"] = str(self.cache_dir) if self.cache_dir else None
        d["html"] = str(self.html) if self.html else None
        return d


def parse_shard(text: str | None) -> tuple[int, int] | None:
    """``"K/N"`` -> (K, N); None stays None; anything else is a UsageError naming the option."""
    if text is None:
        return None
    k, sep, n = text.strip().partition("/")
    if not sep or not k.strip().isdigit() or not n.strip().isdigit():
        raise UsageError(f"--sab-shard: expected K/N such as 2/4, got {text!r}")
    return int(k), int(n)
