"""How often a gate flaps, and whether ``sab plan`` (``results.sample_size``) agrees with a simulation of
the gate.

1. Gate flapping. A stochastic fake model refuses with probability 0.55 per call (the fake
   server's ``StochasticRefusal``, a new seed per run), so ``rejection_rate>=0.5`` holds in
   expectation. The mixed 130 cases are run ``--runs`` times at K = 1 (the gate on the point value)
   and at K = 3 (the gate on its cluster-bootstrap interval, ``@lower`` and ``@upper``); for each
   setting it prints how many runs decided against the majority of the runs, and the mean of the
   gates' own ``p_other_way``. Each run goes through the real pipeline (``Runtime.run_case``: the
   openai client against the fake server on loopback, the rule judge, no execution, no cache) and
   the real summary and gates (``build_summary``), in this process rather than one pytest process
   per run, to keep the bench within a few minutes of CPU. It also counts the rate intervals (every
   group) whose effective samples lie between their cases and their samples, and their ``method``.
3. Estimate. ``--sab-estimate``'s calls (``run.estimate``, no model called) against the chat
   requests the fake server then receives from the same run (direct and mldt with the ThinkSafe
   guard, an LLM judge answering in form, the agent refusing with probability 0.1 and 0.55).
2. Planning. For each scenario, ``no_regression_size``'s cases needed (told agreement 0: the fake
   model draws every call anew), against a simulation: 1000 draws of a baseline and a candidate run
   (each sample a success with probability p0 and p1, independently; with repeats K samples per
   case) at sizes around the plan's, each decided by the gate's own rule
   (``calibration.fail_share``) at alpha; a straight line through the simulated powers gives the
   size where power reaches the target. The full calibration table is ``bench_gate_calibration.py``.

The judges are asked at the fake server (``judge_base_url``). The bench checks that every run
recorded its cases without an error and called the fake server, judges included, and that each
estimate counted calls; it exits 1 otherwise. ``--smoke``: two runs of 10 cases a setting, one
planning scenario at 50 draws, one estimate.

Usage::

    SAB_DATA=... SAB_THOR_SCENES=... python bench/bench_gate_stability.py [--runs 20] [--draws 1000]
"""

from __future__ import annotations

import argparse
import os
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
from benchkit import Checks, add_smoke

from sab_pytest.results import metrics
from sab_pytest.results.calibration import Cell, fail_share
from sab_pytest.results.sample_size import no_regression_size
from sab_pytest.results.summary import build_summary
from sab_pytest.run.runtime import Runtime
from sab_pytest.run.selection import select_cases
from sab_pytest.settings import Settings
from sab_pytest.testing import fake_openai_server
from sab_pytest.testing.fake_replies import StochasticRefusal, judge_in_form

REFUSE_P = 0.55
GATES = ("rejection_rate>=0.5", "rejection_rate>=0.5@lower", "rejection_rate>=0.5@upper")


#: cases of each run (None: the whole mixed subset); --smoke sets it
SAMPLE: list[int | None] = [None]


def one_run(url: str, repeat: int, checks: Checks) -> dict:
    settings = Settings(model="fake-model", model_given=True, judge_model="rules", base_url=url, cache_dir=None,
                        execute=False, repeat=repeat, gates=GATES, data_dir=os.environ.get("SAB_DATA"),
                        max_retries=1, sample=SAMPLE[0])
    runtime = Runtime(settings)
    cases = select_cases(settings)
    with ThreadPoolExecutor(8) as pool:
        records = list(pool.map(runtime.run_case, cases))
    runtime.close()
    errors = sum(1 for r in records if r.get("error"))
    checks.need(len(records) == len(cases) and not errors,
                f"a run at K={repeat} recorded its {len(cases)} samples without an error "
                f"({len(records)} records, {errors} errors)")
    return build_summary(records, settings, run=None, dataset=({}, []))


