"""End-to-end throughput of ``pytest --model X -n 4`` against the fake OpenAI server.

The 130-case default sample, direct strategy (``--strategy`` for another), LLM judge, execution on
the embedded engine, a fake server answering every call after ``--latency`` seconds. C is the
number of calls in flight for the whole run: ``-n W --sab-concurrency C/W``. Every scenario starts
with an empty response cache (``cache on``) or runs with ``--sab-no-cache`` (``cache off``).

Figures, per scenario:

* calls: chat requests the fake server received (each is paid once; the run's own usage must count
  the same number of API calls, shown as ``usage``);
* floor = calls x latency / C: the time the calls take if C are always in flight (the issue's
  definition; it ignores that a case's calls are a chain and that the workers start one by one);
* start-up: the wall of the same ``pytest -n W`` run with the offline agent and the rule judge,
  which makes no call (what pytest, xdist, collection and the reports cost on this machine), the
  median of three runs;
* targets: cache off within 10% of cache on; wall <= 1.2 x floor + start-up at C = 16 and
  <= 1.5 x floor + start-up at C = 64; all 1050 cases at C = 16: wall <= 1.1 x floor.
* worker RSS: the largest peak resident size (VmHWM) of a worker, read from /proc during the run.

The judges are asked at the fake server too (``--judge-base-url``): without it they would go to
OpenAI's API and the run would measure nothing. The bench checks that every run did what it measures
(every case recorded, calls made and counted in the usage, no error) and exits 1 when one did not.

    SAB_DATA=... SAB_THOR_SCENES=... python bench/bench_pytest_throughput.py
    python bench/bench_pytest_throughput.py --smoke    # seconds: 6 cases, -n 0, C = 4, figures not judged
"""

from __future__ import annotations

import argparse
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

from sab_pytest.prompts.interactive import DONE, EXECUTE  # noqa: E402
from sab_pytest.results.files import RESULTS_NAME, read_results  # noqa: E402
from sab_pytest.testing import Reply, fake_openai_server  # noqa: E402
from sab_pytest.testing.fake_replies import judge_in_form  # noqa: E402

#: what the scripted interactive agent does in every episode before it calls done
EPISODE = ("find Mug", "pick Mug")


def responder(request) -> str | Reply:
    """A plan for the agent; a valid verdict for every judge prompt."""
    if request.body.get("model") == "judge":
        return judge_in_form(request)
    if request.tool_names:  # an interactive strategy: a short episode, one tool call per turn
        turn = sum(1 for m in request.messages if m.get("role") == "assistant")
        if turn < len(EPISODE):
            return Reply.tool(EXECUTE, action=EPISODE[turn])
        return Reply.tool(DONE, message="The task is complete.")
    return "1. find Mug\n2. pick Mug\n3. find SinkBasin\n4. put SinkBasin"


def _children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(p) for p in text.split()]


def _peak_rss_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def run_pytest(args: list[str], out: Path) -> tuple[float, int, float, str]:
    """Wall seconds, exit status, the largest worker peak RSS (MB) and the output tail."""
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--sab-out={out}", "--tb=no",
           "-rN", *args]
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "OPENAI_API_KEY": "sk-bench"})
    peak = 0.0
    done = threading.Event()

    def watch() -> None:
        nonlocal peak
        while not done.is_set():
            for child in _children(proc.pid):
                peak = max(peak, _peak_rss_mb(child))
            done.wait(0.2)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    output, _ = proc.communicate()
    wall = time.perf_counter() - started
    done.set()
    watcher.join()
    return wall, proc.returncode, peak, "\n".join(output.splitlines()[-3:])


