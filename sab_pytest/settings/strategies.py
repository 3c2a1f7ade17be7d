"""Every ``--sab-strategy``, one line each: its name, the agent class that plays it, and its traits.

Why a table here, and not the agents' own attributes: the settings (the option's help and checks,
which strategies need an engine or pictures, which settings change verdicts), the dry run's fake
answers and the docs need a strategy's traits long before any agent is imported, and the settings
import nothing above them. So the traits are written once, here, and everything reads them: the
settings and ``run.dry`` directly, the agents' registry (``agents.registry``) by importing each
line's class by name and checking that it is one the line may name, and the acting agents read
their own ``visual`` and turn format from their line. Adding a strategy is its agent's module
(with its prompt) and one line below; nothing else lists strategies.

A line's traits:

* ``acts``: the agent acts in the scene itself (move by move, or executing its own plan), so every
  case needs an engine; otherwise it is a text planner that answers with a plan once;
* ``answers``: what a complying model answers, turn by turn: ``plan`` (a numbered plan), ``program``
  (a ProgPrompt program) or ``moves`` (one move a turn); the dry run's fake answers take this form;
* ``visual``: the model is shown the robot's camera pictures;
* ``three_part``: each turn has three parts (perception, cognition, action), PCA-EVAL's format;
* ``helpers``: the agent calls models beside the one under test (map_vlm's vision and converter
  models, ``--sab-vision-model``/``--sab-converter-model``), which it is built with.
"""

from __future__ import annotations

from dataclasses import dataclass

from sab_pytest.errors import UsageError

ANSWERS = ("plan", "program", "moves")


@dataclass(frozen=True)
class StrategyInfo:
    """One line of the table (see the module docstring). ``agent`` is ``module:Class`` in ``sab_pytest.agents``."""

    name: str
    agent: str
    acts: bool = False
    answers: str = "plan"
    visual: bool = False
    three_part: bool = False
    helpers: bool = False

    def __post_init__(self) -> None:
        if self.answers not in ANSWERS:
            raise ValueError(f"strategy {self.name!r}: answers {self.answers!r} is not one of {', '.join(ANSWERS)}")
        if (self.visual or self.three_part or self.helpers) and not self.acts:
            raise ValueError(f"strategy {self.name!r}: visual, three_part and helpers are traits of an agent that acts")


#: the strategies, in the order the docs list them: the text planners, then the agents that act
STRATEGIES: dict[str, StrategyInfo] = {line.name: line for line in (
    StrategyInfo("direct", "text:DirectPlanner"),
    StrategyInfo("cot", "text:CotPlanner"),
    StrategyInfo("two_stage", "text:TwoStagePlanner"),
    StrategyInfo("progprompt", "text:ProgPromptPlanner", answers="program"),
    StrategyInfo("fewshot", "text:FewShotPlanner"),
    StrategyInfo("cooperative", "text:CooperativePlanner"),
    StrategyInfo("mldt", "text:MldtPlanner"),
    StrategyInfo("react", "react:ReactAgent", acts=True, answers="moves"),
    StrategyInfo("basic", "basic:BasicVisualAgent", acts=True, answers="moves", visual=True),
    StrategyInfo("pca", "pca:PcaAgent", acts=True, answers="moves", visual=True, three_part=True),
    StrategyInfo("map_vlm", "map_vlm:MapVlmAgent", acts=True, visual=True, helpers=True),
)}

TEXT_STRATEGIES = tuple(name for name, line in STRATEGIES.items() if not line.acts)
#: strategies that act in the engine move by move (``agents.registry`` maps each to its agent class)
INTERACTIVE_STRATEGIES = tuple(name for name, line in STRATEGIES.items() if line.acts)
#: the interactive strategies that are shown camera pictures
VISUAL_STRATEGIES = tuple(name for name, line in STRATEGIES.items() if line.visual)


def strategy_info(name: str) -> StrategyInfo:
    """The line of ``name``, else a ``UsageError`` naming the option and the valid values."""
    line = STRATEGIES.get(name)
    if line is None:
        raise UsageError(f"--sab-strategy: unknown strategy {name!r}; valid values: {', '.join(STRATEGIES)}")
    return line


def strategies_help() -> str:
    """The strategies as ``--sab-strategy``'s help lists them, by kind."""
    return (f"text planners {', '.join(TEXT_STRATEGIES)}; agents that act in the scene "
            f"{', '.join(INTERACTIVE_STRATEGIES)}")
