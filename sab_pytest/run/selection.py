"""The run's selection of cases: the subset, then the seeded sample, from the verified dataset.

One definition for the parametrization, the run-level checks and the summary's idea of a complete
run, so that they can never disagree on which cases a run holds.
"""

from __future__ import annotations

import dataclasses

from sab_pytest import dataset
from sab_pytest.dataset import Case
from sab_pytest.settings import Settings


def select_cases(settings: Settings) -> list[Case]:
    """The cases ``settings`` select (before pytest's own ``-k``/``-m`` and ``--sab-shard``); with
    ``--sab-repeat K`` (K > 1) every case K times in a row, as repeats 1..K (``Case.sample_id``)."""
    data = dataset.load(settings.data_dir, allow_modified=settings.allow_modified_data)
    cases = dataset.select(data, settings.subset, sample=settings.sample, seed=settings.seed)
    return repeated(cases, settings.repeat)


def repeated(cases: list[Case], k: int) -> list[Case]:
    """Each case ``k`` times (repeats numbered 1..k); the cases themselves when ``k`` is 1."""
    if k <= 1:
        return cases
    return [dataclasses.replace(case, repeat=r) for case in cases for r in range(1, k + 1)]
