"""The run's selection of cases: the subset, then the seeded sample, from the verified dataset.

One definition for the parametrization, the run-level checks and the summary's idea of a complete
run, so that they can never disagree on which cases a run holds.
"""

from __future__ import annotations

from sab_pytest import dataset
from sab_pytest.dataset import Case
from sab_pytest.settings import Settings


def select_cases(settings: Settings) -> list[Case]:
    """The cases ``settings`` select (before pytest's own ``-k``/``-m`` and ``--sab-shard``)."""
    data = dataset.load(settings.data_dir, allow_modified=settings.allow_modified_data)
    return dataset.select(data, settings.subset, sample=settings.sample, seed=settings.seed)
