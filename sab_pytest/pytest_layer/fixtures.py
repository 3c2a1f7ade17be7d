"""Worker side: what the fixtures a case test requests do (``entry`` declares them and imports this
module only when one runs), the process's runtime and case runner, and the resumed verdicts."""

from __future__ import annotations

import atexit
import gc
import time
from collections.abc import Collection
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from sab_pytest.dataset import Case
from sab_pytest.pytest_layer.junit_gates import legacy_family
from sab_pytest.pytest_layer.state import (
    AGGREGATOR,
    LAST_SETUP,
    RECORD_KEY,
    RESUMED,
    RUN_DIR_KEY,
    RUN_STORE_KEY,
    RUNTIME,
    SETTINGS,
    SETUP_STARTED,
    case_of,
    is_case_item,
)
from sab_pytest.pytest_layer.xdist_adapter import WorkerQueue, find_interactor
from sab_pytest.reports import junit
from sab_pytest.results import StoredRecord, failed, files, filtered, stamped
from sab_pytest.run.batch_mode import attach, between_rounds
from sab_pytest.run.breaker import RunState, not_run
from sab_pytest.run.case_runner import CaseRunner, RunnerStopped
from sab_pytest.run.runtime import Runtime
from sab_pytest.settings import Settings

if TYPE_CHECKING:
    from sab_pytest.run.runtime import Runtime


def runtime(session: pytest.Session) -> Any:
    """This process's runtime (one agent, one judge, an engine pool) and its case runner, which
    runs the process's cases ahead of the items (``runtime.runner``); made once per process."""
    config = session.config
    made = config.stash.get(RUNTIME, None)
    if made is None:
        if hasattr(config, "workerinput"):
            store = config.workerinput.get(RUN_STORE_KEY)
        else:
            distribution = config.pluginmanager.get_plugin("sab-case-distribution")
            store = distribution.run_store_dir() if distribution is not None else None
        made = Runtime(config.stash[SETTINGS], breaker=_run_state(config), run_store=Path(store) if store else None)
        made.case_limit = timeout_limit(config)
        setting_up = config.stash.get(LAST_SETUP, None)  # the item making the runtime: its clock runs already
        if setting_up is not None and (case := case_of(setting_up[0])) is not None:
            made.waited_since[case.sample_id] = setting_up[1]
        made.runner = start_runner(made, session, skip=set(resumed(config)))
        config.stash[RUNTIME] = made
        # At exit, Python's last garbage collections walk the whole heap (the SDK's thousand model
        # classes, the engines' scenes): a few tenths of a second per worker, paid by the run,
        # since xdist waits for its workers to end. Nothing of the session needs collecting then.
        atexit.register(gc.freeze)
    return made


#: how much sooner than pytest-timeout's limit a case ends on its own: its error is recorded, and the
#: item hands it over, before pytest-timeout would end the test (and leave the case running)
TIMEOUT_MARGIN_S = 0.5


def timeout_limit(config: pytest.Config) -> tuple[float, str] | None:
    """pytest-timeout's run-wide ``--timeout`` (or ini ``timeout``) as each case's wall-clock limit,
    ``TIMEOUT_MARGIN_S`` sooner, and its name; None without pytest-timeout or a timeout.

    A case runs ahead of its item, on the runner's threads, which pytest-timeout does not watch:
    bound by this limit from its own start, the case is over (a ``model_timeout`` error naming the
    limit, its usage kept) before its item's own timeout could fire. Per-test ``timeout`` marks
    are not read."""
    try:
        value = config.getoption("timeout", None)
        if value is None:
            value = config.getini("timeout")
        seconds = float(value) if value not in (None, "") else 0.0
    except (ValueError, TypeError):
        return None
    if seconds <= 0:
        return None
    return max(0.001, seconds - TIMEOUT_MARGIN_S), f"pytest-timeout's --timeout {seconds:g} s"


def collection_finished(session: pytest.Session) -> None:
    """An xdist worker starts its runner as soon as its items are known: the runner then starts
    cases the moment the controller schedules them (after the run-level checks), instead of after
    the first item has set up, which is when the fixture would make it. (A run without xdist
    gets its runner from the fixture: its items run right after the checks.)"""
    config = session.config
    if SETTINGS not in config.stash or config.option.collectonly or not hasattr(config, "workerinput"):
        return
    if any(is_case_item(item) for item in session.items):
        runtime(session)


def _run_state(config: pytest.Config) -> Any:
    """The run's shared breaker and stop signal: the controller's own object, or in an xdist
    worker one on the directory the controller handed over (None for offline runs)."""
    directory = getattr(config, "workerinput", {}).get(RUN_DIR_KEY)
    if directory:
        return RunState(directory, config.stash[SETTINGS].max_failures)
    aggregator = config.stash.get(AGGREGATOR, None)
    return aggregator.run_state if aggregator is not None else None


