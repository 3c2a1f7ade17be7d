"""Loopback helpers for the THOR server tests: a free port, and the server as its own process."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from support.timing import PROCESS_S

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    """A loopback port nothing listens on (once this returns)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(cmd: Sequence[str], env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """Start a THOR server command and wait for its "listening on" line; AssertionError with its stderr if it dies."""
    proc = subprocess.Popen(list(cmd), cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline() if proc.stdout else ""
    if "listening on" not in line:
        proc.kill()
        _, err = proc.communicate(timeout=PROCESS_S)
        raise AssertionError(f"the THOR server did not start: {line!r} {err[-2000:]}")
    return proc


@contextmanager
def sim_server(scenes: Path, *args: str) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """``sab thor-server --backend sim`` on a free port: (process, base URL); killed at exit."""
    port = free_port()
    proc = start_server([sys.executable, "-m", "sab_pytest", "thor-server", "--backend", "sim", "--port", str(port),
                         "--thor-scenes", str(scenes), *args])
    try:
        yield proc, f"http://127.0.0.1:{port}"
    finally:
        proc.kill()
        proc.communicate(timeout=PROCESS_S)
