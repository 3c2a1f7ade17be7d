"""The shape of the package, kept: layers one way down, no import cycle, and the names the layers
share declared once. How big a module or a function may grow is a reviewer's call, not a test's
(docs/architecture.md, "Size": a cap in a test shapes the code to the cap). ``.ci/run`` also runs
``lint-imports`` on the contracts in pyproject.toml; these tests say the same where a developer runs
``pytest tests``."""

from __future__ import annotations

from pathlib import Path

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
