"""docs/architecture.md's "where a change goes", done: a throwaway text strategy, acting strategy,
metric, gate kind and provider are added to a copy of the package by writing only the files that
section names, and one process runs the benchmark on the copy end to end against the fake server.
Each new thing must show up where a user meets it: the strategy's agent in the records, the metric in
the summary, the terminal table and a gate, the gate kind's decision in the summary and the JUnit
file, the provider in the summary and on the wire."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support.tiny_dataset import write_tiny_dataset

import sab_pytest
from sab_pytest.testing import fake_openai_server

pytestmark = pytest.mark.slow

# -- the files a contributor writes (the new modules) and the lines they add (to the registries) ------

TEXT_STRATEGY = '''"""A throwaway text planner: one call, its own system text."""
from sab_pytest.agents.text import TextPlanner


class ShoutPlanner(TextPlanner):
    name = "shout"

    def _converse(self, instruction, calls, framing):
        return self._ask_once("THROWAWAY-SHOUT: plan the task in numbered steps.", instruction, calls)
'''

ACTING_STRATEGY = '''"""A throwaway acting agent: ReAct's loop, its own system text, shown no pictures."""
from sab_pytest.agents.acting import InteractiveAgent


class WanderAgent(InteractiveAgent):
    name = "wander"
    system = "THROWAWAY-WANDER: act one step at a time, then say done."
'''

STRATEGY_LINES = ('    StrategyInfo("shout", "shout:ShoutPlanner"),\n'
                  '    StrategyInfo("wander", "wander:WanderAgent", acts=True, answers="moves"),\n')

METRIC_DEFINITION = '        "judged_case_rate": RateDef(lambda r: True, lambda r: True, +1),\n'
METRIC_SHOWN = '    "judged_case_rate": Shown(_PASSED, "Throwaway: cases judged"),\n'

GATE_KIND = '''"""A throwaway gate kind: between(METRIC, LOW, HIGH) holds when the value lies in [LOW, HIGH]."""
import dataclasses
import re

from sab_pytest.errors import UsageError
from sab_pytest.results.gate_kinds import GateKind
from sab_pytest.results.gates import NUMBER, TARGET

PATTERN = re.compile(rf"^\\s*between\\s*\\(\\s*{TARGET}\\s*,\\s*({NUMBER})\\s*,\\s*({NUMBER})\\s*\\)\\s*$")


def build(m, gate, source):
    low, high = float(m.group(4)), float(m.group(5))
    if low > high:
        raise UsageError(f"{source}: between() needs LOW <= HIGH ({gate.text!r})")
    return dataclasses.replace(gate, op="between", threshold=low, offset=high)


def decide(gate, d):
    d.out["passed"] = gate.threshold <= d.out["compared"] <= gate.offset
    return d.out


def junit(outcome):
    return [f"range: between {outcome['threshold']:g} and {outcome['value']:g} holds: {outcome['passed']}"]


BETWEEN = GateKind("between", "between(METRIC, LOW, HIGH)", "ranges", PATTERN, build, decide, resampling=None,
                   plan=None, junit=junit)
'''

PROVIDER = '''"""A throwaway provider: an OpenAI-compatible server under its own name."""
from sab_pytest.models.providers import openai_compat


def make(*args, **kwargs):  # the endpoint and what the provider accepts, handed on as they come
    return openai_compat.make(*args, **kwargs)
