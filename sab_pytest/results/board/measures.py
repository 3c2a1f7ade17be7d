"""Which runs may share a board: those whose numbers are one measurement, whatever agent made them.

A board exists to compare agents: eight strategies of one model, five candidate models. So the
settings of the agent under test and of how it is driven (the settings table's ``agent`` side: model,
its endpoint, strategy, sampling temperature and token limit, which under ``--sab-protocol paper``
follow the model's family, guard and guard model, safety hint, action format, step and picture
limits, map_vlm's helper models) are what the rows differ in, and name them. ``sab compare`` and a
gate's baseline check more (``compare.differences``): there the two runs are meant to be one setup.

A run is refused (or, allowed, marked) where its numbers would measure something else than the
reference's, one line per reason:

* the cases and their reading (``compare.case_differences``): the dataset's sha256, subset, sample
  and its seed, protocol;
* the table's ``measurement`` settings: the judges (models, panels, temperatures, prompts) and
  whether plans were executed at all (without, SR(goal) and ER are not measured, and a guard screens
  no execution);
* what was found where the table's ``where`` settings point, rather than the address itself: the
  dataset (its sha256, above); the models that answered the judges (``served_models``: an endpoint may
  answer a judge's name as another model); the engine that ran the plans, by what it is, not by
  ``--thor``: the embedded engine (``--thor sim``, or ``local``/``remote`` on ``sab-thor-standin``),
  a re-implementation of AI2-THOR's rules, or AI2-THOR's Unity build. SR(goal) and ER are read off the
  engine's state after each plan (and visual agents see its pictures), so runs on the two are two
  measurements; ``local`` and ``remote`` on the Unity build are one.
"""

from __future__ import annotations

from typing import Any

from sab_pytest.results.compare import case_differences
from sab_pytest.results.judging.served import same_model
from sab_pytest.results.load import Run, setting_differences
from sab_pytest.settings import Settings, run_setting_sides

#: how the two values of a setting are labelled (the reference's first)
LABELS = ("reference", "this run")


def measurement_keys() -> frozenset[str]:
    """The run-key names of the settings table's ``measurement`` side."""
    return frozenset(k for k, side in run_setting_sides().items() if side == "measurement")


def engine_of(settings: Settings) -> str | None:
    """What ran a run's plans, as a measurement: None where none ran (not executed, a text planner)."""
    if not (settings.execute or settings.interactive):
        return None
    return "the embedded engine" if settings.pictures == "schematic" else "AI2-THOR's Unity build"


def judges_served(run: Run) -> dict[str, list[str]]:
    """Judge model asked for -> the models its answers named (a dated snapshot counts as the model asked)."""
    asked: dict[str, Any] = (run.summary.get("served_models") or {}).get("judge") or {}
    return {model: sorted({model if same_model(model, m) else m for m in named}) for model, named in asked.items()}


def board_differences(reference: Run, run: Run) -> list[str]:
    """What makes ``run`` measure another thing than ``reference``, one line each (the module's list).
    Settings are compared only where both summaries hold them, served models where both recorded them."""
    out = case_differences(reference, run)
    if reference.summary.get("settings") and run.summary.get("settings"):
        mine, theirs = run.settings, reference.settings
        out += [line for line in setting_differences(mine, theirs, LABELS, keys=measurement_keys())
                if not line.startswith("protocol:")]  # case_differences has its own line, saying what it changes
        engines = engine_of(theirs), engine_of(mine)
        if None not in engines and engines[0] != engines[1]:
            out.append(f"engine: {LABELS[0]} {engines[0]}, {LABELS[1]} {engines[1]} (SR(goal) and ER are read off "
                       "the engine's state)")
    served = judges_served(reference), judges_served(run)
    for model in sorted(set(served[0]) & set(served[1])):
        if served[0][model] != served[1][model]:
            out.append(f"judge {model!r} answered as: {LABELS[0]} {', '.join(served[0][model])}, "
                       f"{LABELS[1]} {', '.join(served[1][model])}")
    return out
