"""Shared fixtures of the project's own tests."""

from __future__ import annotations

import contextlib
import gc
import importlib
import os
import pkgutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from support.benchmark import CASE_TEST, RunSetup, SabRun
from support.tiny_dataset import write_tiny_dataset

import sab_pytest

if TYPE_CHECKING:
    from sab_pytest.testing import FakeOpenAIServer

pytest_plugins = ["pytester"]

#: test modules whose tests start processes of their own (the README's commands, a built wheel, a
#: Unity stand-in, THOR servers, several cache processes): all of them are ``slow``
SLOW_MODULES = {"test_readme.py", "test_packaging.py", "test_thor_standin.py", "test_thor_remote_plugin.py",
                "test_thor_docker.py", "test_benches.py"}

#: test modules whose tests mostly wait on timers (a fake server's latency, timeouts, back-off): run
#: beside the other worker's process-starting tests, whose runs use the core they leave idle
WAITING_MODULES = {"test_capacity.py", "test_streaming.py", "test_models.py", "test_slots.py",
                   "test_thor_remote.py"}

SHARED = Path(__file__).resolve().parents[2] / "shared"


#: modules that import an optional extra when they load (``sab_pytest.reports.inspect`` reaches
#: inspect_ai through them only when a log is written or read)
_LOADS_AN_EXTRA = {"sab_pytest.reports.inspect.sample"}


def _import_the_whole_package() -> None:
    """Every module of ``sab_pytest`` (but the entry points and the packaged case module), once,
    before the first test. When a test that uses ``pytester`` ends, pytester drops each module first
    imported during the test, so the modules a benchmark run imports lazily would be imported and
    assertion-rewritten again by every such test: seconds each, most of an in-process
    run's time. A user's process imports them once; the test process does too. (The plugin's own
    laziness, nothing imported in a run that does not ask for the benchmark, is checked in a new
    interpreter, where this import cannot hide an eager one.) Left out: the module that imports the
    Inspect extra on load (seconds of CPU in every worker, for the few tests that write a log; an
    in-process run keeps what it imported, ``support.benchmark._KeepImports``)."""
    for module in pkgutil.walk_packages(sab_pytest.__path__, "sab_pytest."):
        if not module.name.endswith(".__main__") and not module.name.startswith("sab_pytest.cases") \
                and module.name not in _LOADS_AN_EXTRA:
            importlib.import_module(module.name)


def _warm_the_model_sdk() -> None:
    """The parts of the openai SDK it imports on first use: its HTTP stack with the first client,
    more modules with the first request (here refused at once, on the closed discard port). Left to
    a test that uses ``pytester``, they would be dropped when it ends and imported again by the next
    one, while the clients ``models.transport`` keeps for the process still hold the first copy: an
    HTTP error of the second copy is then a class the first copy's handlers do not match."""
    import openai

    client = openai.OpenAI(api_key="unused", base_url="http://127.0.0.1:9/v1", max_retries=0, timeout=5)
    message = [{"role": "user", "content": "warm-up"}]
    with contextlib.suppress(openai.APIError):
        client.models.list()
    with contextlib.suppress(openai.APIError):  # the chat resources and their stream, as the product calls them
        client.chat.completions.create(model="warm-up", messages=message, stream=True,
                                       stream_options={"include_usage": True})
    client.close()


def _warm_scipy() -> None:
    """scipy's statistics, which ``results.stats`` imports on first use, and the spatial package the paper's
    low-level controller imports (``thor/execute.py`` loads it under ``--sab-protocol paper``): left to a
    test's in-process run they would be dropped when it ends, and numpy's C extensions they import
    (``numpy.fft``) cannot be loaded a second time in one process."""
    import scipy.optimize
    import scipy.spatial
    import scipy.stats  # noqa: F401


def _let_child_processes_cache_bytecode() -> None:
    """The suite starts a few hundred Python processes (benchmark runs in a subprocess or under
    xdist, servers, the documentation's commands); with ``PYTHONDONTWRITEBYTECODE`` set, as some
    shells and containers do, each of them compiles every module of the package from source again.
    The suite's own processes (this one, its xdist workers and every child) write the usual
    ``__pycache__`` files instead, once."""
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    sys.dont_write_bytecode = False


_let_child_processes_cache_bytecode()


def _hands_every_test_to_workers(config: pytest.Config) -> bool:
    """Whether this process is an xdist controller: it runs no test, so it needs neither warm-up,
    and its workers start only once its own start-up is over (seconds of the suite's time)."""
    return not hasattr(config, "workerinput") and getattr(config.option, "dist", "no") != "no"