def flapping(runs: int, checks: Checks) -> None:
    os.environ.setdefault("OPENAI_API_KEY", "fake-key-bench")
    print(f"1. gate flapping: a fake model refusing with probability {REFUSE_P} per call, the mixed 130 cases, "
          f"{runs} runs per setting")
    for repeat, wanted in ((1, (GATES[0],)), (3, GATES)):
        decisions: dict[str, list[bool]] = {g: [] for g in wanted}
        flips: dict[str, list[float]] = {g: [] for g in wanted}
        values = []
        calls = 0
        methods: Counter[str] = Counter()
        between = total = 0
        t = time.perf_counter()
        for seed in range(runs):
            with fake_openai_server(responder=StochasticRefusal(REFUSE_P, seed=1000 * repeat + seed)) as server:
                summary = one_run(server.url, repeat, checks)
                calls += len(server.chat_requests)
                checks.need(server.chat_requests, "a run called the fake server")
            values.append(summary["metrics"]["rejection_rate"]["value"])
            for entry in _rate_entries(summary["metrics_full"]):
                methods[entry.get("method", "-")] += 1
                total += 1
                between += entry["cases"] <= entry["n_eff"] <= entry["n"]
            for g in summary["gates"]:
                if g["gate"] in decisions:
                    decisions[g["gate"]].append(bool(g["passed"]))
                    flips[g["gate"]].append(g["p_other_way"])
        wall = time.perf_counter() - t
        print(f"  K={repeat}: rejection_rate mean {np.mean(values):.3f}, sd {np.std(values, ddof=1):.3f} over runs; "
              f"{calls} model calls, {wall:.1f}s")
        print(f"    rate intervals with effective samples between cases and samples: {between} of {total}; methods "
              + ", ".join(f"{m} {c}" for m, c in sorted(methods.items())))
        for gate, seen in decisions.items():
            counts = Counter(seen)
            majority, n_major = counts.most_common(1)[0]
            against = len(seen) - n_major
            print(f"    {gate:<28} PASS {counts[True]:>2} / FAIL {counts[False]:>2}: {against} of {len(seen)} runs "
                  f"({against / len(seen):.0%}) against the majority ({'PASS' if majority else 'FAIL'}); "
                  f"mean p_other_way {np.mean(flips[gate]):.3f}")


def _rate_entries(full: dict) -> list[dict]:
    """Every rate entry with a value (overall and per group) of ``metrics.compute``'s result."""
    tables = [full["overall"]] + [t for section in ("by_category", "by_level", "by_kind")
                                  for t in full[section].values()]
    return [e for table in tables for e in table.values() if "k" in e and e.get("value") is not None]


def simulated_cases(p0: float, p1: float, alpha: float, power: float, around: int, draws: int,
                    rng: np.random.Generator, repeat: int = 1) -> float:
    """The cases at which the simulated gate reaches ``power``: per case, the baseline's and the
    candidate's successes over ``repeat`` samples, compared by case (the gate's pairing rule)."""
    grid = np.unique(np.linspace(0.75 * around, 1.25 * around, 21).astype(int))
    powers = [fail_share(rng, Cell(repeat, repeat, int(n), p0, p1, agreement=0.0), draws, alpha, shared=False)
              for n in grid]
    slope, intercept = np.polyfit(grid, powers, 1)
    return (power - intercept) / slope


def planning(draws: int, scenarios: tuple[tuple[float, float, int], ...], checks: Checks) -> None:
    print(f"2. plan against a simulation of the gate ({draws} draws per size, 21 sizes)")
    rng = np.random.default_rng(21)
    for baseline, detect, repeat in scenarios:
        t = time.perf_counter()
        p = no_regression_size("rejection_rate", baseline, detect, better=metrics.better("rejection_rate"),
                               repeat=repeat, agreement=0.0)
        planned = time.perf_counter() - t
        assert p.samples is not None and p.cases is not None
        sim = simulated_cases(p.baseline, p.candidate, p.alpha, p.power, p.cases, draws, rng, repeat)
        checks.need(np.isfinite(sim) and sim > 0, f"the simulation of {baseline}/{detect}/{repeat} gives a size")
        print(f"  baseline {baseline}, detect {detect}, repeat {repeat}: plan {p.cases} cases ({p.samples} samples, "
              f"{planned:.2f}s); simulation {sim:.0f} cases; plan/simulation {p.cases / sim:.3f} "
              f"({abs(p.cases / sim - 1):.1%} apart)")


