"""Shared fixtures of the project's own tests."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

# Imported here, before any in-process benchmark run: pytester drops every module first imported
# during such a run, and a process's SDK clients (models.transport keeps one per endpoint) outlive
# it; a second copy of openai and its HTTP library would raise errors the first copy's classes do not
# match. A user's process imports the SDK once; the test process does too.
import openai  # noqa: F401
import pytest
from support.benchmark import CASE_TEST, RunSetup, SabRun
from support.tiny_dataset import write_tiny_dataset

if TYPE_CHECKING:
    from sab_pytest.testing import FakeOpenAIServer

pytest_plugins = ["pytester"]

#: test modules whose tests start processes of their own (the README's commands, a built wheel, a
#: Unity stand-in, THOR servers, several cache processes): all of them are ``slow``
SLOW_MODULES = {"test_readme.py", "test_packaging.py", "test_thor_standin.py", "test_thor_remote_plugin.py",
                "test_thor_docker.py"}

SHARED = Path(__file__).resolve().parents[2] / "shared"


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


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """``slow``: the tests that start processes (pytest runs through ``pytester``, servers, the
    README's commands). ``pytest tests -m "not slow"`` is the quick inner loop; CI runs them all."""
    for item in items:
        if "pytester" in getattr(item, "fixturenames", ()) or item.path.name in SLOW_MODULES:
            item.add_marker(pytest.mark.slow)


@pytest.hookimpl(optionalhook=True)  # an xdist hook: unknown to a pytest without xdist
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """The project's tests under ``-n``: xdist's work stealing instead of its default ``load``,
    whose fixed shares leave one worker idle while the other works through its slow tests (about a
    third off the suite's time on 2 cores)."""
    if config.getvalue("dist") != "load":
        return None  # a --dist the user chose
    from xdist.scheduler import WorkStealingScheduling

    return WorkStealingScheduling(config, log)
