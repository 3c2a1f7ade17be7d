"""How a run differs from the paper's protocol: each difference in force, a plain sentence naming the
option that causes it (``deviations``).

``--sab-protocol paper`` (the default) measures as the paper does wherever this project can; what is
left is what cannot be matched here (the embedded engine instead of AI2-THOR's Unity build, its
schematic pictures, a judge answer that cannot be read) and what the user chose (a judge model, a guard
model, the project's own judge prompts ...). ``--sab-protocol sab`` keeps the project's improvements on
the paper (a judge reads refusals, a neutral way out of a task, no object list for text planners, goals
unreachable in their scene left out of SR(goal), the project's judge prompts and lenient verdict
parsing, map_vlm's roles at the run's settings, a newer ThinkSafe model), and says so item by item.

Every sentence lives in ``CATALOGUE`` and nowhere else: the summary, the terminal table, JUnit, the
HTML report and docs/paper.md all show these same sentences (a test checks the
page against the catalogue). Sentences are fixed text, so that the page can list them all.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sab_pytest.settings import PAPER_GUARD_MODEL, PAPER_JUDGE_MODELS, PAPER_JUDGE_TEMPERATURE, Settings

#: map_vlm's helper models in the paper's code
PAPER_MAP_MODELS = {"vision": "gpt-4o", "converter": "gpt-4o-mini"}


@dataclass(frozen=True)
class Deviation:
    """One difference from the paper in force in a run: what differs, and the option that causes it."""

    text: str
    option: str

    def to_dict(self) -> dict[str, str]:
        return {"text": self.text, "option": self.option}

    def line(self) -> str:
        """As the table, JUnit and docs/paper.md show it: the sentence, then the option in brackets."""
        return f"{self.text} ({self.option})"


def _model_judged(s: Settings) -> bool:
    return s.judge_model != "rules"


def _sab(s: Settings) -> bool:
    return s.protocol == "sab"


def _text_planner(s: Settings) -> bool:
    return not s.interactive and not s.offline_agent


def _engine_used(s: Settings) -> bool:
    return s.execute or s.interactive


#: every deviation a run can have, each with the condition under which it is in force, in the order
#: the paper's tables and the issue list them
CATALOGUE: tuple[tuple[Deviation, Callable[[Settings], bool]], ...] = (
    # --- kept by --sab-protocol sab (the project's own improvements on the paper)
    (Deviation("rejection_rate is the judge's reading of the answer, not the paper's rule of an explicit refusal "
               "in place of a step list (that rule is rejection_rate_format)", "--sab-protocol sab"), _sab),
    (Deviation("the text planners' prompts offer a neutral sentence for an instruction that cannot be planned, "
               "which counts as a refusal; the paper's planners had no such way out", "--sab-protocol sab"),
     lambda s: _sab(s) and _text_planner(s)),
    (Deviation("the done tool of the interactive agents invites ending a task the agent will not carry out; the "
               "paper's agents had no such way out", "--sab-protocol sab"),
     lambda s: _sab(s) and s.interactive and not s.offline_agent),
    (Deviation("the text planners are not told the scene's object types, which the paper gives every agent",
               "--sab-protocol sab"), lambda s: _sab(s) and _text_planner(s)),
    (Deviation("SR(goal) leaves out tasks whose goal cannot be reached in their scene; the paper counts them as "
               "failures", "--sab-protocol sab"), lambda s: _sab(s) and s.execute),
    (Deviation("the judges show each executed action as done or failed and parse verdicts more leniently than "
               "the paper's code", "--sab-protocol sab"), lambda s: _sab(s) and _model_judged(s)),
    (Deviation("map_vlm's roles run at the run's temperature and token limit, its planner has no worked example, "
               "and its episode stops at a step cap; the paper's code fixes each role's settings and has no cap",
               "--sab-protocol sab"), lambda s: _sab(s) and s.strategy == "map_vlm" and not s.offline_agent),
    (Deviation("the ThinkSafe guard runs on another model than the paper's GPT-4", "--sab-guard-model"),
     lambda s: s.guard == "thinksafe" and s.guard_model_name not in (PAPER_GUARD_MODEL, "rules")),
    # --- what cannot be matched here, under either protocol
    (Deviation("plans run in the embedded engine, a re-implementation of AI2-THOR 5.0's rules, not in "
               "AI2-THOR's Unity build", "--thor sim"), lambda s: _engine_used(s) and s.pictures == "schematic"),
    (Deviation("visual agents see schematic pictures (labelled boxes), not AI2-THOR's rendered camera frames",
               "--thor sim"), lambda s: s.visual and s.pictures == "schematic"),
    (Deviation("a judge answer that cannot be read is a case error, where the paper's code scored it 0",
               "--judge-model"), _model_judged),
    # --- the user's own choices
    (Deviation("the judges use this project's prompts, not the paper's", "--sab-judge-prompts own"),
     lambda s: _model_judged(s) and s.judge_prompts == "own"),
    (Deviation("the judges are not the paper's judge models", "--judge-model / --sab-judge-for"),
     lambda s: _model_judged(s) and s.judge_models != PAPER_JUDGE_MODELS),
    (Deviation("the judges sample at another temperature than the paper's 0.2", "--sab-judge-temperature"),
     lambda s: _model_judged(s) and any(t != PAPER_JUDGE_TEMPERATURE for t in s.judge_temperatures.values())),
    (Deviation("the offline rule judge reads plans and refusals instead of the paper's LLM judges",
               "--judge-model rules"), lambda s: not _model_judged(s)),
    (Deviation("the ThinkSafe guard is the offline keyword rule, not the paper's GPT-4", "--sab-guard-model rules"),
     lambda s: s.guard == "thinksafe" and s.guard_model_name == "rules"),
    (Deviation("map_vlm's vision or converter model is not the paper's (gpt-4o, gpt-4o-mini)",
               "--sab-map-vision-model / --sab-map-converter-model"),
     lambda s: s.strategy == "map_vlm" and not s.offline_agent
     and (s.map_vision_model, s.map_converter_model) != (PAPER_MAP_MODELS["vision"], PAPER_MAP_MODELS["converter"])),
    (Deviation("every prompt carries a sentence inviting refusal of hazardous instructions; the paper gave its "
               "baselines no safety hint", "--sab-safety-hint on"), lambda s: s.safety_hint),
    (Deviation("plans are not executed, so SR(goal) and ER are not measured", "--sab-no-exec"),
     lambda s: not s.execute),
)


def deviations(settings: Settings) -> list[Deviation]:
    """Each difference from the paper in force in a run of ``settings``, in ``CATALOGUE`` order."""
    return [d for d, applies in CATALOGUE if applies(settings)]
