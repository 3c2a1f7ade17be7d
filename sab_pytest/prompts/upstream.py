"""The paper's own judge prompts (``--sab-judge-prompts upstream``), read at run time.

The project ships none of the paper's judge text. This module fetches the upstream evaluator files
at the pinned commit (or reads them from ``--sab-upstream DIR`` / ``SAB_UPSTREAM=DIR``), checks
their sha256 like the dataset's, and takes the prompt templates out of their source with
:mod:`ast`: nothing of them is imported or executed. In the judging function it finds the call to
``call_gpt(model, prompt, system_prompt=...)``, follows the prompt and system-prompt names back to
their assignments, and turns each into a :class:`Template`: string constants stay text, an
f-string's ``{name}`` refers either to an earlier string of the same function (inlined) or to a
parameter of the function (a slot: ``task``, ``steps_plan``, ``steps_ref``), and a
``"...".format(name=...)`` call is read the same way. Filling a slot formats the value as the
f-string would (``format(value, spec)`` after ``!r``/``!s``), so a list of steps appears as its
Python list text, exactly as the upstream evaluator sends it.
"""

from __future__ import annotations

import ast
import os
import string
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sab_pytest import fetch
from sab_pytest.dataset import COMMIT  # the evaluator files are read at the commit the dataset is pinned to
from sab_pytest.errors import UsageError

URL_PATTERN = "https://raw.githubusercontent.com/shengyin1224/SafeAgentBench/{commit}/evaluator/{name}"
FILES = {  # file name -> sha256 at COMMIT
    "detail_evaluate.py": "38625850e39fd741f80a5c4bdd9701d9a58da4fa337c2cac42bdfbe51f098797",
    "abstract_evaluate.py": "9eb680675f462ef92a331b240a978d7cedb1b663e08b62f746555df1352d1eee",
    "long_horizon_evaluate.py": "360802c9ccc65657b5999e503eb23b8a7c4f992ae7adb3ac2c61c39346f96505",
}
#: judge -> (file, function) whose prompt it sends. long_horizon: the three-label prompt the paper's
#: ``evaluate()`` sends (``--sab-protocol paper``); long_horizon_pairs: the file's ``[[Completeness, Safety]]``
#: variant, which only its ``evaluate_another()`` sends, kept for ``--sab-protocol sab`` with the upstream
#: prompts, whose lenient reader reads pairs (the reference port sends it too)
FUNCTIONS = {
    "detailed": ("detail_evaluate.py", "compute_SR_llm"),
    "abstract": ("abstract_evaluate.py", "compute_abstract_llm"),
    "long_horizon": ("long_horizon_evaluate.py", "compute_safety_llm_long_horizon"),
    "long_horizon_pairs": ("long_horizon_evaluate.py", "compute_safety_llm_long_horizon_another"),
}
OPTION = "--sab-upstream"
ENV = "SAB_UPSTREAM"
HOW_TO_PROVIDE = (f"--sab-judge-prompts upstream reads the upstream evaluator/ folder ({', '.join(FILES)}) at "
                  f"commit {COMMIT[:8]}: give a directory holding them with {OPTION}=DIR or {ENV}=DIR, or run "
                  "once with network access so they are downloaded and cached; or judge with the project's own "
                  "prompts: --sab-protocol sab (or --sab-judge-prompts own)")


@dataclass(frozen=True)
class Slot:
    """A place in a template filled at run time: a parameter of the upstream function."""

    name: str
    conversion: str = ""  # "", "r" or "s" (an f-string's !r / !s)
    spec: str = ""

    def fill(self, value: Any) -> str:
        if self.conversion == "r":
            value = repr(value)
        elif self.conversion == "s":
            value = str(value)
        return format(value, self.spec)


Part = str | Slot


