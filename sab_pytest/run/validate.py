"""Validation of ``Settings``: every value that can be checked without running a case, once,
before any case runs. Every mistake is a ``UsageError`` that names the option."""

from __future__ import annotations

from pathlib import Path

from sab_pytest import dataset
from sab_pytest.agents.episode import PROTOCOLS
from sab_pytest.agents.registry import check_strategy
from sab_pytest.errors import UsageError
from sab_pytest.guard import GUARDS
from sab_pytest.models import parse_model_spec, parse_prices
from sab_pytest.results import metrics
from sab_pytest.settings import ENGINES, Settings


def validate(s: Settings) -> Settings:
    """Check every value that can be checked without running a case."""
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
        from sab_pytest.thor.local import resolve_executable

        resolve_executable(s.thor_executable)
    if s.shard is not None:
        k, n = s.shard
        if not (1 <= k <= n):
            raise UsageError(f"--sab-shard: expected K/N with 1 <= K <= N, got {k}/{n}")
    if s.engine == "remote":
        from sab_pytest.thor.remote import parse_urls

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
