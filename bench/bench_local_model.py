"""A self-hosted model as a user runs one: llama.cpp's OpenAI-compatible server with a small GGUF model.

When ``llama_cpp.server`` can be imported by ``--python`` (llama-cpp-python's server extra) and the
``--gguf`` file exists, the bench starts the server on loopback, one slot and an 8192-token context::

    PYTHON -m llama_cpp.server --model GGUF --host 127.0.0.1 --port P --n_ctx 8192 --model_alias smollm2

and runs ``sab run`` against it, the model as agent and as every judge, with no response
cache, in three scenarios:

* ``direct``: 12 cases of the mixed subset (``--sab-sample 12``), ``-n 2``;
* ``react``: 4 cases played move by move in the embedded engine;
* ``long_horizon``: one long-horizon case.

One row per scenario: exit status, wall time, cases, API calls (answered and failed), completion tokens
per second of wall time, the run's status, and its errors by kind. A 135M model cannot format a
judge's verdict, so ``judge_parse`` errors are the model's; transport and timeout errors are the
harness's to avoid. Without the server or the model file it says what is missing and exits 0 (the
one end without checks: a machine without llama.cpp measures nothing here). With them, each run
must end (exit 0 or 1), record its cases, call the server (the judges too: ``--judge-base-url``)
and have no transport or timeout error; else the bench exits 1. ``--smoke``: the direct scenario
on 2 cases.

    python bench/bench_local_model.py [--python PATH] [--gguf PATH] [--only direct react long_horizon]

``SAB_LLAMA_PYTHON`` and ``SAB_LLAMA_GGUF`` give the two paths when the options do not; the dataset and
scenes come from ``SAB_DATA`` / ``SAB_THOR_SCENES`` as for any run.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from benchkit import Checks, add_smoke, skip

ALIAS = "smollm2"
#: error kinds that are the harness's to avoid (a small model's unreadable verdicts are the model's)
HARNESS_ERRORS = ("model_api", "model_timeout", "timeout", "endpoint_down")
N_CTX = 8192
START_TIMEOUT_S = 300  # loading a model the first time can take a while on 2 cores
RUN_TIMEOUT_S = 3600

#: scenario -> the run's own options (after the model, judge, endpoint and output options)
SCENARIOS: dict[str, list[str]] = {
    "direct": ["--sab-sample=12", "-n", "2"],
    "smoke": ["--sab-sample=2", "-n", "0"],
    "react": ["--sab-strategy=react", "--sab-sample=4", "-n", "0"],
    "long_horizon": ["--sab-subset=all", "-k", "long_horizon-0000", "-n", "0"],
}


def _missing(python: str, gguf: str | None) -> list[str]:
    """What keeps the bench from running, in words a user can act on (empty when nothing does)."""
    missing = []
    try:
        check = subprocess.run([python, "-c", "import llama_cpp.server"], capture_output=True, text=True, timeout=120)
        if check.returncode != 0:
            missing.append(f"llama_cpp.server cannot be imported by {python} "
                           "(pip install 'llama-cpp-python[server]' into it, or give --python)")
    except (OSError, subprocess.TimeoutExpired) as exc:
        missing.append(f"{python} cannot be run: {exc}")
    if not gguf:
        missing.append("no model file: give --gguf PATH (or SAB_LLAMA_GGUF), e.g. SmolLM2-135M-Instruct.Q4_1.gguf")
    elif not Path(gguf).is_file():
        missing.append(f"the model file {gguf} does not exist")
    return missing


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def llama_server(python: str, gguf: str, log: Path) -> Iterator[str]:
    """The server on a free loopback port, stopped afterwards; yields its ``/v1`` URL once it answers."""
    port = _free_port()
    argv = [python, "-m", "llama_cpp.server", "--model", gguf, "--host", "127.0.0.1", "--port", str(port),
            "--n_ctx", str(N_CTX), "--model_alias", ALIAS]
    with log.open("w") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"the server exited with {proc.returncode}; its log: {log}")
            try:
                with urllib.request.urlopen(f"{url}/models", timeout=5) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"the server did not answer within {START_TIMEOUT_S} s; its log: {log}")
            time.sleep(1)
        yield url
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def run_scenario(name: str, url: str, work: Path) -> dict[str, object]:
    """One scenario's run against ``url``; its figures from the run's summary."""
    out = work / name
    argv = [sys.executable, "-m", "sab_pytest", "run", f"--model={ALIAS}", f"--judge-model={ALIAS}",
            f"--base-url={url}", f"--sab-judge-base-url={url}", "--sab-no-cache", f"--sab-out={out}", "-q", "-p",
            "no:cacheprovider",
            *SCENARIOS[name]]
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env.setdefault("OPENAI_API_KEY", "sk-local-no-key-needed")  # the client wants one; llama.cpp ignores it
    start = time.monotonic()
    try:
        done = subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
        code, output = done.returncode, done.stdout + done.stderr
    except subprocess.TimeoutExpired as exc:
        code, output = -1, f"timed out after {RUN_TIMEOUT_S} s: {exc}"
    wall = time.monotonic() - start
    (work / f"{name}.log").write_text(output)
    summary_path = out / "sab-summary.json"
    summary = json.loads(summary_path.read_text()) if summary_path.exists() else {}
    usage = summary.get("usage") or {}
    tokens = int(usage.get("completion_tokens") or 0)
    return {"scenario": name, "exit": code, "wall_s": round(wall, 1), "cases": summary.get("cases"),
            "api_calls": usage.get("api_calls"), "failed_calls": usage.get("failed_calls"),
            "completion_tokens": tokens, "tokens_per_s": round(tokens / wall, 1) if wall > 0 else None,
            "status": (summary.get("run") or {}).get("status", "no summary"),
            "errors": summary.get("error_kinds") or {}}


def _row(fig: dict[str, object]) -> str:
    errors = fig["errors"] if isinstance(fig["errors"], dict) else {}
    shown = ", ".join(f"{k} {v}" for k, v in sorted(errors.items())) or "none"
    return (f"{fig['scenario']:<13} exit {fig['exit']!s:>3}  wall {fig['wall_s']!s:>7} s  cases {fig['cases']!s:>3}  "
            f"calls {fig['api_calls']!s:>4} ({fig['failed_calls']} failed)  {fig['tokens_per_s']} tok/s  "
            f"{fig['status']}  errors: {shown}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--python", default=os.environ.get("SAB_LLAMA_PYTHON", sys.executable),
                        help="the Python that has llama-cpp-python[server] (default $SAB_LLAMA_PYTHON, else this one)")
    parser.add_argument("--gguf", default=os.environ.get("SAB_LLAMA_GGUF"),
                        help="the model file (default $SAB_LLAMA_GGUF)")
    parser.add_argument("--only", nargs="+", choices=list(SCENARIOS), default=[n for n in SCENARIOS if n != "smoke"])
    parser.add_argument("--work", type=Path, default=None, help="where the runs write (default: a temporary directory)")
    add_smoke(parser)
    args = parser.parse_args(argv)
    if args.smoke:
        args.only = ["smoke"]
    missing = _missing(args.python, args.gguf)
    if missing:
        return skip("bench_local_model", [f"a llama.cpp server with a model: {what}" for what in missing])
    checks = Checks()
    work = args.work or Path(tempfile.mkdtemp(prefix="sab-local-model-"))
    work.mkdir(parents=True, exist_ok=True)
    print(f"llama.cpp server: {args.python} -m llama_cpp.server --model {args.gguf} --n_ctx {N_CTX} "
          f"--model_alias {ALIAS} (one slot); runs under {work}")
    with llama_server(args.python, args.gguf, work / "server.log") as url:
        figures = []
        for name in args.only:
            fig = run_scenario(name, url, work)
            figures.append(fig)
            print(_row(fig), flush=True)
            errors = fig["errors"] if isinstance(fig["errors"], dict) else {}
            harness = {k: v for k, v in errors.items() if k in HARNESS_ERRORS}
            checks.need(fig["exit"] in (0, 1) and fig["cases"] and fig["api_calls"] and not harness,
                        f"{name}: the run ended, recorded its cases and called the server without a transport or "
                        f"timeout error (exit {fig['exit']}, cases {fig['cases']}, calls {fig['api_calls']}, "
                        f"errors {errors})")
    (work / "figures.json").write_text(json.dumps(figures, indent=2))
    return checks.status()


if __name__ == "__main__":
    sys.exit(main())
