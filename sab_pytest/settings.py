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
from typing import TYPE_CHECKING, Any

from .breaker import DEFAULT_MAX_FAILURES
from .errors import UsageError

if TYPE_CHECKING:
    from .dataset import Case

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

    def cases(self) -> list[Case]:
        """The run's selection (subset, then sample) from the verified dataset: one definition for
        the parametrization, the run-level checks and the summary's idea of a complete run."""
        from . import dataset

        data = dataset.load(self.data_dir, allow_modified=self.allow_modified_data)
        return dataset.select(data, self.subset, sample=self.sample, seed=self.seed)
    @property
    def interactive(self) -> bool:
        """The strategy acts in the engine (react, basic, pca, map_vlm), offline agents included."""
        from .agents.registry import is_interactive

        return is_interactive(self.strategy)

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
    if s.thor_executable is not None and s.engine != "local":
        raise UsageError(f"--thor-executable: only used with --thor local (the engine is {s.engine!r})")
    if s.thor_executable is not None:
        from .thor.local import resolve_executable

        resolve_executable(s.thor_executable)
    if s.shard is not None:
        k, n = s.shard
        if not (1 <= k <= n):
            raise UsageError(f"--sab-shard: expected K/N with 1 <= K <= N, got {k}/{n}")
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
    from .agents.episode import PROTOCOLS
    from .agents.registry import check_strategy
    from .guard import GUARDS
    from .models import parse_model_spec, parse_prices

    if s.tool_protocol not in PROTOCOLS:
        raise UsageError(f"--sab-tool-protocol: unknown value {s.tool_protocol!r}; choose one of "
                         f"{', '.join(PROTOCOLS)}")
    if s.max_steps < 1:
        raise UsageError(f"--sab-max-steps: expected a positive integer, got {s.max_steps}")
    if s.max_images < 0:
        raise UsageError(f"--sab-max-images: expected an integer >= 0, got {s.max_images}")
    if s.guard not in GUARDS:
        raise UsageError(f"--sab-guard: unknown value {s.guard!r}; choose one of {', '.join(GUARDS)}")
    if s.guard_model is not None and s.guard_model != "rules":
        try:
            parse_model_spec(s.guard_model)
        except UsageError as exc:
            raise UsageError(str(exc).replace("--model", "--sab-guard-model", 1)) from None
    if s.max_retries < 0:
        raise UsageError(f"--sab-retries: expected an integer >= 0, got {s.max_retries}")
    if s.max_failures < 0:
        raise UsageError(f"--sab-max-failures: expected an integer >= 0 (0 = never stop), got {s.max_failures}")
    if not 0.0 < s.alpha < 1.0:
        raise UsageError(f"--sab-alpha: expected a significance level between 0 and 1 (exclusive), got {s.alpha}")
    for gate in s.gates:
        if metrics.parse_gate(gate).needs_baseline and not s.baseline:
            raise UsageError(f"--sab-gate: {gate!r} compares with a baseline run; give one with --sab-baseline RUN "
                             "(a run directory or its sab-summary.json)")
    if s.baseline and not Path(s.baseline).exists():
        raise UsageError(f"--sab-baseline: {s.baseline} does not exist (expected a run directory written by "
                         "--sab-out, or its sab-summary.json)")
    check_strategy(s.strategy)  # whatever the model: a typo must not pass because the agent is offline
    if not s.offline_agent:
        parse_model_spec(s.model)
    if s.judge_model != "rules":
        parse_model_spec(s.judge_model)
    for name, url in (("--base-url", s.base_url), ("--judge-base-url", s.judge_base_url)):
        if url and not url.startswith(("http://", "https://")):
            raise UsageError(f"{name}: expected an http:// or https:// URL, got {url!r}")
    if s.prices:
        parse_prices(s.prices)
    return s
