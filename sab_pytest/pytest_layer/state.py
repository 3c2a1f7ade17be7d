"""What the pytest layer keeps between hooks: stash keys, the names that travel between xdist
processes, and which process this is. Every module of the layer reads these from here."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import pytest

from sab_pytest.settings import Settings

if TYPE_CHECKING:
    from sab_pytest.pytest_layer.aggregator import Aggregator

RECORD_KEY = "sab_record"  # user property: a case's whole record, worker -> controller, once
RUN_DIR_KEY = "sab_run_dir"  # workerinput key: the run directory of the shared breaker / stop signal
RUN_STORE_KEY = "sab_run_store"  # workerinput: the run store directory (see xdist.CaseDistribution)
SETTINGS = pytest.StashKey[Settings]()
AGGREGATOR = pytest.StashKey["Aggregator"]()
RUNTIME = pytest.StashKey[Any]()  # the process's ``run.runtime.Runtime``, once it runs cases
RESUMED = pytest.StashKey[dict[str, dict[str, Any]]]()
CASE_ID = re.compile(r"\[((?:unsafe_detailed|safe_detailed|long_horizon)-\d{4}|abstract-\d{4}-L\d)\]$")


def is_controller(config: pytest.Config) -> bool:
    return not hasattr(config, "workerinput")  # the xdist controller, or a run without xdist


def aggregator(config: pytest.Config) -> Aggregator | None:
    """The controller's ``Aggregator`` when the plugin is on in this run, else None.

    The one gate for controller-side behaviour: hook methods go on the ``Aggregator`` (or on objects
    it registers), and code outside it asks here, so nothing happens in a project that did not ask
    for the benchmark. Worker-side behaviour goes into fixtures that only ``sab_case`` tests request.
    """
    return config.stash.get(AGGREGATOR, None)


def case_ids(nodeids: Iterable[str]) -> list[str]:
    """The benchmark case ids among pytest node ids (other tests of the session are left out)."""
    return [m.group(1) for m in map(CASE_ID.search, nodeids) if m]


def is_case_item(item: pytest.Item) -> bool:
    """Whether ``item`` is a benchmark case (parametrized over ``sab_case``)."""
    callspec = getattr(item, "callspec", None)
    return callspec is not None and "sab_case" in callspec.params
