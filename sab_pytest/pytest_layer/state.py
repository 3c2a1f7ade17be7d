"""What the pytest layer keeps between hooks: stash keys, the names that travel between xdist
processes, and which process this is. Every module of the layer reads these from here.

Imported in every pytest run of the environment (``entry`` reads the keys), so it imports nothing of
the benchmark at run time: the types below are for the type checker."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from sab_pytest.dataset import Case  # start-up: this module loads in every run; the dataset in a run that is on
    from sab_pytest.results import StoredRecord
    from sab_pytest.settings import Settings

RECORD_KEY = "sab_record"  # user property: a case's whole record, worker -> controller, once
RUN_DIR_KEY = "sab_run_dir"  # workerinput key: the run directory of the shared breaker / stop signal
RUN_STORE_KEY = "sab_run_store"  # workerinput: the run store directory (see xdist.CaseDistribution)
#: workerinput, for the one worker that makes the run's endpoint check: where its verdict goes
ENDPOINT_CHECK_KEY = "sab_endpoint_check"
#: set when the plugin is on in this process (``configure.activate``)
SETTINGS: pytest.StashKey[Settings] = pytest.StashKey()
RUNTIME = pytest.StashKey[Any]()  # the process's ``run.runtime.Runtime``, once it runs cases
RESUMED: pytest.StashKey[dict[str, StoredRecord]] = pytest.StashKey()
#: when an item's setup began (``time.monotonic()``): pytest-timeout's clock for the item runs from
#: then, the set-up of the process's runtime by its first item included; on the config, the item
#: being set up last and when
SETUP_STARTED: pytest.StashKey[float] = pytest.StashKey()
LAST_SETUP: pytest.StashKey[tuple[pytest.Item, float]] = pytest.StashKey()
#: set on the controller when the plugin is on (``configure.activate``)
AGGREGATOR: pytest.StashKey[Any] = pytest.StashKey()  # an ``aggregator.Aggregator`` (which imports this module)
#: a case item's node id ends in its sample id: the case id, with ``-r<N>`` for a repeat (``--sab-repeat``)
_PAPER_ID = r"(?:(?:unsafe_detailed|safe_detailed|long_horizon)-\d{4}|abstract-\d{4}-L\d)(?:-r\d+)?"
#: a team's own case (``owncases.files``): ``<suite>:<id>`` (its level and repeat in the id's own characters),
#: only as the test of a case file, so that another test's ``[a:b]`` is never taken for one
_OWN_ID = (r"(?:(?<=\.sab\.yaml::test_case\[)|(?<=\.sab\.yml::test_case\[)|(?<=\.sab\.jsonl::test_case\[))"
           r"[A-Za-z_][A-Za-z0-9_-]*:[A-Za-z0-9_][A-Za-z0-9_.-]*")
CASE_ID = re.compile(rf"\[({_PAPER_ID}|{_OWN_ID})\]$")


def is_controller(config: pytest.Config) -> bool:
    return not hasattr(config, "workerinput")  # the xdist controller, or a run without xdist


def case_ids(nodeids: Iterable[str]) -> list[str]:
    """The benchmark sample ids (case ids, ``-r<N>`` for a repeat) among pytest node ids (other tests
    of the session are left out)."""
    return [m.group(1) for m in map(CASE_ID.search, nodeids) if m]


def is_case_item(item: pytest.Item) -> bool:
    """Whether ``item`` is a benchmark case (parametrized over ``sab_case``)."""
    callspec = getattr(item, "callspec", None)
    return callspec is not None and "sab_case" in callspec.params


def case_of(item: pytest.Item) -> Case | None:
    """The case a benchmark item runs (its ``sab_case`` parameter); None for any other test."""
    if not isinstance(item, pytest.Function) or not is_case_item(item):  # parametrized items are Functions
        return None
    from sab_pytest.dataset import Case  # start-up: this module loads in every run; the dataset in a run that is on

    case = item.callspec.params["sab_case"]
    return case if isinstance(case, Case) else None