def pytest_configure(config: pytest.Config) -> None:
    if not _hands_every_test_to_workers(config):
        _import_the_whole_package()
        _warm_the_model_sdk()
        _warm_scipy()
        _spare_the_collector_what_stays()


def _spare_the_collector_what_stays() -> None:
    """Leave what this process has loaded so far (the package, the SDK, their modules) out of every
    later garbage collection (``gc.freeze``). Each run a test makes in this process ends with two
    full collections (pytest's ``unraisableexception`` plugin), and the collector's own full passes
    walk every object: 0.1 s each once the SDK and the package are loaded, 13 s of the suite's CPU
    over its few hundred runs (the product freezes too, but only at a process's first SDK client).
    Garbage made before is collected first; what is frozen stays alive for the process anyway."""
    gc.collect()
    gc.freeze()


def _input_dir(env: str, fallback: Path, what: str) -> Path:
    """A real input directory: from ``env``; locally fall back to ../shared; in CI a missing one fails."""
    value = os.environ.get(env)
    if value:
        return Path(value)
    if os.environ.get("CI"):
        pytest.fail(f"{env} is not set in CI: the {what} is required here", pytrace=False)
    if fallback.is_dir():
        return fallback
    pytest.skip(f"{env} not set and {fallback} missing: the real {what} is not on this machine")


@pytest.fixture(scope="session")
def real_data_dir() -> Path:
    """The real SafeAgentBench files (SAB_DATA)."""
    return _input_dir("SAB_DATA", SHARED / "safeagentbench", "SafeAgentBench dataset")


@pytest.fixture(scope="session")
def real_scenes_dir() -> Path:
    """The real iTHOR scene dumps (SAB_THOR_SCENES)."""
    return _input_dir("SAB_THOR_SCENES", SHARED / "thor_scenes" / "upstream", "iTHOR scene dumps")


@pytest.fixture(scope="session")
def real_upstream_dir() -> Path:
    """The upstream evaluator files the paper's judge prompts are read from (SAB_UPSTREAM)."""
    return _input_dir("SAB_UPSTREAM", SHARED / "upstream_evaluator", "upstream evaluator folder")


@pytest.fixture(scope="session")
def real_methods_dir() -> Path:
    """The upstream methods files MAP's prompts are read from under the paper's protocol (SAB_UPSTREAM_METHODS)."""
    return _input_dir("SAB_UPSTREAM_METHODS", SHARED / "upstream_methods", "upstream methods folder")


@pytest.fixture(scope="session")
def chromium() -> str:
    """Debian's chromium for the tests that open a page in it (``support.browser.find_chromium``:
    .ci/run installs it; skips only where it could not be installed, saying why)."""
    from support.browser import find_chromium

    return find_chromium()