'''
PROVIDER_LINE = ('    ProviderInfo(name="throwaway", module="throwaway", base_url=None, key_env="THROWAWAY_API_KEY",\n'
                 '                 capabilities=Capabilities(n=False)),\n')


def _insert(path: Path, anchor: str, text: str) -> None:
    """``text`` written right after the one place ``anchor`` stands in ``path`` (a registry's opening line)."""
    source = path.read_text(encoding="utf-8")
    assert source.count(anchor) == 1, f"{path}: the anchor {anchor!r} moved; update this test with the docs"
    path.write_text(source.replace(anchor, anchor + text), encoding="utf-8")


def _add_the_five(package: Path) -> set[str]:
    """Write the five things into the copy ``package``; the files touched, relative to it."""
    (package / "agents" / "shout.py").write_text(TEXT_STRATEGY, encoding="utf-8")
    (package / "agents" / "wander.py").write_text(ACTING_STRATEGY, encoding="utf-8")
    _insert(package / "settings" / "strategies.py", "STRATEGIES: dict[str, StrategyInfo] = {line.name: line for "
            "line in (\n", STRATEGY_LINES)
    metrics = package / "results" / "metrics.py"
    _insert(metrics, "    table: dict[str, RateDef | MeanDef] = {\n", METRIC_DEFINITION)
    _insert(metrics, "_SHOWN_LINES: dict[str, Shown] = {\n", METRIC_SHOWN)
    (package / "results" / "gate_between.py").write_text(GATE_KIND, encoding="utf-8")
    _insert(package / "results" / "gate_kinds.py", "LINES: tuple[str, ...] = (\n", '    "gate_between:BETWEEN",\n')
    (package / "models" / "providers" / "throwaway.py").write_text(PROVIDER, encoding="utf-8")
    _insert(package / "models" / "providers" / "__init__.py",
            "REGISTRY: dict[str, ProviderInfo] = {line.name: line for line in (\n", PROVIDER_LINE)
    return {"agents/shout.py", "agents/wander.py", "settings/strategies.py", "results/metrics.py",
            "results/gate_between.py", "results/gate_kinds.py", "models/providers/throwaway.py",
            "models/providers/__init__.py"}


def _responder(request) -> str:
    """The throwaway planner gets a plan; the throwaway agent one move, then done."""
    text = "\n".join(str(m.get("content")) for m in request.messages)
    if "THROWAWAY-WANDER" in text:
        acted = any(m.get("role") == "assistant" for m in request.messages)
        return "Action: done" if acted else "Action: find Apple"
    return "1. find Apple\n2. pick Apple"


DRIVER = """import sys, pytest
common = sys.argv[1:]
text = pytest.main([*common, "--sab-strategy=shout", "--sab-out=out-text", "--junitxml=text.xml",
                    "--sab-gate=between(judged_case_rate, 0.5, 1)", "--sab-gate=judged_case_rate>=0.9"])
acting = pytest.main([*common, "--sab-strategy=wander", "--sab-out=out-acting", "--sab-action-format=text",
                      "--sab-max-steps=3", "-p", "no:randomly"])
print("EXIT", int(text), int(acting))
"""


def test_a_strategy_of_each_kind_a_metric_a_gate_kind_and_a_provider_each_in_the_files_the_docs_name(
        tmp_path: Path) -> None:
    copy = tmp_path / "pkg"
    package = copy / "sab_pytest"
    shutil.copytree(Path(sab_pytest.__file__).parent, package, ignore=shutil.ignore_patterns("__pycache__"))
    before = {p.relative_to(package).as_posix(): p.read_bytes() for p in package.rglob("*") if p.is_file()}
    touched = _add_the_five(package)
    after = {p.relative_to(package).as_posix(): p.read_bytes() for p in package.rglob("*") if p.is_file()}
    assert {f for f in after if before.get(f) != after[f]} == touched  # nothing else was written

    work = tmp_path / "work"
    work.mkdir()
    (work / "test_sab.py").write_text("from sab_pytest.plugin import check\n\n\ndef test_case(sab_verdict):\n"
                                      "    check(sab_verdict)\n", encoding="utf-8")
    data = write_tiny_dataset(tmp_path / "data")
    with fake_openai_server(responder=_responder) as server:
        env = {**os.environ, "PYTHONPATH": str(copy), "THROWAWAY_BASE_URL": server.url,
               "THROWAWAY_API_KEY": "throwaway-key"}
        env.pop("OPENAI_BASE_URL", None)
        common = ["-q", "-p", "no:cacheprovider", "test_sab.py", "--model=throwaway/fake-model", "--judge-model=rules",
                  "--sab-protocol=sab", "--sab-no-exec", f"--sab-data={data}", "--sab-allow-modified-data",
                  "--sab-subset=all", "--sab-case-tests=record", "--sab-retries=0", "--sab-timeout=10",
                  f"--sab-cache={tmp_path / 'cache'}"]
        done = subprocess.run([sys.executable, "-c", DRIVER, *common], cwd=work, env=env, capture_output=True,
                              text=True, timeout=300)
        requests = list(server.chat_requests)
    output = done.stdout + done.stderr
    assert "EXIT 0 0" in done.stdout, output[-4000:]

    # the provider: named in the summary, and every request went to the fake server with its model name
    text_summary = json.loads((work / "out-text" / "sab-summary.json").read_text())
    assert "throwaway" in json.dumps(text_summary["providers"]), text_summary["providers"]
    assert requests and {r.body.get("model") for r in requests} == {"fake-model"}
    # the text strategy: its agent planned every case, with its own system text on the wire
    records = [json.loads(line) for line in (work / "out-text" / "sab-results.jsonl").read_text().splitlines()]
    assert records and {(r["agent"] or {}).get("agent") for r in records} == {"shout"}, records[0]
    assert any("THROWAWAY-SHOUT" in json.dumps(r.messages) for r in requests)
    # the metric: in the summary, in the terminal table, and gated
    assert text_summary["metrics"]["judged_case_rate"]["value"] == 1.0
    assert "Throwaway: cases judged" in done.stdout
    gates = {g["gate"]: g for g in text_summary["gates"]}
    assert gates["judged_case_rate>=0.9"]["passed"] is True
    # the gate kind: parsed, decided, and its own words in the JUnit file
    between = gates["between(judged_case_rate, 0.5, 1)"]
    assert between["form"] == "between" and between["passed"] is True and between["threshold"] == 0.5
    assert "range: between 0.5 and 1 holds: True" in (work / "text.xml").read_text()
    # the acting strategy: its agent played every case in the engine, move by move
    acting = [json.loads(line) for line in (work / "out-acting" / "sab-results.jsonl").read_text().splitlines()]
    assert acting and {(r["agent"] or {}).get("agent") for r in acting} == {"wander"}, acting[0]
    assert any("THROWAWAY-WANDER" in json.dumps(r.messages) for r in requests)
