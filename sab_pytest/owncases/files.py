"""A team's own cases: ``*.sab.yaml`` and ``*.sab.jsonl`` files -> entries with their lines -> ``Case``.

A file holds cases written with the dataset's own keys (``instruction``, ``scene_name``, ``step``,
``final_state``, ``risk_category``, ``objects``, ``risk_instruction``) plus ``kind``, an optional
``id`` and an optional ``goal_unreachable``. Its name without ``.sab.yaml`` / ``.sab.jsonl`` is the
suite's name. A YAML file is a list of mappings; a JSONL file one JSON object per line. Either may
start with a header, a mapping whose one key is ``suite`` (its own risk categories, a description).

This module only reads: every entry keeps the line of each of its keys, so that validation
(``owncases.check``) can name ``file:line`` for every problem at once, and ``cases`` turns the entries it
can read into the run's cases. Nothing here imports pytest: ``sab cases check`` reads the same way.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from sab_pytest import categories
from sab_pytest.dataset import KINDS, Case

#: how a case file's name ends, YAML first
SUFFIXES: tuple[str, ...] = (".sab.yaml", ".sab.yml", ".sab.jsonl")
#: the keys a case may have (the dataset's own, ``kind``, ``id`` and ``goal_unreachable``)
CASE_KEYS: tuple[str, ...] = ("kind", "id", "instruction", "scene_name", "step", "final_state", "risk_category",
                              "objects", "risk_instruction", "goal_unreachable")
#: the keys of the header's ``suite`` mapping
HEADER_KEYS: tuple[str, ...] = ("categories", "description")
#: a suite's name and a case's own id: a pytest marker and a part of a node id, so plain characters only
NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")
LOCAL_ID = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")
#: an own case's id ends neither like a repeat's sample id (``-r3``) nor like an abstract level (``-L2``)
RESERVED_END = re.compile(r"-(?:r\d+|L\d)$")
CATEGORY_SLUG = re.compile(r"^[a-z][a-z0-9_]*$")


def is_case_file(path: Path | str) -> bool:
    """Whether ``path`` names a case file (by its name alone: no read)."""
    name = str(path)
    return name.endswith(SUFFIXES)


def suite_name(path: Path) -> str:
    """The suite a file holds: its name without the case-file suffix (``kitchen.sab.yaml`` -> ``kitchen``)."""
    name = path.name
    for suffix in SUFFIXES:
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return path.stem


@dataclass(frozen=True)
class Problem:
    """One thing wrong (``error``) or worth a look (``warning``) in a case file, at ``path:line``."""

    path: str
    line: int
    message: str
    severity: str = "error"

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.severity}: {self.message}"


@dataclass(frozen=True)
class Entry:
    """One case as written: its fields, the line of the entry and of each key, its row in the file."""

    fields: dict[str, Any]
    line: int
    key_lines: dict[str, int]
    row: int

    def line_of(self, key: str) -> int:
        return self.key_lines.get(key, self.line)


@dataclass(frozen=True)
class SuiteFile:
    """A case file read: its suite, header, entries, and the problems met while reading it."""

    path: Path
    suite: str
    entries: tuple[Entry, ...]
    header: dict[str, Any] = field(default_factory=dict)
    header_line: int = 1
    problems: tuple[Problem, ...] = ()

    def categories(self) -> dict[str, str]:
        """The header's own risk categories, slug -> display name (what it says, unchecked: see casecheck)."""
        return declared_categories(self.header.get("categories"))


def declared_categories(value: Any) -> dict[str, str]:
    """``categories`` as a header or the ini writes it: a mapping slug -> name, or a list of slugs (or of
    ``slug: Name`` strings). Anything else is empty here; validation names the problem."""
    if isinstance(value, Mapping):
        return {str(k): str(v) if v is not None else str(k) for k, v in value.items()}
    if isinstance(value, list):
        out: dict[str, str] = {}
        for item in value:
            if isinstance(item, Mapping):
                out.update(declared_categories(item))
            elif isinstance(item, str):
                slug, _, name = item.partition(":")
                out[slug.strip()] = name.strip() or slug.strip()
        return out
    return {}


# --------------------------------------------------------------------------------------------- reading

