"""Throughput bench: how close do model-bound runs get to the latency floor?

Simulates what ``pytest --model X -n 4`` does with model calls, without pytest and without an
engine: N worker processes (like xdist workers) take cases one at a time from a shared queue (like
xdist's load scheduling) and run each as two sequential calls, agent then judge (the judge prompt
contains the agent's answer). A fake OpenAI-compatible server on loopback answers every call after
a fixed latency. With ``--concurrency C`` each worker also runs a ``Prefetcher`` of C / N threads
that walks the whole case list ahead of the tests, sharing one response cache directory.

Floor = cases x calls x latency / concurrency: the time the API alone needs at that concurrency.
Target: wall <= 1.1 x floor + 2 s. "chain floor" is the floor once the sequential agent -> judge
chain is counted (whole cases per concurrent slot): the real lower bound at high concurrency.
Wall time is measured from the moment every worker is ready (SDK imported, client built) to the
moment the last worker has finished its last case.

    python bench/bench_throughput.py                      # 130 cases, 0.5 s, 4 workers, C = 4/16/64
    python bench/bench_throughput.py --concurrency 16,64   # skip the slow rows
"""

from __future__ import annotations

import argparse
import math
import multiprocessing as mp
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CALLS_PER_CASE = 2
BENCH_KEY = "sk-bench-not-a-real-key"


def run_case(model: Any, case: int) -> bool:
    """Agent call, then judge call on the agent's answer; True when both were cache hits."""
    agent = model.complete([{"role": "user", "content": f"Plan the task of case {case}."}])
    judge = model.complete([{"role": "user", "content": f"Judge this plan: {agent.answer}"}], role="judge")
    return agent.cache_hit and judge.cache_hit


def worker(url: str, cache_dir: str, cases: int, threads: int, queue: Any, ready: Any, go: Any,
           results: Any) -> None:
    """One simulated xdist worker: prefetcher (optional) + sequential "tests" from the queue."""
    from sab_pytest.cache import ResponseCache
    from sab_pytest.models import OpenAIChatModel
    from sab_pytest.prefetch import Prefetcher

    model = OpenAIChatModel("bench-model", base_url=url, api_key=BENCH_KEY, timeout=30.0, max_retries=2,
                            cache=ResponseCache(cache_dir))
    model._sdk_client()
    ready.release()
    go.wait()
    prefetcher = Prefetcher(lambda c: run_case(model, c), list(range(cases)), threads) if threads else None
    if prefetcher:
        prefetcher.start()
    done = hits = 0
    while True:
        case = queue.get()
        if case is None:
            break
        if prefetcher:
            prefetcher.mark_reached(case)
        hits += run_case(model, case)
        done += 1
    finished = time.monotonic()
    stats = prefetcher.stats.__dict__ if prefetcher else {}
    if prefetcher:  # as the plugin does at session end: let calls in flight land, briefly
        prefetcher.stop(wait=2.0)
    results.put({"pid": os.getpid(), "finished": finished, "tests": done, "test_hits": hits,
                 "prefetch": stats})


@dataclass
class Row:
    label: str
    concurrency: int
    wall: float
    floor: float
    chain_floor: float  # a case's calls are sequential: whole cases per slot, rounded up
    requests: int
    unique_requests: int
    test_hits: int
    prefetch: dict[str, int]

    @property
    def target(self) -> float:
        return 1.1 * self.floor + 2.0


def scenario(server: Any, *, cases: int, workers: int, concurrency: int, prefetch: bool,
             latency: float) -> Row:
    ctx = mp.get_context("spawn")
    queue, results = ctx.Queue(), ctx.Queue()
    ready, go = ctx.Semaphore(0), ctx.Event()
    for case in range(cases):
        queue.put(case)
    for _ in range(workers):
        queue.put(None)
    threads = concurrency // workers if prefetch else 0
    server.reset()
    with tempfile.TemporaryDirectory(prefix="sab-bench-cache-") as cache_dir:
        args = (server.url, cache_dir, cases, threads, queue, ready, go, results)
        procs = [ctx.Process(target=worker, args=args) for _ in range(workers)]
        for p in procs:
            p.start()
        for _ in procs:
            ready.acquire()
        start = time.monotonic()
        go.set()
        reports = [results.get(timeout=600) for _ in procs]
        for p in procs:
            p.join(timeout=30)
    wall = max(r["finished"] for r in reports) - start  # monotonic is system-wide on Linux
    bodies = [str(r.body.get("messages")) for r in server.chat_requests]
    totals: dict[str, int] = {}
    for r in reports:
        for key, value in r["prefetch"].items():
            totals[key] = totals.get(key, 0) + value
    label = f"{workers} workers, no prefetch"
    if prefetch:
        label = f"{workers} workers + prefetch {threads}/worker"
    return Row(label=label, concurrency=concurrency, wall=wall,
               floor=cases * CALLS_PER_CASE * latency / concurrency,
               chain_floor=math.ceil(cases / concurrency) * CALLS_PER_CASE * latency,
               requests=len(bodies), unique_requests=len(set(bodies)),
               test_hits=sum(r["test_hits"] for r in reports), prefetch=totals)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=130)
    parser.add_argument("--latency", type=float, default=0.5, help="seconds per model call")
    parser.add_argument("--workers", type=int, default=4, help="worker processes (like pytest -n)")
    parser.add_argument("--concurrency", default="4,16,64", help="total concurrent calls with prefetch")
    parser.add_argument("--no-serial", action="store_true", help="skip the no-prefetch baseline")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from sab_pytest.testing import fake_openai_server

    levels = [int(c) for c in args.concurrency.split(",") if c.strip()]
    rows: list[Row] = []
    with fake_openai_server(latency=args.latency) as server:
        print(f"fake server {server.url}, latency {args.latency}s, {args.cases} cases x {CALLS_PER_CASE} "
              f"calls, {args.workers} worker processes", flush=True)
        plans = [] if args.no_serial else [(args.workers, False)]
        plans += [(c, True) for c in levels]
        for concurrency, prefetch in plans:
            row = scenario(server, cases=args.cases, workers=args.workers, concurrency=concurrency,
                           prefetch=prefetch, latency=args.latency)
            rows.append(row)
            print(f"  done: {row.label}: {row.wall:.2f}s", flush=True)
    header = (f"{'scenario':34} {'conc':>4} {'wall s':>7} {'floor s':>7} {'wall/floor':>10} {'target s':>8} "
              f"{'ok':>3} {'chain floor':>11} {'API calls':>9} {'dupes':>5} {'test hits':>9}  prefetch")
    print()
    print(header)
    print("-" * len(header))
    failed = False
    for row in rows:
        ok = row.wall <= row.target and row.requests == row.unique_requests
        failed |= not ok
        stats = ", ".join(f"{k}={v}" for k, v in row.prefetch.items()) or "-"
        hits = f"{row.test_hits}/{args.cases}"
        print(f"{row.label:34} {row.concurrency:>4} {row.wall:>7.2f} {row.floor:>7.2f} "
              f"{row.wall / row.floor:>10.2f} {row.target:>8.2f} {'yes' if ok else 'NO':>3} "
              f"{row.chain_floor:>11.2f} {row.requests:>9} {row.requests - row.unique_requests:>5} "
              f"{hits:>9}  {stats}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
