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
unless a test requests ``sab_case``.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from . import categories, dataset, report
from .errors import SabError, UsageError
from .settings import OFFLINE_MODELS, Settings, validate

RECORD_KEY = "sab_record"
_SETTINGS = pytest.StashKey[Settings]()
_AGGREGATOR = pytest.StashKey["Aggregator"]()
_CASE_ID = re.compile(r"\[((?:unsafe_detailed|safe_detailed|long_horizon)-\d{4}|abstract-\d{4}-L\d)\]$")


# ---------------------------------------------------------------------------------------------- options

def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("safeagentbench", "SafeAgentBench (sab-pytest)")
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
    g.addoption("--judge-api-key-env", default=None, metavar="VAR", help="judge API key variable")
    g.addoption("--sab-strategy", default="direct",
                help="agent strategy: direct, cot, two_stage, progprompt, fewshot, cooperative, mldt")
    g.addoption("--sab-safety-hint", default="off", choices=("on", "off"),
                help="add one sentence inviting refusal of hazardous instructions to every strategy (default "
                     "off, as the paper ran them)")
    g.addoption("--sab-data", default=None, metavar="DIR", help="directory with the four dataset files "
                "(default: $SAB_DATA, else the user cache, else download the pinned files)")
    g.addoption("--sab-subset", default="mixed", help="mixed (130 cases, default), unsafe, safe or all")
    g.addoption("--sab-sample", default=None, type=int, metavar="N", help="seeded stratified sample of N cases")
    g.addoption("--sab-seed", default=42, type=int, help="sampling seed (default 42)")
    g.addoption("--sab-gate", action="append", default=[], metavar="EXPR",
                help="CI gate, e.g. 'rejection_rate>=0.5' or 'rejection_rate[fire_hazard]>=0.8' (repeatable); "
                     "with gates the exit status is 0 only if every gate holds and no case errored")
    g.addoption("--sab-out", default=".", metavar="DIR", help="where sab-results.jsonl and sab-summary.json go")
    g.addoption("--sab-resume", action="store_true",
                help="reuse verdicts in DIR/sab-results.jsonl from an earlier run with the same settings")
    g.addoption("--sab-cache", default=None, metavar="DIR", help="model response cache directory "
                "(default: the user cache)")
    g.addoption("--sab-no-cache", action="store_true", help="do not read or write the response cache")
    g.addoption("--sab-temperature", default=0.0, type=float, help="sampling temperature (default 0)")
    g.addoption("--sab-max-tokens", default=2048, type=int, help="max tokens per answer (default 2048)")
    g.addoption("--sab-timeout", default=60.0, type=float, help="seconds per model request (default 60)")
    g.addoption("--sab-retries", default=6, type=int, help="retries per model request (default 6)")
    g.addoption("--sab-case-budget", default=900.0, type=float, help="seconds of model time per case (default 900)")
    g.addoption("--sab-concurrency", default=1, type=int, metavar="N",
                help="model calls in flight per worker: N>1 prefetches upcoming cases' calls (default 1)")
    g.addoption("--sab-price", default=None, metavar="in=X,out=Y", help="USD per 1M input/output tokens, for cost")
    g.addoption("--thor", default="sim",
                help="engine: sim (embedded, default), local (ai2thor.Controller, needs its Unity build) or "
                     "remote (engines leased from THOR servers, see --thor-url)")
    g.addoption("--thor-url", default=None, metavar="URL[,URL...]",
                help="--thor remote: THOR server addresses (default: $SAB_THOR_URL); token from $SAB_THOR_TOKEN")
    g.addoption("--thor-scenes", default=None, metavar="DIR", help="iTHOR scene dumps (default: $SAB_THOR_SCENES, "
                "else the user cache, else download the pinned files)")
    g.addoption("--no-sab-exec", action="store_true", help="do not execute plans in the engine")
    parser.addini("sab_gates", "CI gates, one per line (as --sab-gate)", type="linelist", default=[])
    parser.addini("sab_price", "USD per 1M tokens, 'in=X,out=Y' (as --sab-price)", default="")


def _settings(config: pytest.Config) -> Settings:
    opt = config.getoption
    model = opt("--model")
    offline = model is None or model in OFFLINE_MODELS
    judge = opt("--judge-model") or ("rules" if offline else "gpt-4o")
    if opt("--sab-no-cache"):
        cache_dir = None
    else:
        from .fetch import cache_root

        cache_dir = Path(opt("--sab-cache") or cache_root() / "responses")
    return validate(Settings(
        model=model or "reference", model_given=model is not None,
        base_url=opt("--base-url") or os.environ.get("OPENAI_BASE_URL") or None,
        api_key_env=opt("--api-key-env"),
        judge_model=judge, judge_base_url=opt("--judge-base-url"),
        judge_api_key_env=opt("--judge-api-key-env") or opt("--api-key-env"),
        strategy=opt("--sab-strategy"), safety_hint=opt("--sab-safety-hint") == "on",
        temperature=opt("--sab-temperature"), max_tokens=opt("--sab-max-tokens"), timeout_s=opt("--sab-timeout"),
        max_retries=opt("--sab-retries"), case_budget_s=opt("--sab-case-budget"),
        concurrency=opt("--sab-concurrency"),
        data_dir=opt("--sab-data"), subset=opt("--sab-subset"), sample=opt("--sab-sample"), seed=opt("--sab-seed"),
        gates=tuple([*config.getini("sab_gates"), *opt("--sab-gate")]),
        out_dir=Path(opt("--sab-out")), cache_dir=cache_dir,
        prices=opt("--sab-price") or config.getini("sab_price") or None,
        engine=opt("--thor"),
        thor_scenes=opt("--thor-scenes") or os.environ.get("SAB_THOR_SCENES") or None,
        thor_url=opt("--thor-url") or os.environ.get("SAB_THOR_URL") or None,
        execute=not opt("--no-sab-exec"), resume=opt("--sab-resume"),
    ))


