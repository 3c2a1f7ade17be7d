"""The client's CPU per model call: what a run spends on each call it makes, apart from the wait.

Two ``-n 0`` runs of the same cases, plans not executed, against the fake OpenAI server in this
process (it answers at once; its own CPU is not counted): one with a model agent and LLM judges
(both asked at the fake server: ``--judge-base-url``), one with the offline refusing agent and the
rule judge, which makes no call. The difference of their CPU time (user + system of the pytest
process), divided by the calls the first made, is what a call costs the client: building the
request, the SDK, reading the streamed answer, and the judging and records around it. The offline
run's CPU is pytest's and the plugin's start-up and the cases' own work. Each figure is the median
of ``--repeat`` pairs. The bench checks that the model run recorded every case without an error
and that its agent and judges called the fake server, and that the offline run made no call; it
exits 1 otherwise.

    SAB_DATA=... SAB_THOR_SCENES=... python bench/bench_call_cpu.py [--repeat 3] [--sample 130]
    python bench/bench_call_cpu.py --smoke    # seconds: one pair of 4 cases, figures not judged
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
from benchkit import Checks, add_smoke  # noqa: E402

from sab_pytest.results.files import RESULTS_NAME, read_results  # noqa: E402
from sab_pytest.testing import fake_openai_server  # noqa: E402


def cpu_of(args: list[str], checks: Checks, what: str, cases: int) -> float:
    """CPU seconds (user + system) of one pytest run of the benchmark with ``args``; checks that it
    recorded its ``cases`` without an error."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    with tempfile.TemporaryDirectory() as out:
        _wall, code, _rss, tail = run_pytest(["--sab-no-exec", "--sab-no-cache", *args], Path(out))
        records = read_results(Path(out) / RESULTS_NAME)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    errors = sum(1 for r in records if r.get("error"))
    checks.need(code in (0, 1) and len(records) == cases and not errors,
                f"the {what} run recorded its {cases} cases without an error (exit {code}, {len(records)} "
                f"recorded, {errors} errors; {tail!r})")
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--sample", type=int, default=130, help="cases of the default subset")
    add_smoke(parser)
    ns = parser.parse_args()
    if ns.smoke:
        ns.repeat, ns.sample = 1, 4
    checks = Checks()
    sample = [f"--sab-sample={ns.sample}"]
    with fake_openai_server(responder=responder) as server:
        model, offline, calls, judged = [], [], 0, 0
        for _ in range(ns.repeat):
            server.reset()
            model.append(cpu_of(["--model", "agent", "--judge-model", "judge", f"--base-url={server.url}",
                                 f"--sab-judge-base-url={server.url}", *sample], checks, "model", ns.sample))
            calls = len(server.chat_requests)
            judged = sum(1 for r in server.chat_requests if r.body.get("model") == "judge")
            checks.need(calls > ns.sample and judged > 0, f"the model run's agent and judges called the fake server "
                                                          f"({calls} calls, {judged} of the judges)")
            server.reset()
            offline.append(cpu_of(["--model", "refuse", "--judge-model", "rules", *sample], checks, "offline",
                                  ns.sample))
            checks.need(not server.chat_requests, f"the offline run made no call ({len(server.chat_requests)})")
    with_calls, without = statistics.median(model), statistics.median(offline)
    print(f"{ns.sample} cases, {calls} calls ({judged} of the judges, the endpoint check included): model run "
          f"{with_calls:.2f} s of CPU, offline run {without:.2f} s (medians of {ns.repeat})")
    print(f"client CPU per call: {1000 * (with_calls - without) / max(1, calls):.1f} ms")
    return checks.status()


if __name__ == "__main__":
    sys.exit(main())
