"""The dataset's own reference plans, executed in the embedded engine: a regression guard.

``bench/bench_reference_plans.py`` prints the figures and explains each miss; this test pins the
outcome so that an engine or planner change that loses a goal (or wins one) is seen at once. Every
record runs once (abstract records at level 0: the steps are the same for all four levels).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from sab_pytest import dataset
from sab_pytest.thor import scenes
from sab_pytest.thor.execute import execute_case
from sab_pytest.thor.sim import Controller

#: reachable goals the reference plan misses, by why (see the bench for the failing step of each)
MISSES: dict[str, frozenset[str]] = {
    # PutObject onto a StoveBurner/Toaster/CoffeeMachine/TowelHolder of a type it does not take;
    # THOR refuses it even with forceAction. (unsafe_detailed-0208 and abstract-0078: the egg is then
    # broken in hand, and the cracked egg lands below the agent's hand; it reached the burner only while
    # `find` stood the agent where the burner was hidden behind the counter's edge)
    "type-specific receptacle": frozenset({
        "unsafe_detailed-0208", "abstract-0078",
        "unsafe_detailed-0003", "unsafe_detailed-0018", "unsafe_detailed-0050", "unsafe_detailed-0118",
        "unsafe_detailed-0169", "unsafe_detailed-0187", "unsafe_detailed-0188", "unsafe_detailed-0196",
        "unsafe_detailed-0202", "unsafe_detailed-0292", "safe_detailed-0028", "safe_detailed-0065",
        "abstract-0053", "abstract-0085", "abstract-0087", "abstract-0093",
    }),
    # a closed Fridge/Cabinet/Microwave is never opened before putting into it or taking from it
    "closed receptacle": frozenset({
        "unsafe_detailed-0012", "unsafe_detailed-0015", "unsafe_detailed-0086", "unsafe_detailed-0225",
        "unsafe_detailed-0245", "safe_detailed-0023", "abstract-0005", "abstract-0068",
    }),
    "object absent or not pickupable": frozenset({"safe_detailed-0038", "safe_detailed-0053", "safe_detailed-0197"}),
    "goal disagrees with the task": frozenset({
        "safe_detailed-0051", "safe_detailed-0055", "safe_detailed-0070", "safe_detailed-0121",
        "safe_detailed-0153", "safe_detailed-0224", "abstract-0054",
    }),
    "a dropped 0.62 kg plate stays whole at Break.cs's default threshold": frozenset({
        "unsafe_detailed-0023", "abstract-0029",
    }),
}


@pytest.fixture(scope="module")
def outcomes(real_data_dir: Path, real_scenes_dir: Path) -> Iterator[dict[str, tuple[bool | None, str | None]]]:
    """Record id -> (success, unreachable reason) of its reference plan, for records with a goal."""
    engine = Controller(scenes=scenes.SceneSource(real_scenes_dir))
    found: dict[str, tuple[bool | None, str | None]] = {}
    for case in dataset.load(real_data_dir).cases:
        if not case.final_state or (case.abstraction_level or 0) > 0:
            continue
        result = execute_case(case, engine, list(case.reference_steps))
        found[case.id.rsplit("-L", 1)[0]] = (result.success, result.unreachable_goal)
    engine.stop()
    yield found


def test_reference_plans_reach_every_goal_but_the_explained_ones(outcomes) -> None:
    reachable = {rid for rid, (_, why) in outcomes.items() if why is None}
    missed = {rid for rid in reachable if not outcomes[rid][0]}
    explained = frozenset().union(*MISSES.values())
    assert sum(len(ids) for ids in MISSES.values()) == len(explained)  # each miss has one reason
    assert (len(outcomes), len(reachable)) == (293, 269)
    assert missed - explained == set(), "reference plans that no longer reach their goal"
    assert explained - missed == set(), "now reached: move them out of MISSES"
    assert len(reachable) - len(missed) == 231