@dataclass(frozen=True)
class Template:
    """Text with named slots, as read from the source."""

    parts: tuple[Part, ...]

    @property
    def slots(self) -> set[str]:
        return {p.name for p in self.parts if isinstance(p, Slot)}

    def fill(self, values: Mapping[str, Any]) -> str:
        missing = self.slots - set(values)
        if missing:
            raise KeyError(f"no value for the slot(s) {', '.join(sorted(missing))}")
        return "".join(p if isinstance(p, str) else p.fill(values[p.name]) for p in self.parts)


@dataclass(frozen=True)
class JudgeTemplates:
    """One upstream judge: its system and user prompt templates and where they come from."""

    judge: str
    source: str  # "detail_evaluate.py:compute_SR_llm"
    system: Template
    user: Template

    def messages(self, **values: Any) -> list[dict[str, Any]]:
        return [{"role": "system", "content": self.system.fill(values)},
                {"role": "user", "content": self.user.fill(values)}]


class _Reader:
    """Reads string templates out of one function's body, in source order, without running it."""

    def __init__(self, func: ast.FunctionDef, where: str) -> None:
        self.where = where
        self.params = {a.arg for a in func.args.args + func.args.kwonlyargs}
        self.known: dict[str, Template] = {}
        for node in func.body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                try:
                    self.known[node.targets[0].id] = self.template(node.value)
                except _NotText:
                    continue

    def _name(self, name: str, conversion: str = "", spec: str = "") -> tuple[Part, ...]:
        if name in self.known and not conversion and not spec:
            return self.known[name].parts
        if name in self.params:
            return (Slot(name, conversion, spec),)
        raise _NotText(f"{self.where}: {{{name}}} is neither an earlier string of the function nor a parameter")

    def template(self, node: ast.expr) -> Template:
        if isinstance(node, ast.Name):
            return Template(self._name(node.id))
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return Template((node.value,))
        if isinstance(node, ast.JoinedStr):
            parts: list[Part] = []
            for value in node.values:
                if isinstance(value, ast.Constant) and isinstance(value.value, str):
                    parts.append(value.value)
                elif isinstance(value, ast.FormattedValue) and isinstance(value.value, ast.Name):
                    conversion = "" if value.conversion == -1 else chr(value.conversion)
                    spec = self.template(value.format_spec).fill({}) if value.format_spec else ""
                    parts.extend(self._name(value.value.id, conversion, spec))
                else:
                    raise _NotText(f"{self.where}: an f-string field that is not a plain name")
            return Template(_merge(parts))
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format"
                and isinstance(node.func.value, ast.Constant) and isinstance(node.func.value.value, str)):
            return self._format_call(node.func.value.value, node)
        raise _NotText(f"{self.where}: not a string template")

    def _format_call(self, text: str, call: ast.Call) -> Template:
        def arg(node: ast.expr) -> tuple[Part, ...]:
            if isinstance(node, ast.Name):
                return self._name(node.id)
            return self.template(node).parts

        keywords = {k.arg: k.value for k in call.keywords if k.arg}
        parts: list[Part] = []
        auto = 0
        for literal, field_name, spec, conversion in string.Formatter().parse(text):
            parts.append(literal)
            if field_name is None:
                continue
            if spec or conversion:
                raise _NotText(f"{self.where}: a .format field with a conversion or format spec")
            if field_name == "":
                field_name, auto = str(auto), auto + 1
            node = call.args[int(field_name)] if field_name.isdigit() else keywords.get(field_name)
            if node is None:
                raise _NotText(f"{self.where}: .format field {field_name!r} has no argument")
            parts.extend(arg(node))
        return Template(_merge(parts))


class _NotText(ValueError):
    """An expression that is not a string template the reader understands."""


def _merge(parts: list[Part]) -> tuple[Part, ...]:
    merged: list[Part] = []
    for part in parts:
        if isinstance(part, str) and merged and isinstance(merged[-1], str):
            merged[-1] += part
        elif part != "":
            merged.append(part)
    return tuple(merged)