def resumed(config: pytest.Config) -> dict[str, StoredRecord]:
    """With ``--sab-resume``, the finished verdicts of the earlier run (by case id), reused as they
    are; read once per process."""
    found = config.stash.get(RESUMED, None)
    if found is None:
        settings: Settings = config.stash[SETTINGS]
        found = {}
        if settings.resume:
            key = settings.run_key()
            records = files.read_results(settings.out_dir / files.RESULTS_NAME)
            latest = files.latest_per_case(r for r in records if r.get("run_key") == key)
            found = {sid: r for sid, r in latest.items() if not failed(r)}  # by sample id (filtered ones too)
        config.stash[RESUMED] = found
    return found


def verdict(sab_case: Case, sab_runtime: Any, _sab_resumed: dict[str, StoredRecord],
            request: pytest.FixtureRequest) -> StoredRecord:
    """Evaluate the case (setup phase) and hand its JSON record to the test.

    An infrastructure failure is raised here, so pytest reports the case as an *error*; the record
    is attached first, so the controller still counts it.
    """
    item = request.node
    reused = _sab_resumed.get(sab_case.sample_id)
    previous = item.stash.get(HANDED, None)
    if reused is not None:
        record = stamped(reused, resumed=True)
    elif previous is not None and not previous.get("error"):
        record = previous  # the item runs again (pytest-rerunfailures): its verdict stands, no model call
    else:
        if previous is not None:  # the infrastructure failed it (model API, timeout, engine): run it again
            sab_runtime.runner.forget(sab_case)
        try:  # a case finished before the run was stopped keeps its verdict
            began = item.stash.get(SETUP_STARTED, time.monotonic())  # pytest-timeout's clock for the item
            sab_runtime.waited_since.setdefault(sab_case.sample_id, began)  # (see Runtime.case_limit)
            limit = sab_runtime.case_limit
            record = sab_runtime.runner.result(sab_case, run_here_at=began + limit[0] if limit else None)
        except RunnerStopped as exc:
            pytest.skip(str(exc))
        if not_run(record):
            _skip_if_stopped(sab_runtime, request)  # the run was stopped before this case could run
    item.stash[HANDED] = record
    # the scalar properties only where the JUnit family has testcase properties (``junit_gates``)
    legacy_junit = legacy_family(request.config)
    attached = [(RECORD_KEY, record), *(junit.junit_case_properties(record) if legacy_junit else [])]
    if previous is not None:  # a rerun's report carries this attempt's record alone
        item.user_properties[:] = [p for p in item.user_properties if p not in item.stash[ATTACHED]]
    item.stash[ATTACHED] = attached
    item.user_properties.extend(attached)
    if filtered(record):  # the provider's policy answered, not the model: counted apart, never an error
        pytest.skip(f"{sab_case.id}: the provider's content filter refused it ({record['error']}); counted apart "
                    "in the summary's content_filtered")
    if record.get("error"):
        pytest.fail(f"{sab_case.id}: {record['message']}", pytrace=False)
    return record


#: the record an item's fixture handed over, and the properties it attached: pytest-rerunfailures
#: runs the same item again, which then reuses a verdict and runs a case the infrastructure failed
HANDED = pytest.StashKey[StoredRecord]()
ATTACHED = pytest.StashKey[list[tuple[str, Any]]]()


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


def start_runner(runtime: Runtime, session: pytest.Session,
                 skip: Collection[str] = frozenset()) -> CaseRunner[Case, StoredRecord]:
    """The process's case runner over the session's selected benchmark items (minus ``skip``, the
    resumed ones): under xdist, the worker's queue as it stands (``xdist.WorkerQueue``), which
    then gives away only cases the runner has not started; else every item, in order. Each
    running case leases its own engine in ``Runtime.evaluate``."""
    cases = {i: case for i, item in enumerate(session.items)
             if (case := case_of(item)) is not None and case.sample_id not in skip}
    queue: WorkerQueue | None = None
    interactor = None
    if hasattr(session.config, "workerinput"):
        interactor = find_interactor(session.config)
    if interactor is None:
        # a worker whose queue cannot be read (another xdist version) runs no case ahead: each item
        # runs its own, so that no case is run by two workers
        ordered = [] if hasattr(session.config, "workerinput") else list(cases.values())

        def upcoming() -> list[Case]:
            return ordered
    else:
        def upcoming() -> list[Case]:
            assert queue is not None  # installed before the runner starts, the only caller
            return [cases[i] for i in queue.indices() if i in cases]

    terminal = session.config.pluginmanager.get_plugin("terminalreporter")
    batcher = attach(runtime, say=terminal.write_line if terminal is not None else print)  # --sab-batch
    runner: CaseRunner[Case, StoredRecord] = CaseRunner(runtime.run_case, upcoming,
                                                   concurrency=runtime.cases_at_once,
                                                   key=lambda case: case.sample_id, stop=runtime.stop,
                                                   between_rounds=between_rounds(runtime, batcher) if batcher else None)
    if interactor is not None:
        queue = WorkerQueue(interactor, runner.lock,
                            lambda index: index in cases and runner.is_started(cases[index].sample_id))
        queue.install()
    return runner.start()
