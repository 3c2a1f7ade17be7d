"""The paper's MAP prompts (map_vlm under ``--sab-protocol paper``), read at run time from its released code.

Only MAP's prompts were published with the paper (methods/map_vlm.py and methods/utils.py); the project
ships none of their text. This module fetches those two files at the pinned commit (or reads them from
``SAB_UPSTREAM_METHODS=DIR``), checks their sha256 like the evaluator's, and takes the prompt texts out
of their source with :mod:`ast`, nothing of them imported or executed:

* in ``Agents.multi_agent_vision_planning`` (map_vlm.py): the environment agent's and the grounding
  agent's text (the ``{"type": "text", ...}`` part of each one's picture message, in its nested
  function), and the planner's system and user messages (the method's own chat call);
* in ``gen_low_level_plan`` (utils.py): the converter's system prompt and its prompt, through the same
  ``call_gpt`` reader as the judge prompts (:func:`sab_pytest.prompts.upstream.read_templates`).

The texts are concatenations (``"..." + self.task_description + "..."``) and f-strings. Each becomes a
:class:`~sab_pytest.prompts.upstream.Template` whose slots are the names the code fills them from:
``task_description`` (the task), ``objs_from_scene`` (the scene's object types, a Python list, as the
code formats it), ``enviroment_agent`` and ``sim_ground_agent`` (the two vision agents' answers),
``high_level_plan`` (the planner's plan). A name assigned earlier in the same function is inlined.
The paper's code lists the object types in the order of a Python ``set``, which is arbitrary; they are
given sorted here.
"""

from __future__ import annotations

import ast
import os
from dataclasses import dataclass
from typing import Any

from sab_pytest import fetch
from sab_pytest.dataset import COMMIT
from sab_pytest.errors import UsageError
from sab_pytest.prompts.upstream import Part, Slot, Template, _merge, read_templates, resolve_pinned

URL_PATTERN = "https://raw.githubusercontent.com/shengyin1224/SafeAgentBench/{commit}/methods/{name}"
FILES = {  # file name -> sha256 at COMMIT
    "map_vlm.py": "d18a253dafc6eee3ddc8d0056a185adfa95f09493534584bbf7001e53c4a17e4",
    "utils.py": "8b00228cf9a4554d213ec06998eaed42f34a45ebc16ec31a8350b567a87f18db",
}
ENV = "SAB_UPSTREAM_METHODS"
HOW_TO_PROVIDE = (f"map_vlm under --sab-protocol paper reads the upstream methods/ folder ({', '.join(FILES)}) at "
                  f"commit {COMMIT[:8]}: give a directory holding them with {ENV}=DIR, or run once with network "
                  "access so they are downloaded and cached; or run map_vlm in the project's own words: "
                  "--sab-protocol sab")
#: where each role's text is: (file, class or None, function, nested function or None)
PLANNING = ("map_vlm.py", "Agents", "multi_agent_vision_planning")


@dataclass(frozen=True)
class MapTexts:
    """MAP's four roles as the paper's code words them; ``fill`` puts the run's values in."""

    environment: Template  # the environment agent's text, sent beside the picture
    grounding: Template  # the grounding agent's text, sent beside the picture
    planner_system: Template
    planner_user: Template
    converter_system: Template
    converter_user: Template

    def vision_message(self, role: str, task: str, object_types: list[str], picture: str | None) -> dict[str, Any]:
        """The one user message a vision agent gets: its text, then the picture (no system message)."""
        template = self.environment if role == "environment" else self.grounding
        parts: list[dict[str, Any]] = [{"type": "text", "text": template.fill(
            {"task_description": task, "objs_from_scene": list(object_types)})}]
        if picture:
            parts.append({"type": "image_url", "image_url": {"url": picture}})
        return {"role": "user", "content": parts}

    def planner_messages(self, task: str, environment: str, grounding: str) -> list[dict[str, Any]]:
        values = {"task_description": task, "enviroment_agent": environment, "sim_ground_agent": grounding}
        return [{"role": "system", "content": self.planner_system.fill(values)},
                {"role": "user", "content": self.planner_user.fill(values)}]

    def converter_messages(self, plan: str) -> list[dict[str, Any]]:
        values = {"high_level_plan": plan}
        return [{"role": "system", "content": self.converter_system.fill(values)},
                {"role": "user", "content": self.converter_user.fill(values)}]


def converted_lines(answer: str) -> list[str]:
    """The converter's answer as the paper's code executes it: every non-empty line, stripped."""
    return [line.strip() for line in answer.strip().split("\n") if line.strip()]


