"""A ProgPrompt-style program's steps, read with :mod:`ast`: parsing builds a syntax tree and
executes nothing, so a program the model wrote is never run."""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence

from sab_pytest.plan_parser.lines import FENCE, from_call


def _strip_fences(text: str) -> str:
    return "\n".join(line for line in text.splitlines() if not FENCE.match(line.strip()))


def _arg_value(node: ast.expr) -> str | None:
    """A call argument usable as an object: a bare name or a string literal, nothing else."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


def _call_step(node: ast.Call) -> str | None:
    """A step from a call node: a plain function name that is a verb, with simple arguments only."""
    if not isinstance(node.func, ast.Name):
        return None  # attribute calls (os.system, robot.find), calls of calls, lambdas: never steps
    values = [_arg_value(a) for a in node.args] + [_arg_value(k.value) for k in node.keywords]
    if any(v is None for v in values):
        return None
    return from_call(node.func.id, [v.strip() for v in values if v is not None])


def _walk_statements(body: Sequence[ast.stmt]) -> list[str]:
    """Calls in program order. Guards and loops contribute their main body, once (see parse_program)."""
    steps: list[str] = []
    for stmt in body:
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
            step = _call_step(stmt.value)
            if step:
                steps.append(step)
        elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.If, ast.For, ast.AsyncFor,
                               ast.While, ast.With, ast.AsyncWith, ast.Try)):
            steps.extend(_walk_statements(stmt.body))
    return steps


def _guarded_lines(lines: list[str]) -> list[str]:
    """For text that is not valid Python: drop ``else``/``elif``/``except`` branches by indentation."""
    kept: list[str] = []
    skip_deeper_than: int | None = None
    for line in lines:
        stripped = line.strip()
        if not stripped:
            continue
        indent = len(line) - len(line.lstrip())
        if skip_deeper_than is not None:
            if indent > skip_deeper_than:
                continue
            skip_deeper_than = None
        if re.match(r"^(?:else|elif|except|finally)\b", stripped):
            skip_deeper_than = indent
            continue
        kept.append(stripped)
    return kept


def parse_program(text: str) -> list[str]:
    """A ProgPrompt-style program -> canonical steps, by parsing it with :mod:`ast` (nothing is run).

    What counts: expression statements that call a plain function named like one of the 17 actions
    (``find("Mug")``, ``turn_on(Candle)``, ``fillLiquid("Mug", "water")``, ``break_obj(Vase)``,
    ``pick_up(Mug)``), with arguments that are bare names or string literals. Everything else yields
    no step: attribute calls (``os.system(...)``, ``robot.find(...)``), calls in arguments
    (``find(__import__("os"))``), assignments, lambdas, comments, ``assert`` statements.

    Guards: a program is a plan the robot is expected to follow straight through, so the *main
    path* is taken: the body of ``def``, ``if``, ``for``, ``while``, ``with`` and ``try`` blocks, in
    order and once; ``else``/``elif``/``except`` branches are recovery paths and are left out, and
    conditions are queries, never actions. ProgPrompt's own ``assert(...) else: find(x)`` lines are
    not Python; text that does not parse as a whole is parsed line by line with the same rules
    (branches under ``else:`` dropped by indentation, lines that do not parse skipped). A program
    with no action call at all (for example the cannot-plan sentence) yields ``[]``.
    """
    source = _strip_fences(text or "")
    try:
        return _walk_statements(ast.parse(source).body)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        pass
    steps: list[str] = []
    for line in _guarded_lines(source.splitlines()):
        try:
            tree = ast.parse(line)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue
        steps.extend(_walk_statements(tree.body))
    return steps