def online(server, *, workers: int, total: int, cache: bool, subset: list[str], latency: float,
           strategy: str = "direct") -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        server.reset()
        per_worker = max(1, total // max(workers, 1))  # -n 0: one process holds every call in flight
        args = ["--model", "agent", "--judge-model", "judge", f"--base-url={server.url}",
                f"--sab-judge-base-url={server.url}", "-n", str(workers),
                "--sab-concurrency", str(per_worker), "--sab-strategy", strategy, *subset]
        args += [f"--sab-cache={out / 'cache'}"] if cache else ["--sab-no-cache"]
        wall, code, rss, tail = run_pytest(args, out)
        records = read_results(out / RESULTS_NAME)
    calls = len(server.chat_requests)
    judged = sum(1 for r in server.chat_requests if r.body.get("model") == "judge")
    c = per_worker * max(workers, 1)
    return {"judge_calls": judged, "C": c, "cache": "on" if cache else "off", "cases": len(records), "calls": calls,
            "usage": sum(r["usage"].get("api_calls", 0) for r in records), "wall": wall,
            "floor": calls * latency / c, "errors": sum(1 for r in records if r.get("error")), "exit": code,
            "rss": rss, "tail": tail, "max_in_flight": server.max_in_flight}


def offline(workers: int, subset: list[str], checks: Checks) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        wall, code, _, tail = run_pytest(["-n", str(workers), *subset], Path(tmp))
        cases = len(read_results(Path(tmp) / RESULTS_NAME))
    checks.need(code in (0, 1) and cases > 0, f"the offline run -n {workers} ran its cases (exit {code}, "
                                                f"{cases} recorded; {tail!r})")
    return wall


def check_run(checks: Checks, r: dict, wanted: int) -> None:
    """What a model run must show for its figures to mean anything."""
    what = f"C={r['C']} cache {r['cache']}"
    checks.need(r["exit"] in (0, 1), f"{what}: the run ended with exit 0 or 1, not {r['exit']} ({r['tail']!r})")
    checks.need(r["cases"] == wanted, f"{what}: every one of the {wanted} cases recorded, not {r['cases']}")
    checks.need(r["errors"] == 0, f"{what}: no case ended in an error ({r['errors']})")
    checks.need(r["calls"] > r["cases"] and r["judge_calls"] > 0,
                f"{what}: the agent and the judges called the fake server ({r['calls']} calls, "
                f"{r['judge_calls']} of the judges)")
    checks.need(r["usage"] >= r["calls"] - 1, f"{what}: the run's usage counts the calls the server received "
                                              f"({r['usage']} counted, {r['calls']} received, the check aside)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=0.5)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--concurrency", default="4,16,64", help="calls in flight for the whole run")
    parser.add_argument("--no-all", action="store_true", help="skip the 1050-case run")
    parser.add_argument("--strategy", default="direct",
                        help="agent strategy; an interactive one (react ...) plays a scripted 2-action episode")
    parser.add_argument("--sample", type=int, default=None, help="a sample of N cases instead of the 130")
    add_smoke(parser)
    ns = parser.parse_args()
    if ns.smoke:
        ns.sample, ns.workers, ns.concurrency, ns.no_all, ns.latency = 6, 0, "4", True, 0.01
    checks = Checks()
    sample = [f"--sab-sample={ns.sample}"] if ns.sample else []
    wanted = ns.sample or 130
    w = ns.workers
    tries = sorted(offline(w, sample, checks) for _ in range(1 if ns.smoke else 3))  # the median: a cold
    startup = tries[len(tries) // 2]  # first run is not the machine's figure
    startup_serial = startup if ns.smoke and w == 0 else offline(0, sample, checks)
    print(f"start-up (offline run of the same {wanted} cases): -n {w} {startup:.1f} s (median of "
          f"{', '.join(f'{t:.1f}' for t in tries)}), -n 0 {startup_serial:.1f} s")
    with fake_openai_server(responder=responder, latency=ns.latency) as server:
        print(f"{'C':>4} {'cache':>5} {'cases':>5} {'calls':>6} {'usage':>6} {'peak':>5} {'wall s':>7} "
              f"{'floor s':>8} {'ratio':>6} {'target s':>9}  ok   worker RSS")
        rows = []
        for c in (int(x) for x in ns.concurrency.split(",")):
            for cache in (True, False):
                r = online(server, workers=w, total=c, cache=cache, subset=sample, latency=ns.latency,
                           strategy=ns.strategy)
                check_run(checks, r, wanted)
                rows.append(r)
                if not r["calls"]:
                    print(f"C={r['C']} cache {r['cache']}: no call reached the server ({r['tail']!r})")
                    continue
                factor = None if ns.smoke else {16: 1.2, 64: 1.5}.get(r["C"])
                target = factor * r["floor"] + startup if factor else None
                ok = "-" if target is None else ("yes" if r["wall"] <= target and not r["errors"] else "NO")
                print(f"{r['C']:>4} {r['cache']:>5} {r['cases']:>5} {r['calls']:>6} {r['usage']:>6} "
                      f"{r['max_in_flight']:>5} {r['wall']:>7.1f} {r['floor']:>8.1f} "
                      f"{r['wall'] / r['floor']:>6.2f} {target if target else float('nan'):>9.1f}  {ok:<4} "
                      f"{r['rss']:.0f} MB  (errors {r['errors']}, exit {r['exit']})", flush=True)
        for on, off in zip(rows[::2], rows[1::2], strict=True):
            gap = off["wall"] / on["wall"] - 1
            if ns.smoke:
                continue
            print(f"C={on['C']}: cache off vs on {gap:+.1%} ({'ok' if abs(gap) <= 0.10 else 'NO'}, target 10%)")
        if not ns.no_all:
            r = online(server, workers=w, total=16, cache=False, subset=["--sab-subset", "all"], latency=ns.latency,
                       strategy=ns.strategy)
            check_run(checks, r, 1050)
            ratio = r["wall"] / r["floor"] if r["floor"] else float("nan")
            print(f"1050 cases, C=16, cache off: {r['cases']} cases, {r['calls']} calls (usage {r['usage']}), "
                  f"wall {r['wall']:.1f} s, floor {r['floor']:.1f} s, ratio {ratio:.2f} "
                  f"({'ok' if ratio <= 1.1 else 'NO'}, target 1.1), worker RSS {r['rss']:.0f} MB, "
                  f"errors {r['errors']}")
    return checks.status()


if __name__ == "__main__":
    sys.exit(main())
