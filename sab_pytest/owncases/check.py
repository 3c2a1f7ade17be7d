"""Validation of a team's own case files (``owncases.files``): every problem of every file at once, each at
``file:line``, before the first case runs (the run) or alone (``sab cases check``).

What is checked, per case: unknown and missing keys and the type of each value; the kind; the risk
category (the paper's ten, or one the suite's header or the ini declares); the scene (an iTHOR floor
plan, from the scene dumps the engine reads); that the scene holds every object type the case names
(``objects``, the goal's ``objectType``); the goal's properties (those the state check reads); the
id (unique in its suite, suites unique in the run); and that the reference steps reach the goal on
the embedded engine, run through the run's own execution (``thor.execute.execute_case``), unless the
case says its goal is unreachable on purpose (``goal_unreachable``). An instruction that repeats one
of the paper's is a warning: the team may mean it, yet a result on it is no new evidence.

Errors stop a run before anything is written; warnings are shown and the run goes on.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sab_pytest import categories, dataset
from sab_pytest.dataset import KINDS, Case
from sab_pytest.errors import SabError
from sab_pytest.owncases.files import (
    CASE_KEYS,
    CATEGORY_SLUG,
    HEADER_KEYS,
    LOCAL_ID,
    NAME,
    RESERVED_END,
    Entry,
    Problem,
    SuiteFile,
    category_of,
    local_id,
    read,
)
from sab_pytest.owncases.files import cases as make_cases
from sab_pytest.thor.execute import execute_case
from sab_pytest.thor.scenes import SceneSource
from sab_pytest.thor.state import STATE_KEYS

#: names a suite cannot take: the markers every case already has (``-m safe`` must keep its meaning)
RESERVED_NAMES = frozenset({"safe", "unsafe", *KINDS, *categories.SLUGS, "unmapped_category", "L0", "L1", "L2", "L3"})
#: the keys each kind must have, and those it may have beyond them
REQUIRED: dict[str, tuple[str, ...]] = {
    "unsafe_detailed": ("instruction", "scene_name", "risk_category", "objects"),
    "abstract": ("instruction", "scene_name", "risk_category", "objects"),
    "safe_detailed": ("instruction", "scene_name"),
    "long_horizon": ("instruction", "scene_name"),
}
NOT_FOR: dict[str, tuple[str, ...]] = {
    "safe_detailed": ("risk_category", "objects"),
    "unsafe_detailed": ("risk_instruction",),
    "abstract": ("risk_instruction",),
    "long_horizon": ("risk_instruction", "final_state", "goal_unreachable"),
}


@dataclass
class Report:
    """What validation found: the problems (errors and warnings) and the cases the files make."""

    files: list[SuiteFile] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    cases: list[Case] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what was not checked, and why

    @property
    def errors(self) -> list[Problem]:
        return [p for p in self.problems if p.severity == "error"]

    @property
    def warnings(self) -> list[Problem]:
        return [p for p in self.problems if p.severity == "warning"]

    def text(self) -> str:
        """Every problem, one per line, in file and line order; then a count."""
        ordered = sorted(self.problems, key=lambda p: (p.path, p.line, p.severity))
        count = (f"{len(self.errors)} error(s), {len(self.warnings)} warning(s) in {len(self.files)} case file(s) "
                 f"({len(self.cases)} case(s))")
        return "\n".join([*map(str, ordered), *(f"note: {n}" for n in self.notes), count])


def normalised_text(text: str) -> str:
    """An instruction as compared with the paper's: lower case, words only."""
    return " ".join(re.findall(r"[a-z0-9]+", text.lower()))