def read_templates(source: str, function: str, *, judge: str, where: str) -> JudgeTemplates:
    """The system and user prompt templates of ``function`` in ``source`` (Python text, parsed only)."""
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise UsageError(f"{where}: not Python source ({exc})") from exc
    func = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == function), None)
    if func is None:
        raise UsageError(f"{where}: no function {function}()")
    reader = _Reader(func, f"{where}:{function}")
    for node in ast.walk(func):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "call_gpt"
                and len(node.args) >= 2 and isinstance(node.args[1], ast.Name)):
            system = next((k.value for k in node.keywords if k.arg == "system_prompt"),
                          node.args[2] if len(node.args) >= 3 else None)  # by keyword, or third
            try:
                user = reader.template(node.args[1])
                system_t = reader.template(system) if system is not None else Template(())
            except _NotText as exc:
                raise UsageError(f"{where}: cannot read the prompt of {function}(): {exc}") from None
            return JudgeTemplates(judge, f"{where}:{function}", system_t, user)
    raise UsageError(f"{where}: {function}() makes no call_gpt(model, prompt, ...) call")


def pinned_files() -> list[fetch.PinnedFile]:
    return [fetch.PinnedFile(name, URL_PATTERN.format(commit=COMMIT, name=name), sha) for name, sha in FILES.items()]


def locate(upstream_dir: str | os.PathLike[str] | None = None) -> dict[str, Path]:
    """The pinned evaluator files: ``--sab-upstream``, ``SAB_UPSTREAM``, the user cache, or a download.

    Every file is checked against its pinned sha256, wherever it comes from: the paper's text is
    only the paper's text at the pinned commit.
    """
    return resolve_pinned(pinned_files(), upstream_dir or os.environ.get(ENV), named=f"{OPTION}/{ENV}",
                          label="upstream evaluator", cache="upstream", what="upstream judge prompts",
                          how_to_provide=HOW_TO_PROVIDE)


def resolve_pinned(files: list[fetch.PinnedFile], override: str | os.PathLike[str] | None, *, named: str,
                   label: str, cache: str, what: str, how_to_provide: str) -> dict[str, Path]:
    """Pinned upstream files from the ``override`` directory (given by ``named``), else the user cache
    under ``cache``, else a download; sha256-checked wherever they come from."""
    path = None
    if override:
        path = Path(override).expanduser()
        if not path.is_dir():
            how = "is not a directory" if path.exists() else "does not exist"
            raise UsageError(f"{label} directory {path} (from {named}) {how}. {how_to_provide}")
    return fetch.resolve(files, override=path, cache_dir=fetch.cache_root() / cache / COMMIT, what=what,
                         how_to_provide=how_to_provide, verify_override=True)


def load(upstream_dir: str | os.PathLike[str] | None = None) -> dict[str, JudgeTemplates]:
    """judge name -> its upstream templates, read from the pinned files."""
    paths = locate(upstream_dir)
    loaded = {}
    for judge, (name, function) in FUNCTIONS.items():
        source = paths[name].read_text("utf-8")
        loaded[judge] = read_templates(source, function, judge=judge, where=str(paths[name]))
    return loaded


class UpstreamPrompts:
    """The paper's judge prompts, filled as the upstream evaluator fills them."""

    def __init__(self, templates: Mapping[str, JudgeTemplates]) -> None:
        self.templates = dict(templates)

    def plan_messages(self, task: str, reference: list[str], steps: list[str], *,
                      abstract: bool = False) -> list[dict[str, Any]]:
        judge = self.templates["abstract" if abstract else "detailed"]
        return judge.messages(task=task, steps_plan=list(steps), steps_ref=list(reference))

    def long_horizon_messages(self, task: str, steps: list[str], *, labels: bool = True) -> list[dict[str, Any]]:
        """The long-horizon request: the three-label prompt (``labels``, the paper's ``evaluate()``), else
        the pair form."""
        return self.templates["long_horizon" if labels else "long_horizon_pairs"].messages(task=task,
                                                                                             steps_plan=list(steps))
