"""The run's settings: one table that declares every option once, and the ``Settings`` it makes.

Each field of ``Settings`` that a user can set is declared with ``setting(default, Option(...))``: its
type (the annotation), its default (written there once; the help's ``{default}`` shows it), the flag,
the help text, the policy file's key, where a value comes from when the option is not written (an
environment variable, an ini setting), the simple constraints on it, and whether it changes verdicts
(the run key of ``--sab-resume``). From this table come the pytest options (``pytest_layer.options``),
the policy file's keys and checks (``run.policy``), ``check_options`` and ``run_settings``; checks
across options are in ``run.validate``; ``settings.resolution.resolve`` is where a value depends on
other options. It imports nothing of the project but ``errors`` and the settings' own modules (``spec``,
``text``, ``strategies``: the table of strategies, ``judging``, ``sampling``): every layer may read it.
Any front end can build a ``Settings``; the pytest layer builds it from argv.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from sab_pytest.errors import UsageError
from sab_pytest.settings import text as setting_text
from sab_pytest.settings.judging import (
    JUDGE_PROMPTS,
    OPENAI_API_URL,
    OPENAI_URL_ENV,
    PAPER_JUDGE_TEMPERATURE,
    JudgeRoles,
    openai_url,
)
from sab_pytest.settings.sampling import PAPER_CALLS, PaperCall, paper_family
from sab_pytest.settings.spec import Check, Option, Verdicts, at_least, on_off, relative, setting
from sab_pytest.settings.strategies import (
    INTERACTIVE_STRATEGIES,
    STRATEGIES,
    VISUAL_STRATEGIES,
    strategies_help,
)

OFFLINE_MODELS = ("reference", "refuse")
DEFAULT_MAX_FAILURES = 10  # model calls failing for good in a row, run-wide, that stop the run (--sab-max-failures)
DEFAULT_API_KEY_ENV = "OPENAI_API_KEY"  # holds the agent's API key, and the judges' unless told otherwise
#: significance level of ``no_regression`` gates (``--sab-alpha``), also the default of ``gates`` and ``plan``
DEFAULT_ALPHA = 0.05
ENGINES = ("sim", "local", "remote")  # remote: a THOR server pool (sab_pytest.thor.server)
BASELINE_MISMATCH = ("refuse", "allow")  # a baseline of other verdict-changing settings: a usage error, or allowed
ACTION_FORMATS = ("tools", "text")  # how an interactive agent acts: native tool calls or "Action:" lines
GUARDS = ("off", "thinksafe")
#: whose protocol a run follows (``--sab-protocol``): the paper's, or this project's own improvements on it
PROTOCOLS = ("paper", "sab")
#: what a gate compares with its threshold (``--sab-gate-on``): an end of the 95% interval, or the value
GATE_ON = ("lower", "point", "upper")
#: what a case's testcase says (``--sab-case-tests``): fails when the agent behaved wrongly, or records the verdict
CASE_TESTS = ("fail", "record")


# Where a setting changes verdicts only in some runs (``Verdicts.when``); settings added after records were written
# join the run key only there, so that an older run's records keep their key and ``--sab-resume`` still reuses them.
def _paper(s: Settings) -> bool:  # runs before --sab-protocol followed what is now "sab"
    return s.protocol == "paper"


def _acts(s: Settings) -> bool:
    return s.interactive


def _map_models(s: Settings) -> bool:
    return s.helpers and not s.offline_agent


def _guarded(s: Settings) -> bool:
    return s.guard != "off"


def _model_judged(s: Settings) -> bool:
    return s.judge_model != "rules"


@dataclass(frozen=True)
class Settings(JudgeRoles):
    """Everything a run is told. Constructible with keywords alone (tests and other front ends do)."""

    model: str = setting("reference", Option(
        "--model", "model under test: an OpenAI-compatible model name (optional 'openai/' prefix), or the offline "
        "agents 'reference' (answers with the reference plan) and 'refuse' (default {default})",
        policy="model", expects="a model name", verdicts=True, side="agent"))
    model_given: bool = False  # False when --model was not given (offline default)
    base_url: str | None = setting(None, Option(
        "--base-url", f"OpenAI-compatible endpoint (default: ${OPENAI_URL_ENV})", env=OPENAI_URL_ENV,
        policy="base_url", expects="a URL", verdicts=True, side="agent"))
    api_key_env: str = setting(DEFAULT_API_KEY_ENV, Option(
        "--api-key-env", "environment variable holding the API key (default {default})", metavar="VAR",
        policy="api_key_env", expects="an environment variable name"))
    protocol: str = setting("paper", Option(
        "--sab-protocol", "whose protocol to follow: paper (its rejection rule, prompts, judges, denominators) or "
        "sab (this project's improvements on it, each named in the summary's deviations) (default {default})",
        choices=PROTOCOLS, policy="protocol", expects="paper or sab", verdicts=Verdicts(when=_paper),
        side="measurement"))
    judge_model: str = setting("rules", Option(
        "--judge-model", "judge: 'rules' (offline rule judge) or a model name for every judge; default 'rules' for "
        "offline agents, for real models the paper's judges (gpt-4 for detailed tasks' plans, gpt-4o-2024-08-06 "
        "for the others)", policy="judge_model", expects="a model name or 'rules'", verdicts=True, side="measurement"))
    judge_for: tuple[str, ...] = setting((), Option(
        "--sab-judge-for", "JUDGE=MODEL: the model of one judge (rejection, detailed, abstract, long_horizon), "
        "over --judge-model (repeatable; default: the paper's, see --judge-model)", action="append",
        metavar="JUDGE=MODEL", policy="judge_for", expects="a list of JUDGE=MODEL",
        to_setting=tuple, verdicts=Verdicts(when=_model_judged, key="judge_models"), side="measurement"))
    judge_panel: tuple[str, ...] = setting((), Option(
        "--sab-judge-panel", "MODEL,MODEL,...: each judge asks every model, decides by majority; JUDGE=MODEL,... for "
        "one judge (repeatable; default: none)", action="append", metavar="[JUDGE=]MODELS", policy="judge_panel",
        expects="[JUDGE=]MODEL,MODEL,...", to_setting=tuple,
        verdicts=Verdicts(when=lambda s: _model_judged(s) and bool(s.judge_panel), key="judge_panels"),
        side="measurement"))
    judge_temperature: str = setting(str(PAPER_JUDGE_TEMPERATURE), Option(
        "--sab-judge-temperature", "the judges' sampling temperature: T for every judge, or JUDGE=T,... for some "
        "(default {default}, the paper's)", metavar="T|JUDGE=T,...",
        verdicts=Verdicts(when=_model_judged, key="judge_temperatures"), side="measurement"))
    judge_prompts: str = setting("own", Option(
        "--sab-judge-prompts", "own: the project's judge prompts (the paper's criteria in its own words); upstream: "
        "the paper's own judge prompts, read at run time from its evaluator files at the pinned commit (default: "
        "upstream under --sab-protocol paper with model judges, else own)", choices=JUDGE_PROMPTS,
        policy="judge_prompts", expects="own or upstream", verdicts=Verdicts(when=_model_judged), side="measurement"))
    upstream_dir: str | None = setting(None, Option(
        "--sab-upstream", "directory with the upstream evaluator files for --sab-judge-prompts upstream (default: "
        "$SAB_UPSTREAM, else the user cache, else download the pinned files)", metavar="DIR", path=True,
        env="SAB_UPSTREAM"))
    judge_base_url: str | None = setting(None, Option(
        "--judge-base-url", f"judges' and guard's endpoint (default: ${OPENAI_URL_ENV} or {OPENAI_API_URL}; "
        "--base-url names the agent's alone)", policy="judge_base_url", expects="a URL", verdicts=True, side="where"))
    judge_api_key_env: str = setting(DEFAULT_API_KEY_ENV, Option(
        "--judge-api-key-env", "judge API key variable (default: the agent's, --api-key-env, where the judges share "
        f"its endpoint, else {DEFAULT_API_KEY_ENV})", metavar="VAR", policy="judge_api_key_env",
        expects="an environment variable name"))
    strategy: str = setting("direct", Option(
        "--sab-strategy", f"agent strategy (default {{default}}): {strategies_help()}",
        policy="strategy", expects="a strategy name", verdicts=True, side="agent"))
    action_format: str = setting("tools", Option(
        "--sab-action-format", "how interactive agents act: native tool calls (tools) or plain-text "
        "'Action: ...' lines (text) (default {default})", choices=ACTION_FORMATS, verdicts=Verdicts(when=_acts),
        side="agent"))
    max_steps: int = setting(20, Option(
        "--sab-max-steps", "actions per episode of an interactive agent (default {default}); reaching it ends "
        "the episode", type=int, metavar="N", check=at_least(1, "a positive integer"), verdicts=Verdicts(when=_acts),
        side="agent"))
    max_images: int = setting(2, Option(
        "--sab-max-images", "camera pictures kept in a visual agent's conversation, latest first (default "
        "{default})", type=int, metavar="N", check=at_least(0, "an integer >= 0"), verdicts=Verdicts(when=_acts),
        side="agent"))
    guard: str = setting("off", Option(
        "--sab-guard", "thinksafe: a guard model rates every step before it reaches the robot; unsafe rejects the "
        "task at that step (default {default})", choices=GUARDS, verdicts=Verdicts(when=_guarded), side="agent"))
    guard_model: str | None = setting(None, Option(
        "--sab-guard-model", "guard model (default: gpt-4, the paper's, under --sab-protocol paper with model "
        "judges, else the judge model; 'rules' = the offline keyword guard)",
        verdicts=Verdicts(when=_guarded, key="guard_model_name"), side="agent"))
    map_vision_model: str = setting("gpt-4o", Option(
        "--sab-map-vision-model", "map_vlm: the model of the environment and grounding agents, which look at the "
        "picture (default {default}, the paper's; on the agent's endpoint). The model under test plans",
        policy="map_vision_model", expects="a model name", verdicts=Verdicts(when=_map_models), side="agent"))
    map_converter_model: str = setting("gpt-4o-mini", Option(
        "--sab-map-converter-model", "map_vlm: the small model that turns the plan's plain-language steps into "
        "the 17 actions (default {default}, the paper's; on the agent's endpoint)",
        policy="map_converter_model", expects="a model name", verdicts=Verdicts(when=_map_models), side="agent"))
    safety_hint: bool = setting(False, Option(
        "--sab-safety-hint", "add one sentence inviting refusal of hazardous instructions to every strategy "
        "(default {default}, as the paper ran them)", choices=("on", "off"),
        policy="safety_hint", expects="true or false", to_setting=lambda v: v == "on",
        from_policy=lambda v, _base: on_off(v), verdicts=True, side="agent"))
    data_dir: str | None = setting(None, Option(
        "--sab-data", "directory with the four dataset files (default: $SAB_DATA, else the user cache, else "
        "download the pinned files)", metavar="DIR", path=True, policy="data", expects="a directory",
        from_policy=relative, verdicts=True, side="where"))
    subset: str = setting("mixed", Option(
        "--sab-subset", "mixed (130 cases), unsafe, safe or all (default {default})", policy="subset",
        expects="mixed, unsafe, safe or all"))
    sample: int | None = setting(None, Option(
        "--sab-sample", "seeded stratified sample of N cases of the subset (default: the whole subset)", type=int,
        metavar="N", policy="sample", expects="a whole number of cases",
        check=at_least(1, "a positive number of cases")))
    seed: int = setting(42, Option(
        "--sab-seed", "sampling seed (default {default})", type=int, policy="seed",
        expects="a whole number"))
    repeat: int = setting(1, Option(
        "--sab-repeat", "run every selected case K times, each an item of its own ([...-r1]..[...-rK]), with a "
        "distinct seed passed to the model; metrics take the case as the unit (default {default})", type=int,
        metavar="K", policy="repeat", expects="a whole number of repeats",
        check=at_least(1, "a positive number of repeats")))
    gate_on: str = setting("point", Option(
        "--sab-gate-on", "what a fixed or baseline gate compares with its threshold: the metric's value (point) "
        "or the lower or upper end of its 95 percent interval; a gate's own '@lower' suffix wins (default "
        "{default})", choices=GATE_ON, policy="gate_on", expects="lower, point or upper"))
    gates: tuple[str, ...] = setting((), Option(
        "--sab-gate", "CI gate, e.g. 'rejection_rate>=0.5' or 'rejection_rate[fire_hazard]>=0.8' (repeatable); "
        "with gates the exit status is 0 only if every gate holds and no case errored (default: none; ini "
        "sab_gates)", action="append", metavar="EXPR", policy="gates",
        expects="a list of gate expressions", ini="sab_gates", ini_help="CI gates, one per line (as --sab-gate)",
        to_setting=tuple))
    case_tests: str | None = setting(None, Option(  # None: record with gates, fail without (``case_tests_mode``)
        "--sab-case-tests", "what a case's test says when the agent behaved wrongly: fail (a failed test) or "
        "record (a passed test whose JUnit system-out carries the verdict; the gates decide the exit status); "
        "infrastructure errors stay errors; verdicts are the same either way (default: record with gates, "
        "fail without)", choices=CASE_TESTS, policy="case_tests", expects="fail or record"))
    out_dir: Path = setting(Path("."), Option(
        "--sab-out", "where sab-results.jsonl and sab-summary.json go (default: the current directory)",
        metavar="DIR", path=True, policy="out", expects="a directory", to_setting=Path,
        from_policy=relative))
    resume: bool = setting(False, Option(
        "--sab-resume", "reuse verdicts in DIR/sab-results.jsonl from an earlier run with the same settings "
        "(default {default})", action="store_true"))
    cache_dir: Path | None = setting(None, Option(  # None: no response cache (``resolution`` sets the user cache)
        "--sab-cache", "model response cache directory (default: the user cache, $SAB_CACHE_HOME/responses)",
        metavar="DIR", path=True, to_setting=Path))
    no_cache: bool = setting(False, Option(
        "--sab-no-cache", "do not read or write the response cache (default: use it)",
        action="store_true"))
    temperature: float | None = setting(0.0, Option(  # None: not sent (the paper's call_deepseek)
        "--sab-temperature", "the agent's sampling temperature (default {default}; under --sab-protocol paper the "
        "paper's code's for the model's family: 0.2 for OpenAI's models, 0 self-hosted, none sent to DeepSeek's "
        "API)", type=float,
        policy="temperature", expects="a number", check=at_least(0.0, "a number >= 0.0"),
        from_policy=lambda v, _base: float(v), verdicts=True, side="agent"))
    max_tokens: int | None = setting(2048, Option(  # None: not sent (the paper's call_deepseek)
        "--sab-max-tokens", "max tokens per agent answer (default {default}; under --sab-protocol paper the "
        "paper's code's for the model's family: 1024 for OpenAI's models, 4096 self-hosted, none sent to "
        "DeepSeek's API)", type=int,
        policy="max_tokens", expects="a whole number", check=at_least(1, "a positive integer"), verdicts=True,
        side="agent"))
    timeout_s: float = setting(60.0, Option(
        "--sab-timeout", "seconds per model request (default {default})", type=float, policy="timeout",
        expects="a number of seconds", check=at_least(0.001, "a number >= 0.001"),
        from_policy=lambda v, _base: float(v)))
    max_retries: int = setting(6, Option(
        "--sab-retries", "retries per model request (default {default})", type=int, policy="retries",
        expects="a whole number", check=at_least(0, "an integer >= 0")))
    case_budget_s: float = setting(900.0, Option(
        "--sab-case-budget", "seconds of model time per case (default {default})", type=float,
        policy="case_budget", expects="a number of seconds", check=at_least(0.001, "a number >= 0.001"),
        from_policy=lambda v, _base: float(v)))
    max_failures: int = setting(DEFAULT_MAX_FAILURES, Option(
        "--sab-max-failures", "stop the run when N model calls in a row, counted across all workers, get no "
        "answer (after retrying) with no success between them; 0 = never stop (default {default})",
        type=int, metavar="N", check=at_least(0, "an integer >= 0 (0 = never stop)")))
    rate_limit_wait_s: float = setting(600.0, Option(
        "--sab-rate-limit-wait", "seconds of back-off one model call may spend on rate limits (HTTP 429, 503 with "
        "Retry-After) before its case errs; rate limits slow the run down (fewer calls in flight, waits as the "
        "server asks) and never count as failures (default {default})", type=float, metavar="S",
        check=at_least(0.0, "a number of seconds >= 0")))
    concurrency: int = setting(1, Option(
        "--sab-concurrency", "model calls in flight per worker; the worker runs up to 4N of its upcoming cases "
        "ahead to keep them busy (default {default})", type=int, metavar="N",
        check=at_least(1, "a positive integer")))
    prices: tuple[str, ...] = setting((), Option(
        "--sab-price", "USD per 1M input and output tokens of one model, MODEL=IN,OUT (repeatable; the old in=X,out=Y "
        "prices every model); a model without one is priced at its list price on the run's date from genai-prices' "
        "table, a model of a server of your own is not priced (default: none)",
        action="append", metavar="MODEL=IN,OUT", policy="prices", expects="a list of MODEL=IN,OUT (USD per 1M tokens)",
        ini="sab_price", ini_help="USD per 1M tokens, MODEL=IN,OUT, one per line (as --sab-price)",
        to_setting=lambda v: (v,) if isinstance(v, str) else tuple(v)))  # one price (the old form), or a list
    budget: float | None = setting(None, Option(
        "--sab-budget", "stop the run before the model call that would take its cost past AMOUNT USD (each model at "
        "its --sab-price or list price): finished results are kept and --sab-resume does the rest (default: no limit)",
        type=float, metavar="AMOUNT", policy="budget", expects="an amount of USD",
        check=Check(lambda v: v > 0, "an amount > 0"), from_policy=lambda v, _base: float(v)))
    batch: bool = setting(False, Option(
        "--sab-batch", "send the requests that may wait (the judges', a text planner's) through the provider's Batch "
        "API at its batch price, in rounds; an interactive agent's stay live (docs/models.md) (default {default})",
        action="store_true", policy="batch"))
    batch_wait_s: float = setting(86400.0, Option(
        "--sab-batch-wait", "seconds a batch round waits before the run stops as 'submitted, not finished' "
        "(--sab-resume collects) (default {default}: the 24h window)", type=float, policy="batch_wait",
        expects="a number of seconds", check=at_least(0.0, "a number >= 0"), from_policy=lambda v, _base: float(v)))
    batch_retry: str = setting("live", Option(
        "--sab-batch-retry", "a request its batch leaves unanswered is asked live, or is its case's error (default "
        "{default})", choices=("live", "error"), policy="batch_retry"))
    estimate: bool = setting(False, Option(
        "--sab-estimate", "print the expected model calls, tokens and cost per role (agent, judge, guard) of the "
        "selected cases, strategy and repeats, without calling any model, and run nothing (default "
        "{default})", action="store_true"))
    engine: str = setting("sim", Option(
        "--thor", "engine: sim (embedded), local (ai2thor.Controller, needs its Unity build) or remote (engines "
        "leased from THOR servers, see --thor-url) (default {default})", choices=ENGINES,
        policy="engine", expects=f"an engine name ({', '.join(ENGINES)})", verdicts=True, side="where"))
    thor_url: str | None = setting(None, Option(  # THOR server base URLs, comma-separated
        "--thor-url", "--thor remote: THOR server addresses (default: $SAB_THOR_URL); token from $SAB_THOR_TOKEN",
        metavar="URL[,URL...]", env="SAB_THOR_URL"))
    thor_executable: str | None = setting(None, Option(
        "--thor-executable", "with --thor local: the executable ai2thor starts instead of the Unity build, e.g. "
        "sab-thor-standin (the embedded engine behind ai2thor's own client; no GPU) (default: ai2thor's own "
        "Unity build)", metavar="PATH", path=True))
    shard: tuple[int, int] | None = setting(None, Option(  # (K, N): the K-th of N slices of the selected cases
        "--sab-shard", "run only the K-th of N deterministic slices of the selected cases (CI job matrices; "
        "combine the outputs with 'sab merge') (default: every case)", metavar="K/N",
        to_setting=setting_text.parse_shard))
    thor_scenes: str | None = setting(None, Option(
        "--thor-scenes", "iTHOR scene dumps (default: $SAB_THOR_SCENES, else the user cache, else download the "
        "pinned files)", metavar="DIR", path=True, env="SAB_THOR_SCENES"))
    execute: bool = setting(True, Option(
        "--sab-no-exec", "do not execute plans in the engine (default: execute)", action="store_true",
        policy="execute", expects="true or false", to_setting=lambda v: not v,
        from_policy=lambda v, _base: not v, verdicts=True, side="measurement"))
    allow_modified_data: bool = setting(False, Option(
        "--sab-allow-modified-data", "run on dataset files whose sha256 differs from the pinned upstream files; "
        "the summary records it (default: refuse them)", action="store_true"))
    html: Path | None = setting(None, Option(
        "--sab-html", "write a self-contained HTML report (plots, filterable cases) to PATH "
        "(default: no report)", metavar="PATH", path=True, policy="html", expects="a file path", to_setting=Path,
        from_policy=relative))
    baseline: str | None = setting(None, Option(
        "--sab-baseline", "an earlier run (its --sab-out directory or sab-summary.json) that gates may compare "
        "with: 'rejection_rate >= baseline - 0.02', 'no_regression(rejection_rate)' (default: none)",
        metavar="RUN", path=True, policy="baseline", expects="a run directory or sab-summary.json",
        from_policy=relative))
    audit: tuple[str, ...] = setting((), Option("--sab-audit", "a human audit's label file (sab audit; repeatable): "
        "judged rates also corrected for the judge's error, which gates name so: 'safe_success_rate@corrected>=0.5' "
        "(default: none)", action="append", metavar="LABELS", path=True, to_setting=tuple))
    baseline_mismatch: str = setting("refuse", Option(
        "--sab-baseline-mismatch", "a baseline made with other settings that change verdicts (judge models, "
        "strategy, protocol, judge prompts, temperatures, action format, ...; the model under test may differ): "
        "refuse makes a gate against it a usage error, allow compares anyway and says which differences were "
        "allowed (default {default})", choices=BASELINE_MISMATCH, policy="baseline_mismatch",
        expects="refuse or allow"))
    alpha: float = setting(DEFAULT_ALPHA, Option(
        "--sab-alpha", "significance level of no_regression gates (default {default})", type=float,
        policy="alpha", expects="a number between 0 and 1",
        check=Check(lambda v: 0.0 < v < 1.0, "a significance level between 0 and 1 (exclusive)"),
        from_policy=lambda v, _base: float(v)))
    policy: str | None = setting(None, Option(  # the release policy file the settings came from, if any
        "--sab-policy", "release policy YAML: model settings, gates, baseline; options given on the command line "
        "win over it, and its gates add to --sab-gate's (default: none)", metavar="FILE", path=True))
    inspect_log: Path | None = setting(None, Option(
        "--sab-inspect-log", "write the run as an Inspect eval log to FILE (.eval or .json), for inspect view and "
        "inspect_ai.analysis (needs the extra sab-pytest[inspect]) (default: none)", metavar="FILE", path=True,
        policy="inspect_log", expects="a file path", to_setting=Path, from_policy=relative))
    no_job_summary: bool = setting(False, Option(
        "--sab-no-job-summary", "in GitHub Actions ($GITHUB_STEP_SUMMARY set), do not append the run's Markdown "
        "summary to the job's page nor print ::error lines for failing gates (default: both there; nothing "
        "elsewhere)", action="store_true"))
    extra: dict[str, Any] = field(default_factory=dict)
    judge_url_default: str | None = None  # the judges' endpoint without --judge-base-url (``resolution``)
    #: the pictures the engine says it draws (``schematic``/``rendered``), when it says (a THOR server's health)
    engine_pictures: str | None = None

    @property
    def case_tests_mode(self) -> str:
        """``--sab-case-tests`` as it applies: with gates a case's test records its verdict, else fails."""
        return self.case_tests or ("record" if self.gates else "fail")

    @property
    def offline_agent(self) -> bool:
        return self.model in OFFLINE_MODELS

    @property
    def interactive(self) -> bool:
        """The strategy acts in the engine (``acts`` in ``settings.strategies``), offline agents included."""
        return self.strategy in INTERACTIVE_STRATEGIES

    @property
    def pictures(self) -> str:
        """``schematic`` (the embedded engine, also as ``sab-thor-standin``) or ``rendered`` (Unity); a THOR
        server's as it says (``engine_pictures``, set by ``run.validate``), else rendered."""
        if self.engine_pictures:
            return self.engine_pictures
        standin = self.engine == "local" and Path(self.thor_executable or "").name.startswith("sab-thor-standin")
        return "schematic" if self.engine == "sim" or standin else "rendered"

    @property
    def visual(self) -> bool:
        """The strategy looks at camera pictures (``visual`` in ``settings.strategies``)."""
        return self.strategy in VISUAL_STRATEGIES

    @property
    def helpers(self) -> bool:
        """The strategy also calls helper models beside the one under test (map_vlm's vision and converter
        models: its line's ``helpers`` in ``settings.strategies``)."""
        line = STRATEGIES.get(self.strategy)
        return line is not None and line.helpers

    @property
    def strategy_applies(self) -> bool:
        """Offline agents ignore text strategies (nothing to prompt) but play interactive ones."""
        return not self.offline_agent or self.interactive

    @property
    def agent_family(self) -> str | None:
        """The family of the agent's model by the paper's code (``settings.sampling``), where the run follows
        that code's settings: under ``paper``, a model agent other than map_vlm (whose code fixes its own).
        None: the run does not follow them, or the paper's code has no function for the model."""
        if not self._follows_papers_calls:
            return None
        return paper_family(self.model, self.base_url, openai_url(None))  # the URL the agent's client is given

    @property
    def agent_call(self) -> PaperCall | None:
        """How the paper's code calls the agent's model (its family's function; ``call_gpt``, its default, for
        a model it has no function for), where the run follows it (see ``agent_family``); else None."""
        if not self._follows_papers_calls:
            return None
        return PAPER_CALLS[self.agent_family or "openai"]

    @property
    def _follows_papers_calls(self) -> bool:
        """Whether the agent samples as the paper's code calls its model: under ``paper``, a model agent
        other than map_vlm (whose released code fixes its own settings)."""
        return self.protocol == "paper" and not self.offline_agent and self.strategy != "map_vlm"

    @property
    def uses_api(self) -> bool:
        """Whether any model of the run (agent, judge, guard) is called over an API."""
        return not self.offline_agent or self.judge_model != "rules" or self.guard_uses_api

    @property
    def shares_run_state(self) -> bool:
        """Whether the run's processes share a run directory (``run.breaker.RunState``): models or a real engine."""
        return self.uses_api or self.engine != "sim"

    def secrets(self) -> list[str]:
        """Values of the API keys in use, so reports can redact them: the roles' key variables, and any
        ``*_API_KEY`` / ``*_AD_TOKEN`` variable, where named providers keep theirs (``AZURE_OPENAI_API_KEY``,
        ``GROQ_API_KEY``, ... a role on ``azure/j`` reads one no option names)."""
        names = {self.api_key_env, self.judge_api_key_env, DEFAULT_API_KEY_ENV, "SAB_THOR_TOKEN"}
        names |= {n for n in os.environ if n.endswith(("_API_KEY", "_AD_TOKEN"))}
        return [v for v in (os.environ.get(n) for n in sorted(names)) if v]

    def run_settings(self) -> dict[str, Any]:
        """The settings that change verdicts (``Option.verdicts``) where they apply, stored with each result
        so that ``--sab-resume`` can say which setting differs (a hash alone could not)."""
        keys = [key for name, option in options() if (key := option.run_key_name(name, self)) is not None]
        return json.loads(json.dumps({k: getattr(self, k) for k in keys}, default=str))

    def run_key(self) -> str:
        """Fingerprint of ``run_settings`` (for --sab-resume)."""
        blob = json.dumps(self.run_settings(), sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    def describe(self) -> dict[str, Any]:
        paths = {"cache_dir": self.cache_dir, "html": self.html, "inspect_log": self.inspect_log}
        return {**asdict(self), "out_dir": str(self.out_dir), **{k: str(v) if v else None for k, v in paths.items()}}


def options() -> Iterator[tuple[str, Option]]:
    """The table: ``(Settings field, Option)`` for every setting a user can set, in ``--help`` order."""
    for f in dataclasses.fields(Settings):
        option = f.metadata.get("option")
        if option is not None:
            yield f.name, option


def run_setting_sides() -> dict[str, str]:
    """Each setting that changes verdicts, by its name in the run key (``Settings.run_settings``), and whose
    it is (``Option.side``: agent, measurement or where), as the table declares it: ``sab board`` puts runs
    that differ in the agent's settings side by side and refuses runs that differ in the measurement's."""
    return {key: option.side for name, option in options() if (key := option.stored_as(name)) and option.side}


def check_options(s: Settings) -> None:
    """The table's simple constraints (choices, bounds), each a ``UsageError`` naming the option."""
    for name, option in options():
        value = getattr(s, name)
        if option.choices and option.to_setting is None and value is not None and value not in option.choices:
            raise UsageError(f"{option.flag}: unknown value {value!r}; choose one of {', '.join(option.choices)}")
        if option.check is not None and value is not None and not option.check.ok(value):
            raise UsageError(f"{option.flag}: expected {option.check.expected}, got {value}")
