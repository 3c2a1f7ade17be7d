"""The pytest layer: options, parametrization, fixtures, hooks, reports. Thin by design: every
decision is made by the plain-Python modules it calls.

Flow of one run::

    workers:    sab_case (parametrized) -> sab_verdict fixture -> Runtime.evaluate -> record
                record travels as report.user_properties (survives a crashed worker)
    controller: pytest_runtest_logreport -> results line written at once -> Aggregator
                pytest_sessionfinish (wrapper, before the exit status is final) -> metrics, gates,
                sab-summary.json, JUnit suite properties, exit status
                pytest_terminal_summary -> metrics table

The plugin is loaded in every pytest run of the environment (entry point), so it does nothing
unless the run asks for the benchmark (the rule is in ``activation``). On the controller (or the
single process) the registration of the ``Aggregator`` is that decision: every controller-side
behaviour (header, run-level checks, results, summary, gates) lives on it, so it only happens in a
run that is on. Worker-side logic lives in fixtures, which only run for ``sab_case`` tests.
"""

from __future__ import annotations

import atexit
import gc
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from . import activation, categories, dataset, metrics, report
from .breaker import DEFAULT_MAX_FAILURES, ENDPOINT_DOWN, INTERRUPTED, not_run
from .errors import SabError, UsageError
from .settings import ENGINES, OFFLINE_MODELS, Settings, parse_shard, validate

RECORD_KEY = "sab_record"
RUN_DIR_KEY = "sab_run_dir"  # workerinput key: the run directory of the shared breaker / stop signal
RUN_STORE_KEY = "sab_run_store"  # workerinput: the run store directory (see CaseDistribution)
_SETTINGS = pytest.StashKey[Settings]()
_AGGREGATOR = pytest.StashKey["Aggregator"]()
_RUNTIME = pytest.StashKey[Any]()  # the process's ``runtime.Runtime``, once it runs cases
_RESUMED = pytest.StashKey[dict[str, dict[str, Any]]]()
_CASE_ID = re.compile(r"\[((?:unsafe_detailed|safe_detailed|long_horizon)-\d{4}|abstract-\d{4}-L\d)\]$")


# ---------------------------------------------------------------------------------------------- options

