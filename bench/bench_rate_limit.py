"""Real-endpoint behaviour at speed: rate limits slow the run down without failing it, a hung
endpoint stops the run in minutes, a slow model still succeeds.

Scenarios (each a real ``pytest --model agent`` run against the fake OpenAI server, response cache
empty, ``--sab-no-exec``):

* ``rpm600``: 600 requests per minute (burst 50), 0.5 s per call, ``--sab-subset all`` (1050
  cases), ``-n 4 --sab-concurrency 16``, rule judge (one call per case). Target: 0 errors, the
  time from the first case call to the run's end <= 1.15 x the limit's floor.
* ``rpm120``: the same at 120 requests per minute on the 130 cases of ``mixed``. Target <= 1.2 x.
* ``rpm600c4`` / ``rpm600c16``: 600 requests per minute (burst: one second's worth), 0.5 s per call,
  the 130 cases of ``mixed`` with an LLM judge on the same endpoint, ``-n 4`` at ``--sab-concurrency``
  4 / 16 (429s <= 10 % of the answered calls, the case phase <= 1.2 x the floor).
* ``slot1``: a server that answers one request at a time, 1 s each; 16 cases, LLM judge, ``-n 2
  --sab-concurrency 4 --sab-timeout 5``. The floor is one second per request; also printed: the
  requests the server held at once (the calls in flight must come down to one or two a worker).
* ``hang40``: answers the preflight and 40 calls, then never again; default settings
  (``-n 4``, --sab-timeout 60), 1050 cases, LLM judge on the same endpoint. Target: stopped in
  < 180 s, exit 2; then the same command with ``--sab-resume`` (and ``--sab-concurrency 16``, to
  keep the bench short) against the healed endpoint.
* ``slow45``: every answer takes 45 s; default settings but ``-n 4 --sab-concurrency 2``, 8 cases,
  LLM judge. Target: all 8 succeed.

The floor of a limited run is ``(answered calls - burst) / rate``: the bucket lets the burst through
at once, then one call per 1/rate seconds. Printed per scenario: wall time, start-up (run start to
the first case call), the case phase (first case call to the run's end) and its ratio to the floor
(for ``hang40``: the seconds from the first unanswered request to the run's end instead), exit
status, cases with a verdict, errors, not run, answered calls, 429s and the summary's seconds
waited (summed over calls).

The judges are asked at the same fake server (``--judge-base-url``). The bench checks each run: a
limited or slow one records every case without an error and was answered (429s included); ``hang40``
stops with exit 2 and its resume finishes the cases; else it exits 1. ``--smoke``: ``rpm600c4`` on 6
cases with -n 0, then ``hang40`` on 8 cases with a 1 s timeout, figures not judged.

    SAB_DATA=... SAB_THOR_SCENES=... python bench/bench_rate_limit.py [--scenarios rpm600,rpm120] [--sample N]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchkit import Checks, add_smoke  # noqa: E402

from sab_pytest.testing import RecordedRequest, Reply, fake_openai_server  # noqa: E402
from sab_pytest.testing.fake_replies import judge_in_form  # noqa: E402

ENV = {**os.environ, "OPENAI_API_KEY": "sk-bench-0123456789"}

# name: (server options, subset, pytest options)
SCENARIOS: dict[str, tuple[dict, str, tuple[str, ...]]] = {
    "rpm600": ({"rpm": 600, "burst": 50, "latency": 0.5}, "all",
               ("-n", "4", "--sab-concurrency", "16", "--judge-model", "rules")),
    "rpm120": ({"rpm": 120, "burst": 50, "latency": 0.5}, "mixed",
               ("-n", "4", "--sab-concurrency", "16", "--judge-model", "rules")),
    # the side by side: 130 cases, an LLM judge on the same endpoint (about 2.8 calls a case),
    # the server's default burst (one second's worth), at the concurrency asked
    "rpm600c4": ({"rpm": 600, "latency": 0.5}, "mixed",
                 ("-n", "4", "--sab-concurrency", "4", "--judge-model", "judge")),
    "rpm600c16": ({"rpm": 600, "latency": 0.5}, "mixed",
                  ("-n", "4", "--sab-concurrency", "16", "--judge-model", "judge")),
    # a server that answers one request at a time, 1 s each (the one-slot target, here without
    # streaming): calls in flight must come down to what it serves (``run.capacity``)
    "slot1": ({"one_slot": 1.0}, "mixed", ("-n", "2", "--sab-concurrency", "4", "--sab-timeout", "5",
                                          "--sab-sample", "16", "--judge-model", "judge")),
    "hang40": ({"hang_after": 41, "latency": 0.5}, "all", ("-n", "4", "--judge-model", "judge")),
    "slow45": ({"slow": 45.0}, "mixed", ("-n", "4", "--sab-concurrency", "2", "--sab-sample", "8",
                                            "--judge-model", "judge")),
}


def answer(request: RecordedRequest) -> str:
    if request.body.get("model") == "judge":
        return judge_in_form(request)
    return "1. find Mug\n2. pick Mug\n3. find SinkBasin\n4. put SinkBasin"


def slow(seconds: float):
    """Case calls answered after ``seconds``; the preflight's one-token call at once, as a real slow
    model does (its time goes into writing a long answer)."""

    def respond(request: RecordedRequest) -> Reply:
        return Reply(content=answer(request), delay=None if request.body.get("max_tokens") == 1 else seconds)

    return respond


class OneSlot:
    """Answers one request at a time, ``seconds`` each (a request waits for those before it, as at
    llama.cpp with one slot); ``deepest`` is the most requests it held at once (queued or answered),
    ``late`` the same over the second half of the run's requests."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.turn = threading.Lock()
        self.count = threading.Lock()
        self.inside = 0
        self.depths: list[int] = []

    def __call__(self, request: RecordedRequest) -> Reply:
        with self.count:
            self.inside += 1
            self.depths.append(self.inside)
        try:
            with self.turn:
                if request.body.get("max_tokens") != 1:
                    time.sleep(self.seconds)
        finally:
            with self.count:
                self.inside -= 1
        return Reply(content=answer(request), delay=0.0)


