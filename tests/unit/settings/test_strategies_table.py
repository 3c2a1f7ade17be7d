"""The table of strategies (``settings.strategies``): the one place their names and traits are written,
which the settings, the dry run and the agents read."""

from __future__ import annotations

import pytest

from sab_pytest.agents import registry
from sab_pytest.agents.basic import BasicVisualAgent
from sab_pytest.agents.pca import PcaAgent
from sab_pytest.agents.react import ReactAgent
from sab_pytest.errors import UsageError
from sab_pytest.run.dry import answer_style
from sab_pytest.settings import Settings
from sab_pytest.settings.strategies import STRATEGIES, StrategyInfo, strategies_help, strategy_info


def test_a_line_that_gives_a_planner_an_acting_trait_is_refused() -> None:
    with pytest.raises(ValueError, match="traits of an agent that acts"):
        StrategyInfo("odd", "text:DirectPlanner", visual=True)
    with pytest.raises(ValueError, match="answers 'essay'"):
        StrategyInfo("odd", "text:DirectPlanner", answers="essay")


def test_an_unknown_strategy_is_a_usage_error_listing_the_table() -> None:
    with pytest.raises(UsageError, match="--sab-strategy: unknown strategy 'nope'; valid values: direct, cot"):
        strategy_info("nope")
    assert tuple(STRATEGIES) == registry.STRATEGIES


@pytest.mark.parametrize("name", list(STRATEGIES))
def test_the_settings_the_dry_run_and_the_agents_read_each_line(name: str) -> None:
    line = STRATEGIES[name]
    s = Settings(strategy=name, model="m")
    assert (s.interactive, s.visual, s.helpers) == (line.acts, line.visual, line.helpers)
    assert answer_style(name) == line.answers
    assert name in strategies_help()
    cls = registry.INTERACTIVE[name] if line.acts else registry.PLANNERS[name]
    assert cls.name == name


def test_the_acting_agents_read_their_pictures_and_turn_format_from_their_line() -> None:
    agents = [cls.__new__(cls) for cls in (ReactAgent, BasicVisualAgent, PcaAgent)]
    assert [(a.visual, a.pca) for a in agents] == [(False, False), (True, False), (True, True)]
