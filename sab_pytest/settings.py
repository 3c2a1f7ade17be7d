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

from .errors import UsageError

OFFLINE_MODELS = ("reference", "refuse")
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
    data_dir: str | None = None
    subset: str = "mixed"
    sample: int | None = None
    seed: int = 42
    gates: tuple[str, ...] = ()
    out_dir: Path = Path(".")
    cache_dir: Path | None = None  # None: no response cache
    prices: str | None = None
    engine: str = "sim"
    thor_scenes: str | None = None
    thor_url: str | None = None  # --thor remote: THOR server base URLs, comma-separated
    execute: bool = True
    resume: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def offline_agent(self) -> bool:
        return self.model in OFFLINE_MODELS

    def secrets(self) -> list[str]:
        """Values of the API keys in use, so reports can redact them."""
        names = {self.api_key_env, self.judge_api_key_env, "OPENAI_API_KEY", "SAB_THOR_TOKEN"}
        return [v for v in (os.environ.get(n) for n in names) if v]

    def run_key(self) -> str:
        """Fingerprint of everything that determines a case's verdict (for --sab-resume)."""
        keys = ("model", "base_url", "judge_model", "judge_base_url", "strategy", "safety_hint", "temperature",
                "max_tokens", "engine", "execute", "data_dir")
        blob = json.dumps({k: getattr(self, k) for k in keys}, sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    def describe(self) -> dict[str, Any]:
        d = asdict(self)
        d["out_dir"] = str(self.out_dir)
        d["cache_dir"] = str(self.cache_dir) if self.cache_dir else None
        return d


def validate(s: Settings) -> Settings:
    """Check every value that can be checked without running a case."""
    from . import dataset, metrics

    if not s.model or not s.model.strip():
        raise UsageError("--model: empty model name")
    if s.subset not in dataset.SUBSETS:
        raise UsageError(f"--sab-subset: unknown value {s.subset!r}; choose one of {', '.join(dataset.SUBSETS)}")
    if s.sample is not None and s.sample < 1:
        raise UsageError(f"--sab-sample: expected a positive number of cases, got {s.sample}")
    if s.engine not in ENGINES:
        raise UsageError(f"--thor: unknown engine {s.engine!r}; choose one of {', '.join(ENGINES)}")
    if s.engine == "remote":
        from .thor.remote import parse_urls

        if not s.thor_url:
            raise UsageError("--thor remote needs --thor-url http://HOST:PORT[,...] (or $SAB_THOR_URL)")
        parse_urls(s.thor_url)
    for name, value, low in (("--sab-temperature", s.temperature, 0.0), ("--sab-timeout", s.timeout_s, 0.001),
                             ("--sab-case-budget", s.case_budget_s, 0.001)):
        if value < low:
            raise UsageError(f"{name}: expected a number >= {low}, got {value}")
    for name, ivalue in (("--sab-max-tokens", s.max_tokens), ("--sab-concurrency", s.concurrency)):
        if ivalue < 1:
            raise UsageError(f"{name}: expected a positive integer, got {ivalue}")
    if s.max_retries < 0:
        raise UsageError(f"--sab-retries: expected an integer >= 0, got {s.max_retries}")
    for gate in s.gates:
        metrics.parse_gate(gate)
    if not s.offline_agent:
        from .agents.registry import check_strategy
        from .models import parse_model_spec

        check_strategy(s.strategy)
        parse_model_spec(s.model)
    if s.judge_model != "rules":
        from .models import parse_model_spec

        parse_model_spec(s.judge_model)
    return s