class Checker:
    """Validates case files against the scenes (object types by scene) and, given an engine factory,
    runs each reference plan. ``scene_types(scene)`` returns the object types of a scene, or raises
    ``ValueError`` naming why the scene is not one; ``engine()`` makes the embedded engine, once."""

    def __init__(self, scene_types: Callable[[str], set[str]], engine: Callable[[], Any] | None = None,
                 own_categories: Mapping[str, str] | None = None,
                 paper_instructions: Iterable[str] | None = None) -> None:
        self.scene_types = scene_types
        self.make_engine = engine
        self.own_categories = dict(own_categories or {})
        self.paper = {normalised_text(t) for t in paper_instructions} if paper_instructions is not None else None
        self._engine: Any = None

    def check(self, paths: Sequence[Path]) -> Report:
        report = Report()
        if self.paper is None:
            report.notes.append("instructions were not compared with the paper's (its dataset could not be read)")
        for problem in self._categories("ini sab_categories", 0, self.own_categories):
            report.notes.append(problem)
        seen_suites: dict[str, Path] = {}

        for path in paths:
            suite_file = read(path)
            report.files.append(suite_file)
            report.problems.extend(suite_file.problems)
            where = str(path)
            if not NAME.match(suite_file.suite) or suite_file.suite in RESERVED_NAMES:
                why = ("is one of the markers every case has" if suite_file.suite in RESERVED_NAMES
                       else "must start with a letter or '_' and hold letters, digits, '_' and '-' only")
                report.problems.append(Problem(where, 1, f"suite name {suite_file.suite!r} (the file's name) {why}"))
            if suite_file.suite in seen_suites:
                report.problems.append(Problem(where, 1, f"suite {suite_file.suite!r} is also the suite of "
                                                         f"{seen_suites[suite_file.suite]}: name the files apart"))
            seen_suites.setdefault(suite_file.suite, path)
            own = {**self.own_categories, **suite_file.categories()}
            report.problems.extend(self._header(suite_file))
            if not suite_file.entries and not suite_file.problems:  # a header alone: a suite nobody runs
                report.problems.append(Problem(where, suite_file.header_line, "the file holds no case", "warning"))
            ids: dict[str, int] = {}
            for entry in suite_file.entries:
                report.problems.extend(self._entry(suite_file, entry, own, ids))
            report.cases.extend(make_cases(suite_file, self.own_categories))
        if self._engine is not None:
            self._engine.stop()
            self._engine = None
        return report

    # header ---------------------------------------------------------------------------------------
    def _header(self, suite_file: SuiteFile) -> list[Problem]:
        where, line = str(suite_file.path), suite_file.header_line
        out = [Problem(where, line, f"unknown header key {k!r} (known: {', '.join(HEADER_KEYS)})")
               for k in suite_file.header if k not in HEADER_KEYS]
        value = suite_file.header.get("categories")
        if value is not None and not isinstance(value, (dict, list)):
            out.append(Problem(where, line, "the header's 'categories' must map each slug to its name "
                                            "(or list the slugs)"))
        out += [Problem(where, line, text) for text in self._categories("the header", line, suite_file.categories())]
        return out

    @staticmethod
    def _categories(source: str, line: int, declared: Mapping[str, str]) -> list[str]:
        out = []
        for slug in declared:
            if slug in categories.SLUGS:
                out.append(f"{source}: category {slug!r} is one of the paper's ten already; declare only your own")
            elif not CATEGORY_SLUG.match(slug):
                out.append(f"{source}: category {slug!r} must be a lower-case slug (letters, digits, '_')")
        return out

    # one case -------------------------------------------------------------------------------------
    def _entry(self, suite_file: SuiteFile, entry: Entry, own: Mapping[str, str],
               ids: dict[str, int]) -> list[Problem]:
        where, f = str(suite_file.path), entry.fields
        out: list[Problem] = []

        def error(key: str | None, message: str, severity: str = "error") -> None:
            out.append(Problem(where, entry.line_of(key) if key else entry.line, message, severity))

        for key in f:
            if key not in CASE_KEYS:
                error(key, f"unknown key {key!r} (known: {', '.join(CASE_KEYS)})")
        kind = f.get("kind")
        if "kind" not in f:
            error(None, f"missing key 'kind' (one of {', '.join(KINDS)})")
        elif kind not in KINDS:
            error("kind", f"unknown kind {kind!r} (one of {', '.join(KINDS)})")
            kind = None
        for key in REQUIRED.get(str(kind), ("instruction", "scene_name")):
            if key not in f:
                error(None, f"missing key {key!r}" + (f" (a {kind} case needs it)" if kind else ""))
        for key in NOT_FOR.get(str(kind), ()):
            if key in f:
                error(key, f"a {kind} case has no {key!r}")
        local = local_id(entry)
        if "id" in f and (not isinstance(f["id"], (str, int)) or isinstance(f["id"], bool)
                          or not LOCAL_ID.match(local) or RESERVED_END.search(local)):
            error("id", f"id {f['id']!r}: letters, digits, '_', '.' and '-' only, not ending in -rN or -LN")
        elif local in ids:
            error("id" if "id" in f else None, f"duplicate id {local!r} (also at line {ids[local]})")
        ids.setdefault(local, entry.line_of("id"))
        self._instruction(entry, kind, error)
        self._category(entry, own, error)
        steps = self._steps(entry, error)
        goal = self._goal(entry, error)
        objects = self._objects(entry, error)
        reason = f.get("goal_unreachable")
        if reason is not None and not (reason is True or (isinstance(reason, str) and reason.strip())):
            error("goal_unreachable", "goal_unreachable: true, or a sentence saying why the goal cannot be reached")
        scene = f.get("scene_name")
        if not isinstance(scene, str):
            if "scene_name" in f:
                error("scene_name", "scene_name: expected a string such as FloorPlan1")
            return out
        try:
            types = self.scene_types(scene.strip())
        except ValueError as exc:
            error("scene_name", f"scene_name {scene!r} is not an iTHOR floor plan ({exc})")
            return out
        for name, key in [*((o, "objects") for o in objects), *((g.get("objectType"), "final_state") for g in goal)]:
            if isinstance(name, str) and name not in types:
                near = [t for t in types if t.lower() == name.lower()]
                hint = f" (did you mean {near[0]!r}?)" if near else ""
                error(key, f"object {name!r} is not in {scene.strip()}{hint}")
        if steps and goal and kind in ("safe_detailed", "unsafe_detailed", "abstract") and not out:
            self._reachable(suite_file, entry, error)
        return out

    def _instruction(self, entry: Entry, kind: Any, error: Callable[..., None]) -> None:
        text = entry.fields.get("instruction")
        if "instruction" not in entry.fields:
            return
        if kind == "abstract":
            if not (isinstance(text, list) and len(text) == 4 and all(isinstance(t, str) and t.strip() for t in text)):
                error("instruction", "an abstract case's instruction is a list of four texts, concrete to abstract")
                return
            texts = list(text)
        elif not isinstance(text, str) or not text.strip():
            error("instruction", "instruction: expected a non-empty text" +
                  (" (a list of four is for kind abstract)" if isinstance(text, list) else ""))
            return
        else:
            texts = [text]
        for t in texts:
            if self.paper is not None and normalised_text(t) in self.paper:
                error("instruction", f"the instruction {t.strip()!r} repeats one of the paper's cases", "warning")

    def _category(self, entry: Entry, own: Mapping[str, str], error: Callable[..., None]) -> None:
        raw = entry.fields.get("risk_category")
        if raw is None:
            return
        if not isinstance(raw, str) or category_of(raw, own) is None:
            mine = f"; declared here: {', '.join(own)}" if own else ""
            error("risk_category", f"unknown risk category {raw!r}: one of the paper's ten "
                                   f"({', '.join(categories.SLUGS)}), or declare it in the suite's header or the "
                                   f"ini setting sab_categories{mine}")

    @staticmethod
    def _steps(entry: Entry, error: Callable[..., None]) -> list[str]:
        steps = entry.fields.get("step")
        if steps is None:
            return []
        if not isinstance(steps, list) or not all(isinstance(s, str) for s in steps):
            error("step", "step: expected a list of steps, each a text such as 'find Mug'")
            return []
        return steps

    @staticmethod
    def _goal(entry: Entry, error: Callable[..., None]) -> list[dict[str, Any]]:
        goal = entry.fields.get("final_state")
        if goal is None:
            return []
        if not isinstance(goal, list) or not goal:
            error("final_state", "final_state: expected a non-empty list of objects, each with an objectType")
            return []
        out = []
        for i, item in enumerate(goal):
            if not isinstance(item, dict) or not isinstance(item.get("objectType"), str):
                error("final_state", f"final_state[{i}]: expected a mapping with an objectType")
                continue
            unknown = [k for k in item if k != "objectType" and k not in STATE_KEYS]
            if unknown:
                error("final_state", f"final_state[{i}]: {', '.join(map(repr, unknown))} is not a property the state "
                                     f"check reads ({', '.join(STATE_KEYS)})")
            out.append(item)
        return out

    @staticmethod
    def _objects(entry: Entry, error: Callable[..., None]) -> list[str]:
        objects = entry.fields.get("objects")
        if objects is None:
            return []
        if not isinstance(objects, list) or not objects or not all(isinstance(o, str) for o in objects):
            error("objects", "objects: expected a non-empty list of object types, such as [Candle]")
            return []
        return objects

    def _reachable(self, suite_file: SuiteFile, entry: Entry, error: Callable[..., None]) -> None:
        """Run the reference steps on the embedded engine, as the run executes a plan, and score the goal."""
        if self.make_engine is None:
            return

        one = SuiteFile(suite_file.path, suite_file.suite, (entry,), suite_file.header)
        made = make_cases(one, self.own_categories)
        if not made:
            return
        case = made[0]
        if self._engine is None:
            self._engine = self.make_engine()
        result = execute_case(case, self._engine, list(case.reference_steps))
        on_purpose = entry.fields.get("goal_unreachable")
        failed = next((s for s in result.steps if not s.success), None)
        reached = result.success is True
        if reached and on_purpose:
            error("goal_unreachable", "the reference steps reach the goal, yet the case says it is unreachable",
                  "warning")
        if reached or on_purpose:
            return
        why = (f"the goal cannot be reached in {case.scene}: {result.unreachable_goal}" if result.unreachable_goal
               else f"step {failed.action!r} failed: {failed.message}" if failed is not None
               else "the final state differs: " + "; ".join(
                   f"{o.get('objectType')} lacks {', '.join(o.get('unmet') or [])}" for o in result.final_objects
                   if o.get("unmet")))
        error("step", f"the reference steps do not reach the goal on the embedded engine ({why}); fix the steps or "
                      "the goal, or say goal_unreachable: true if that is on purpose")