def pytest_configure(config: pytest.Config) -> None:
    for name, doc in (("unsafe", "hazardous case (refusal expected, or a safety requirement)"),
                      ("safe", "safe control case"), ("unsafe_detailed", "detailed hazardous task"),
                      ("safe_detailed", "detailed safe task"), ("abstract", "abstract hazardous task"),
                      ("long_horizon", "long-horizon task with a safety requirement"),
                      *((slug, f"risk category: {name}") for slug, name in categories.CATEGORIES),
                      ("unmapped_category", "hazard label outside the 10 categories"),
                      *((f"L{lv}", f"abstraction level {lv} (0 concrete .. 3 abstract)") for lv in range(4))):
        config.addinivalue_line("markers", f"{name}: SafeAgentBench {doc}")
    try:
        settings = _settings(config)
        if settings.prices:
            from .models import parse_prices

            parse_prices(settings.prices)
    except SabError as exc:
        raise pytest.UsageError(str(exc)) from None
    config.stash[_SETTINGS] = settings
    _warn_split_path_options(config)
    if not hasattr(config, "workerinput"):  # the controller (or a run without xdist)
        aggregator = Aggregator(config, settings)
        config.stash[_AGGREGATOR] = aggregator
        config.pluginmanager.register(aggregator, "sab-aggregator")


_PATH_OPTIONS = ("--sab-data", "--sab-out", "--sab-cache", "--thor-scenes")


def _warn_split_path_options(config: pytest.Config) -> None:
    """pytest looks for its ini file from every path-like argument, before plugins are loaded, so
    ``--sab-out /elsewhere`` can make it miss the project's ini (and its ``testpaths``). Say so."""
    args = list(config.invocation_params.args)
    split = [a for a, nxt in zip(args, [*args[1:], ""], strict=True) if a in _PATH_OPTIONS and os.path.exists(nxt)]
    if split and config.inipath is None:
        config.issue_config_time_warning(pytest.PytestConfigWarning(
            f"pytest found no ini file, possibly because of '{split[0]} PATH': write '{split[0]}=PATH' so pytest "
            "does not take the path into its rootdir and ini search"), stacklevel=2)


# ----------------------------------------------------------------------------------- parametrization

def _cases(config: pytest.Config) -> list[dataset.Case]:
    s = config.stash[_SETTINGS]
    return dataset.select(dataset.load(s.data_dir), s.subset, sample=s.sample, seed=s.seed)


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
        cases = _cases(metafunc.config)
    except SabError as exc:
        problem = str(exc)
    else:
        problem = None
    if problem is not None:  # outside the except block: one clean message, no chained traceback
        pytest.fail(problem, pytrace=False)
    metafunc.parametrize("sab_case", [pytest.param(c, id=c.id, marks=_marks(c)) for c in cases])


# ------------------------------------------------------------------------------------------- fixtures

@pytest.fixture(scope="session")
def sab_settings(pytestconfig: pytest.Config) -> Settings:
    return pytestconfig.stash[_SETTINGS]


@pytest.fixture(scope="session")
def sab_runtime(sab_settings: Settings, request: pytest.FixtureRequest):
    """One runtime per process (per xdist worker): one agent, one judge, one engine."""
    from .runtime import Runtime

    runtime = Runtime(sab_settings)
    prefetcher = _start_prefetch(runtime, request.session)
    runtime.prefetcher = prefetcher
    yield runtime
    if prefetcher is not None:
        prefetcher.stop()
    runtime.close()


def _start_prefetch(runtime: Any, session: pytest.Session) -> Any:
    s = runtime.settings
    if s.concurrency <= 1 or s.offline_agent or s.cache_dir is None:
        return None
    from .prefetch import Prefetcher

    cases = [item.callspec.params["sab_case"] for item in session.items
             if hasattr(item, "callspec") and "sab_case" in item.callspec.params]
    prefetcher = Prefetcher(runtime.warm, cases, concurrency=s.concurrency, key=lambda case: case.id)
    prefetcher.start()
    return prefetcher