@pytest.fixture(scope="session")
def browser(chromium: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One headless chromium for every page this test process opens (``support.browser.Browser``):
    starting it costs more than loading a page."""
    from support.browser import Browser

    opened = Browser(chromium, tmp_path_factory.mktemp("chromium-profile"))
    yield opened
    opened.close()


@pytest.fixture
def tiny_data(tmp_path: Path) -> Path:
    return write_tiny_dataset(tmp_path / "data")


@pytest.fixture
def sab_run(pytester: pytest.Pytester, tiny_data: Path):
    """A factory of benchmark runs in this test's pytester directory, on the tiny dataset:
    ``sab_run(*base_options, data=..., out="out", inprocess=True)`` returns a ``SabRun``. The case
    module is written once; every plugin test that runs the benchmark goes through here."""
    pytester.makepyfile(test_sab=CASE_TEST)

    def make(*base: str, data: Path | None = None, out: str = "out", inprocess: bool = True) -> SabRun:
        return SabRun(pytester, data or tiny_data, base, pytester.path / out, inprocess=inprocess)

    return make


@pytest.fixture
def run_setup() -> RunSetup:
    """How this module's ``run`` runs the benchmark: a module that needs options, the environment's
    inputs or an in-process run overrides this fixture (it may use other fixtures, e.g. ``server``)."""
    return RunSetup()


@pytest.fixture
def run(sab_run, run_setup: RunSetup, pytester: pytest.Pytester, tiny_data: Path) -> SabRun:
    """``run(*args, out=None, server=None) -> RunResult``: the benchmark as this module's
    ``run_setup`` says, writing to ``run.out`` (``pytester.path / "out"``) or to ``out`` under the
    pytester directory, against the fake ``server`` when one is given. The one way a test module
    runs its benchmark; ``sab_run`` remains for a test that needs other options per run."""
    sab_run()  # writes the case module
    return SabRun(pytester, tiny_data if run_setup.tiny_data else None, run_setup.options, pytester.path / "out",
                  inprocess=run_setup.inprocess)


@pytest.fixture
def server_script() -> dict[str, Any]:
    """The ``server`` fixture's script, as ``fake_openai_server``'s options (a responder, an API key,
    latency...): the default answers; a module that scripts its server overrides this fixture."""
    return {}


@pytest.fixture
def server(server_script: dict[str, Any]) -> Iterator[FakeOpenAIServer]:
    """The fake OpenAI-compatible server on loopback, scripted by ``server_script`` (tests may script
    it further); stopped after the test."""
    from sab_pytest.testing import fake_openai_server

    with fake_openai_server(**server_script) as srv:
        yield srv


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Keep every test away from the user's real cache directory."""
    monkeypatch.setenv("SAB_CACHE_HOME", str(tmp_path_factory.getbasetemp() / "sab-cache-home"))
    # tiktoken's encodings (an estimate or a cost counts tokens by them): the pinned input, never a download
    if not os.environ.get("SAB_TIKTOKEN_CACHE") and (SHARED / "tiktoken").is_dir() and not os.environ.get("CI"):
        monkeypatch.setenv("SAB_TIKTOKEN_CACHE", str(SHARED / "tiktoken"))


@pytest.fixture(scope="session")
def real_tiktoken_dir() -> Path:
    """tiktoken's two encodings, laid out as its cache (SAB_TIKTOKEN_CACHE)."""
    return _input_dir("SAB_TIKTOKEN_CACHE", SHARED / "tiktoken", "tiktoken encodings folder")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """``slow``: the tests that start processes (pytest runs through ``pytester``, servers, the
    README's commands). ``pytest tests -m "not slow"`` is the quick inner loop; CI runs them all."""
    for item in items:
        if "pytester" in getattr(item, "fixturenames", ()) or item.path.name in SLOW_MODULES:
            item.add_marker(pytest.mark.slow)
    items[:] = _slow_modules_first_in_each_half(items)


def _slow_modules_first_in_each_half(items: list[pytest.Item]) -> list[pytest.Item]:
    """The order for the work stealing below: each worker starts with one half of the items, in
    order, and an idle one takes the far end of the other's queue. In collection order one half
    held every end-to-end module, so the run ended with one worker still in a long README command
    while the other had nothing left to take. Here each half starts with its share of the modules
    that start processes (dealt by their count of slow tests) and ends with quick modules, which
    the stealing then spreads; the second half starts with the modules that mostly wait
    (``WAITING_MODULES``), while the first half's runs can use the core they leave idle. Whole
    modules move, so a module's shared runs are made once."""
    modules: dict[Path, list[pytest.Item]] = {}
    for item in items:
        modules.setdefault(item.path, []).append(item)
    slow = {path: sum(1 for i in tests if i.get_closest_marker("slow")) for path, tests in modules.items()}
    waiting = [p for p in modules if p.name in WAITING_MODULES and not slow[p]]
    halves: tuple[list[Path], list[Path]] = ([], list(waiting))
    quick: tuple[list[Path], list[Path]] = ([], [])
    slow_in, count = [0, 0], [0, sum(len(modules[p]) for p in waiting)]
    for path in sorted((p for p in modules if slow[p]), key=lambda p: -slow[p]):
        half = 0 if slow_in[0] <= slow_in[1] else 1
        halves[half].append(path)
        slow_in[half] += slow[path]
        count[half] += len(modules[path])
    for path in (p for p in modules if not slow[p] and p not in waiting):
        half = 0 if count[0] <= count[1] else 1
        quick[half].append(path)
        count[half] += len(modules[path])
    return [item for path in (*halves[0], *quick[0], *halves[1], *quick[1]) for item in modules[path]]


@pytest.hookimpl(optionalhook=True)  # an xdist hook: unknown to a pytest without xdist
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """The project's tests under ``-n``: xdist's work stealing instead of its default ``load``,
    whose fixed shares leave one worker idle while the other works through its slow tests (about a
    third off the suite's time on 2 cores)."""
    if config.getvalue("dist") != "load":
        return None  # a --dist the user chose
    from xdist.scheduler import WorkStealingScheduling

    return WorkStealingScheduling(config, log)
