"""The plugin's command-line options and ini settings, and the ``Settings`` they make.

Option values come from the command line (or ``addopts``), else the release policy file, else the
default (``_Options``); ``settings_from_config`` maps them onto ``Settings`` and validates them once.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from sab_pytest.errors import UsageError
from sab_pytest.pytest_layer import activation
from sab_pytest.settings import DEFAULT_MAX_FAILURES, ENGINES, OFFLINE_MODELS, Settings, parse_shard

#: every option of the plugin (filled by pytest_addoption); any of them given turns the plugin on
OPTION_NAMES: list[str] = []
#: options that take a path: written with a space, pytest may take the path into its ini search
PATH_OPTIONS = ("--sab-data", "--sab-out", "--sab-cache", "--thor-scenes", "--sab-html", "--sab-baseline",
                 "--sab-policy", "--thor-executable")


class _Group:
    """The option group, remembering the option names for the activation rule."""

    def __init__(self, group: Any) -> None:
        self.group = group

    def addoption(self, *names: str, **attrs: Any) -> None:
        OPTION_NAMES.extend(n for n in names if n not in OPTION_NAMES)
        self.group.addoption(*names, **attrs)


def pytest_addoption(parser: pytest.Parser) -> None:
    g = _Group(parser.getgroup("safeagentbench", "SafeAgentBench (sab-pytest)"))
    g.addoption("--model", default=None,
                help="model under test: an OpenAI-compatible model name (optional 'openai/' prefix), or the "
                     "offline agents 'reference' (answers with the reference plan; the default) and 'refuse'")
    g.addoption("--base-url", default=None, help="OpenAI-compatible endpoint (default: $OPENAI_BASE_URL)")
    g.addoption("--api-key-env", default="OPENAI_API_KEY", metavar="VAR",
                help="environment variable holding the API key (default OPENAI_API_KEY)")
    g.addoption("--judge-model", default=None,
                help="judge: 'rules' (offline rule judge) or a model name; default 'rules' for offline agents "
                     "and gpt-4o for real models")
    g.addoption("--judge-base-url", default=None, help="judge endpoint (default: the agent's)")
    g.addoption("--judge-api-key-env", default=None, metavar="VAR",
                help="judge API key variable (default: the agent's, --api-key-env)")
    g.addoption("--sab-strategy", default="direct",
                help="agent strategy (default direct): text planners direct, cot, two_stage, progprompt, fewshot, "
                     "cooperative, mldt; agents that act in the scene react, basic, pca, map_vlm")
    g.addoption("--sab-tool-protocol", default="tools", choices=("tools", "text"),
                help="how interactive agents act: native tool calls (default) or plain-text 'Action: ...' lines")
    g.addoption("--sab-max-steps", default=20, type=int, metavar="N",
                help="actions per episode of an interactive agent (default 20); reaching it ends the episode")
    g.addoption("--sab-max-images", default=2, type=int, metavar="N",
                help="camera pictures kept in a visual agent's conversation, latest first (default 2)")
    g.addoption("--sab-guard", default="off", choices=("off", "thinksafe"),
                help="thinksafe: a guard model rates every step before it reaches the robot; unsafe rejects the "
                     "task at that step (default off)")
    g.addoption("--sab-guard-model", default=None,
                help="guard model (default: the judge model; 'rules' = the offline keyword guard)")
    g.addoption("--sab-safety-hint", default="off", choices=("on", "off"),
                help="add one sentence inviting refusal of hazardous instructions to every strategy (default "
                     "off, as the paper ran them)")
    g.addoption("--sab-data", default=None, metavar="DIR", help="directory with the four dataset files "
                "(default: $SAB_DATA, else the user cache, else download the pinned files)")
    g.addoption("--sab-subset", default="mixed", help="mixed (130 cases, default), unsafe, safe or all")
    g.addoption("--sab-sample", default=None, type=int, metavar="N",
                help="seeded stratified sample of N cases of the subset (default: the whole subset)")
    g.addoption("--sab-seed", default=42, type=int, help="sampling seed (default 42)")
    g.addoption("--sab-gate", action="append", default=[], metavar="EXPR",
                help="CI gate, e.g. 'rejection_rate>=0.5' or 'rejection_rate[fire_hazard]>=0.8' (repeatable); "
                     "with gates the exit status is 0 only if every gate holds and no case errored (default: none; ini "
                     "sab_gates)")
    g.addoption("--sab-out", default=".", metavar="DIR",
                help="where sab-results.jsonl and sab-summary.json go (default: the current directory)")
    g.addoption("--sab-resume", action="store_true",
                help="reuse verdicts in DIR/sab-results.jsonl from an earlier run with the same settings (default off)")
    g.addoption("--sab-cache", default=None, metavar="DIR", help="model response cache directory "
                "(default: the user cache, $SAB_CACHE_HOME/responses)")
    g.addoption("--sab-no-cache", action="store_true", help="do not read or write the response cache (default: use it)")
    g.addoption("--sab-temperature", default=0.0, type=float, help="sampling temperature (default 0)")
    g.addoption("--sab-max-tokens", default=2048, type=int, help="max tokens per answer (default 2048)")
    g.addoption("--sab-timeout", default=60.0, type=float, help="seconds per model request (default 60)")
    g.addoption("--sab-retries", default=6, type=int, help="retries per model request (default 6)")
    g.addoption("--sab-case-budget", default=900.0, type=float, help="seconds of model time per case (default 900)")
    g.addoption("--sab-max-failures", default=DEFAULT_MAX_FAILURES, type=int, metavar="N",
                help="stop the run when N model calls in a row, counted across all workers, get no answer "
                     "(after retrying) with no success between them; 0 = never stop (default 10)")
    g.addoption("--sab-concurrency", default=1, type=int, metavar="N",
                help="model calls in flight per worker; the worker runs up to 4N of its upcoming cases ahead "
                     "to keep them busy (default 1)")
    g.addoption("--sab-price", default=None, metavar="in=X,out=Y",
                help="USD per 1M input/output tokens, for cost (default: ini sab_price, else no cost)")
    g.addoption("--thor", default="sim", choices=ENGINES,
                help="engine: sim (embedded, default), local (ai2thor.Controller, needs its Unity build) or "
                     "remote (engines leased from THOR servers, see --thor-url)")
    g.addoption("--thor-url", default=None, metavar="URL[,URL...]",
                help="--thor remote: THOR server addresses (default: $SAB_THOR_URL); token from $SAB_THOR_TOKEN")
    g.addoption("--thor-executable", default=None, metavar="PATH",
                help="with --thor local: the executable ai2thor starts instead of the Unity build, e.g. "
                     "sab-thor-standin (the embedded engine behind ai2thor's own client; no GPU) (default: "
                     "ai2thor's own Unity build)")
    g.addoption("--sab-shard", default=None, metavar="K/N",
                help="run only the K-th of N deterministic slices of the selected cases (CI job matrices; "
                     "combine the outputs with 'python -m sab_pytest merge') (default: every case)")
    g.addoption("--thor-scenes", default=None, metavar="DIR", help="iTHOR scene dumps (default: $SAB_THOR_SCENES, "
                "else the user cache, else download the pinned files)")
    g.addoption("--no-sab-exec", action="store_true", help="do not execute plans in the engine (default: execute)")
    g.addoption("--sab-allow-modified-data", action="store_true",
                help="run on dataset files whose sha256 differs from the pinned upstream files; the summary "
                     "records it (default: refuse them)")
    parser.addini("sab_cases", "paths holding the benchmark's cases: a run that collects one of them turns the "
                  "plugin on without any option (the checkout sets 'cases')", type="paths", default=[])
    g.addoption("--sab-html", default=None, metavar="PATH",
                help="write a self-contained HTML report (plots, filterable cases) to PATH (needs matplotlib) "
                     "(default: no report)")
    g.addoption("--sab-baseline", default=None, metavar="RUN",
                help="an earlier run (its --sab-out directory or sab-summary.json) that gates may compare with: "
                     "'rejection_rate >= baseline - 0.02', 'no_regression(rejection_rate)' (default: none)")
    g.addoption("--sab-alpha", default=0.05, type=float,
                help="significance level of no_regression gates (default 0.05)")
    g.addoption("--sab-policy", default=None, metavar="FILE",
                help="release policy YAML: model settings, gates, baseline; options given on the command line "
                     "win over it, and its gates add to --sab-gate's (default: none)")
    parser.addini("sab_gates", "CI gates, one per line (as --sab-gate)", type="linelist", default=[])
    parser.addini("sab_price", "USD per 1M tokens, 'in=X,out=Y' (as --sab-price)", default="")


class _Options:
    """Option values: written on the command line (or in addopts), else from the policy file, else the default."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        path = config.getoption("--sab-policy")
        self.policy = None
        if path:
            from sab_pytest.run.policy import load_policy

            self.policy = load_policy(path)
        self.written = given(config)

    def __call__(self, name: str) -> Any:
        value = self.config.getoption(name)
        if self.policy is None or name not in self.policy.values:
            return value
        if name == "--sab-gate":
            return [*self.policy.get(name), *value]
        if self._written(name):
            return value
        return self.policy.get(name)

    def _written(self, name: str) -> bool:
        return activation.names_option(self.written, (name,)) is not None

    def locate(self, exc: UsageError) -> UsageError:
        """An option's error, pointed at the policy line its value came from (when it came from there)."""
        if self.policy is not None:
            for option in self.policy.lines:  # (a gate's own message already quotes the gate)
                if str(exc).startswith(f"{option}:") and option != "--sab-gate" and not self._written(option):
                    return self.policy.located(option, str(exc))
        return exc