@pytest.fixture(scope="session")
def _sab_resumed(sab_settings: Settings) -> dict[str, dict[str, Any]]:
    if not sab_settings.resume:
        return {}
    key = sab_settings.run_key()
    found = report.read_results(sab_settings.out_dir / report.RESULTS_NAME)
    return {r["case"]["id"]: r for r in found if r.get("run_key") == key and not r.get("error")}


@pytest.fixture
def sab_verdict(sab_case: dataset.Case, sab_runtime: Any, _sab_resumed: dict[str, dict[str, Any]],
                request: pytest.FixtureRequest) -> dict[str, Any]:
    """Evaluate the case (setup phase) and hand its JSON record to the test.

    An infrastructure failure is raised here, so pytest reports the case as an *error*; the record
    is attached first, so the controller still counts it.
    """
    prefetcher = getattr(sab_runtime, "prefetcher", None)
    if prefetcher is not None:
        prefetcher.mark_reached(sab_case)  # the test does this case itself now
    record = _sab_resumed.get(sab_case.id)
    if record is not None:
        record = {**record, "resumed": True}
    else:
        record = sab_runtime.evaluate(sab_case).to_record()
        record["run_key"] = sab_runtime.settings.run_key()
    request.node.user_properties.append((RECORD_KEY, record))
    request.node.user_properties.extend(report.junit_case_properties(record))
    if record.get("error"):
        pytest.fail(f"{sab_case.id}: {record['message']}", pytrace=False)
    return record


def check(record: dict[str, Any]) -> None:
    """The assertion of a benchmark case: fail with what the agent did."""
    if not record["passed"]:
        pytest.fail(f"{record['case']['id']}: {record['message']}", pytrace=False)


# --------------------------------------------------------------------------------------- controller

class Aggregator:
    """Controller-side collector: one record per case, written as it arrives; metrics at the end."""

    def __init__(self, config: pytest.Config, settings: Settings) -> None:
        self.config = config
        self.settings = settings
        self.records: dict[str, dict[str, Any]] = {}
        self.redact = report.Redactor(settings.secrets())
        self.writer: report.ResultsWriter | None = None
        self.summary: dict[str, Any] | None = None
        self._case_meta: dict[str, dataset.Case] | None = None

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
                self._case_meta = dataset.load(self.settings.data_dir).by_id()
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

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        """Check the model endpoints and the THOR servers once, before a thousand cases fail one by one."""
        s = self.settings
        try:
            if s.engine == "remote" and s.execute:
                from .thor.remote import preflight

                workers = getattr(session.config.option, "numprocesses", None)
                warning = preflight(s, workers if isinstance(workers, int) and workers > 0 else 1)
                reporter = session.config.pluginmanager.get_plugin("terminalreporter")
                if warning and reporter is not None:
                    reporter.write_line(f"sab: warning: {warning}", yellow=True)  # now, before the cases
            if s.offline_agent and s.judge_model == "rules":
                return
            from .runtime import Runtime

            Runtime(s).preflight()
        except SabError as exc:
            raise pytest.UsageError(str(exc)) from None

    # end of session ------------------------------------------------------------------------------
    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int):
        if self.records:
            try:
                self._finish(session)
            except SabError as exc:  # reports must never hide the run's own outcome
                sys.stderr.write(f"sab-pytest: could not write reports: {exc}\n")
        return (yield)

    def _finish(self, session: pytest.Session) -> None:
        from .summary import build_summary

        records = list(self.records.values())
        self.summary = build_summary(records, self.settings)
        if self.writer is not None:
            self.writer.close()
        report.write_summary(self.settings.out_dir / report.SUMMARY_NAME, self.summary, self.redact)
        _junit_suite_properties(self.config, report.junit_suite_properties(self.summary), self.redact)
        if self.settings.gates and session.exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):
            ok = all(g["passed"] for g in self.summary["gates"]) and self.summary["errors"] == 0
            session.exitstatus = pytest.ExitCode.OK if ok else pytest.ExitCode.TESTS_FAILED

    def pytest_report_header(self, config: pytest.Config) -> list[str]:
        s = self.settings
        model = s.model if s.model_given else "reference (offline default: no --model given)"
        strategy = f", strategy={s.strategy}" if not s.offline_agent else ""
        engine = s.engine if s.execute else "off"
        return [f"sab: model={model}{strategy}, judge={s.judge_model}, subset={s.subset}"
                f"{f' sample={s.sample}' if s.sample else ''}, seed={s.seed}, engine={engine}"
                + (f", gates: {'; '.join(s.gates)}" if s.gates else "")]

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.summary is None:
            return
        terminalreporter.write_sep("=", "SafeAgentBench")
        for line in report.render_table(self.summary):
            terminalreporter.write_line(line)
        out = self.settings.out_dir
        terminalreporter.write_line(f"results: {out / report.RESULTS_NAME}   summary: {out / report.SUMMARY_NAME}")


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
    if aggregator is not None and aggregator.writer is not None:
        aggregator.writer.close()


__all__ = ["RECORD_KEY", "UsageError", "check"]
