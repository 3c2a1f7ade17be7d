"""The labelling page of ``sab audit --sample`` in a real headless Chromium: opened from the file,
five cases labelled by keyboard alone, the labels downloaded (and kept over a reload), and the
downloaded file read back by ``sab audit --labels``."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest
from support.browser import Browser
from support.made_up_runs import record, write_run
from support.timing import POLL_S, PROCESS_S

from sab_pytest.__main__ import main as sab


def judged(i: int) -> dict[str, Any]:
    r = record(f"safe_detailed-{i:04d}", kind="safe_detailed")
    verdict = i % 3 != 0
    r.update(plan_success=verdict, passed=verdict, run_settings={"protocol": "paper"})
    r["judge"]["plan"] = {"judge": "m", "value": verdict, "explanation": "made up", "calls": [
        {"messages": [{"role": "user", "content": f"Plan {i}: find Candle</script><b>x</b>"}]}]}
    return r


async def _press(page: Any, key: str) -> None:
    for kind in ("keyDown", "keyUp"):
        await page.call("Input.dispatchKeyEvent", type=kind, key=key, text=key if kind == "keyDown" else "")


def test_label_five_cases_by_keyboard_download_and_read_back(browser: Browser, tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    out = write_run(tmp_path / "run", [judged(i) for i in range(30)], protocol="paper")
    assert sab(["audit", str(out), "--sample", "8", "--seed", "2"]) == 0
    downloads = tmp_path / "downloads"
    downloads.mkdir()

    async def label(page: Any, errors: list[str]) -> list[str]:
        await page.call("Page.setDownloadBehavior", behavior="allow", downloadPath=str(downloads))
        for key in ("y", "n", "y", "j", "1", "2"):  # five answers, one case skipped with j
            await _press(page, key)
        await _press(page, "d")
        deadline = time.monotonic() + PROCESS_S
        while not list(downloads.glob("*.jsonl")) and time.monotonic() < deadline:
            await asyncio.sleep(POLL_S)
        return errors

    assert browser._on((out / "sab-audit.html").as_uri(), label) == []

    async def count(page: Any, errors: list[str]) -> str:
        return await page.text("document.getElementById('count').textContent")

    assert browser._on((out / "sab-audit.html").as_uri(), count) == "5 of 8 labelled"  # kept over a reload
    files = list(downloads.glob("*.jsonl"))
    assert len(files) == 1, list(downloads.iterdir())
    rows = [json.loads(line) for line in files[0].read_text(encoding="utf-8").splitlines()]
    drawn = json.loads((out / "sab-audit-sample.json").read_text())["drawn"]
    assert [r["case"] for r in rows] == [d["case"] for i, d in enumerate(drawn[:6]) if i != 3]
    assert [r["label"] for r in rows] == [True, False, True, True, False]
    assert all(r["judge"] == "plan" and r["shown"] for r in rows)
    capsys.readouterr()
    assert sab(["audit", str(out), "--labels", str(files[0])]) == 0
    assert "plan judge: 5 of 30 judged cases labelled" in capsys.readouterr().out
