"""The benchmark as a user runs it, inside a ``pytester`` directory: the one case module every
plugin test collects, and ``SabRun``, which runs pytest on it with the dataset and output options
(``conftest.sab_run`` hands out configured ones; ``conftest.run`` is the module's own, set up by
its ``RunSetup``); and ``shared_run``, one run under xdist outside any ``pytester`` that several
tests of a module read (from a module-scoped fixture), where each would otherwise start its own
controller and workers."""

from __future__ import annotations

import contextlib
import io
import os
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

import pytest

from support.tiny_dataset import write_tiny_dataset

if TYPE_CHECKING:
    from sab_pytest.testing import FakeOpenAIServer

#: a test module of the benchmark's cases, as a checkout's ``cases/`` or the packaged one holds it
CASE_TEST = "from sab_pytest.plugin import check\n\n\ndef test_case(sab_verdict):\n    check(sab_verdict)\n"

def hands_to_xdist(args: Sequence[str]) -> bool:
    """Whether a run with ``args`` starts xdist workers (``-n N`` with N not 0, ``--tx``); ``-n 0`` is
    an ordinary run."""
    for i, arg in enumerate(args):
        if arg in ("-n", "--numprocesses"):
            if i + 1 < len(args) and args[i + 1] != "0":
                return True
        elif arg.startswith(("-n", "--numprocesses=")):
            if arg.removeprefix("--numprocesses=").removeprefix("-n").lstrip("=") != "0":
                return True
        elif arg == "--tx" or arg.startswith("--tx="):
            return True
    return False

#: an in-process run finds the plugin's package imported already (by this run's own pytest), which
#: pytest warns about; a user's run never sees it, so it would only change the run's counts
_INPROCESS = ("-W", "ignore::pytest.PytestAssertRewriteWarning")


class _KeepImports:
    """Puts back, after an in-process run, the modules the run imported for the first time, except
    the test's own (its conftest and case modules). pytester drops every new module at the end of a
    run; a library imported again next run would make exception classes that the modules kept from
    before do not know. A user's process keeps its imports, so the runs here do too (the model SDK is
    imported before any run by ``tests/conftest.py``)."""

    def __init__(self, own: Path) -> None:
        self.own = own.resolve()
        self.seen: dict[str, ModuleType] = {}

    def pytest_unconfigure(self) -> None:
        self.seen = dict(sys.modules)

    def restore(self) -> None:
        for name, module in self.seen.items():
            where = getattr(module, "__file__", None)
            if name not in sys.modules and not (where and Path(where).resolve().is_relative_to(self.own)):
                sys.modules[name] = module


def run_pytest(pytester: pytest.Pytester, *args: str, inprocess: bool = True) -> pytest.RunResult:
    """pytest on ``args`` in ``pytester``'s directory: in this process (a new interpreter per run
    would cost more than most tests' own work), or in a subprocess where ``inprocess`` is False (the
    caller says why). A run that hands its tests to xdist (``hands_to_xdist``) has its controller
    here and its workers in processes of their own, as pytest-xdist's own tests run it; what the
    workers write to their standard error, which they share with the controller, is part of the
    run's ``stderr`` as it would be in a subprocess."""
    if not inprocess:
        return pytester.runpytest_subprocess(*args)
    keep = _KeepImports(pytester.path)
    with pytest.MonkeyPatch.context() as environment, _workers_stderr(hands_to_xdist(args)) as workers:
        for name in XDIST_WORKER_VARIABLES:  # this process is the suite's xdist worker, the run is not
            environment.delenv(name, raising=False)
        try:
            result = pytester.runpytest_inprocess(*_INPROCESS, *args, plugins=[keep])
        finally:
            keep.restore()
    return pytest.RunResult(result.ret, result.outlines, result.errlines + workers, result.duration)


@contextlib.contextmanager
def _workers_stderr(workers: bool) -> Iterator[list[str]]:
    """The lines written to file descriptor 2 while the block runs, where ``workers`` start: an
    in-process run captures only ``sys.stderr``, and the processes it starts inherit the descriptor."""
    lines: list[str] = []
    if not workers:
        yield lines
        return
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as written:
        os.dup2(written.fileno(), 2)
        try:
            yield lines
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            written.seek(0)
            lines.extend(written.read().decode(errors="replace").splitlines())


@dataclass(frozen=True)
class RunSetup:
    """How a test module's ``run`` fixture runs the benchmark (a module overrides the ``run_setup``
    fixture to change it; the default is the tiny dataset in this process, no further option).

    ``options`` come before each call's own arguments. ``inprocess=False``: a subprocess per run,
    for a module whose point is a process boundary (elsewhere a new interpreter per run would
    dominate the test's time; a run under xdist has its workers in processes of their own either
    way). ``tiny_data=False``: no dataset, subset or output option is added, the inputs come
    from the environment as a user sets them (the run writes to its working directory unless a
    call gives ``out``)."""

    options: tuple[str, ...] = ()
    inprocess: bool = True
    tiny_data: bool = True