class _Concat:
    """Reads one function's text expressions: concatenations, constants, f-strings, names and calls."""

    def __init__(self, func: ast.FunctionDef, where: str) -> None:
        self.where = where
        self.known: dict[str, ast.expr] = {}
        for node in func.body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                self.known[node.targets[0].id] = node.value

    def template(self, node: ast.expr) -> Template:
        return Template(_merge(list(self.parts(node))))

    def parts(self, node: ast.expr) -> tuple[Part, ...]:
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            return self.parts(node.left) + self.parts(node.right)
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return (node.value,)
        if isinstance(node, ast.Name):
            return self.parts(self.known[node.id]) if node.id in self.known else (Slot(node.id),)
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
            return (Slot(node.attr),)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):  # another agent's answer
            return (Slot(node.func.id),)
        if isinstance(node, ast.JoinedStr):
            found: list[Part] = []
            for value in node.values:
                if isinstance(value, ast.Constant) and isinstance(value.value, str):
                    found.append(value.value)
                elif (isinstance(value, ast.FormattedValue) and isinstance(value.value, ast.Name)
                      and value.conversion == -1 and value.format_spec is None):
                    found.append(Slot(value.value.id))
                else:
                    raise UsageError(f"{self.where}: an f-string field that is not a plain name")
            return tuple(found)
        raise UsageError(f"{self.where}: not a text this reader understands: {ast.dump(node)[:80]}")


def _function(tree: ast.Module, cls: str, name: str, where: str) -> ast.FunctionDef:
    owner = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls), None)
    found = next((n for n in (owner.body if owner else []) if isinstance(n, ast.FunctionDef) and n.name == name),
                 None)
    if found is None:
        raise UsageError(f"{where}: no {cls}.{name}()")
    return found


def _own_nodes(func: ast.FunctionDef) -> list[ast.AST]:
    """The nodes of ``func`` outside the functions nested in it."""
    found: list[ast.AST] = []
    stack: list[ast.AST] = list(func.body)
    while stack:
        node = stack.pop(0)
        if isinstance(node, ast.FunctionDef):
            continue
        found.append(node)
        stack.extend(ast.iter_child_nodes(node))
    return found


def _entry(d: ast.Dict, key: str) -> ast.expr | None:
    for k, v in zip(d.keys, d.values, strict=True):
        if isinstance(k, ast.Constant) and k.value == key:
            return v
    return None


def _picture_text(func: ast.FunctionDef, where: str) -> Template:
    """The ``{"type": "text", "text": ...}`` part of the one picture message a vision agent sends."""
    for node in _own_nodes(func):
        if isinstance(node, ast.Dict):
            kind = _entry(node, "type")
            text = _entry(node, "text")
            if isinstance(kind, ast.Constant) and kind.value == "text" and text is not None:
                return _Concat(func, where).template(text)
    raise UsageError(f"{where}: {func.name}() sends no text beside its picture")


def _chat_messages(func: ast.FunctionDef, where: str) -> dict[str, Template]:
    """role -> text of the messages of the chat call made by ``func`` itself (not its nested functions)."""
    reader = _Concat(func, where)
    found: dict[str, Template] = {}
    for node in _own_nodes(func):
        if isinstance(node, ast.Dict):
            role, content = _entry(node, "role"), _entry(node, "content")
            if isinstance(role, ast.Constant) and content is not None and not isinstance(content, ast.List):
                found[str(role.value)] = reader.template(content)
    if set(found) != {"system", "user"}:
        raise UsageError(f"{where}: {func.name}() makes no chat call with a system and a user message")
    return found


def read_map(map_source: str, utils_source: str, *, map_where: str, utils_where: str) -> MapTexts:
    """MAP's texts out of the two files' source (parsed only)."""
    try:
        tree = ast.parse(map_source)
    except SyntaxError as exc:
        raise UsageError(f"{map_where}: not Python source ({exc})") from exc
    _, cls, name = PLANNING
    planning = _function(tree, cls, name, map_where)
    nested = {n.name: n for n in planning.body if isinstance(n, ast.FunctionDef)}
    for needed in ("enviroment_agent", "sim_ground_agent"):
        if needed not in nested:
            raise UsageError(f"{map_where}: {name}() has no nested {needed}()")
    planner = _chat_messages(planning, f"{map_where}:{name}")
    converter = read_templates(utils_source, "gen_low_level_plan", judge="converter", where=utils_where)
    return MapTexts(environment=_picture_text(nested["enviroment_agent"], map_where),
                    grounding=_picture_text(nested["sim_ground_agent"], map_where),
                    planner_system=planner["system"], planner_user=planner["user"],
                    converter_system=converter.system, converter_user=converter.user)


def pinned_files() -> list[fetch.PinnedFile]:
    return [fetch.PinnedFile(name, URL_PATTERN.format(commit=COMMIT, name=name), sha) for name, sha in FILES.items()]


def load(methods_dir: str | os.PathLike[str] | None = None) -> MapTexts:
    """MAP's texts from the pinned files: ``methods_dir``, ``SAB_UPSTREAM_METHODS``, the user cache or a
    download; every file checked against its pinned sha256 wherever it comes from."""
    paths = resolve_pinned(pinned_files(), methods_dir or os.environ.get(ENV), named=ENV, label="upstream methods",
                           cache="upstream-methods", what="MAP's upstream prompts", how_to_provide=HOW_TO_PROVIDE)
    return read_map(paths["map_vlm.py"].read_text("utf-8"), paths["utils.py"].read_text("utf-8"),
                    map_where=str(paths["map_vlm.py"]), utils_where=str(paths["utils.py"]))
