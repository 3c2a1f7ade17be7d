"""Release policy file (``--sab-policy FILE.yaml``): the model's settings, the gates and the baseline,
checked into a repository so that a release pipeline runs one command.

Example::

    model: gpt-4o
    judge_model: gpt-4o
    strategy: direct
    subset: all
    gates:
      - rejection_rate >= 0.6
      - no_regression(rejection_rate)
      - rejection_rate[fire_hazard] >= baseline - 0.05
    baseline: releases/2025-06      # relative to this file
    alpha: 0.05
    html: sab-report.html           # relative to this file

Precedence: an option written on the command line wins over the policy, the policy wins over the
ini file and the defaults. Gates add up: the policy's gates, the ini's ``sab_gates`` and every
``--sab-gate`` all apply, so a pipeline can tighten a policy but never silently drop one of its
gates. Paths (``baseline``, ``html``, ``data``, ``out``) are relative to the policy file, so the
command works from any directory.

Every key is checked here, before any case runs; an error names the file, the line and the key, and
lists every bad key and value of the file at once (a file is fixed in one go, not one run per
mistake). Checks across options (``run.validate``) come after, one at a time, as on the command line.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from sab_pytest.errors import UsageError
from sab_pytest.results import parse_gate
from sab_pytest.settings import Option, options

#: policy key -> the option it sets (from the settings table: each option that has a policy key)
KEYS: dict[str, Option] = {option.policy: option for _, option in options() if option.policy}


@dataclass(frozen=True)
class Policy:
    """A validated policy: option name -> value in the option's own form, and where each came from."""

    path: Path
    values: dict[str, Any]
    lines: dict[str, int]

    def get(self, option: str, default: Any = None) -> Any:
        return self.values.get(option, default)

    def located(self, option: str, message: str) -> UsageError:
        """A later check's error about an option this policy set, pointed at the policy's line and key."""
        key = next(k for k, spec in KEYS.items() if spec.flag == option)
        return UsageError(f"--sab-policy: {self.path}:{self.lines[option]}: key {key!r}: {message}")


def load_policy(path: str | Path) -> Policy:
    """Read and validate a policy file; every problem is a ``UsageError`` naming file, line and key."""
    path = Path(path)
    root = _mapping_of(path)
    loader = yaml.SafeLoader("")
    values: dict[str, Any] = {}
    lines: dict[str, int] = {}
    seen: dict[str, int] = {}
    problems: list[str] = []  # every bad key and value, each with its line: one error lists them all
    for key_node, value_node in root.value:
        line = key_node.start_mark.line + 1
        at = f"--sab-policy: {path}:{value_node.start_mark.line + 1}"
        key = key_node.value if isinstance(key_node, yaml.ScalarNode) else None
        if key not in KEYS:
            problems.append(f"--sab-policy: {path}:{line}: unknown key {key!r}; known keys: {', '.join(KEYS)}")
            continue
        if key in seen:
            problems.append(f"--sab-policy: {path}:{line}: key {key!r} given twice (first on line {seen[key]})")
            continue
        seen[key] = line
        spec = KEYS[key]
        try:
            value = loader.construct_object(value_node, deep=True)
        except yaml.YAMLError as exc:
            problems.append(f"{at}: key {key!r}: {exc}")
            continue
        if value is None:  # an explicit empty value means "not set"
            continue
        if not spec.policy_type_ok(value):
            problems.append(f"{at}: key {key!r}: expected {spec.expects}, got {value!r}")
            continue
        if key == "gates":
            gate_problems = _check_gates(path, value_node)
            problems += gate_problems
            if gate_problems:
                continue
        value = spec.from_policy(value, path.parent) if spec.from_policy is not None else value
        problem = _value_problem(spec, value)
        if problem:
            problems.append(f"{at}: key {key!r}: {problem}")
            continue
        values[spec.flag] = value
        lines[spec.flag] = line
    if len(problems) == 1:
        raise UsageError(problems[0])
    if problems:
        raise UsageError(f"--sab-policy: {path}: {len(problems)} problems:\n" + "\n".join(problems))
    return Policy(path=path, values=values, lines=lines)


def _mapping_of(path: Path) -> yaml.MappingNode:
    """The policy file's top node, kept with its lines (values are read key by key, so that each
    problem names its line); a file that cannot be read, is not YAML, is empty or is not a mapping is
    a ``UsageError`` naming it."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"--sab-policy: cannot read {path}: {exc.strerror or exc}") from None
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        raise UsageError(f"--sab-policy: {where}: not valid YAML ({getattr(exc, 'problem', None) or exc})") from None
    if root is None:
        raise UsageError(f"--sab-policy: {path} is empty; expected a mapping of keys: {', '.join(KEYS)}")
    if not isinstance(root, yaml.MappingNode):
        raise UsageError(f"--sab-policy: {path}:{root.start_mark.line + 1}: expected a mapping of keys "
                         f"({', '.join(KEYS)}) at the top")
    return root


def _value_problem(spec: Option, value: Any) -> str | None:
    """The table's simple constraints on one value (``settings.check_options`` checks the same on
    the run's settings): checked here too, so that every bad value of the file is in one error, in
    the words of the option's own error (a bad value is the file's mistake even where the command
    line overrides it)."""
    if spec.choices and spec.to_setting is None and value not in spec.choices:
        return f"{spec.flag}: unknown value {value!r}; choose one of {', '.join(spec.choices)}"
    if spec.check is None:
        return None
    try:
        converted = spec.to_setting(value) if spec.to_setting is not None else value
        ok = converted is None or spec.check.ok(converted)
    except (TypeError, ValueError, UsageError):
        return None  # a conversion's own error comes from the settings, as for the command line
    return None if ok else f"{spec.flag}: expected {spec.check.expected}, got {value}"


def _check_gates(path: Path, node: yaml.Node) -> list[str]:
    """Each gate parsed where it stands, so an error points at its own line; every bad gate's error."""
    problems = []
    for i, item in enumerate(node.value):
        try:
            parse_gate(item.value, source=f"--sab-policy: {path}:{item.start_mark.line + 1}: gates[{i}]")
        except UsageError as exc:
            problems.append(str(exc))
    return problems
