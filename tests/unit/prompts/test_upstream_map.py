"""MAP's prompts under the paper's protocol: read at run time from the pinned methods/ files (never
shipped), sha256-checked wherever they come from, one usage error naming SAB_UPSTREAM_METHODS when
they cannot be had, and filled the way the paper's code fills them."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest

from sab_pytest.errors import UsageError
from sab_pytest.prompts import upstream_map
from sab_pytest.run.validate import validate
from sab_pytest.settings import Settings

MAP_PAPER = {"model": "agent-x", "model_given": True, "strategy": "map_vlm", "protocol": "paper"}


def test_the_pins_are_the_shared_copy_and_every_role_has_its_slots(real_methods_dir: Path) -> None:
    for name, sha in upstream_map.FILES.items():
        assert hashlib.sha256((real_methods_dir / name).read_bytes()).hexdigest() == sha
    texts = upstream_map.load(real_methods_dir)
    assert texts.environment.slots == {"task_description"}
    assert texts.grounding.slots == {"task_description", "objs_from_scene"}
    assert texts.planner_system.slots == {"enviroment_agent", "sim_ground_agent"}
    assert texts.planner_user.slots == {"task_description"} and texts.converter_user.slots == {"high_level_plan"}
    # filled as the code fills them: the task where the code adds it, both reports joined by a newline
    assert texts.planner_user.fill({"task_description": "Heat the mug"}).endswith("Heat the mug")
    system = texts.planner_messages("t", "REPORT-A", "REPORT-B")[0]["content"]
    assert "REPORT-A\nREPORT-B" in system
    assert "PLAN-X" in texts.converter_messages("PLAN-X")[1]["content"]


def test_no_upstream_text_is_in_the_project(real_methods_dir: Path) -> None:
    texts = upstream_map.load(real_methods_dir)
    # the converter's system prompt and the longest line of each vision agent's text: read, never shipped
    phrases = [texts.converter_system.fill({}),
               *(max(t.fill({"task_description": "", "objs_from_scene": []}).split("\n"), key=len).strip()
                 for t in (texts.environment, texts.grounding))]
    root = Path(upstream_map.__file__).resolve().parents[1]
    for path in root.rglob("*.py"):
        source = path.read_text(encoding="utf-8")
        assert not any(p in source for p in phrases), path


def test_a_changed_file_is_refused(real_methods_dir: Path, tmp_path: Path) -> None:
    copy = tmp_path / "methods"
    shutil.copytree(real_methods_dir, copy)
    (copy / "utils.py").chmod(0o644)
    (copy / "utils.py").write_text((copy / "utils.py").read_text() + "\n# changed\n")
    with pytest.raises(UsageError, match="sha256"):
        upstream_map.load(copy)


def test_missing_files_are_one_usage_error_naming_the_variable(monkeypatch: pytest.MonkeyPatch,
                                                               tmp_path: Path) -> None:
    monkeypatch.setenv("SAB_UPSTREAM_METHODS", str(tmp_path / "nowhere"))
    with pytest.raises(UsageError, match=r"upstream methods directory .*nowhere \(from SAB_UPSTREAM_METHODS\) "
                                         r"does not exist"):
        validate(Settings(**MAP_PAPER))
    monkeypatch.delenv("SAB_UPSTREAM_METHODS")
    monkeypatch.setattr(upstream_map, "URL_PATTERN", "http://127.0.0.1:9/{name}?{commit}")  # nothing listens
    monkeypatch.setenv("SAB_CACHE_HOME", str(tmp_path / "cache"))
    with pytest.raises(UsageError, match="SAB_UPSTREAM_METHODS=DIR"):
        validate(Settings(**MAP_PAPER))
    validate(Settings(**{**MAP_PAPER, "protocol": "sab"}))  # the project's own words need no file


def test_the_converter_s_answer_is_every_line_stripped() -> None:
    assert upstream_map.converted_lines("  find Apple\n\n1. pick Apple \n") == ["find Apple", "1. pick Apple"]


def test_each_role_s_settings_are_the_released_code_s(real_methods_dir: Path) -> None:
    """The token limits and temperatures map_vlm asks for under paper are those of the code's calls."""
    import ast

    from sab_pytest.agents.map_vlm import PAPER_MAX_TOKENS, PAPER_TEMPERATURES

    def keywords(call: ast.Call) -> dict[str, object]:
        return {k.arg: ast.literal_eval(k.value) for k in call.keywords if k.arg in ("max_tokens", "temperature")}

    tree = ast.parse((real_methods_dir / "map_vlm.py").read_text())
    planning = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)
                    and n.name == "multi_agent_vision_planning")
    nested = {n.name: n for n in planning.body if isinstance(n, ast.FunctionDef)}
    creates = {name: next(c for c in ast.walk(nested[name]) if isinstance(c, ast.Call) and keywords(c))
               for name in ("enviroment_agent", "sim_ground_agent")}
    planner = [n for n in planning.body if isinstance(n, ast.Assign) and isinstance(n.value, ast.Call)
               and keywords(n.value)][-1].value
    assert keywords(creates["enviroment_agent"]) == {"max_tokens": PAPER_MAX_TOKENS["environment"],
                                                     "temperature": PAPER_TEMPERATURES["vision"]}
    assert keywords(creates["sim_ground_agent"]) == {"max_tokens": PAPER_MAX_TOKENS["grounding"],
                                                     "temperature": PAPER_TEMPERATURES["vision"]}
    assert keywords(planner)["max_tokens"] == PAPER_MAX_TOKENS["planner"]
    utils = ast.parse((real_methods_dir / "utils.py").read_text())
    call_gpt = next(n for n in utils.body if isinstance(n, ast.FunctionDef) and n.name == "call_gpt")
    defaults = dict(zip([a.arg for a in call_gpt.args.args][-len(call_gpt.args.defaults):],
                        [ast.literal_eval(d) for d in call_gpt.args.defaults], strict=True))
    assert (defaults["max_tokens"], defaults["temperature"]) == (PAPER_MAX_TOKENS["converter"],
                                                                 PAPER_TEMPERATURES["converter"])
