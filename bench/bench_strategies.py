"""Cost of each text strategy per case: model calls, wall time and tokens at a fixed API latency.

Runs every strategy over a few made-up cases through the real ``ChatClient`` against the
fake OpenAI-compatible server on loopback, whose latency stands in for a real API. Wall time per
case is then dominated by ``calls x latency``: the figure that tells a user what ``mldt`` (3 calls)
costs against ``direct`` (1) before spending money on a real model. It checks that every strategy
called the server and came back with a plan, and that the server received the calls the strategies
counted, and exits 1 otherwise (so does a client that is gone: ``ChatClient`` missing).

    python bench/bench_strategies.py [--latency 0.2] [--cases 5]
    python bench/bench_strategies.py --smoke    # one case, no latency
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchkit import Checks, add_smoke

from sab_pytest.agents.registry import INTERACTIVE, STRATEGIES, AgentModels, AgentSpec, make_agent
from sab_pytest.dataset import Case
from sab_pytest.outcome import ModelCall

#: Made-up instructions (not dataset tasks), a mix of the shapes the benchmark has.
INSTRUCTIONS = (
    "Put the Apple in the Fridge.",
    "Fill the Kettle with water and place it on the StoveBurner.",
    "Switch on the DeskLamp and open the Laptop.",
    "Slice the Bread and leave the Knife in the Sink.",
    "Empty the Mug and put it in the Cabinet.",
    "Take the Pillow off the Sofa and put it on the ArmChair.",
)

PLAN = "1. find Apple\n2. pick Apple\n3. find Fridge\n4. open Fridge\n5. put Fridge\n6. close Fridge"
PROGRAM = ('def task():\n    find("Apple")\n    pick("Apple")\n    find("Fridge")\n    open("Fridge")\n'
           '    put("Fridge")\n    close("Fridge")')


def answer_for(last_user: str) -> str:
    """A plausible answer for each strategy's turn, so that extraction runs on realistic shapes."""
    if "from robot import" in last_user:
        return PROGRAM
    return PLAN


def make_case(i: int, instruction: str) -> Case:
    return Case(id=f"safe_detailed-{i:04d}", kind="safe_detailed", safety="safe", instruction=instruction,
                reference_steps=(), scene="FloorPlan1", final_state=None, risk_category=None,
                risk_label_raw=None, abstraction_level=None, row=i)


class InProcessModel:
    """Fallback when the real client is missing: answers at once, so only calls/tokens are meaningful."""

    name = "in-process"

    def complete(self, messages: list[dict[str, Any]], *, role: str = "agent",
                 max_tokens: int | None = None) -> ModelCall:
        answer = answer_for(messages[-1]["content"])
        prompt_chars = sum(len(m["content"]) for m in messages)
        return ModelCall(model=self.name, messages=messages, answer=answer, role=role,
                         prompt_tokens=prompt_chars // 4 + 1, completion_tokens=len(answer) // 4 + 1)


def real_client(url: str) -> Any | None:
    """``ChatClient`` pointed at the fake server, or None while it does not exist."""
    from sab_pytest import models

    if not hasattr(models, "ChatClient"):
        return None
    return models.chat_client("gpt-4o", base_url=url, api_key="sk-bench-not-a-secret", temperature=0.0,
                                  timeout=30.0, max_retries=0, cache=None)


def bench(model: Any, cases: list[Case], timed: bool) -> list[dict[str, Any]]:
    rows = []
    for strategy in (s for s in STRATEGIES if s not in INTERACTIVE):  # the text ones; acting needs an engine
        agent = make_agent(AgentSpec(model.name, strategy=strategy), AgentModels(chat=model))
        walls, calls, ptok, ctok, steps = [], [], [], [], []
        for case in cases:
            start = time.perf_counter()
            outcome = agent.run(case)
            walls.append(time.perf_counter() - start)
            calls.append(len(outcome.calls))
            ptok.append(sum(c.prompt_tokens for c in outcome.calls))
            ctok.append(sum(c.completion_tokens for c in outcome.calls))
            steps.append(len(outcome.steps))
        rows.append({"strategy": strategy, "calls": statistics.mean(calls),
                     "wall": statistics.mean(walls) if timed else None,
                     "wall_max": max(walls) if timed else None, "prompt_tokens": statistics.mean(ptok),
                     "completion_tokens": statistics.mean(ctok), "steps": statistics.mean(steps)})
    return rows


def print_table(rows: list[dict[str, Any]], latency: float, n: int, client: str) -> None:
    print(f"\n{n} made-up cases per strategy, {client}, fake-server latency {latency:.3f} s per call\n")
    print(f"{'strategy':<12} {'calls/case':>10} {'wall s/case':>12} {'max s':>7} {'overhead s':>11} "
          f"{'prompt tok':>11} {'compl tok':>10} {'steps':>6}")
    for r in rows:
        if r["wall"] is None:
            wall = mx = over = "n/a"
        else:
            wall, mx = f"{r['wall']:.3f}", f"{r['wall_max']:.3f}"
            over = f"{r['wall'] - r['calls'] * latency:+.3f}"
        print(f"{r['strategy']:<12} {r['calls']:>10.1f} {wall:>12} {mx:>7} {over:>11} "
              f"{r['prompt_tokens']:>11.0f} {r['completion_tokens']:>10.0f} {r['steps']:>6.1f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=0.2, help="fake server latency per call (s)")
    parser.add_argument("--cases", type=int, default=5, help="made-up cases per strategy (max 6)")
    add_smoke(parser)
    args = parser.parse_args(argv)
    if args.smoke:
        args.latency, args.cases = 0.0, 1
    checks = Checks()
    cases = [make_case(i, text) for i, text in enumerate(INSTRUCTIONS[: args.cases])]

    from sab_pytest.testing import fake_openai_server

    with fake_openai_server(latency=args.latency, responder=lambda r: answer_for(r.last_user_message)) as srv:
        client = real_client(srv.url)
        if client is None:
            print("ChatClient not available: in-process model, calls and tokens only")
            print_table(bench(InProcessModel(), cases, timed=False), args.latency, len(cases), "in-process")
            checks.need(False, "the real client (sab_pytest.models.ChatClient) is there to measure")
            return checks.status()
        client.complete([{"role": "user", "content": "warm-up"}])  # SDK import + connection: not a strategy's cost
        srv.reset()
        rows = bench(client, cases, timed=True)
        print_table(rows, args.latency, len(cases), "ChatClient -> fake server on 127.0.0.1")
        print(f"\nrequests served: {len(srv.chat_requests)} (after one warm-up call)")
        for r in rows:
            checks.need(r["calls"] >= 1 and r["steps"] >= 1, f"{r['strategy']}: called the server and planned steps "
                                                               f"({r['calls']} calls, {r['steps']} steps a case)")
        counted = round(sum(r["calls"] for r in rows) * len(cases))
        checks.need(counted == len(srv.chat_requests), f"the server received the calls the strategies counted "
                                                       f"({len(srv.chat_requests)} received, {counted} counted)")
    return checks.status()


if __name__ == "__main__":
    raise SystemExit(main())
