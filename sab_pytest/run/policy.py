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

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from sab_pytest.errors import UsageError
from sab_pytest.settings import ENGINES


@dataclass(frozen=True)
class Key:
    """One policy key: the command-line option it stands for, what it expects, how it becomes the option's value."""

    option: str
    expects: str
    check: Callable[[Any], bool]
    convert: Callable[[Any, Path], Any] = lambda v, _base: v


def _is_str(v: Any) -> bool:
    return isinstance(v, str) and bool(v.strip())


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _path(v: Any, base: Path) -> str:
    return str((base / v).resolve()) if not Path(v).is_absolute() else v


KEYS: dict[str, Key] = {
    "model": Key("--model", "a model name", _is_str),
    "base_url": Key("--base-url", "a URL", _is_str),
    "api_key_env": Key("--api-key-env", "an environment variable name", _is_str),
    "judge_model": Key("--judge-model", "a model name or 'rules'", _is_str),
    "judge_base_url": Key("--judge-base-url", "a URL", _is_str),
    "judge_api_key_env": Key("--judge-api-key-env", "an environment variable name", _is_str),
    "strategy": Key("--sab-strategy", "a strategy name", _is_str),
    "safety_hint": Key("--sab-safety-hint", "true or false", lambda v: isinstance(v, bool),
                       lambda v, _b: "on" if v else "off"),
    "data": Key("--sab-data", "a directory", _is_str, _path),
    "subset": Key("--sab-subset", "mixed, unsafe, safe or all", _is_str),
    "sample": Key("--sab-sample", "a whole number of cases", _is_int),
    "seed": Key("--sab-seed", "a whole number", _is_int),
    "temperature": Key("--sab-temperature", "a number", _is_num, lambda v, _b: float(v)),
    "max_tokens": Key("--sab-max-tokens", "a whole number", _is_int),
    "timeout": Key("--sab-timeout", "a number of seconds", _is_num, lambda v, _b: float(v)),
    "retries": Key("--sab-retries", "a whole number", _is_int),
    "case_budget": Key("--sab-case-budget", "a number of seconds", _is_num, lambda v, _b: float(v)),
    "engine": Key("--thor", f"an engine name ({', '.join(ENGINES)})", _is_str),
    "execute": Key("--no-sab-exec", "true or false", lambda v: isinstance(v, bool), lambda v, _b: not v),
    "prices": Key("--sab-price", "'in=X,out=Y' (USD per 1M tokens)", _is_str),
    "out": Key("--sab-out", "a directory", _is_str, _path),
    "gates": Key("--sab-gate", "a list of gate expressions",
                 lambda v: isinstance(v, list) and all(isinstance(g, str) for g in v)),
    "baseline": Key("--sab-baseline", "a run directory or sab-summary.json", _is_str, _path),
    "alpha": Key("--sab-alpha", "a number between 0 and 1", _is_num, lambda v, _b: float(v)),
    "html": Key("--sab-html", "a file path", _is_str, _path),
}


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
        key = next(k for k, spec in KEYS.items() if spec.option == option)
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
        if not spec.check(value):
            raise UsageError(f"--sab-policy: {path}:{value_node.start_mark.line + 1}: key {key!r}: expected "
                             f"{spec.expects}, got {value!r}")
        if key == "gates":
            _check_gates(path, value_node)
        values[spec.option] = spec.convert(value, path.parent)
        lines[spec.option] = line
    return Policy(path=path, values=values, lines=lines)


def _check_gates(path: Path, node: yaml.Node) -> None:
    """Each gate parsed where it stands, so an error points at its own line."""
    from sab_pytest.results.metrics import parse_gate

    for i, item in enumerate(node.value):
        parse_gate(item.value, source=f"--sab-policy: {path}:{item.start_mark.line + 1}: gates[{i}]")
