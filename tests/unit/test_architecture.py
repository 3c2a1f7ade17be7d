"""The shape of the package, kept: layers one way down, no import cycle, the names the layers share
declared once, and the size smells of docs/architecture.md ("Size"), set where a module or function
most likely holds more than one job, not as a tight cap. ``.ci/run`` also runs ``lint-imports`` on the
contracts in pyproject.toml; these tests say the same where a developer runs ``pytest tests``."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

import grimp
import pytest

import sab_pytest
from sab_pytest.agents import registry
from sab_pytest.settings import INTERACTIVE_STRATEGIES
from sab_pytest.settings.strategies import STRATEGIES, StrategyInfo

PACKAGE = Path(sab_pytest.__file__).parent


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph("sab_pytest", include_external_packages=True)


def _cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    modules = sorted(m for m in graph.modules if m.startswith("sab_pytest"))
    for root in modules:
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next((c for c in children if c.startswith("sab_pytest")), None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.find_modules_directly_imported_by(child)))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    found.append(sorted(group))
    return found


def test_no_import_cycle(graph: grimp.ImportGraph) -> None:
    assert _cycles(graph) == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    made_up = grimp.ImportGraph()
    for module in ("sab_pytest", "sab_pytest.a", "sab_pytest.b", "sab_pytest.c"):
        made_up.add_module(module)
    made_up.add_import(importer="sab_pytest.a", imported="sab_pytest.b")
    made_up.add_import(importer="sab_pytest.b", imported="sab_pytest.c")
    made_up.add_import(importer="sab_pytest.c", imported="sab_pytest.a")
    assert _cycles(made_up) == [["sab_pytest.a", "sab_pytest.b", "sab_pytest.c"]]


def test_only_the_pytest_layer_imports_pytest_or_xdist(graph: grimp.ImportGraph) -> None:
    allowed = ("sab_pytest.pytest_layer", "sab_pytest.plugin", "sab_pytest.cases")
    importers = {m for external in ("pytest", "_pytest", "xdist") if external in graph.modules
                 for m in graph.find_modules_that_directly_import(external)}
    assert sorted(m for m in importers if not m.startswith(allowed)) == []


def test_the_import_contracts_hold() -> None:
    from importlinter.cli import lint_imports

    assert lint_imports(config_filename=str(PACKAGE.parent / "pyproject.toml"), no_cache=True) == 0


def test_pytest_s_private_parts_are_reached_through_its_adapter_alone() -> None:
    """``_pytest`` modules and the terminal reporter's private attributes, named anywhere but in
    ``pytest_layer/pytest_adapter.py``, would escape the check that names what a new pytest changed."""
    import re

    private = re.compile(r"^\s*(from|import) _pytest\b|import_module\(\s*[\"']_pytest|\._keyboardinterrupt_memo|"
                         r"\._report_keyboardinterrupt|getattr\(\s*\w+,\s*[\"']_tw[\"']", re.MULTILINE)
    reaching = sorted(str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py") if private.search(p.read_text()))
    assert reaching == ["pytest_layer/pytest_adapter.py"]


@pytest.mark.parametrize(("pattern", "adapter"), [
    (r"inspect_ai(\.\w+)*\._\w", "reports/inspect/adapter.py"),
    (r"^\s*(from|import) xdist\b", "pytest_layer/xdist_adapter.py")])
def test_inspect_ai_s_and_xdist_s_private_parts_are_reached_through_their_adapter_alone(pattern: str,
                                                                                         adapter: str) -> None:
    import re

    private = re.compile(pattern, re.MULTILINE)
    reaching = sorted(str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py") if private.search(p.read_text()))
    assert reaching == [adapter]


def test_reports_read_results_and_results_never_read_reports(graph: grimp.ImportGraph) -> None:
    """The seam between what is kept (records, statistics, gates) and what people read: a report may
    change without touching a number, and no number depends on how it is shown."""
    results = {m for m in graph.modules if m.startswith("sab_pytest.results")}
    reports = {m for m in graph.modules if m.startswith("sab_pytest.reports")}
    assert not any(graph.find_modules_directly_imported_by(m) & reports for m in results)
    assert any(graph.find_modules_directly_imported_by(m) & results for m in reports)


def test_settings_and_the_registry_name_the_same_interactive_strategies() -> None:
    assert set(INTERACTIVE_STRATEGIES) == set(registry.INTERACTIVE)
    assert set(registry.PLANNERS) | set(registry.INTERACTIVE) == set(STRATEGIES)


def test_a_strategy_line_that_names_a_class_it_cannot_be_is_refused() -> None:
    """The table's line is checked against its class: a text strategy naming an acting agent, or a
    class with another name, is an error when the registry is built."""
    with pytest.raises(TypeError, match="must be a TextPlanner named 'react'"):
        registry.agent_class(StrategyInfo("react", "react:ReactAgent"))
    with pytest.raises(TypeError, match="must be a InteractiveAgent named 'pca'"):
        registry.agent_class(StrategyInfo("pca", "basic:BasicVisualAgent", acts=True, answers="moves"))
    assert registry.agent_class(STRATEGIES["pca"]).__name__ == "PcaAgent"


def test_a_provider_is_one_module_and_one_registry_line(graph: grimp.ImportGraph) -> None:
    """Each module of ``models.providers`` is a registry line's, with its ``make``; nothing imports a
    provider's module but the registry (by name, when a run names the provider) and another provider
    built on it (Azure and Anthropic on the OpenAI-compatible one's classification). So adding a
    provider touches no other module of ``models`` (docs/providers.md, "Adding a provider")."""
    import importlib

    from sab_pytest.models.providers import REGISTRY

    package = "sab_pytest.models.providers"
    modules = {m.rsplit(".", 1)[1] for m in graph.find_children(package)}
    assert modules == {line.module for line in REGISTRY.values()}
    for module in modules:
        assert callable(importlib.import_module(f"{package}.{module}").make)
        importers = graph.find_modules_that_directly_import(f"{package}.{module}")
        assert {m for m in importers if not m.startswith(f"{package}.")} == set(), module


# ------------------------------------------------------------------------------------------- size
# The smells of docs/architecture.md, "Size", held: no module over 700 lines, no function over 60
# lines, none over 8 parameters unless its docstring has a line starting "Parameters:" that says why,
# and at most 20 imports of the package's own modules inside functions, each with a comment on its
# line or the line above saying which cost or cycle keeps it there ("start-up: ..." or "cycle: ...").

MAX_MODULE_LINES, MAX_FUNCTION_LINES, MAX_PARAMETERS, MAX_INNER_IMPORTS = 700, 60, 8, 20


def _functions(tree: ast.AST) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    return [node for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]


def _parameters(function: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """Its parameters, ``self`` and ``cls`` aside, ``*args`` and ``**kwargs`` counted."""
    a = function.args
    names = [*a.posonlyargs, *a.args, *a.kwonlyargs, *([a.vararg] if a.vararg else []),
             *([a.kwarg] if a.kwarg else [])]
    return len([n for n in names if n.arg not in ("self", "cls")])


def _says_why(function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    doc = ast.get_docstring(function) or ""
    return any(line.strip().startswith("Parameters:") for line in doc.splitlines())


def _inner_imports(tree: ast.AST, lines: list[str]) -> list[tuple[int, bool]]:
    """(line, commented) of each import of a ``sab_pytest`` module inside a function."""
    found: dict[int, bool] = {}
    for function in _functions(tree):
        for node in ast.walk(function):
            own = ((isinstance(node, ast.ImportFrom) and (node.level > 0 or str(node.module).startswith("sab_pytest")))
                   or (isinstance(node, ast.Import) and any(a.name.startswith("sab_pytest") for a in node.names)))
            if own and node is not function:
                here = lines[node.lineno - 1]
                above = lines[node.lineno - 2].strip()
                reason = re.compile(r"#\s*(start-up|cycle):")
                found[node.lineno] = bool(reason.search(here) or (above.startswith("#") and reason.search(above)))
    return sorted(found.items())


def _sizes(package: Path) -> dict[str, Any]:
    """What breaks each limit in ``package``: long modules and functions, functions with many
    parameters and no reason, and every inner import (with whether it says why)."""
    out: dict[str, Any] = {"modules": {}, "functions": {}, "parameters": {}, "inner": {}}
    for path in sorted(package.rglob("*.py")):
        rel = str(path.relative_to(package))
        text = path.read_text(encoding="utf-8")
        lines = text.splitlines()
        if len(lines) > MAX_MODULE_LINES:
            out["modules"][rel] = len(lines)
        tree = ast.parse(text)
        for function in _functions(tree):
            name = f"{rel}:{function.name}"
            length = (function.end_lineno or function.lineno) - function.lineno + 1
            if length > MAX_FUNCTION_LINES:
                out["functions"][name] = length
            if _parameters(function) > MAX_PARAMETERS and not _says_why(function):
                out["parameters"][name] = _parameters(function)
        out["inner"].update({f"{rel}:{line}": commented for line, commented in _inner_imports(tree, lines)})
    return out


def test_no_module_function_or_parameter_list_outgrows_its_smell() -> None:
    sizes = _sizes(PACKAGE)
    assert sizes["modules"] == {}
    assert sizes["functions"] == {}
    assert sizes["parameters"] == {}


def test_imports_of_the_package_inside_functions_are_few_and_say_why() -> None:
    """An import inside a function hides an arrow from readers and from ``lint-imports``: only a cycle
    or a measured start-up cost keeps one there (the inert plugin's ``pytest_layer.entry`` above all)."""
    inner = _sizes(PACKAGE)["inner"]
    assert len(inner) <= MAX_INNER_IMPORTS, sorted(inner)
    assert [where for where, commented in inner.items() if not commented] == []


def test_the_size_check_finds_what_breaks_it(tmp_path: Path) -> None:
    """A made-up package that breaks every limit once, and keeps to it once."""
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES))
    params = ", ".join(f"p{i}" for i in range(MAX_PARAMETERS + 1))
    text = (f"def long():\n{body}\n\n"
            f"def many({params}):\n    pass\n\n"
            f"def many_with_reason({params}):\n    \"\"\"Many.\n\n    Parameters: a fake server's knobs.\"\"\"\n\n"
            "def lazy():\n    from sab_pytest import errors\n\n"
            "def lazy_and_said():\n    from sab_pytest import errors  # start-up: measured\n"
            + "\n" * MAX_MODULE_LINES)
    (tmp_path / "big.py").write_text(text)
    lines = text.splitlines()
    imports = [n + 1 for n, line in enumerate(lines) if "from sab_pytest import errors" in line]
    sizes = _sizes(tmp_path)
    assert sizes["modules"] == {"big.py": len(lines)}
    assert sizes["functions"] == {"big.py:long": MAX_FUNCTION_LINES + 1}
    assert sizes["parameters"] == {"big.py:many": MAX_PARAMETERS + 1}
    assert sizes["inner"] == {f"big.py:{imports[0]}": False, f"big.py:{imports[1]}": True}