class SabRun:
    """``run(*args, out=None, server=None)``: the benchmark on ``data`` (every case of its four
    files, the pinned hashes not checked) writing to ``out`` (a directory under the pytester
    directory; ``self.out`` by default), with ``base`` options before ``args``, against the fake
    ``server`` when one is given; in this process, or in a subprocess like a user's run where the
    test needs the isolation (``inprocess=False``, for every call or for one). ``data=None``: no dataset, subset
    or output option, the environment gives them (``self.out`` is then the working directory)."""

    def __init__(self, pytester: pytest.Pytester, data: Path | None, base: Sequence[str], out: Path, *,
                 inprocess: bool = True) -> None:
        self.pytester, self.data, self.base, self.inprocess = pytester, data, tuple(base), inprocess
        self.out = out if data is not None else pytester.path

    def where(self, out: Path | str | None = None) -> Path:
        """The directory a call with ``out`` writes to."""
        return self.pytester.path / out if out is not None else self.out

    def args(self, *args: str, out: Path | str | None = None, server: FakeOpenAIServer | None = None) -> list[str]:
        # option=value form: pytest would take a separate path argument into its rootdir/ini search
        inputs = [f"--sab-data={self.data}", "--sab-allow-modified-data", "--sab-subset=all"] if self.data else []
        if self.data is not None or out is not None:
            inputs.append(f"--sab-out={self.where(out)}")
        # the fake serves the judges too: --base-url alone names the agent's endpoint
        endpoint = [f"--sab-base-url={server.url}", f"--sab-judge-base-url={server.url}"] if server is not None else []
        return [*inputs, *self.base, *endpoint, *args]

    def __call__(self, *args: str, out: Path | str | None = None, server: FakeOpenAIServer | None = None,
                 inprocess: bool | None = None) -> pytest.RunResult:
        inprocess = self.inprocess if inprocess is None else inprocess
        return run_pytest(self.pytester, *self.args(*args, out=out, server=server), inprocess=inprocess)


#: this suite's own environment, which a run a test starts must not inherit: its pytest options and
#: its xdist worker's identity (the run would take itself for a worker of the suite)
XDIST_WORKER_VARIABLES = ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT")
SUITE_VARIABLES = ("PYTEST_ADDOPTS", *XDIST_WORKER_VARIABLES, "TOX_ENV_DIR")


def pytest_in_this_process(where: Path, *args: str, env: Mapping[str, str] | None = None) -> pytest.RunResult:
    """pytest on ``args`` in ``where``, in this process as ``run_pytest`` runs it but outside any
    test's ``pytester``: for a run that a module's tests share (a module-scoped fixture; ``pytester``
    is made anew for each test). As ``pytester`` does, ``where`` is the working and the home
    directory, the suite's own variables (``SUITE_VARIABLES``) are left out, and the modules the run
    imported from ``where`` (its conftest and case modules) are dropped after it; the model cache is
    the run's own; ``env`` adds to the environment."""
    variables = {"HOME": str(where), "SAB_CACHE_HOME": str(where / "sab-cache-home"), "PY_COLORS": "0", **(env or {})}
    keep, modules, path = _KeepImports(where), dict(sys.modules), list(sys.path)
    out, err = io.StringIO(), io.StringIO()
    started = time.monotonic()
    with pytest.MonkeyPatch.context() as environment, _workers_stderr(hands_to_xdist(args)) as workers:
        environment.chdir(where)
        for name, value in variables.items():
            environment.setenv(name, value)
        for name in SUITE_VARIABLES:
            environment.delenv(name, raising=False)
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                ret = pytest.main(["-p", "no:cacheprovider", *_INPROCESS, *args], plugins=[keep])
        finally:
            for name in set(sys.modules) - set(modules):
                del sys.modules[name]
            sys.modules.update(modules)  # a conftest replaces the suite's own ``conftest`` entry
            sys.path[:] = path
            keep.restore()
    return pytest.RunResult(int(ret), out.getvalue().splitlines(), err.getvalue().splitlines() + workers,
                            time.monotonic() - started)


@dataclass(frozen=True)
class SharedRun:
    """A finished run that several tests of a module read: its directory (the rootdir, with the case
    module and any conftest), its tiny dataset (outside the rootdir), its ``out`` and pytest's result."""

    where: Path
    data: Path
    out: Path
    result: pytest.RunResult


def shared_run(tmp_path_factory: pytest.TempPathFactory, *args: str, conftest: str = "") -> SharedRun:
    """The benchmark on the tiny dataset with ``args`` (under xdist: the run the tests of a module
    share, from a module-scoped fixture), the inputs and output given as ``SabRun`` gives them."""
    where = tmp_path_factory.mktemp("shared-run")
    data = write_tiny_dataset(tmp_path_factory.mktemp("shared-data") / "data")
    (where / "test_sab.py").write_text(CASE_TEST)
    if conftest:
        (where / "conftest.py").write_text(conftest)
    result = pytest_in_this_process(where, f"--sab-data={data}", "--sab-allow-modified-data", "--sab-subset=all",
                                    f"--sab-out={where / 'out'}", *args)
    return SharedRun(where, data, where / "out", result)