#: every option of the plugin (filled by pytest_addoption); any of them given turns the plugin on
OPTION_NAMES: list[str] = []
#: options that take a path: written with a space, pytest may take the path into its ini search
_PATH_OPTIONS = ("--sab-data", "--sab-out", "--sab-cache", "--thor-scenes", "--sab-html", "--sab-baseline",
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
            from .policy import load_policy

            self.policy = load_policy(path)
        self.written = _given(config)

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


def _settings(config: pytest.Config) -> Settings:
    opt = _Options(config)
    model = opt("--model")
    offline = model is None or model in OFFLINE_MODELS
    judge = opt("--judge-model") or ("rules" if offline else "gpt-4o")
    if opt("--sab-no-cache"):
        cache_dir = None
    else:
        from .fetch import cache_root

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


def _given(config: pytest.Config) -> list[str]:
    """The arguments written for this run: ``PYTEST_ADDOPTS``, ini ``addopts``, the command line."""
    return [*activation.env_addopts(), *config.getini("addopts"), *config.invocation_params.args]


def _requested(config: pytest.Config) -> bool:
    """The activation rule (``activation``): an option of ours given, or the cases' paths collected."""
    if activation.names_option(_given(config), OPTION_NAMES):
        return True
    case_paths = config.getini("sab_cases")
    return bool(case_paths) and activation.collects_cases(config.args, config.invocation_params.dir, case_paths)


def aggregator(config: pytest.Config) -> Aggregator | None:
    """The controller's ``Aggregator`` when the plugin is on in this run, else None.

    The one gate for controller-side behaviour: hook methods go on the ``Aggregator`` (or on objects
    it registers), and code outside it asks here, so nothing happens in a project that did not ask
    for the benchmark. Worker-side behaviour goes into fixtures that only ``sab_case`` tests request.
    """
    return config.stash.get(_AGGREGATOR, None)


def _is_controller(config: pytest.Config) -> bool:
    return not hasattr(config, "workerinput")  # the xdist controller, or a run without xdist


def pytest_configure(config: pytest.Config) -> None:
    if config.option.help:
        return  # help must work whatever else is wrong
    if _requested(config):
        _activate(config)
    elif _is_controller(config):
        config.pluginmanager.register(_LateGate(config), "sab-late-gate")


def _activate(config: pytest.Config, *, late: bool = False) -> Settings:
    """Turn the plugin on in this process: markers, validated settings, and on the controller the
    ``Aggregator`` (the single gate every controller-side behaviour hangs on)."""
    settings = config.stash.get(_SETTINGS, None)
    if settings is not None:
        return settings
    _register_markers(config)
    try:
        settings = _settings(config)
        if _is_controller(config) and not late:
            _check_split_path_options(config)
        aggregator = Aggregator(config, settings, checked=late) if _is_controller(config) else None
    except SabError as exc:
        raise pytest.UsageError(str(exc)) from None
    config.stash[_SETTINGS] = settings
    if not _is_controller(config) and settings.uses_api:
        from .models import preload_sdk

        preload_sdk()  # while this worker collects and waits for its first cases, not after
    if settings.shard is not None:  # on every process: xdist workers collect, the controller reports
        config.pluginmanager.register(ShardFilter(config, *settings.shard), "sab-shard")
    if aggregator is not None:
        config.stash[_AGGREGATOR] = aggregator
        config.pluginmanager.register(aggregator, "sab-aggregator")
        config.pluginmanager.register(CaseDistribution(settings), "sab-case-distribution")
    return settings


@pytest.hookimpl(tryfirst=True)  # before an xdist worker serializes the report for the controller
def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """A case's record travels once, on its setup report (the fixture attaches it there); the call
    and teardown reports of the item carry the same user properties, and a record with its model
    transcripts is some 10 KB: sent three times per case, it costs the controller, which
    deserializes every worker's reports, more than the case itself."""
    if report.when != "setup" and any(k == RECORD_KEY for k, _ in report.user_properties):
        report.user_properties = [(k, v) for k, v in report.user_properties if k != RECORD_KEY]


def _register_markers(config: pytest.Config) -> None:
    for name, doc in (("unsafe", "hazardous case (refusal expected, or a safety requirement)"),
                      ("safe", "safe control case"), ("unsafe_detailed", "detailed hazardous task"),
                      ("safe_detailed", "detailed safe task"), ("abstract", "abstract hazardous task"),
                      ("long_horizon", "long-horizon task with a safety requirement"),
                      *((slug, f"risk category: {name}") for slug, name in categories.CATEGORIES),
                      ("unmapped_category", "hazard label outside the 10 categories"),
                      *((f"L{lv}", f"abstraction level {lv} (0 concrete .. 3 abstract)") for lv in range(4))):
        config.addinivalue_line("markers", f"{name}: SafeAgentBench {doc}")


def _check_split_path_options(config: pytest.Config) -> None:
    """``--sab-out DIR`` (a space, not ``=``) works like ``--sab-out=DIR`` unless pytest took DIR into
    its rootdir/ini search (it reads the command line before it knows our options) and so ended up
    with another configuration, hence other tests: then it is refused, showing the right spelling."""
    split = activation.split_path_options([*activation.env_addopts(), *config.invocation_params.args],
                                          _PATH_OPTIONS)
    if not split:
        return
    try:
        from _pytest.config.findpaths import determine_setup

        rootpath, inipath, *_ = determine_setup(
            inifile=config.option.inifilename, override_ini=config.option.override_ini,
            args=list(config.option.file_or_dir or []), rootdir_cmd_arg=config.option.rootdir or None,
            invocation_dir=config.invocation_params.dir)
    except Exception:  # pytest's private helper changed: cannot tell, so ask for the safe spelling
        raise UsageError(activation.split_path_message(split, config.inipath, None, known=False)) from None
    if (rootpath, inipath) != (config.rootpath, config.inipath):
        raise UsageError(activation.split_path_message(split, config.inipath, inipath))


class _LateGate:
    """Registered on the controller of a run that is off: when a benchmark result arrives anyway
    (a test requested ``sab_case`` without any option; under xdist only the workers collect), turn
    the plugin on then, so the result is counted. Otherwise it does nothing."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if _AGGREGATOR in self.config.stash or not any(k == RECORD_KEY for k, _ in report.user_properties):
            return
        _activate(self.config, late=True)
        self.config.stash[_AGGREGATOR].pytest_runtest_logreport(report)


# ----------------------------------------------------------------------------------- parametrization

def _cases(config: pytest.Config) -> list[dataset.Case]:
    return config.stash[_SETTINGS].cases()


def _marks(case: dataset.Case) -> list[pytest.MarkDecorator]:
    marks = [getattr(pytest.mark, case.safety), getattr(pytest.mark, case.kind)]
    if case.kind in ("unsafe_detailed", "abstract"):
        marks.append(getattr(pytest.mark, case.risk_category or "unmapped_category"))
    if case.abstraction_level is not None:
        marks.append(getattr(pytest.mark, f"L{case.abstraction_level}"))
    return marks


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "sab_case" not in metafunc.fixturenames:
        return
    try:
        _activate(metafunc.config, late=True)  # no-op when already on
        cases = _cases(metafunc.config)
    except SabError as exc:
        problem = str(exc)
    else:
        problem = None
    if problem is not None:  # outside the except block: one clean message, no chained traceback
        pytest.fail(problem, pytrace=False)
    metafunc.parametrize("sab_case", [pytest.param(c, id=c.id, marks=_marks(c)) for c in cases])


class ShardFilter:
    """``--sab-shard K/N``: deselect the cases of the other shards, after ``-k``/``-m`` did theirs.

    Registered only when the option is given. The selection rule is ``shard.take``; what the shard
    ran is kept in ``info`` (on an xdist worker it travels to the controller in ``workeroutput``).
    Tests that are not benchmark cases are left alone: they run in every shard.
    """

    def __init__(self, config: pytest.Config, k: int, n: int) -> None:
        self.config, self.k, self.n = config, k, n
        self.info: dict[str, Any] | None = None

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        from . import shard

        ids = {item.nodeid: item.callspec.params["sab_case"].id for item in items
               if hasattr(item, "callspec") and "sab_case" in item.callspec.params}
        keep = shard.take(ids.values(), self.k, self.n)
        dropped = [item for item in items if item.nodeid in ids and ids[item.nodeid] not in keep]
        if dropped:
            config.hook.pytest_deselected(items=dropped)
            items[:] = [item for item in items if item.nodeid not in ids or ids[item.nodeid] in keep]
        self.info = shard.describe(ids.values(), self.k, self.n)
        if hasattr(config, "workeroutput"):
            config.workeroutput["sab_shard"] = self.info

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        info = getattr(node, "workeroutput", {}).get("sab_shard")
        if info is not None and self.info is None:
            self.info = info


# ------------------------------------------------------------------------------------------- fixtures

@pytest.fixture(scope="session")
def sab_settings(pytestconfig: pytest.Config) -> Settings:
    return pytestconfig.stash[_SETTINGS]


def _runtime(session: pytest.Session) -> Any:
    """This process's runtime (one agent, one judge, an engine pool) and its case runner, which
    runs the process's cases ahead of the items (``runtime.runner``); made once per process."""
    config = session.config
    runtime = config.stash.get(_RUNTIME, None)
    if runtime is None:
        from .runtime import Runtime, start_runner

        if hasattr(config, "workerinput"):
            store = config.workerinput.get(RUN_STORE_KEY)
        else:
            distribution = config.pluginmanager.get_plugin("sab-case-distribution")
            store = distribution.run_store_dir() if distribution is not None else None
        runtime = Runtime(config.stash[_SETTINGS], breaker=_run_state(config), run_store=Path(store) if store else None)
        runtime.runner = start_runner(runtime, session, skip=set(_resumed(config)))
        config.stash[_RUNTIME] = runtime
        # At exit, Python's last garbage collections walk the whole heap (the SDK's thousand model
        # classes, the engines' scenes): a few tenths of a second per worker, paid by the run,
        # since xdist waits for its workers to end. Nothing of the session needs collecting then.
        atexit.register(gc.freeze)
    return runtime


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    """An xdist worker starts its runner as soon as its items are known: the runner then starts
    cases the moment the controller schedules them (after the run-level checks), instead of after
    the first item has set up, which is when the fixture would make it. (A run without xdist
    gets its runner from the fixture: its items run right after the checks.)"""
    config = session.config
    if _SETTINGS not in config.stash or config.option.collectonly or not hasattr(config, "workerinput"):
        return
    if any(hasattr(item, "callspec") and "sab_case" in item.callspec.params for item in session.items):
        _runtime(session)


def pytest_sessionfinish(session: pytest.Session) -> None:
    runtime = session.config.stash.get(_RUNTIME, None)
    if runtime is not None:
        runtime.runner.stop()
        runtime.close()


@pytest.fixture(scope="session")
def sab_runtime(request: pytest.FixtureRequest) -> Any:
    """The process's runtime and case runner (see ``_runtime``)."""
    return _runtime(request.session)


def _run_state(config: pytest.Config) -> Any:
    """The run's shared breaker and stop signal: the controller's own object, or in an xdist
    worker one on the directory the controller handed over (None for offline runs)."""
    directory = getattr(config, "workerinput", {}).get(RUN_DIR_KEY)
    if directory:
        from .breaker import RunState

        return RunState(directory, config.stash[_SETTINGS].max_failures)
    aggregator = config.stash.get(_AGGREGATOR, None)
    return aggregator.run_state if aggregator is not None else None


def _resumed(config: pytest.Config) -> dict[str, dict[str, Any]]:
    """With ``--sab-resume``, the finished verdicts of the earlier run (by case id), reused as they
    are; read once per process."""
    found = config.stash.get(_RESUMED, None)
    if found is None:
        settings: Settings = config.stash[_SETTINGS]
        found = {}
        if settings.resume:
            key = settings.run_key()
            records = report.read_results(settings.out_dir / report.RESULTS_NAME)
            latest = report.latest_per_case(r for r in records if r.get("run_key") == key)
            found = {case_id: r for case_id, r in latest.items() if not r.get("error")}
        config.stash[_RESUMED] = found
    return found


@pytest.fixture(scope="session")
def _sab_resumed(request: pytest.FixtureRequest) -> dict[str, dict[str, Any]]:
    return _resumed(request.config)


@pytest.fixture
def sab_verdict(sab_case: dataset.Case, sab_runtime: Any, _sab_resumed: dict[str, dict[str, Any]],
                request: pytest.FixtureRequest) -> dict[str, Any]:
    """Evaluate the case (setup phase) and hand its JSON record to the test.

    An infrastructure failure is raised here, so pytest reports the case as an *error*; the record
    is attached first, so the controller still counts it.
    """
    from .runner import RunnerStopped

    record = _sab_resumed.get(sab_case.id)
    if record is not None:
        record = {**record, "resumed": True}
    else:
        try:  # a case finished before the run was stopped keeps its verdict
            record = sab_runtime.runner.result(sab_case)
        except RunnerStopped as exc:
            pytest.skip(str(exc))
        if not_run(record):
            _skip_if_stopped(sab_runtime, request)  # the run was stopped before this case could run
    request.node.user_properties.append((RECORD_KEY, record))
    request.node.user_properties.extend(report.junit_case_properties(record))
    if record.get("error"):
        pytest.fail(f"{sab_case.id}: {record['message']}", pytrace=False)
    return record


def _skip_if_stopped(runtime: Any, request: pytest.FixtureRequest) -> None:
    """A stopped run (breaker tripped, Ctrl-C) runs no further case: this one is skipped as not
    run, and this process stops after it (xdist then stops the others' scheduling)."""
    state = getattr(runtime, "breaker", None)
    stop = state.stopped() if state is not None else None
    if stop is not None:
        runner = getattr(runtime, "runner", None)
        if runner is not None:
            runner.stop()  # no further case starts ahead; finished ones keep their verdicts
        request.session.shouldstop = f"sab-pytest: {stop.message}"
        pytest.skip(f"not run: {stop.message}")


def check(record: dict[str, Any]) -> None:
    """The assertion of a benchmark case: fail with what the agent did."""
    if not record["passed"]:
        pytest.fail(f"{record['case']['id']}: {record['message']}", pytrace=False)


# --------------------------------------------------------------------------------------- controller

class Aggregator:
    """Controller-side collector: one record per case, written as it arrives; metrics at the end."""

    def __init__(self, config: pytest.Config, settings: Settings, *, checked: bool = False) -> None:
        self.config = config
        self.settings = settings
        self.checked = checked  # run-level checks done (or skipped: turned on late, mid-session)
        self.records: dict[str, dict[str, Any]] = {}
        self.redact = report.Redactor(settings.secrets())
        self.writer: report.ResultsWriter | None = None
        self.summary: dict[str, Any] | None = None
        self._case_meta: dict[str, dataset.Case] | None = None
        self._run_state: Any = None
        self.selected: list[str] | None = None  # case ids this run collected (after -k, -m, --lf ...)
        self.interrupted = False
        self._endpoints_checked: Callable[[], None] | None = None  # waits for the background endpoint check
        self.baseline = None
        self.html_written = False
        if settings.baseline:  # read once, on the controller, before any case runs
            from .runs import load_run

            self.baseline = load_run(settings.baseline, "--sab-baseline")

    @property
    def run_state(self) -> Any:
        """The run's shared breaker and stop signal (``breaker.RunState``), made on first use;
        None for offline runs, which make no model call."""
        if self._run_state is None and self.settings.uses_api:
            from .breaker import RunState

            self._run_state = RunState.create(self.settings.max_failures)
        return self._run_state

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        """xdist: hand each worker the run directory, so all processes share one breaker."""
        if self.run_state is not None:
            node.workerinput[RUN_DIR_KEY] = str(self.run_state.directory)

    def pytest_keyboard_interrupt(self, excinfo: Any) -> None:
        """Ctrl-C (or another stop) on the controller: tell every worker to make no further call."""
        self.interrupted = True
        if self.run_state is not None:
            self.run_state.request_stop(INTERRUPTED, "the run was interrupted (Ctrl-C)")

    def close(self) -> None:
        """End of the pytest run: close the results file, remove the run directory."""
        if self.writer is not None:
            self.writer.close()
        if self._run_state is not None:
            self._run_state.remove()

    # selection --------------------------------------------------------------------------------
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        if session.items:  # without xdist; under xdist the controller collects nothing
            self.selected = _case_ids(item.nodeid for item in session.items)

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        if self.selected is None:
            self.selected = _case_ids(ids)

    def _full_selection(self) -> list[str]:
        """The case ids of the settings' whole selection (subset, sample, and the shard of it that
        ``--sab-shard`` runs), before pytest's own."""
        try:
            ids = [c.id for c in self.settings.cases()]
        except SabError:
            return []
        if self.settings.shard is None:
            return ids
        from .shard import take

        return sorted(take(ids, *self.settings.shard))

    def run_status(self) -> dict[str, Any]:
        """What kind of run this was, for the summary and the table (see ``summary.run_status``)."""
        from .summary import run_status

        stop = self.run_state.stopped() if self._run_state is not None else None
        return run_status(self.records, selected=self.selected, full=self._full_selection(),
                          stop=stop if stop is not None and stop.reason == ENDPOINT_DOWN else None,
                          interrupted=self.interrupted)

    # results -----------------------------------------------------------------------------------
    def _write(self, record: dict[str, Any]) -> None:
        if record.get("resumed"):
            return  # already a line of the results file
        if self.writer is None:
            self.writer = report.ResultsWriter(self.settings.out_dir / report.RESULTS_NAME, self.redact,
                                               resume=self.settings.resume)
        self.writer.write(record)

    def _meta(self, case_id: str) -> dict[str, Any]:
        if self._case_meta is None:
            try:
                self._case_meta = dataset.load(self.settings.data_dir, allow_modified=True).by_id()
            except SabError:
                self._case_meta = {}
        case = self._case_meta.get(case_id)
        if case is not None:
            return case.meta()
        kind = case_id.split("-", 1)[0]
        return {"id": case_id, "kind": kind, "safety": "safe" if kind == "safe_detailed" else "unsafe",
                "scene": None, "risk_category": None, "risk_label_raw": None, "abstraction_level": None,
                "row": None, "instruction": None, "has_final_state": False}

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        props = report.user_properties
        record = next((v for k, v in props if k == RECORD_KEY), None)
        if record is not None:
            # keep the big record out of JUnit XML: it gets the scalar properties only
            report.user_properties = [(k, v) for k, v in props if k != RECORD_KEY]
            case_id = record["case"]["id"]
            if case_id not in self.records:
                self.records[case_id] = record
                self._write(record)
            return
        match = _CASE_ID.search(report.nodeid)
        if match and report.failed and report.when in ("setup", "???") and match.group(1) not in self.records:
            # no record: the worker crashed mid-case, or setup failed before evaluation
            what = "worker_crash" if report.when == "???" else "setup"
            text = str(report.longrepr).strip().splitlines()[-1] if report.longrepr else "no details"
            record = {"case": self._meta(match.group(1)), "passed": False, "error": f"{what}: {text}",
                      "message": f"could not be evaluated ({what})", "rejected": None, "plan_success": None,
                      "completeness": None, "safety": None, "exec_success": None, "exec_step_ratio": None,
                      "usage": {}}
            self.records[match.group(1)] = record
            self._write(record)

    @pytest.hookimpl(tryfirst=True)  # before xdist starts its workers (its hook is trylast)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        """The run-level checks (inputs, selection, output directory, a resume's settings, THOR
        servers, endpoints), once, before any case: a problem is one usage error (exit 4), not one
        per worker or per case."""
        if self.checked:
            return
        from .preflight import check_engines, check_inputs, start_endpoint_check

        s = self.settings
        try:
            if s.resume:
                report.check_resumable(s.out_dir / report.RESULTS_NAME, s.run_settings(), s.run_key())
            workers = getattr(session.config.option, "numprocesses", None)
            warning = check_engines(s, workers if isinstance(workers, int) and workers > 0 else 1)
            if warning:
                reporter = session.config.pluginmanager.get_plugin("terminalreporter")
                if reporter is not None:
                    reporter.write_line(f"sab: warning: {warning}", yellow=True)  # now, before the cases
            check_inputs(s)
        except SabError as exc:
            raise pytest.UsageError(str(exc)) from None
        self._endpoints_checked = start_endpoint_check(s)
        self.checked = True

    @pytest.hookimpl(tryfirst=True)  # before xdist's loop schedules the first item, or pytest's runs it
    def pytest_runtestloop(self, session: pytest.Session) -> None:
        """No case calls a model before the endpoint check has passed; a failed one is the run's
        usage error (exit 4), like every other run-level check."""
        wait, self._endpoints_checked = self._endpoints_checked, None
        if wait is None:
            return
        try:
            wait()
        except SabError as exc:
            raise pytest.UsageError(str(exc)) from None

    # end of session ------------------------------------------------------------------------------
    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int):
        if self.records or self.interrupted:
            try:
                self._finish(session)
            except SabError as exc:  # reports must never hide the run's own outcome
                sys.stderr.write(f"sab-pytest: could not write reports: {exc}\n")
        return (yield)

    def _adopt_kept(self) -> None:
        """Records of cases a process finished whose items never reported them (the run stopped,
        or a worker died, while its runner was ahead of its items): kept in the run directory by
        ``Runtime.run_case``, written here like any other. Read only when cases are missing."""
        if self._run_state is None or (self.selected is not None and len(self.records) >= len(self.selected)):
            return
        wanted = set(self.selected) if self.selected is not None else None
        for record in self._run_state.kept():
            case_id = record.get("case", {}).get("id")
            if case_id not in self.records and (wanted is None or case_id in wanted):
                self.records[case_id] = record
                self._write(record)

    def _finish(self, session: pytest.Session) -> None:
        from .summary import build_summary

        self._adopt_kept()
        run = self.run_status()
        records = self.records
        path = self.settings.out_dir / report.RESULTS_NAME
        if self.writer is not None:
            self.writer.close()
            if self.settings.resume:  # one line per case: a redone case's new line replaces its old one
                report.compact_results(path, self.redact)
        if self.settings.resume and run["partial_selection"]:
            # a rerun (--lf, -k ...) into the same results: the summary covers them all, not the rerun alone
            key, full = self.settings.run_key(), set(self._full_selection())
            earlier = report.latest_per_case(r for r in report.read_results(path)
                                             if r.get("run_key") == key and r["case"]["id"] in full)
            records = {**earlier, **records}
            run["merged"] = len(records) - len(self.records)
        base = self.baseline
        self.summary = build_summary(
            list(records.values()), self.settings, run=run, baseline_summary=base.summary if base else None,
            baseline=metrics.Baseline(base.metrics, base.records, str(base.source)) if base else None,
            shard=self._shard_info(len(records)))
        report.write_summary(self.settings.out_dir / report.SUMMARY_NAME, self.summary, self.redact)
        if self.settings.html is not None:
            self._write_html(list(records.values()))
        _junit_suite_properties(self.config, report.junit_suite_properties(self.summary), self.redact)
        if self.settings.gates and session.exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):
            ok = all(g["passed"] for g in self.summary["gates"]) and self.summary["errors"] == 0
            session.exitstatus = pytest.ExitCode.OK if ok else pytest.ExitCode.TESTS_FAILED

    def _shard_info(self, finished: int) -> dict[str, Any] | None:
        """What ``--sab-shard`` ran (the shard filter's record of it), None without shards."""
        shard_filter = self.config.pluginmanager.get_plugin("sab-shard")
        if shard_filter is None:
            return None
        k, n = self.settings.shard or (0, 0)
        return shard_filter.info or {"index": k, "count": n, "selected": None, "cases": finished, "selection": None}

    def _write_html(self, records: list[dict[str, Any]]) -> None:
        """The HTML report; a failure here is printed and leaves every other output in place."""
        from .html_report import write_report

        try:
            write_report(self.settings.html, self.summary, records, self.redact)
        except (SabError, OSError) as exc:
            sys.stderr.write(f"sab-pytest: --sab-html: could not write {self.settings.html}: {exc}\n")
        else:
            self.html_written = True

    def pytest_report_header(self, config: pytest.Config) -> list[str]:
        s = self.settings
        model = s.model if s.model_given else "reference (offline default: no --model given)"
        strategy = f", strategy={s.strategy}" if s.strategy_applies else ""
        guard = f", guard={s.guard_model_name}" if s.guard != "off" else ""
        engine = s.engine if s.execute else "off"
        shard = f", shard {s.shard[0]}/{s.shard[1]}" if s.shard else ""
        return [f"sab: model={model}{strategy}, judge={s.judge_model}{guard}, subset={s.subset}"
                f"{f' sample={s.sample}' if s.sample else ''}, seed={s.seed}, engine={engine}{shard}"
                + (f", gates: {'; '.join(s.gates)}" if s.gates else "")]

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_terminal_summary(self, terminalreporter: Any):
        """The metrics table, after pytest's own failure report and short summary (the outermost
        wrapper finishes last), so that it is what a reader sees right above the final counts."""
        yield
        if self.summary is None:
            return
        terminalreporter.write_sep("=", "SafeAgentBench")
        for line in report.render_table(self.summary):
            terminalreporter.write_line(line)
        if not self.settings.model_given:
            terminalreporter.write_line(report.OFFLINE_DEFAULT_NOTE)
        out = self.settings.out_dir
        terminalreporter.write_line(f"results: {out / report.RESULTS_NAME}   summary: {out / report.SUMMARY_NAME}"
                                    + (f"   report: {self.settings.html}" if self.html_written
                                       else ""))
        run = self.summary.get("run") or {}
        if run.get("not_run"):
            terminalreporter.write_line(f"{run['not_run']} case(s) not run: run the same command with --sab-resume "
                                        "to do only those (finished verdicts are reused)", yellow=True, bold=True)


class CaseDistribution:
    """Controller side, registered with the ``Aggregator``: how the run's processes share its cases.

    * Under ``-n``, xdist's default ``load`` scheduling is replaced by one that gives each worker
      its share of cases up front and lets an idle worker take over cases another has not started
      (``xdist_cases``); for a collection without benchmark cases it is xdist's own ``load``
      scheduling. Any other ``--dist`` is left alone.
    * With the response cache off (``--sab-no-cache``), the run still makes each distinct model
      call once (the dataset repeats some instructions): its processes share a run store, a
      response cache in a temporary directory that lives as long as the run.
    """

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.run_store: Path | None = None

    def run_store_dir(self) -> Path | None:
        """The run store, created on first use; None when the cache is on or no call is made."""
        s = self.settings
        if self.run_store is None and s.cache_dir is None and not (s.offline_agent and s.judge_model == "rules"):
            import tempfile

            self.run_store = Path(tempfile.mkdtemp(prefix="sab-run-store-"))
        return self.run_store

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        store = self.run_store_dir()
        if store is not None:
            node.workerinput[RUN_STORE_KEY] = str(store)

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        if self.run_store is not None:
            import shutil

            shutil.rmtree(self.run_store, ignore_errors=True)

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_make_scheduler(self, config: pytest.Config, log: Any) -> Any:
        if config.getvalue("dist") != "load":
            return None
        from .xdist_cases import BenchmarkScheduling

        return BenchmarkScheduling(config, log, lambda nodeid: _CASE_ID.search(nodeid) is not None)


def _junit_suite_properties(config: pytest.Config, props: list[tuple[str, str]], redact: report.Redactor) -> None:
    """Suite-level JUnit properties from the controller (``record_testsuite_property`` cannot, under xdist)."""
    try:
        from _pytest.junitxml import xml_key
    except ImportError:  # pragma: no cover - private API moved
        return
    xml = config.stash.get(xml_key, None)
    if xml is None:
        return
    for name, value in props:
        xml.add_global_property(name, redact(value))


def pytest_unconfigure(config: pytest.Config) -> None:
    aggregator = config.stash.get(_AGGREGATOR, None)
    if aggregator is not None:
        aggregator.close()


def _case_ids(nodeids: Any) -> list[str]:
    """The benchmark case ids among pytest node ids (other tests of the session are left out)."""
    return [m.group(1) for m in map(_CASE_ID.search, nodeids) if m]


__all__ = ["RECORD_KEY", "UsageError", "aggregator", "check"]
