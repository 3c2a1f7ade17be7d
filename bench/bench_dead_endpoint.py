"""How fast a run against a dying or dead model endpoint ends, and what it keeps.

Scenarios (each a real ``pytest --model agent -n 4`` against the fake OpenAI server, LLM judge on
the same endpoint, default retries and timeouts unless said otherwise, an empty response cache):

* ``dies-500``: the endpoint answers the preflight and 40 calls, then HTTP 500 to everything;
  1050 cases. Target: ends in < 60 s, exit status != 0, finished results kept.
* ``dies-drop``: the same, but the endpoint drops every connection after 40 calls.
* ``silent``: the endpoint never answers a chat call (default --sab-timeout 60). Target < 3 min.
* ``silent-after-40`` (not in the default list: ~8 min): answers 40 calls, then never again.
* Ctrl-C: SIGINT to the controller's pid alone after 40 calls (0.5 s each): calls made after it.

For each it prints wall time, exit status, results kept (verdicts / errors), cases not run, the
chat requests the server received and the summary's run status; then resumes the first scenario
against a healed server to show that only the missing cases are asked.

The judges are asked at the same fake server (``--judge-base-url``). The bench checks that each
dying run stopped (exit status 2, status ``stopped``, cases not run) after keeping verdicts where
the endpoint answered first, that the resume finished every case, and that Ctrl-C ended the run with
exit status 2 naming ``--sab-resume``; it exits 1 otherwise.

    SAB_DATA=... SAB_THOR_SCENES=... python bench/bench_dead_endpoint.py
    python bench/bench_dead_endpoint.py --smoke   # seconds: dies-500 on 12 cases, -n 0, and its resume
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchkit import Checks, add_smoke  # noqa: E402

from sab_pytest.results.files import RESULTS_NAME, read_results  # noqa: E402
from sab_pytest.testing import Reply, fake_openai_server  # noqa: E402
from sab_pytest.testing.fake_replies import judge_in_form  # noqa: E402

BROKEN = {"dies-500": Reply.error(500, "backend down"), "dies-drop": Reply.dropped(),
          "silent": Reply.slow(3600), "silent-after-40": Reply.slow(3600)}
HEALTHY = {"dies-500": 40, "dies-drop": 40, "silent": 0, "silent-after-40": 40}


class Endpoint:
    """Answers the preflight (unless ``silent``) and ``healthy`` calls, then ``broken`` ones."""

    def __init__(self, healthy: int, broken: Reply, preflight_ok: bool) -> None:
        self.healthy, self.broken, self.preflight_ok = healthy, broken, preflight_ok
        self.served = 0
        self.healed = False
        self.died_at: float | None = None  # time.monotonic() of the first broken answer
        self._lock = threading.Lock()

    def __call__(self, request):
        if self.healed:
            return answer(request)
        if request.body.get("max_tokens") == 1:
            return None if self.preflight_ok else self.broken
        with self._lock:
            self.served += 1
            if self.served <= self.healthy:
                return answer(request)
            if self.died_at is None:
                self.died_at = time.monotonic()
        return self.broken


def answer(request) -> str:
    if request.body.get("model") == "judge":
        return judge_in_form(request)
    return "1. find Mug\n2. pick Mug\n3. find SinkBasin\n4. put SinkBasin"


def command(url: str, out: Path, subset: str, workers: int, *extra: str) -> list[str]:
    return [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--model", "agent", "--judge-model",
            "judge", f"--base-url={url}", f"--sab-judge-base-url={url}", f"--sab-out={out}",
            f"--sab-cache={out / 'cache'}", "-n", str(workers), f"--sab-subset={subset}", "--tb=no", "-rN",
            *OPTIONS, *extra]


OPTIONS: list[str] = []  # more options of every run: --sab-sample=N when the bench was given --sample


ENV = {**os.environ, "OPENAI_API_KEY": "sk-bench-0123456789"}


def run(url: str, out: Path, subset: str, workers: int, *extra: str) -> tuple[float, float, int, str]:
    started = time.monotonic()
    proc = subprocess.run(command(url, out, subset, workers, *extra), cwd=ROOT, capture_output=True, text=True,
                          env=ENV)
    return started, time.monotonic() - started, proc.returncode, proc.stdout + proc.stderr


def facts(out: Path) -> dict:
    records = read_results(out / RESULTS_NAME)  # none when the run wrote no results file
    summary_path = out / "sab-summary.json"
    summary = json.loads(summary_path.read_text()) if summary_path.exists() else {}
    run_info = summary.get("run") or {}
    return {"verdicts": sum(1 for r in records if not r.get("error")),
            "errors": sum(1 for r in records if r.get("error")), "not_run": run_info.get("not_run"),
            "status": run_info.get("status", "no summary"), "reused": run_info.get("reused"),
            "failed_calls": (summary.get("usage") or {}).get("failed_calls")}


def ctrl_c(tmp: Path, subset: str, workers: int, checks: Checks, latency: float = 0.5) -> None:
    """SIGINT to the controller alone after 40 case calls; calls the server got after it."""
    with fake_openai_server(responder=answer, latency=latency) as server:
        proc = subprocess.Popen(command(server.url, tmp / "ctrl-c", subset, workers), cwd=ROOT, env=ENV,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
        while len(server.chat_requests) < 41 and proc.poll() is None:
            time.sleep(0.05)
        signalled = time.monotonic()
        os.kill(proc.pid, signal.SIGINT)
        text = proc.communicate(timeout=300)[0].decode(errors="replace")
        ended = time.monotonic()
        after = [r.received_at - signalled for r in server.chat_requests if r.received_at > signalled]
    f = facts(tmp / "ctrl-c")
    late = max(after) if after else 0.0
    print(f"Ctrl-C to the controller (pid only), -n {workers}, {latency}s per call: {len(after)} calls received "
          f"after the signal (the last {late:.2f}s after it), exit {proc.returncode} after {ended - signalled:.1f}s, "
          f"{f['verdicts']} verdicts kept, status {f['status']}, names --sab-resume: {'--sab-resume' in text}")
    checks.need(proc.returncode == 2 and "--sab-resume" in text and f["verdicts"] > 0,
                f"Ctrl-C ended the run with exit 2, verdicts kept and --sab-resume named (exit {proc.returncode}, "
                f"{f['verdicts']} verdicts)")


WIDTHS = (16, 8, 9, 9, 12, 6, 5, 9, 7, 8, 9, 7)


def row(*cells: object) -> None:
    """One line of the table: fixed-width columns, then the free text."""
    *fixed, free = cells
    print(f"{fixed[0]!s:<{WIDTHS[0]}}" + "".join(f"{c!s:>{w}}" for c, w in zip(fixed[1:], WIDTHS[1:], strict=True))
          + f"  {free}", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenarios", default="dies-500,dies-drop,silent")
    parser.add_argument("--subset", default="all")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--no-ctrl-c", action="store_true", help="skip the Ctrl-C measurement")
    parser.add_argument("--sample", type=int, default=None, help="a sample of N cases of the subset")
    parser.add_argument("--healthy", type=int, default=None, help="calls answered before the endpoint dies")
    add_smoke(parser)
    args = parser.parse_args()
    if args.smoke:
        args.scenarios, args.subset, args.sample, args.workers, args.no_ctrl_c = "dies-500", "mixed", 12, 0, True
        args.healthy = 8
    OPTIONS[:] = [f"--sab-sample={args.sample}"] if args.sample else []
    if args.smoke:  # the breaker trips on few cases
        OPTIONS.append("--sab-max-failures=3")
    checks = Checks()
    print("start-up: run start to the preflight request; 1st case: to the first case's call; death->stop: first "
          "broken answer to the last request; tail: last request to the end of the run")
    row("scenario", "wall s", "start-up", "1st case", "death->stop", "tail", "exit", "verdicts", "errors", "not run",
        "requests", "failed", "status / last line")
    resume_demo: tuple[Endpoint, Path, int] | None = None
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.scenarios.split(","):
            healthy = HEALTHY[name] if args.healthy is None or not HEALTHY[name] else args.healthy
            endpoint = Endpoint(healthy, BROKEN[name], preflight_ok=name != "silent")
            out = Path(tmp) / name
            with fake_openai_server(responder=endpoint) as server:
                started, wall, code, text = run(server.url, out, args.subset, args.workers)
                server_requests = server.chat_requests
                times = [r.received_at for r in server_requests]
                requests = len(times)
                port = server.port
            startup = f"{min(times) - started:.1f}" if times else "-"
            to_stop = f"{max(times) - endpoint.died_at:.1f}" if endpoint.died_at and times else "-"
            f = facts(out)
            last = [line for line in text.splitlines() if line.strip()][-1][:90]
            cases_at = [r.received_at for r in server_requests if r.body.get("max_tokens") != 1]
            first_case = f"{min(cases_at) - started:.1f}" if cases_at else "-"
            tail = f"{started + wall - max(times):.1f}" if times else "-"
            row(name, f"{wall:.1f}", startup, first_case, to_stop, tail, code, f["verdicts"], f["errors"], f["not_run"],
                requests, f["failed_calls"], f"{f['status']} / {last}")
            if name == "silent":  # the endpoint check finds it dead: a usage error before any case
                checks.need(code == 4 and f["status"] == "no summary", f"{name}: refused before any case with exit 4 "
                                                                       f"(exit {code}, {f['status']})")
            else:
                checks.need(code == 2 and f["status"] == "stopped" and f["not_run"],
                            f"{name}: the run stopped with exit 2 and cases not run (exit {code}, {f['status']}, "
                            f"{f['not_run']} not run; {last!r})")
                checks.need(f["verdicts"] > 0 and endpoint.died_at is not None,
                            f"{name}: verdicts kept from before the endpoint died ({f['verdicts']})")
            if resume_demo is None and f["not_run"]:
                resume_demo = (endpoint, out, port)
        if resume_demo is not None:  # same URL (port): --sab-resume refuses results of another base URL
            endpoint, out, port = resume_demo
            endpoint.healed = True
            with fake_openai_server(responder=endpoint, port=port) as server:
                _started, wall, code, _text = run(server.url, out, args.subset, args.workers, "--sab-resume")
                requests = len(server.chat_requests)
            f = facts(out)
            row("resume, healed", f"{wall:.1f}", "", "", "", "", code, f["verdicts"], f["errors"], f["not_run"],
                requests, f["failed_calls"], f"{f['status']}, {f['reused']} verdicts reused")
            checks.need(code in (0, 1) and f["status"] == "resumed" and not f["not_run"] and not f["errors"]
                        and f["reused"] and requests > 0,
                        f"the resume against the healed endpoint finished every case, reusing the verdicts kept "
                        f"(exit {code}, {f['status']}, {f['not_run']} not run, {f['errors']} errors, "
                        f"{f['reused']} reused, {requests} requests)")
        if not args.no_ctrl_c:
            ctrl_c(Path(tmp), args.subset, args.workers, checks)
    return checks.status()


if __name__ == "__main__":
    sys.exit(main())