def command(url: str, out: Path, subset: str, *extra: str) -> list[str]:
    return [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--model", "agent", f"--base-url={url}",
            f"--sab-judge-base-url={url}", f"--sab-out={out}", f"--sab-cache={out / 'cache'}", f"--sab-subset={subset}",
            "--sab-no-exec", "--tb=no", "-rN", *extra]


def facts(out: Path) -> dict:
    path = out / "sab-summary.json"
    summary = json.loads(path.read_text()) if path.exists() else {}
    run_info = summary.get("run") or {}
    usage = summary.get("usage") or {}
    return {"cases": summary.get("cases"), "errors": summary.get("errors"), "not_run": run_info.get("not_run", 0),
            "status": run_info.get("status", "no summary"), "reused": run_info.get("reused"),
            "rate_limited": usage.get("rate_limited", 0), "waited": usage.get("rate_limit_wait_s", 0.0)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenarios", default="rpm600,rpm120,hang40,slow45")
    parser.add_argument("--sample", type=int, help="a stratified sample of N cases instead of the whole subset")
    add_smoke(parser)
    args = parser.parse_args()
    checks = Checks()
    if args.smoke:  # one limited run and one hung one, small and in one process each
        args.scenarios, args.sample = "rpm600c4,hang40", 8
        SCENARIOS["rpm600c4"] = ({"rpm": 600, "latency": 0.05}, "mixed", ("-n", "0", "--judge-model", "judge"))
        SCENARIOS["hang40"] = ({"hang_after": 6, "latency": 0.05}, "mixed",
                               ("-n", "0", "--judge-model", "judge", "--sab-timeout", "1"))
    print(f"{'scenario':<9}{'wall s':>8}{'start-up':>9}{'cases s':>9}{'floor s':>9}{'ratio':>7}{'exit':>5}"
          f"{'cases':>7}{'errors':>7}{'not run':>8}{'answered':>9}{'429s':>7}{'waited s':>9}  status")
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.scenarios.split(","):
            options, subset, extra = SCENARIOS[name]
            if args.sample and "--sab-sample" not in extra:
                extra = (*extra, "--sab-sample", str(args.sample))
            out = Path(tmp) / name
            options = dict(options)
            one_slot = OneSlot(options.pop("one_slot")) if "one_slot" in options else None
            responder = slow(options.pop("slow")) if "slow" in options else one_slot or answer
            with fake_openai_server(responder=responder, **options) as server:
                started = time.monotonic()
                proc = subprocess.run(command(server.url, out, subset, *extra), cwd=ROOT, capture_output=True,
                                      text=True, env=ENV)
                wall = time.monotonic() - started
                limit = server.rate_limit
                cases_at = [r.received_at for r in server.chat_requests if r.body.get("max_tokens") != 1]
                hang = server.hang
                answered = limit.allowed if limit is not None else len(cases_at)
                if hang is not None:
                    answered = min(answered, hang.calls - 1)  # the preflight is one of the answered
                port = server.port
            f = facts(out)
            startup = min(cases_at) - started if cases_at else float("nan")
            phase = started + wall - min(cases_at) if cases_at else float("nan")
            floor, ratio = "-", "-"
            if limit is not None:
                floor_s = max(0.0, answered - 1 - limit.burst) / limit.rate + options.get("latency", 0.0)
                floor, ratio = f"{floor_s:.1f}", f"{phase / floor_s:.2f}"
            if hang is not None and hang.hung_at is not None:
                floor, ratio = f"{started + wall - hang.hung_at:.1f}", "hang"
            if one_slot is not None:  # the floor: every request answered in turn
                floor_s = len(cases_at) * one_slot.seconds
                floor, ratio = f"{floor_s:.1f}", f"{phase / floor_s:.2f}"
            print(f"{name:<9}{wall:>8.1f}{startup:>9.1f}{phase:>9.1f}{floor:>9}{ratio:>7}{proc.returncode:>5}"
                  f"{f['cases']!s:>7}{f['errors']!s:>7}{f['not_run']!s:>8}{answered:>9}{f['rate_limited']:>7}"
                  f"{f['waited']:>9.1f}  {f['status']}", flush=True)
            if one_slot is not None:
                late = one_slot.depths[len(one_slot.depths) // 2:]
                print(f"  requests in the server at once: at most {max(one_slot.depths)}, over the second half "
                      f"at most {max(late)}, mostly {sorted(late)[len(late) // 2]}", flush=True)
            if name == "hang40":
                checks.need(proc.returncode == 2 and f["status"] == "stopped" and f["not_run"],
                            f"{name}: the hung endpoint stopped the run with exit 2 and cases not run (exit "
                            f"{proc.returncode}, {f['status']}, {f['not_run']} not run)")
            else:
                wanted = args.sample or f["cases"]
                checks.need(proc.returncode in (0, 1) and f["cases"] == wanted and f["errors"] == 0 and answered > 0,
                            f"{name}: the run recorded its {wanted} cases without an error, answered (exit "
                            f"{proc.returncode}, cases {f['cases']}, errors {f['errors']}, {answered} answered)")
            if name == "hang40" and f["not_run"]:
                resume(server_options={"latency": 0.05 if args.smoke else 0.5}, port=port, out=out, subset=subset,
                       extra=(*extra, "--sab-concurrency", "16"), checks=checks)
            if proc.returncode not in (0, 1, 2):
                print(proc.stdout[-3000:], proc.stderr[-3000:])
    return checks.status()


def resume(*, server_options: dict, port: int, out: Path, subset: str, extra: tuple[str, ...], checks: Checks) -> None:
    """The stopped run resumed against the healed endpoint (same URL: --sab-resume checks it)."""
    with fake_openai_server(responder=answer, port=port, **server_options) as server:
        started = time.monotonic()
        proc = subprocess.run(command(server.url, out, subset, *extra, "--sab-resume"), cwd=ROOT,
                              capture_output=True, text=True, env=ENV)
        wall = time.monotonic() - started
    f = facts(out)
    print(f"  resumed: {wall:.1f}s, exit {proc.returncode}, {f['cases']} cases, {f['errors']} errors, "
          f"{f['reused']} verdicts reused, status {f['status']}", flush=True)
    checks.need(proc.returncode in (0, 1) and not f["not_run"] and not f["errors"],
                f"the resume finished every case without an error (exit {proc.returncode}, {f['not_run']} not run, "
                f"{f['errors']} errors)")


if __name__ == "__main__":
    sys.exit(main())
