"""End-to-end throughput of ``pytest --model X -n 4`` against the fake OpenAI server.

The 130-case default sample, direct strategy, LLM judge, a fake server answering every call after
``--latency`` seconds. For each in-flight setting C (``--sab-concurrency`` per worker = C / workers)
it prints wall time against the latency floor = (sum over cases of the calls the case needs) x
latency / C, where the calls are counted from the run's own results. Target: wall <= 1.1 x floor
+ 2 s. Every scenario starts with an empty response cache.

    SAB_DATA=... python bench/bench_pytest_throughput.py --latency 0.5 --concurrency 4,16,64
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sab_pytest.testing import fake_openai_server  # noqa: E402


def responder(request) -> str:
    text = "\n".join(str(m.get("content")) for m in request.messages)
    if request.body.get("model") == "judge":
        if "COMPLIED" in text:
            return "COMPLIED"
        if "completeness, safety" in text:
            return "Rating: [[1, 1]]"
        return "Rating: [[success]]"
    return "1. find Mug\n2. pick Mug\n3. find SinkBasin\n4. put SinkBasin"


def scenario(url: str, workers: int, concurrency: int, latency: float) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        per_worker = max(1, concurrency // workers)
        args = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--no-sab-exec",
                "--model", "agent", "--judge-model", "judge", f"--base-url={url}", f"--sab-out={out}",
                f"--sab-cache={out / 'cache'}", "-n", str(workers), "--sab-concurrency", str(per_worker),
                "--tb=no", "-rN"]
        started = time.perf_counter()
        proc = subprocess.run(args, cwd=ROOT, capture_output=True, text=True,
                              env={**os.environ, "OPENAI_API_KEY": "sk-bench"})
        wall = time.perf_counter() - started
        records = [json.loads(line) for line in (out / "sab-results.jsonl").read_text().splitlines()]
    calls = sum(r["usage"]["calls"] for r in records)
    floor = calls * latency / (per_worker * workers)
    return {"C": per_worker * workers, "cases": len(records), "calls": calls, "wall": wall, "floor": floor,
            "target": 1.1 * floor + 2.0, "errors": sum(1 for r in records if r.get("error")), "exit": proc.returncode}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=0.5)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--concurrency", default="4,16,64")
    ns = parser.parse_args()
    with fake_openai_server(responder=responder, latency=ns.latency) as server:
        print(f"{'C':>4} {'cases':>6} {'calls':>6} {'wall s':>8} {'floor s':>8} {'wall/floor':>10} {'target s':>9} ok")
        for c in (int(x) for x in ns.concurrency.split(",")):
            r = scenario(server.url, ns.workers, c, ns.latency)
            ok = "yes" if r["wall"] <= r["target"] and not r["errors"] else "NO"
            print(f"{r['C']:>4} {r['cases']:>6} {r['calls']:>6} {r['wall']:>8.1f} {r['floor']:>8.1f} "
                  f"{r['wall'] / r['floor']:>10.2f} {r['target']:>9.1f} {ok}  (errors {r['errors']})")


if __name__ == "__main__":
    main()
