"""The one module that reaches inspect_ai's private modules checks that the installed version has
them, and names what is gone when it does not."""

from __future__ import annotations

import asyncio
import importlib.util
import types

import pytest

from sab_pytest.reports.inspect import adapter as inspect_adapter

#: inspect_ai is imported by the tests, not while the suite collects (seconds in every worker)
pytestmark = pytest.mark.skipif(importlib.util.find_spec("inspect_ai") is None,
                                reason="the [inspect] extra is not installed")


def test_the_installed_inspect_ai_has_every_piece_the_batched_log_uses() -> None:
    assert inspect_adapter.missing() == []


def test_a_piece_gone_from_inspect_ai_is_named_with_the_version(monkeypatch: pytest.MonkeyPatch) -> None:
    real = inspect_adapter.importlib.import_module

    def without_condense(name: str) -> types.ModuleType:
        if name == inspect_adapter.CONDENSE:
            raise ImportError(name)
        if name == inspect_adapter.RECORDER:
            return types.SimpleNamespace(EvalRecorder=type("EvalRecorder", (), {"log_init": None}))
        return real(name)

    monkeypatch.setattr(inspect_adapter.importlib, "import_module", without_condense)
    gone = inspect_adapter.missing()
    assert "inspect_ai.log._condense.condense_sample" in gone
    assert "inspect_ai.log._recorders.eval.EvalRecorder.log_sample" in gone
    assert "inspect_ai.log._recorders.eval.EvalRecorder.log_init" not in gone
    message = inspect_adapter.describe_missing()
    assert inspect_adapter.version() in message and "condense_sample" in message


def test_a_coroutine_runs_to_its_result_from_synchronous_code() -> None:
    async def answer() -> int:
        await asyncio.sleep(0)
        return 42

    assert inspect_adapter.run_coroutine(answer()) == 42
