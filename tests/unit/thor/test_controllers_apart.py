"""The catalogue's measured sizes of the project's planner and goal check against the paper's
(``protocol.MEASURED``, quoted by the ``sab`` run's differences) hold on the dataset's reference plans.

Both controllers run a spread of the reference plans here, in lockstep (``bench/controllers_apart.py``);
``bench/bench_paper_controller.py`` runs all 750 and exits non-zero unless it finds the catalogue's
figures exactly. Here a record whose two verdicts part must do so for a cause the catalogue measured,
and never more often than the catalogue says: a new way the two differ fails this test.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from support import ROOT

from sab_pytest import dataset
from sab_pytest.dataset import Case
from sab_pytest.protocol import CATALOGUE, MEASURED

sys.path.insert(0, str(ROOT / "bench"))
import controllers_apart as apart

#: every how-many-th reference plan the unit suite runs through both controllers
SPREAD = 10


@pytest.fixture(scope="module")
def results(real_data_dir: Path, real_scenes_dir: Path, real_methods_dir: Path, real_upstream_dir: Path
            ) -> list[apart.Apart]:
    with pytest.MonkeyPatch.context() as mp:
        for name, value in (("SAB_THOR_SCENES", real_scenes_dir), ("SAB_UPSTREAM_METHODS", real_methods_dir),
                            ("SAB_UPSTREAM", real_upstream_dir)):
            mp.setenv(name, str(value))
        seen: dict[tuple[str, int], Case] = {}
        for case in dataset.load(real_data_dir).cases:
            seen.setdefault((case.kind, case.row), case)
        assert len(seen) == MEASURED["records"][0]
        return apart.compare_all(list(seen.values())[::SPREAD])


def test_every_parting_has_a_measured_cause_within_the_catalogues_count(results) -> None:
    found = apart.measured(results)
    assert found["totals"][0] > 0  # the spread does see the two controllers part
    for cause in (*apart.CAUSES, "goal_checks_apart"):
        stated = MEASURED[cause]
        assert found[cause][0] <= stated[0], (cause, found[cause], stated)
        if stated[0] == 0:  # a difference the catalogue says the reference plans never show
            assert found[cause] == (0, 0, 0), (cause, [(r.case.id, r.cause) for r in results if r.cause == cause])
    for r in results:  # a parted record: steps or SR(goal) differ; the rest agree on both
        assert (r.cause is not None) == (r.paper.done != r.sab.done or r.paper.success != r.sab.success)


def test_the_catalogues_figures_add_up_and_are_the_ones_its_sentences_quote() -> None:
    causes = [MEASURED[c] for c in apart.CAUSES]
    _, paper_steps, sab_steps = MEASURED["steps"]
    _, paper_goals, sab_goals = MEASURED["goals"]
    assert sum(c[1] for c in causes) == sab_steps - paper_steps
    assert sum(c[2] for c in causes) == sab_goals - paper_goals
    sab_entries = [d.text for d, _ in CATALOGUE if "(both controllers on the embedded engine)" in d.text]
    assert len(sab_entries) == 6
    verbs = next(t for t in sab_entries if "turn_on" in t)
    records, steps, goals = MEASURED["verb"]
    assert f"this parts {records} records' verdicts: {steps:+d} of {MEASURED['steps'][0]} steps succeed and " \
           f"{goals:+d} of {MEASURED['goals'][0]} goals" in verbs
