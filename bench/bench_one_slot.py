"""A run against a server with one slot (a small llama.cpp server): does it complete, at the pace the
server can give?

The fake OpenAI server answers one request at a time, ``--answer-s`` (1 s) each, streamed when asked;
a real ``pytest --model agent --judge-model judge -n 2 --sab-concurrency 4 --sab-timeout 5`` runs
``--sample`` (16) cases against it with an empty cache. Issue 30's target: complete, 0 errors,
wall <= 1.3 x (answers x answer_s) + 12 s. ``--no-stream`` makes the server answer whole JSON bodies
(a server that cannot stream), the shape of the issue's report.

Prints wall, exit status, verdicts / errors by kind, the server's answers (turns), the requests it
dropped from its queue because the client closed them, the streams the client closed, and the target.

The judges are asked at the same server (``--judge-base-url``). The bench checks that the run
recorded every case without an error and that the server answered the agent and the judges, and
exits 1 otherwise; outside ``--smoke`` (3 cases, 0.05 s answers, -n 0) the target must be met too.

    SAB_DATA=... python bench/bench_one_slot.py [--no-stream]
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchkit import Checks, add_smoke  # noqa: E402

from sab_pytest.results.files import RESULTS_NAME, read_results  # noqa: E402
from sab_pytest.testing import fake_openai_server  # noqa: E402
from sab_pytest.testing.fake_replies import judge_in_form  # noqa: E402


def answer(request) -> str:
    if request.body.get("model") == "judge":
        return judge_in_form(request)
    return "1. find Mug\n2. pick Mug\n3. find SinkBasin\n4. put SinkBasin"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sample", type=int, default=16)
    parser.add_argument("--answer-s", type=float, default=1.0)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--timeout", type=float, default=5.0)
    parser.add_argument("--no-stream", action="store_true", help="the server answers stream=True with one body")
    add_smoke(parser)
    args = parser.parse_args()
    if args.smoke:
        args.sample, args.answer_s, args.workers = 3, 0.05, 0
    checks = Checks()
    env = {**os.environ, "OPENAI_API_KEY": "sk-bench-0123456789"}
    with tempfile.TemporaryDirectory() as tmp, \
            fake_openai_server(responder=answer, slots=1, answer_s=args.answer_s,
                               streaming=not args.no_stream) as server:
        out = Path(tmp)
        command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--model", "agent",
                   "--judge-model", "judge", f"--base-url={server.url}", f"--sab-judge-base-url={server.url}",
                   f"--sab-out={out}",
                   f"--sab-cache={out / 'cache'}", "-n", str(args.workers), f"--sab-concurrency={args.concurrency}",
                   f"--sab-timeout={args.timeout:g}", f"--sab-sample={args.sample}", "--tb=no", "-rN"]
        started = time.monotonic()
        proc = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, env=env)
        wall = time.monotonic() - started
        slot = server.one_slot
        assert slot is not None
        turns, skipped, closed, requests = slot.turns, slot.skipped, server.streams_closed, len(server.chat_requests)
        judged = sum(1 for r in server.chat_requests if r.body.get("model") == "judge")
        records = read_results(out / RESULTS_NAME)
        summary_path = out / "sab-summary.json"
        summary = json.loads(summary_path.read_text()) if summary_path.exists() else {}
    kinds = collections.Counter(r.get("error_kind") for r in records if r.get("error"))
    verdicts = sum(1 for r in records if not r.get("error"))
    target = 1.3 * turns * args.answer_s + 12.0
    status = (summary.get("run") or {}).get("status", "no summary")
    last = [line for line in (proc.stdout + proc.stderr).splitlines() if line.strip()][-1][:100]
    mode = "whole JSON bodies" if args.no_stream else "streamed"
    print(f"one-slot fake, {args.answer_s:g}s per answer ({mode}), -n {args.workers} --sab-concurrency "
          f"{args.concurrency} --sab-timeout {args.timeout:g}, {args.sample} cases")
    print(f"wall {wall:.1f}s, exit {proc.returncode}, status {status}; {verdicts} verdicts, "
          f"{sum(kinds.values())} errors {dict(kinds)}; {len(records)} of {args.sample} cases recorded")
    print(f"server: {requests} chat requests, {turns} answers (turns), {skipped} dropped from the queue "
          f"(client closed), {closed} streams closed by the client")
    ok = proc.returncode in (0, 1) and not kinds  # 1: some cases failed, which is the model's behaviour
    ok = ok and len(records) == args.sample and wall <= target
    print(f"target: wall <= 1.3 x {turns} answers x {args.answer_s:g}s + 12s = {target:.1f}s, complete, 0 errors: "
          f"{'met' if ok else 'NOT met'}")
    print(f"last line: {last}")
    checks.need(proc.returncode in (0, 1) and len(records) == args.sample and not kinds,
                f"the run recorded its {args.sample} cases without an error (exit {proc.returncode}, {len(records)} "
                f"recorded, errors {dict(kinds)})")
    checks.need(turns > args.sample and judged > 0, f"the one slot answered the agent and the judges ({turns} answers, "
                                                    f"{judged} requests of the judges)")
    if not args.smoke:
        checks.need(ok, "the target is met")
    return checks.status()


if __name__ == "__main__":
    sys.exit(main())
