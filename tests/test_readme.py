"""Every command in the README's ```bash blocks runs, exactly as written.

How: each block runs in a copy of the checkout, one command after another (``bash -c LINE``, a
timeout each), with the real inputs (``SAB_DATA``, ``SAB_THOR_SCENES``) and ``OPENAI_BASE_URL`` /
``OPENAI_API_KEY`` pointing at the fake OpenAI server on loopback, so model runs are cheap. A
command ending in ``&`` is started in the background for the rest of its block (the test waits for
the ``--port`` it names) and stopped afterwards. A command passes when it ends with status 0 or 1
(a benchmark whose cases or gates fail exits 1) without a traceback, an internal error or a usage
error. Commands that ``.ci/run`` runs literally (the set-up ``pip install -e ".[dev]"`` and the test
suite itself) are covered by CI running them: the test checks they are there, word for word.
New commands in a ```bash block are picked up without touching this file.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.timing import POLL_S, PROCESS_S

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
CI_RUN = ROOT / ".ci" / "run"
TIMEOUT_S = 300
_IGNORE = shutil.ignore_patterns(".git", ".venv", ".ci-venv", ".ci-cache", ".pytest_cache", "__pycache__",
                                 "*.egg-info", "build", "dist", "sab-results.jsonl*", "sab-summary.json", "sab.xml")


def bash_blocks(text: str) -> list[list[str]]:
    """The commands of each ```bash block (comment-only and blank lines dropped)."""
    blocks = re.findall(r"^```bash\n(.*?)^```", text, flags=re.S | re.M)
    return [[line.strip() for line in block.splitlines() if line.strip() and not line.strip().startswith("#")]
            for block in blocks]


def _command(line: str) -> str:
    """The command without its trailing comment (how .ci/run writes it)."""
    return re.sub(r"\s+#.*$", "", line).strip()


def _ci_lines() -> set[str]:
    return {line.strip() for line in CI_RUN.read_text().splitlines()}


BLOCKS = bash_blocks(README.read_text())


def test_readme_has_commands() -> None:
    assert len(BLOCKS) >= 3 and any("pytest -n 4" in line for block in BLOCKS for line in block)


def test_commands_run_by_ci_are_there_literally() -> None:
    covered = [_command(line) for block in BLOCKS for line in block if _command(line) in _ci_lines()]
    assert 'pip install -e ".[dev]"' in covered and "pytest tests -n 2" in covered


def _wait_for_port(line: str, proc: subprocess.Popen) -> None:
    port = re.search(r"--port[ =](\d+)", line)
    if port is None:
        time.sleep(1.0)
        return
    deadline = time.monotonic() + PROCESS_S
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"background command ended early: {line}"
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", int(port.group(1)))) == 0:
                return
        time.sleep(POLL_S)
    raise AssertionError(f"background command never listened: {line}")


@pytest.mark.parametrize("block", [b for b in BLOCKS if any(_command(line) not in _ci_lines() for line in b)],
                         ids=lambda b: _command(next(line for line in b if _command(line) not in _ci_lines()))[:40])
def test_readme_block_runs(block: list[str], tmp_path: Path, real_data_dir: Path, real_scenes_dir: Path,
                           server) -> None:
    checkout = tmp_path / "checkout"
    shutil.copytree(ROOT, checkout, ignore=_IGNORE, symlinks=True)
    env = {**os.environ, "SAB_DATA": str(real_data_dir), "SAB_THOR_SCENES": str(real_scenes_dir),
           "OPENAI_BASE_URL": server.url, "OPENAI_API_KEY": "sk-readme-test-key",
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    env.pop("PYTEST_ADDOPTS", None)
    env.pop("PYTEST_XDIST_WORKER", None)
    background: list[subprocess.Popen] = []
    try:
        for line in block:
            if _command(line) in _ci_lines():
                continue  # run by .ci/run (checked above)
            # an install would replace the environment running these tests: it must be one .ci/run runs
            assert not re.match(r"(python -m )?pip install", line), f"not in .ci/run literally: {line}"
            if _command(line).endswith("&"):
                proc = subprocess.Popen(["bash", "-c", _command(line)[:-1]], cwd=checkout, env=env,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
                background.append(proc)
                _wait_for_port(line, proc)
                continue
            done = subprocess.run(["bash", "-c", line], cwd=checkout, env=env, capture_output=True, text=True,
                                  timeout=TIMEOUT_S)
            out = done.stdout + done.stderr
            assert done.returncode in (0, 1), f"{line}\nexit {done.returncode}\n{out[-3000:]}"
            assert "INTERNALERROR" not in out and "Traceback" not in out, f"{line}\n{out[-3000:]}"
    finally:
        for proc in background:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=PROCESS_S)