class _LineLoader(yaml.CSafeLoader if hasattr(yaml, "CSafeLoader") else yaml.SafeLoader):  # type: ignore[misc]
    """A safe loader whose mappings remember the line of each key (``_Located``), and which keys a
    mapping wrote twice (``repeated_keys``: key and line)."""

    repeated_keys: list[tuple[str, int]]


class _Located(dict[Any, Any]):
    """A mapping read from YAML, with its own line and each key's (1-based)."""

    line: int
    key_lines: dict[str, int]


def _construct_mapping(loader: _LineLoader, node: yaml.MappingNode) -> _Located:
    loader.flatten_mapping(node)
    out = _Located()
    out.line = node.start_mark.line + 1
    out.key_lines = {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        if key in out:  # YAML keeps the last silently: a case written twice over is a problem to show
            loader.repeated_keys.append((str(key), key_node.start_mark.line + 1))
        try:
            out[key] = loader.construct_object(value_node, deep=True)
        except TypeError:  # an unhashable key: kept as its text, validation names it unknown
            key = str(key)
            out[key] = loader.construct_object(value_node, deep=True)
        out.key_lines[str(key)] = key_node.start_mark.line + 1
    return out


_LineLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def _yaml_items(path: Path, text: str) -> tuple[list[tuple[Any, int, dict[str, int]]], list[Problem]]:
    where = str(path)
    loader = _LineLoader(text)
    loader.repeated_keys = []
    try:
        node = loader.get_single_node()
        data = loader.construct_document(node) if node is not None else None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else 1
        what = getattr(exc, "problem", None) or str(exc)
        return [], [Problem(where, line, f"invalid YAML: {what}")]
    finally:
        loader.dispose()
    if data is None:
        return [], [Problem(where, 1, "the file holds no cases (expected a list of cases)")]
    if not isinstance(data, list):
        line = getattr(data, "line", 1)
        return [], [Problem(where, line, f"expected a list of cases (each '- kind: ...'), got {_type(data)}")]
    # each item's own line from the node tree: an item that is not a mapping has no line of its own
    lines = [item.start_mark.line + 1 for item in node.value]
    repeated = [Problem(where, line, f"key {key!r} is written twice in one mapping (YAML would keep the last)")
                for key, line in loader.repeated_keys]
    return [(dict(item) if isinstance(item, dict) else item, line, getattr(item, "key_lines", {}))
            for item, line in zip(data, lines, strict=True)], repeated


def _jsonl_items(path: Path, text: str) -> tuple[list[tuple[Any, int, dict[str, int]]], list[Problem]]:
    items: list[tuple[Any, int, dict[str, int]]] = []
    problems: list[Problem] = []
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as exc:
            problems.append(Problem(str(path), lineno, f"invalid JSON ({exc.msg} at column {exc.colno})"))
            continue
        keys = {str(k): lineno for k in value} if isinstance(value, dict) else {}
        items.append((value, lineno, keys))
    if not items and not problems:
        problems.append(Problem(str(path), 1, "the file holds no cases (expected one JSON object per line)"))
    return items, problems


def _type(value: Any) -> str:
    names: dict[type, str] = {dict: "a mapping", list: "a list", str: "a string"}
    return names.get(type(value), type(value).__name__)


def read(path: Path) -> SuiteFile:
    """Read one case file: its entries with their lines, and what could not be read (never raises for
    the file's content; a file that cannot be opened is one problem too)."""
    suite = suite_name(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return SuiteFile(path, suite, (), problems=(Problem(str(path), 1, f"cannot be read: {exc}"),))
    reader = _jsonl_items if path.name.endswith(".jsonl") else _yaml_items
    items, problems = reader(path, text)
    header: dict[str, Any] = {}
    header_line = 1
    if items and isinstance(items[0][0], dict) and "suite" in items[0][0]:
        first, header_line, keys = items.pop(0)
        header = first.get("suite") if isinstance(first.get("suite"), dict) else {}
        if not isinstance(first.get("suite"), dict) and first.get("suite") is not None:
            problems.append(Problem(str(path), header_line, "the header's 'suite' must be a mapping "
                                    f"(keys: {', '.join(HEADER_KEYS)}), got {_type(first['suite'])}"))
        for key in first:
            if key != "suite":
                problems.append(Problem(str(path), keys.get(str(key), header_line),
                                        f"the header holds 'suite' alone; {key!r} belongs in a case"))
    entries = []
    for row, (item, line, keys) in enumerate(items):
        if not isinstance(item, dict):
            problems.append(Problem(str(path), line, f"a case must be a mapping of keys, got {_type(item)}"))
            continue
        entries.append(Entry({str(k): v for k, v in item.items()}, line, keys, row))
    return SuiteFile(path, suite, tuple(entries), header, header_line, tuple(problems))


def find(paths: Iterable[Path], skip_dirs: Iterable[str] = ()) -> list[Path]:
    """The case files at or under ``paths``, sorted, each once. Directories whose name starts with a dot
    or matches one of ``skip_dirs`` (pytest's ``norecursedirs`` globs) are not entered, as pytest does not."""
    patterns = [*skip_dirs, "node_modules", "__pycache__", "venv"]
    found: set[Path] = set()

    def walk(folder: Path) -> Iterator[Path]:
        for root, dirs, names in os.walk(folder):
            dirs[:] = [d for d in dirs if not d.startswith(".") and not any(fnmatch.fnmatch(d, p) for p in patterns)]
            yield from (Path(root) / name for name in names if is_case_file(name))

    for path in paths:
        if path.is_file() and is_case_file(path.name):
            found.add(path.resolve())
        elif path.is_dir():
            found.update(p.resolve() for p in walk(path))
    return sorted(found)


# ---------------------------------------------------------------------------------------------- cases

def category_of(raw: str, own: Mapping[str, str]) -> str | None:
    """The slug of a written risk category: one of the paper's ten (by slug, name or a dataset
    spelling), or one the suite or the ini declares (by slug or name); None when unknown."""
    text = raw.strip()
    if text in categories.SLUGS or text in own:
        return text
    by_name = {name.lower(): slug for slug, name in own.items()}
    return categories.normalise(text) or by_name.get(text.lower())


def local_id(entry: Entry) -> str:
    """The case's id inside its suite: its own ``id``, else ``<kind>-<row:04d>`` as the dataset's."""
    given = entry.fields.get("id")
    if isinstance(given, (str, int)) and not isinstance(given, bool):
        return str(given)
    return f"{entry.fields.get('kind')}-{entry.row:04d}"


def cases(suite_file: SuiteFile, own_categories: Mapping[str, str] | None = None) -> list[Case]:
    """The cases of a file, ids ``<suite>:<id>`` (``-L<level>`` for each level of an abstract one). Entries
    that cannot make a case (validation reports why) are left out."""
    own = {**(own_categories or {}), **suite_file.categories()}
    out: list[Case] = []
    for entry in suite_file.entries:
        out.extend(_entry_cases(suite_file, entry, own))
    return out


def _entry_cases(suite_file: SuiteFile, entry: Entry, own: Mapping[str, str]) -> list[Case]:
    f = entry.fields
    kind, scene, text = f.get("kind"), f.get("scene_name"), f.get("instruction")
    if kind not in KINDS or not isinstance(scene, str):
        return []
    steps = f.get("step") or []
    goal = f.get("final_state")
    raw = f.get("risk_category") if isinstance(f.get("risk_category"), str) else None
    objects = f["objects"] if isinstance(f.get("objects"), list) else []
    common: dict[str, Any] = dict(
        kind=kind, safety="safe" if kind == "safe_detailed" else "unsafe",
        reference_steps=tuple(str(s) for s in steps) if isinstance(steps, list) else (),
        scene=scene.strip(), final_state=tuple(goal) if isinstance(goal, list) and goal else None,
        risk_category=category_of(raw, own) if raw else None, risk_label_raw=raw, row=entry.row,
        source=(str(suite_file.path.absolute()), entry.line), suite=suite_file.suite,
        objects=tuple(str(o) for o in objects))
    case_id = f"{suite_file.suite}:{local_id(entry)}"
    if kind == "abstract":
        if not isinstance(text, list) or not all(isinstance(t, str) for t in text):
            return []
        return [Case(id=f"{case_id}-L{level}", instruction=t.strip(), abstraction_level=level, **common)
                for level, t in enumerate(text)]
    if not isinstance(text, str):
        return []
    return [Case(id=case_id, instruction=text.strip(), abstraction_level=None, **common)]
