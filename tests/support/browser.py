"""A headless Chromium driven over its DevTools protocol, for pages that build themselves from data they
fetch (Inspect's log viewer): ``--dump-dom`` and ``--screenshot`` take the page when it has loaded, before
such a page has fetched anything, so here the test waits for the text it expects, then takes the
screenshot. Uses aiohttp's websocket client (a dependency of inspect_ai, whose viewer is what needs this).
"""

from __future__ import annotations

import asyncio
import base64
import json
import re
import socket
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

from support.timing import POLL_S, PROCESS_S

#: a headless chromium that fetches nothing of its own (tests/unit/reports/test_html_report.py's runs)
HEADLESS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--no-first-run")
#: the same in a window of a laptop's size, for the pages driven over DevTools
FLAGS = (*HEADLESS, "--window-size=1280,900")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _page_socket(port: int, proc: subprocess.Popen) -> str:
    """The DevTools websocket of the browser's one page, once the browser answers."""
    deadline = time.monotonic() + PROCESS_S
    while True:
        assert proc.poll() is None, "chromium ended before it served its DevTools endpoint"
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=PROCESS_S) as answer:
                targets = json.load(answer)
            return next(t["webSocketDebuggerUrl"] for t in targets if t.get("type") == "page")
        except (OSError, StopIteration, ValueError):
            assert time.monotonic() < deadline, "chromium's DevTools endpoint never answered"
            time.sleep(POLL_S)


async def _wait_and_shoot(socket_url: str, until: str, shot: Path) -> str:
    import aiohttp

    async with aiohttp.ClientSession() as session, session.ws_connect(socket_url, max_msg_size=0) as ws:
        counter = 0

        async def call(method: str, **params: Any) -> dict[str, Any]:
            nonlocal counter
            counter += 1
            await ws.send_json({"id": counter, "method": method, "params": params})
            while True:
                # not receive_json: some aiohttp builds refuse a text frame their C reader typed as a
                # plain 1 ("Received message 1 ... is not WSMsgType.TEXT"); the payload is the same
                frame = await ws.receive(timeout=PROCESS_S)
                assert isinstance(frame.data, (str, bytes)), f"the DevTools socket ended: {frame}"
                message = json.loads(frame.data)
                if message.get("id") == counter:
                    return dict(message.get("result") or {})

        deadline = time.monotonic() + PROCESS_S
        text = ""
        while not re.search(until, text) and time.monotonic() < deadline:
            await asyncio.sleep(POLL_S * 10)
            found = await call("Runtime.evaluate", expression="document.body ? document.body.innerText : ''",
                               returnByValue=True)
            text = str(found.get("result", {}).get("value") or "")
        picture = await call("Page.captureScreenshot", format="png")
        shot.write_bytes(base64.b64decode(picture["data"]))
        return text


def visible_text_and_screenshot(chromium: str, url: str, until: str, shot: Path, profile: Path) -> str:
    """Open ``url``, wait until its visible text matches the regular expression ``until`` (at most
    ``PROCESS_S``), save a screenshot to ``shot``; returns the visible text (not matching ``until`` if
    it never came)."""
    port = _free_port()
    proc = subprocess.Popen([chromium, *FLAGS, f"--user-data-dir={profile}", f"--remote-debugging-port={port}", url],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        return asyncio.run(_wait_and_shoot(_page_socket(port, proc), until, shot))
    finally:
        proc.terminate()
        proc.wait(timeout=PROCESS_S)


def find_chromium() -> str:
    """Debian's chromium (``.ci/run`` installs it), for every test that opens a page in it: skips
    only where it could not be installed, saying why; missing in CI is a failure."""
    import os
    import shutil

    import pytest

    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found:
        return found
    why = os.environ.get("SAB_CHROMIUM_UNAVAILABLE")
    if why:
        pytest.skip(f"chromium could not be installed here: {why}")
    if os.environ.get("CI"):
        pytest.fail("chromium is missing in CI although .ci/run installs it (apt-get install chromium)", pytrace=False)
    pytest.skip("chromium is not installed (apt-get install chromium; .ci/run does this in CI)")
