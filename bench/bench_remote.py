"""The remote engine on loopback: a step's round trip, and the full offline run through a THOR server.

Targets: a step's round trip < 3 ms on the embedded engine; the 1050-case offline run
(``--model reference --sab-subset all``) with ``--thor remote`` within 2x of ``--thor sim``. The
server runs as its own process (``sab thor-server --backend sim``), as on a THOR
host, so client and server do not share an interpreter. Prints the figures; run from the root:

    python bench/bench_remote.py            # uses SAB_DATA / SAB_THOR_SCENES or the user cache
    python bench/bench_remote.py --no-run   # only the round trip
    python bench/bench_remote.py --smoke    # seconds: 30 steps, one run of 6 cases on each engine, -n 0

The steps must succeed through the server, and the runs must record their cases without an error and
give the same metrics on both engines; else the bench exits 1.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchkit import Checks, add_smoke  # noqa: E402

#: more options of every run (--smoke: a sample)
OPTIONS: list[str] = []


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _server(engines: int) -> tuple[subprocess.Popen[str], str]:
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "sab_pytest", "thor-server", "--backend", "sim", "--port", str(port),
                             "--engines", str(engines)], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    line = proc.stdout.readline() if proc.stdout else ""
    if "listening on" not in line:
        proc.kill()
        sys.exit(f"bench_remote: the THOR server did not start: {line.strip() or 'no output'}")
    return proc, f"http://127.0.0.1:{port}"


def _times(fn, n: int) -> list[float]:
    out = []
    for _ in range(n):
        started = time.perf_counter()
        fn()
        out.append((time.perf_counter() - started) * 1000)
    return out


def _show(label: str, ms: list[float]) -> None:
    ms = sorted(ms)
    print(f"  {label:<34} mean {statistics.fmean(ms):6.2f} ms  p50 {ms[len(ms) // 2]:6.2f}  "
          f"p95 {ms[int(len(ms) * 0.95)]:6.2f}  (n={len(ms)})")


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def round_trip(url: str, n: int, server_pid: int, checks: Checks) -> None:
    from sab_pytest.thor.remote import RemoteEngine
    from sab_pytest.thor.sim import Controller

    remote = RemoteEngine(url)
    local = Controller(width=600, height=600)
    try:
        print(f"step round trip on loopback, FloorPlan1, {n} steps each (target < 3 ms):")
        for engine, name in ((local, "embedded engine, in-process"), (remote, "remote engine (THOR server)")):
            engine.reset("FloorPlan1")
            _times(lambda e=engine: e.step(action="RotateRight"), 20)  # warm up
            _show(f"{name}: RotateRight", _times(lambda e=engine: e.step(action="RotateRight"), n))
        # CPU, not wall: what a step costs whatever else the machine runs (shared CI runners)
        client0, server0 = time.process_time(), _cpu_s(server_pid)
        for _ in range(n):
            remote.step(action="RotateRight")
        client_ms = (time.process_time() - client0) * 1000 / n
        server_ms = (_cpu_s(server_pid) - server0) * 1000 / n
        print(f"  remote: CPU per RotateRight        client {client_ms:.2f} ms + server {server_ms:.2f} ms")
        checks.need(remote.last_event.metadata["lastActionSuccess"], "a step through the THOR server succeeds")
        mug = next(o["objectId"] for o in remote.last_event.metadata["objects"] if o["objectType"] == "Mug")
        remote.reset("FloorPlan1")
        picked = remote.step(action="PickupObject", objectId=mug, forceAction=True).metadata["lastActionSuccess"]
        checks.need(picked, "the Mug is picked up through the THOR server")
        remote.step(action="DropHandObject", forceAction=True)
        _show("remote: Pickup+Drop (objects move)", _times(
            lambda: (remote.step(action="PickupObject", objectId=mug, forceAction=True),
                     remote.step(action="DropHandObject", forceAction=True)), n // 2))
        _show("remote: reset(FloorPlan1), same scene", _times(lambda: remote.reset("FloorPlan1"), n // 10))
        _show("remote: frame (600x600 PNG)", _times(lambda: remote.step(action="RotateRight").frame, n // 10))
    finally:
        remote.stop()


def _pytest(args: list[str], out: Path) -> tuple[float, subprocess.CompletedProcess[str]]:
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", f"--sab-out={out}",
                           "--model", "reference", "--sab-subset", "all", "-q", *OPTIONS, *args], cwd=ROOT,
                          capture_output=True, text=True)
    return time.perf_counter() - started, proc


def full_run(url: str, workers: str, repeat: int, checks: Checks) -> None:
    print(f"pytest --model reference --sab-subset all -n {workers} (1050 cases, target remote within 2x of sim; "
          f"sim and remote alternate, best of {repeat} each):")
    walls: dict[str, list[float]] = {"sim": [], "remote": []}
    metrics = {}
    with tempfile.TemporaryDirectory() as tmp:
        for round_ in range(repeat):
            for name, extra in (("sim", ["--thor", "sim"]), ("remote", ["--thor", "remote", f"--thor-url={url}"])):
                out = Path(tmp) / f"{name}{round_}"
                wall, proc = _pytest([*extra, "-n", workers], out)
                summary_path = out / "sab-summary.json"
                summary = json.loads(summary_path.read_text()) if summary_path.exists() else {}
                walls[name].append(wall)
                metrics[name] = _rounded(summary.get("metrics"))
                tail = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else proc.stderr.strip()[-300:]
                print(f"  --thor {name:<6}: {wall:6.2f} s wall, exit {proc.returncode}, cases {summary.get('cases')}, "
                      f"errors {summary.get('errors')}  ({tail})")
                checks.need(proc.returncode in (0, 1) and summary.get("cases") and summary.get("errors") == 0,
                            f"--thor {name}: the run recorded its cases without an error (exit {proc.returncode}, "
                            f"cases {summary.get('cases')}, errors {summary.get('errors')})")
    same = metrics["sim"] is not None and metrics["sim"] == metrics["remote"]
    best = {name: min(values) for name, values in walls.items()}
    ratio = best["remote"] / best["sim"]
    print(f"  best: sim {best['sim']:.2f} s, remote {best['remote']:.2f} s: remote / sim {ratio:.2f}x; "
          f"metrics equal (to 10 decimals: sums follow the order cases finish in under xdist): {same}")
    checks.need(same, "the remote engine gives the metrics of the embedded one")


def _rounded(value):
    if isinstance(value, float):
        return round(value, 10)
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_rounded(v) for v in value]
    return value


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=500)
    parser.add_argument("--workers", default="2")
    parser.add_argument("--no-run", action="store_true", help="skip the 1050-case runs")
    parser.add_argument("--repeat", type=int, default=2, help="runs of each engine (best counts; default 2)")
    add_smoke(parser)
    ns = parser.parse_args()
    if ns.smoke:
        ns.steps, ns.workers, ns.repeat = 30, "0", 1
        OPTIONS[:] = ["--sab-sample=6"]
    checks = Checks()
    proc, url = _server(engines=max(2, int(ns.workers)))
    try:
        round_trip(url, ns.steps, proc.pid, checks)
        if not ns.no_run:
            full_run(url, ns.workers, ns.repeat, checks)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    return checks.status()


if __name__ == "__main__":
    sys.exit(main())
