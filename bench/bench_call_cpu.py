"""The client's CPU per model call: what a run spends on each call it makes, apart from the wait.

Two ``-n 0`` runs of the same cases, plans not executed, against the fake OpenAI server in this
process (it answers at once; its own CPU is not counted): one with a model agent and LLM judges,
one with the offline refusing agent and the rule judge, which makes no call. The difference of
their CPU time (user + system of the pytest process), divided by the calls the first made, is
what a call costs the client: building the request, the SDK, reading the streamed answer, and
the judging and records around it. The offline run's CPU is pytest's and the plugin's start-up
and the cases' own work. Each figure is the median of ``--repeat`` pairs.

    SAB_DATA=... SAB_THOR_SCENES=... python bench/bench_call_cpu.py [--repeat 3] [--sample 130]
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench_pytest_throughput import responder, run_pytest  # noqa: E402

from sab_pytest.testing import fake_openai_server  # noqa: E402


def cpu_of(args: list[str]) -> float:
    """CPU seconds (user + system) of one pytest run of the benchmark with ``args``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    with tempfile.TemporaryDirectory() as out:
        run_pytest(["--sab-no-exec", "--sab-no-cache", *args], Path(out))
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--sample", type=int, default=130, help="cases of the default subset")
    ns = parser.parse_args()
    sample = [f"--sab-sample={ns.sample}"]
    with fake_openai_server(responder=responder) as server:
        model, offline, calls = [], [], 0
        for _ in range(ns.repeat):
            server.reset()
            model.append(cpu_of(["--model", "agent", "--judge-model", "judge", f"--base-url={server.url}", *sample]))
            calls = len(server.chat_requests)
            offline.append(cpu_of(["--model", "refuse", "--judge-model", "rules", *sample]))
    with_calls, without = statistics.median(model), statistics.median(offline)
    print(f"{ns.sample} cases, {calls} calls (the endpoint check included): model run {with_calls:.2f} s of CPU, "
          f"offline run {without:.2f} s (medians of {ns.repeat})")
    print(f"client CPU per call: {1000 * (with_calls - without) / max(1, calls):.1f} ms")


if __name__ == "__main__":
    main()