def settings_from_config(config: pytest.Config) -> Settings:
    from sab_pytest.run.validate import validate  # the domain's names: loaded only in a run that is on

    opt = _Options(config)
    model = opt("--model")
    offline = model is None or model in OFFLINE_MODELS
    judge = opt("--judge-model") or ("rules" if offline else "gpt-4o")
    if opt("--sab-no-cache"):
        cache_dir = None
    else:
        from sab_pytest.fetch import cache_root

        cache_dir = Path(opt("--sab-cache") or cache_root() / "responses")
    settings = Settings(
        model=model or "reference", model_given=model is not None,
        base_url=opt("--base-url") or os.environ.get("OPENAI_BASE_URL") or None,
        api_key_env=opt("--api-key-env"),
        judge_model=judge, judge_base_url=opt("--judge-base-url"),
        judge_api_key_env=opt("--judge-api-key-env") or opt("--api-key-env"),
        strategy=opt("--sab-strategy"), safety_hint=opt("--sab-safety-hint") == "on",
        temperature=opt("--sab-temperature"), max_tokens=opt("--sab-max-tokens"), timeout_s=opt("--sab-timeout"),
        max_retries=opt("--sab-retries"), case_budget_s=opt("--sab-case-budget"),
        concurrency=opt("--sab-concurrency"), max_failures=opt("--sab-max-failures"),
        data_dir=opt("--sab-data"), subset=opt("--sab-subset"), sample=opt("--sab-sample"), seed=opt("--sab-seed"),
        gates=tuple([*config.getini("sab_gates"), *opt("--sab-gate")]),
        out_dir=Path(opt("--sab-out")), cache_dir=cache_dir,
        prices=opt("--sab-price") or config.getini("sab_price") or None,
        engine=opt("--thor"), thor_executable=opt("--thor-executable"), shard=parse_shard(opt("--sab-shard")),
        thor_scenes=opt("--thor-scenes") or os.environ.get("SAB_THOR_SCENES") or None,
        thor_url=opt("--thor-url") or os.environ.get("SAB_THOR_URL") or None,
        execute=not opt("--no-sab-exec"), resume=opt("--sab-resume"),
        allow_modified_data=opt("--sab-allow-modified-data"),
        tool_protocol=opt("--sab-tool-protocol"), max_steps=opt("--sab-max-steps"),
        max_images=opt("--sab-max-images"), guard=opt("--sab-guard"), guard_model=opt("--sab-guard-model"),
        baseline=opt("--sab-baseline"), alpha=opt("--sab-alpha"),
        html=Path(opt("--sab-html")) if opt("--sab-html") else None,
        policy=config.getoption("--sab-policy"),
    )
    try:
        return validate(settings)
    except UsageError as exc:
        raise opt.locate(exc) from None



def given(config: pytest.Config) -> list[str]:
    """The arguments written for this run: ``PYTEST_ADDOPTS``, ini ``addopts``, the command line."""
    return [*activation.env_addopts(), *config.getini("addopts"), *config.invocation_params.args]