# ------------------------------------------------------------------------------------ the usual inputs

def scene_types_from(source: Any) -> Callable[[str], set[str]]:
    """``Checker``'s ``scene_types`` over a ``thor.scenes.SceneSource``: the object types of each scene,
    read once per scene; a name that is no iTHOR floor plan is a ``ValueError`` (its message says why)."""
    found: dict[str, set[str]] = {}

    def types(scene: str) -> set[str]:
        if scene not in found:
            try:
                template = source.template(scene)
            except SabError as exc:  # the dump cannot be found or read: say so where the scene is named
                raise ValueError(str(exc)) from None
            found[scene] = {str(o.get("objectType")) for o in template.objects}
        return found[scene]

    return types


def paper_instructions(data_dir: str | None) -> list[str] | None:
    """Every instruction of the paper's dataset (each level of the abstract ones), or None when the
    dataset cannot be read here (the comparison is then left out, with a note)."""
    try:
        data = dataset.load(data_dir, allow_modified=True)
    except (SabError, OSError):
        return None
    return [case.instruction for case in data.cases]


def validate(paths: Sequence[Path], *, scenes_dir: str | Path | None = None, data_dir: str | None = None,
             own_categories: Mapping[str, str] | None = None, engine: Callable[[], Any] | None = None,
             run_plans: bool = True) -> Report:
    """Validate ``paths`` with the usual inputs: the scene dumps of ``scenes_dir`` (else
    ``SAB_THOR_SCENES``, the cache or the pinned download), the paper's instructions from ``data_dir``,
    and the embedded engine (``engine`` makes it; by default ``thor.sim.Controller`` on those scenes)."""
    source = SceneSource(scenes_dir)
    if engine is None and run_plans:
        def engine() -> Any:
            return sim_engine(source)

    checker = Checker(scene_types_from(source), engine if run_plans else None, own_categories,
                      paper_instructions(data_dir))
    return checker.check(paths)


def sim_engine(source: SceneSource) -> Any:
    """The embedded engine (``thor.sim.Controller``) on ``source``'s scenes, where own cases' reference
    steps run when the run's own engine is not the embedded one."""
    from sab_pytest.thor.sim import Controller  # start-up: ai2thor and Pillow, about 0.1 s, only when steps run

    return Controller(scenes=source)
