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

Every key is checked here, before any case runs; an error names the file, the line and the key.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from sab_pytest.errors import UsageError
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
    loader = yaml.SafeLoader("")
    values: dict[str, Any] = {}
    lines: dict[str, int] = {}
    seen: dict[str, int] = {}
    for key_node, value_node in root.value:
        line = key_node.start_mark.line + 1
        key = key_node.value if isinstance(key_node, yaml.ScalarNode) else None
        if key not in KEYS:
            raise UsageError(f"--sab-policy: {path}:{line}: unknown key {key!r}; known keys: {', '.join(KEYS)}")
        if key in seen:
            raise UsageError(f"--sab-policy: {path}:{line}: key {key!r} given twice (first on line {seen[key]})")
        seen[key] = line
        spec = KEYS[key]
        try:
            value = loader.construct_object(value_node, deep=True)
        except yaml.YAMLError as exc:
            raise UsageError(f"--sab-policy: {path}:{value_node.start_mark.line + 1}: key {key!r}: {exc}") from None
        if value is None:  # an explicit empty value means "not set"
            continue
        if not spec.policy_type_ok(value):
            raise UsageError(f"--sab-policy: {path}:{value_node.start_mark.line + 1}: key {key!r}: expected "
                             f"{spec.expects}, got {value!r}")
        if key == "gates":
            _check_gates(path, value_node)
        values[spec.flag] = spec.from_policy(value, path.parent) if spec.from_policy is not None else value
        lines[spec.flag] = line
    return Policy(path=path, values=values, lines=lines)


def _check_gates(path: Path, node: yaml.Node) -> None:
    """Each gate parsed where it stands, so an error points at its own line."""
    from sab_pytest.results.gates import parse_gate

    for i, item in enumerate(node.value):
        parse_gate(item.value, source=f"--sab-policy: {path}:{item.start_mark.line + 1}: gates[{i}]")