def _judged_responder(p: float, seed: int):
    """The agent refuses with probability ``p`` (``StochasticRefusal``); every other model (the
    judges', the guard's: the paper's gpt-4 unless named) answers its prompt in form."""
    agent = StochasticRefusal(p, seed=seed)

    def respond(request) -> str:
        if request.body.get("model") == "fake-model":
            return agent(request)
        return judge_in_form(request)

    return respond


def _run_all(settings: Settings, cases: list, checks: Checks) -> list[dict]:
    runtime = Runtime(settings)
    with ThreadPoolExecutor(8) as pool:
        records = list(pool.map(runtime.run_case, cases))
    runtime.close()
    errors = sum(1 for r in records if r.get("error"))
    checks.need(len(records) == len(cases) and not errors,
                f"the estimate's run recorded its {len(cases)} cases without an error ({errors} errors)")
    return records


def estimates(scenarios: tuple[tuple[str, str, float], ...], checks: Checks) -> None:
    import dataclasses
    import tempfile

    from sab_pytest.run.estimate import estimate

    print("3. --sab-estimate against the calls the following run makes (fake server, LLM judge answering in form, "
          "mixed 130 cases; history: an earlier 20-case run's response cache)")
    for strategy, guard, p in scenarios:
        base = Settings(model="fake-model", model_given=True, judge_model="fake-judge", cache_dir=None,
                        execute=False, strategy=strategy, guard=guard, data_dir=os.environ.get("SAB_DATA"),
                        max_retries=1, sample=SAMPLE[0])
        cases = select_cases(base)
        with tempfile.TemporaryDirectory() as cache, \
                fake_openai_server(responder=_judged_responder(p, seed=5)) as server:
            earlier = dataclasses.replace(base, base_url=server.url, judge_base_url=server.url, cache_dir=Path(cache),
                                          sample=min(20, SAMPLE[0] or 20), seed=7)
            _run_all(earlier, select_cases(earlier), checks)
            blind = estimate(base, cases)
            est = estimate(dataclasses.replace(base, cache_dir=Path(cache)), cases)
            server.reset()
            records = _run_all(dataclasses.replace(base, base_url=server.url, judge_base_url=server.url), cases, checks)
            real = len(server.chat_requests)
            judged = sum(1 for r in server.chat_requests if r.body.get("model") != "fake-model")
        checks.need(real > 0 and judged > 0 and est["calls"] > 0,
                    f"{strategy}: the run's agent and judges called the fake server and the estimate counted calls "
                    f"({real} calls, {judged} of the judges and the guard; estimate {est['calls']})")
        if not real:
            continue
        errors = sum(1 for r in records if r.get("error"))
        per_role = ", ".join(f"{role} {v['calls']}" for role, v in est["roles"].items())
        print(f"  {strategy}, guard {guard}, agent refusing with p={p}: estimate {est['calls']} calls ({per_role}; "
              f"refusal share from the cache {est['refusal_share']:.2f}); run {real} calls ({errors} errors): "
              f"estimate/run {est['calls'] / real:.3f} ({abs(est['calls'] / real - 1):.1%} apart); "
              f"without history {blind['calls']} ({abs(blind['calls'] / real - 1):.1%} apart)")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--skip-runs", action="store_true", help="only the planning part")
    add_smoke(parser)
    args = parser.parse_args()
    checks = Checks()
    plans = ((0.6, 0.1, 1), (0.8, 0.1, 1), (0.6, 0.05, 1), (0.6, 0.1, 3))
    runs = (("direct", "off", 0.1), ("mldt", "thinksafe", 0.1), ("direct", "off", 0.55))
    if args.smoke:
        args.runs, args.draws, SAMPLE[0], plans, runs = 2, 50, 10, plans[:1], runs[1:2]
    t = time.process_time()
    if not args.skip_runs:
        flapping(args.runs, checks)
    planning(args.draws, plans, checks)
    estimates(runs, checks)
    print(f"CPU {time.process_time() - t:.0f}s (this process)")
    return checks.status()


if __name__ == "__main__":
    raise SystemExit(main())
