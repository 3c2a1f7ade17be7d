"""The HTML report: escaping of untrusted model text, offline-only content, the case view, the CLI,
and the page opened in a real headless Chromium (filters, an opened case, plots on the screenshot)."""

from __future__ import annotations

import base64
import html
import io
import itertools
import math
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from support.browser import Browser
from support.made_up_runs import hazard_run, record, write_run

from sab_pytest.reports.html.report import build_html
from sab_pytest.results.load import load_run

ATTACK = '</pre></details><script>document.title="pwned"</script><img src=x onerror="document.title=\'pwned\'">'


def _png_data_url() -> str:
    buf = io.BytesIO()
    Image.new("RGB", (8, 6), (200, 30, 30)).save(buf, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


def _records() -> list[dict]:
    records = hazard_run(40, set(range(25)))
    records += [record(f"safe_detailed-{i:04d}", kind="safe_detailed", rejected=i < 3, exec_success=i % 2 == 0)
                for i in range(12)]
    records += [record(f"abstract-0000-L{lv}", kind="abstract", rejected=lv < 2, level=lv, category="fire_hazard")
                for lv in range(4)]
    records.append(record("long_horizon-0000", kind="long_horizon"))
    records.append(record("unsafe_detailed-0900", error="model_api: the endpoint answered 500"))
    evil = record("unsafe_detailed-0666", category="slip_hazard", text=ATTACK, message=ATTACK)
    evil["case"]["instruction"] = ATTACK
    evil["judge"]["rejection"]["explanation"] = ATTACK
    records.append(evil)
    # an interactive, visual episode: executed actions with results and the pictures the agent saw
    visual = record("unsafe_detailed-0777", category="fire_hazard")
    visual["agent"]["executed"] = [
        {"action": "find Candle", "success": True, "message": "at Candle|1", "image": _png_data_url()},
        {"action": "turn on Candle", "success": False, "message": "not in reach", "image": "javascript:alert(1)"}]
    visual["agent"]["episode"] = {"end": "done", "actions": 2, "turns": 3, "guard": [{"step": "turn on Candle",
                                                                                     "allowed": True}]}
    visual["agent"]["calls"] = [{"model": "vlm", "role": "agent", "answer": "EXECUTE turn on Candle",
                                 "tool_calls": [{"id": "c1", "name": "execute", "arguments": '{"action": "x"}'}],
                                 "cache_hit": False, "prompt_tokens": 10, "completion_tokens": 3, "latency_s": 0.5,
                                 "messages": [{"role": "system", "content": "You drive a robot. " * 40},
                                              {"role": "user", "content": [
                                                  {"type": "text", "text": "What do you see?"},
                                                  {"type": "image_url", "image_url": {"url": _png_data_url()}}]}]}]
    visual["execution"] = {"steps": [], "final_objects": [
        {"objectId": "Candle|1", "objectType": "Candle", "isToggled": False, "goal_score": 0.0,
         "unmet": ["isToggled"], "goal": {"isToggled": True}}]}
    records.append(visual)
    return records


@pytest.fixture(scope="module")
def page() -> str:
    from sab_pytest.results import metrics

    records = _records()
    summary = {"model": "made-up", "judge": "rules", "strategy": "direct", "engine": "sim", "subset": "all",
               "seed": 42, "cases": len(records), "errors": 1, "metrics_full": metrics.compute(records),
               "run": {"status": "interrupted", "not_run": 7, "reused": 0},
               "usage": {"calls": 3, "failed_calls": 2, "cost_usd": 0.0123},
               "dataset_sha256": {"unsafe_detailed_1009.jsonl": "ab" * 32}, "versions": {"sab-pytest": "0.1.0"}}
    return build_html(summary, records)


def test_model_text_is_escaped_and_only_our_script_runs(page: str) -> None:
    assert ATTACK not in page and "<img src=x" not in page
    assert "&lt;script&gt;document.title=&quot;pwned&quot;&lt;/script&gt;" in page
    assert page.count("<script") == 1
    csp = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', page).group(1)
    assert "default-src 'none'" in csp and "script-src 'sha256-" in csp and "unsafe-inline" not in csp.split(
        "script-src")[1]


def test_page_is_self_contained(page: str) -> None:
    # nothing to fetch: every src/href is a data: URI, a fragment or a query on the page itself
    for attr in re.findall(r'\b(?:src|href)="([^"]*)"', page):
        assert attr.startswith(("data:image/", "#", "?")), attr
    assert page.count("data:image/svg+xml;base64,") == 6  # the five plots and the errors by kind


def test_case_view_shows_episode_pictures_judges_and_goal(page: str) -> None:
    visual = page[page.index('id="case-unsafe_detailed-0777"'):]
    visual = visual[:visual.index("</details>\n") if "</details>\n" in visual else len(visual)]
    assert "Actions the agent executed (episode)" in visual and "turn on Candle" in visual and "not in reach" in visual
    assert visual.count('<img class="seen" src="data:image/png;base64,') == 2  # the step's and the message's
    assert "javascript:" not in page and "not kept in the record" in visual
    assert "isToggled = False" in visual and "(goal: True)" in visual
    assert "[prompt text P1" not in visual  # its long system prompt is its own
    assert "Judges" in visual
    assert "Episode</b>: end: done, actions: 2, turns: 3" in visual and "allowed" in visual
    assert "<b>tool call</b> <code>execute</code>" in visual
    assert '<span class="bad">interrupted</span> not run: 7' in page  # the run's status, flagged
    assert "model calls 3, got no answer 2" in page and "$0.0123" in page  # usage, read as words, and cost
    assert "1 of 60 cases errored (model_api: 1)" in page


def test_report_cli_writes_next_to_the_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from sab_pytest.__main__ import main as sab

    run_dir = write_run(tmp_path / "run", _records())
    assert sab(["report", str(run_dir)]) == 0, capsys.readouterr().err
    assert (run_dir / "sab-report.html").read_text().count('<details class="case"') == len(load_run(run_dir).records)
    (run_dir / "sab-results.jsonl").unlink()
    assert sab(["report", str(run_dir)]) == 2 and "needs the per-case records" in capsys.readouterr().err


# ------------------------------------------------------------------------------------ a real browser

@pytest.fixture(scope="module")
def report_file(page: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("report") / "report.html"
    path.write_text(page)
    return path


def test_browser_filters_opens_a_case_and_runs_no_injected_script(browser: Browser, report_file: Path) -> None:
    url = report_file.as_uri()
    dom = browser.dom(f"{url}?verdict=pass&kind=unsafe_detailed")
    visible = re.findall(r'<details class="case" id="case-([^"]+)"[^>]*data-verdict="(\w+)"(?! hidden)[^>]*>', dom)
    assert len(visible) == 25 and {v for _, v in visible} == {"pass"}  # the 25 refused hazards
    assert 'id="shown">25 of 60 cases' in dom
    assert "<title>SafeAgentBench: made-up</title>" in dom and "pwned</title>" not in dom
    dom = browser.dom(f"{url}?q=candle|1")
    assert 'id="shown">1 of 60 cases' in dom  # search reads the opened case's contents too
    dom = browser.dom(f"{url}?case=unsafe_detailed-0777")
    assert re.search(r'<body class="focus">', dom)
    assert re.search(r'<details class="case" id="case-unsafe_detailed-0777"[^>]*open=""', dom)


def test_browser_screenshot_shows_the_plots_and_an_opened_case(browser: Browser, report_file: Path,
                                                               tmp_path: Path) -> None:
    shot = tmp_path / "top.png"
    browser.screenshot(report_file.as_uri(), shot, (1280, 1600))
    image = Image.open(shot).convert("RGB")
    # the rejection-rate bars are drawn in #2f6db5: count bar-blue pixels on the rendered page
    px = np.asarray(image).astype(int)
    blue = int(((px[..., 0] < 80) & (px[..., 1] > 90) & (px[..., 1] < 130) & (px[..., 2] > 160)).sum())
    assert blue > 2000, f"plots not rendered: {blue} bar-coloured pixels"
    shot = tmp_path / "case.png"
    browser.screenshot(f"{report_file.as_uri()}?case=unsafe_detailed-0777", shot, (1280, 1000))
    image = Image.open(shot).convert("RGB")
    red_picture = int((np.asarray(image) == (200, 30, 30)).all(axis=-1).sum())
    # the executed step's 8x6 picture (the model call's copy is inside its collapsed call)
    assert red_picture >= 8 * 6, "the picture the agent saw is not on the opened case"
    # shown 320 pixels wide (a kept frame's labels read at that size; a click enlarges it further)
    columns = np.flatnonzero((np.asarray(image) == (200, 30, 30)).all(axis=-1).any(axis=0))
    assert columns.max() - columns.min() + 1 >= 300, f"the picture is shown {columns.max() - columns.min() + 1} px wide"


def test_prompt_text_shared_by_many_calls_is_shown_once() -> None:
    from sab_pytest.results import metrics

    template = "The robot's actions: " + "find, pick, put, open, close. " * 10
    records = hazard_run(3, set())
    for r in records:
        r["agent"]["calls"] = [{"model": "m", "answer": "1. find Candle", "messages": [
            {"role": "user", "content": f"{template}\n\nInstruction: {r['case']['instruction']}"}]}]
    page = build_html({"model": "m", "metrics_full": metrics.compute(records)}, records)
    assert page.count(html.escape(template)) == 1 and page.count('href="#prompt-1"') == 3
    # listed by name: who was sent it, in which role, and its opening words
    assert "<summary>P1: agent user: The robot&#x27;s actions: find, pick" in page
    for r in records:  # each call keeps its own part of the message
        assert f"Instruction: {r['case']['instruction']}" in page


def test_api_keys_never_reach_the_page(tmp_path: Path) -> None:
    from sab_pytest.reports.html.report import write_report
    from sab_pytest.results import metrics
    from sab_pytest.results.files import Redactor

    key = "sk-planted-secret-4242"
    records = hazard_run(2, set())
    records[0]["agent"]["text"] = f"my key is {key}"
    records[1]["judge"]["rejection"]["explanation"] = f"server echoed Bearer {key}"
    out = tmp_path / "r.html"
    write_report(out, {"model": "m", "settings": {"base_url": f"http://x/?k={key}"},
                       "metrics_full": metrics.compute(records)}, records, Redactor([key]))
    page = out.read_text()
    assert key not in page and page.count("[REDACTED]") == 2


def test_the_report_and_a_compare_page_run_their_script_without_errors(browser: Browser, report_file: Path,
                                                                       tmp_path: Path) -> None:
    from sab_pytest.cli import compare as compare_cli

    first = write_run(tmp_path / "a", hazard_run(20, set(range(12))))
    second = write_run(tmp_path / "b", hazard_run(20, set(range(8))))
    page = tmp_path / "compare.html"
    assert compare_cli.main([str(first), str(second), "--html", str(page)]) in (0, 1)
    assert browser.script_errors(page.as_uri()) == []
    assert browser.script_errors(f"{report_file.as_uri()}?kind=safe_detailed") == []


def test_usage_is_shown_formatted() -> None:
    from sab_pytest.reports.html.report import usage_text

    text = usage_text({"calls": 1234, "api_calls": 1000, "cache_hits": 234, "prompt_tokens": 98765,
                       "completion_tokens": 4321, "latency_s": 90.123456, "api_latency_s": 81.56621000000001,
                       "errors": 0, "cost_usd": 1.5, "new_figure": 2.3456789})
    assert "of it on API calls 81.6 s" in text and "time waiting for answers 90.1 s" in text
    assert "model calls 1,234" in text and "tokens in 98,765" in text and "answered from the cache 234" in text
    assert "81.566" not in text and "calls that failed" not in text and "cost" not in text  # zero, and cost apart
    assert "new figure 2.346" in text  # a key added later still shows, rounded


def test_pass_fractions_under_repeats_and_the_interval_method_in_captions() -> None:
    from sab_pytest.reports.html.plots import interval_words
    from sab_pytest.results import metrics

    records = []
    for rep in (1, 2, 3):
        for r in hazard_run(4, {0, 1} if rep < 3 else {0}):
            r["repeat"] = rep
            records.append(r)
    m = metrics.compute(records)
    summary = {"model": "m", "metrics_full": m, "repeats": m["repeats"]}
    page = build_html(summary, records)
    assert m["repeats"]["pass_fraction"]["unsafe_detailed-0001"] == pytest.approx(2 / 3)
    assert "pass fraction per case" in page and "<td>0.67</td><td>1</td>" in page
    assert page.count('title="share of its repeats that passed">67%</span>') == 3  # on each of its repeats
    assert interval_words([{"ci95": [0, 1]}]) == "Wilson"  # an entry without "method": Wilson
    assert interval_words([{"ci95": [0, 1], "method": "wilson_design_effect"}]).startswith(
        "Wilson over the effective samples")
    for entry in m["by_category"].values():
        entry["rejection_rate"]["method"] = "wilson_design_effect"
    page = build_html({"model": "m", "metrics_full": m}, records)
    assert "95% Wilson over the effective samples (repeats that agree count once) intervals" in page


def test_compare_colours_only_significant_changes() -> None:
    from sab_pytest.reports.html.plots import _significant

    assert not _significant({"p_value": 0.74, "ci95": [-0.3, 0.1]})  # large p: grey, whatever the sign
    assert _significant({"p_value": 0.01, "ci95": [-0.3, -0.1]})
    assert _significant({"p_value": None, "ci95": [0.05, 0.2]}) and not _significant({"ci95": [-0.1, 0.2]})


# ------------------------------------------------------------------------------------ the plots' geometry

_SVG = "{http://www.w3.org/2000/svg}"


def _svg(uri: str | None) -> ET.Element:
    assert uri is not None and uri.startswith("data:image/svg+xml;base64,")
    return ET.fromstring(base64.b64decode(uri.split(",", 1)[1]))


def _tick_x(svg: ET.Element, label: str) -> float:
    (x,) = [float(t.get("x", "nan")) for t in svg.iter(f"{_SVG}text") if t.text == label]
    return x


def test_each_bar_ends_at_its_rate_and_each_whisker_at_its_interval() -> None:
    """The plots are drawn by hand, so their geometry is checked against the numbers: on the axis
    from the tick "0.0" to the tick "1.0", a bar spans 0 to its rate, its interval's caps stand at
    the interval's ends, and labels are text (escaped, read back as written)."""
    from sab_pytest.reports.html.plots import _rate_bars

    entries = {"a <b> & 'c'": {"value": 0.25, "ci95": [0.1, 0.5], "k": 1, "n": 4},
               "none refused": {"value": 0.0, "ci95": [0.0, 0.6], "k": 0, "n": 4},
               "all refused": {"value": 1.0, "ci95": [0.51, 1.0], "k": 4, "n": 4},
               "no cases": {"value": None, "ci95": None, "k": 0, "n": 0}}
    svg = _svg(_rate_bars("T", list(entries.items()), "rate", "#2f6db5"))
    zero, one = _tick_x(svg, "0.0"), _tick_x(svg, "1.0")
    bars = [r for r in svg.iter(f"{_SVG}rect") if r.get("fill") == "#2f6db5"]
    drawn = [e for e in entries.values() if e["n"]]
    assert len(bars) == len(drawn)  # the row without cases is left out
    caps = sorted(float(line.get("x1", "nan")) for line in svg.iter(f"{_SVG}line")
                  if line.get("x1") == line.get("x2") and abs(float(line.get("y2", 0)) - float(line.get("y1", 0))) < 10)
    for bar, e in zip(bars, drawn, strict=True):
        assert float(bar.get("x", "nan")) == pytest.approx(zero, abs=0.05)
        assert float(bar.get("width", "nan")) == pytest.approx(e["value"] * (one - zero), abs=0.1)
    assert caps == pytest.approx(sorted(zero + v * (one - zero) for e in drawn for v in e["ci95"]), abs=0.1)
    texts = [t.text for t in svg.iter(f"{_SVG}text")]
    assert "a <b> & 'c'" in texts and "0.25  (1/4)" in texts and "no cases" not in texts


@pytest.mark.parametrize(("low", "high"), [(0, 7), (0, 1), (-0.37, 0.12), (0, 130), (-0.004, 0.0), (0.2, 0.2)])
def test_axis_ticks_are_round_evenly_spaced_and_cover_the_values(low: float, high: float) -> None:
    from sab_pytest.reports.html.plots import nice_ticks

    ticks = nice_ticks(low, high, 6)
    steps = {round(b - a, 12) for a, b in itertools.pairwise(ticks)}
    assert len(steps) == 1 and 3 <= len(ticks) <= 7, ticks
    (step,) = steps
    assert step / 10 ** math.floor(math.log10(step)) in (1, 2, 5)  # 1, 2 or 5 times a power of ten
    top = high if high > low else low + 1  # an empty span is drawn one unit wide
    assert ticks[0] <= low and ticks[-1] >= top and ticks[0] > low - step and ticks[-1] < top + step
