"""A headless Chromium driven over its DevTools protocol: one browser for all the pages a test
process opens (``Browser``, the ``browser`` fixture), since starting one costs more than loading a
page. ``--dump-dom`` and ``--screenshot`` would also take a page when it has loaded, before a page
that builds itself from data it fetches (Inspect's log viewer) has fetched anything; here a test can
wait for the text it expects, then take the screenshot. Uses aiohttp's websocket client (a
dependency of inspect_ai, whose viewer is what needs the waiting).
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

#: a headless chromium that fetches nothing of its own, in a window of a laptop's size
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--window-size=1280,900")


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


class _Page:
    """One DevTools connection to the browser's page: calls, and the events that came meanwhile."""

    def __init__(self, ws: Any) -> None:
        self.ws, self.counter = ws, 0
        self.events: list[dict[str, Any]] = []

    async def call(self, method: str, **params: Any) -> dict[str, Any]:
        self.counter += 1
        await self.ws.send_json({"id": self.counter, "method": method, "params": params})
        while True:
            message = await self.next()
            if message.get("id") == self.counter:
                return dict(message.get("result") or {})
            if "method" in message:
                self.events.append(message)

    async def next(self) -> dict[str, Any]:
        # not receive_json: some aiohttp builds refuse a text frame their C reader typed as a
        # plain 1 ("Received message 1 ... is not WSMsgType.TEXT"); the payload is the same
        frame = await self.ws.receive(timeout=PROCESS_S)
        assert isinstance(frame.data, (str, bytes)), f"the DevTools socket ended: {frame}"
        return dict(json.loads(frame.data))

    async def event(self, method: str) -> dict[str, Any]:
        """The next event ``method`` (one that came during a call first)."""
        while True:
            found = next((e for e in self.events if e["method"] == method), None)
            if found is not None:
                self.events.remove(found)
                return found
            self.events.append(await self.next())

    async def text(self, expression: str) -> str:
        found = await self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        return str(found.get("result", {}).get("value") or "")

    async def screenshot(self, shot: Path) -> None:
        picture = await self.call("Page.captureScreenshot", format="png")
        shot.write_bytes(base64.b64decode(picture["data"]))


class Browser:
    """A headless chromium of a laptop's window size that loads page after page: ``dom`` (the page's
    HTML once it has loaded, as ``--dump-dom`` gives it), ``script_errors`` (its uncaught ones while
    it loads), ``screenshot`` (at a window size), ``visible_text_and_screenshot`` (a page that builds
    itself from what it fetches). ``close`` ends it."""

    def __init__(self, chromium: str, profile: Path) -> None:
        port = _free_port()
        command = [chromium, *FLAGS, f"--user-data-dir={profile}", f"--remote-debugging-port={port}", "about:blank"]
        self._proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self._socket = _page_socket(port, self._proc)

    def close(self) -> None:
        self._proc.terminate()
        self._proc.wait(timeout=PROCESS_S)

    def _on(self, url: str, then: Any, size: tuple[int, int] = (1280, 900)) -> Any:
        """Load ``url`` at the window ``size``, then ``then(page, exceptions)`` (the uncaught script
        errors of the load, by their text)."""
        import aiohttp

        async def go() -> Any:
            async with aiohttp.ClientSession() as session, session.ws_connect(self._socket, max_msg_size=0) as ws:
                page = _Page(ws)
                await page.call("Page.enable")
                await page.call("Runtime.enable")
                await page.call("Emulation.setDeviceMetricsOverride", width=size[0], height=size[1],
                                deviceScaleFactor=1, mobile=False)
                page.events.clear()  # the contexts and errors of the page loaded before
                await page.call("Page.navigate", url=url)
                await page.event("Page.loadEventFired")
                thrown = [e["params"]["exceptionDetails"] for e in page.events
                          if e["method"] == "Runtime.exceptionThrown"]
                texts = [str(d.get("exception", {}).get("description") or d.get("text")) for d in thrown]
                return await then(page, texts)

        return asyncio.run(go())

    def dom(self, url: str) -> str:
        async def html(page: _Page, errors: list[str]) -> str:
            return await page.text("document.documentElement.outerHTML")

        return str(self._on(url, html))

    def script_errors(self, url: str) -> list[str]:
        async def errors_of(page: _Page, errors: list[str]) -> list[str]:
            return errors

        return list(self._on(url, errors_of))

    def screenshot(self, url: str, shot: Path, size: tuple[int, int]) -> None:
        async def shoot(page: _Page, errors: list[str]) -> None:
            await page.screenshot(shot)

        self._on(url, shoot, size)

    def visible_text_and_screenshot(self, url: str, until: str, shot: Path) -> str:
        """Open ``url``, wait until its visible text matches the regular expression ``until`` (at most
        ``PROCESS_S``), save a screenshot to ``shot``; returns the visible text (not matching ``until``
        if it never came)."""

        async def wait_and_shoot(page: _Page, errors: list[str]) -> str:
            deadline = time.monotonic() + PROCESS_S
            text = ""
            while not re.search(until, text) and time.monotonic() < deadline:
                await asyncio.sleep(POLL_S * 10)
                text = await page.text("document.body ? document.body.innerText : ''")
            await page.screenshot(shot)
            return text

        return str(self._on(url, wait_and_shoot))


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
