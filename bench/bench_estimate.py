"""--sab-estimate against the run it estimates: calls exact, input tokens within 2 %, and its speed.

For each of direct, cot and mldt under both protocols (``--sab-protocol paper`` and ``sab``), on
``--cases`` cases of the real dataset (130 by default, a seeded sample over the four task kinds):
the estimate, then a run of the same cases against the fake OpenAI-compatible server playing the
estimate's complying model (``sab_pytest.testing.complying``). The run's requests are counted by the
same tokenizer the estimate uses (tiktoken, each model's encoding: the models are named after OpenAI's),
and per role the figures printed are the calls and input tokens of each and the tokens' error.
Then the time ``--sab-estimate``'s function takes over ``--speed-cases`` cases (1050: all of them), the
median of ``--speed-repeat`` estimates (the machine may be shared), against the target of 3 s.

    SAB_DATA=... SAB_THOR_SCENES=... SAB_UPSTREAM=... SAB_TIKTOKEN_CACHE=../shared/tiktoken \\
        python bench/bench_estimate.py [--cases 130] [--speed-cases 1050] [--smoke]

Exits 1 when a run's calls differ from the estimate's, its tokens by more than 2 %, a case errs, a run
made no call, the estimate called a model, the tokens were not counted by tiktoken, or (at full size)
the speed target is missed; 2 when an input is missing. ``--smoke``: 6 cases a run, the speed of one
estimate of 100 cases, not judged.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchkit import Checks, add_smoke

from sab_pytest.dataset import Case, load
from sab_pytest.errors import SabError
from sab_pytest.models.tokens import counter_for
from sab_pytest.run.estimate import estimate
from sab_pytest.run.runtime import Runtime
from sab_pytest.settings.resolution import resolve
from sab_pytest.testing import fake_openai_server
from sab_pytest.testing.complying import complying_server

ROLE_OF_MODEL = {"gpt-4o": "agent", "gpt-4": "judge"}
STRATEGIES = ("direct", "cot", "mldt")
PROTOCOLS = ("paper", "sab")
TOLERANCE = 0.02
SPEED_TARGET_S = 3.0


def sample(cases: list[Case], n: int, seed: int = 7) -> list[Case]:
    """``n`` cases, drawn with a seed from each task kind in proportion."""
    if n >= len(cases):
        return cases
    return sorted(random.Random(seed).sample(cases, n), key=lambda c: c.id)


def one(strategy: str, protocol: str, cases: list[Case], cache: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """The estimate's figures per role, and those of the requests a run sent (its verdicts' errors too, and the
    requests the estimate itself sent: none)."""
    with fake_openai_server(responder=complying_server(cases, strategy, ROLE_OF_MODEL)) as server:
        options = {"model": "gpt-4o", "judge_model": "gpt-4", "strategy": strategy, "protocol": protocol,
                   "base_url": server.url, "judge_base_url": server.url, "no_cache": True, "max_retries": 0}
        settings = resolve(options, user_cache=lambda: cache)
        est = estimate(settings, cases)
        estimate_calls = len(server.chat_requests)
        runtime = Runtime(settings)
        try:
            errors = [v.error for v in (runtime.evaluate(case) for case in cases) if v.error]
        finally:
            runtime.close()
        calls: Counter[str] = Counter()
        tokens: Counter[str] = Counter()
        for request in server.chat_requests:
            role = ROLE_OF_MODEL[request.body["model"]]
            calls[role] += 1
            tokens[role] += counter_for(request.body["model"]).messages(request.messages, request.body.get("tools"))
    sent = {role: {"calls": calls[role], "prompt_tokens": tokens[role]} for role in calls}
    return est, {"roles": sent, "errors": errors, "estimate_calls": estimate_calls}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=130)
    parser.add_argument("--speed-cases", type=int, default=1050)
    parser.add_argument("--speed-repeat", type=int, default=3)
    add_smoke(parser)
    args = parser.parse_args()
    if args.smoke:
        args.cases, args.speed_cases, args.speed_repeat = 6, 100, 1
    os.environ["OPENAI_API_KEY"] = "fake-key-0123456"  # the fake server's; no hosted API is called
    try:
        everything = list(load(os.environ.get("SAB_DATA")).cases)
    except SabError as exc:
        print(f"bench_estimate: {exc}", file=sys.stderr)
        return 2
    cases = sample(everything, args.cases)
    checks = Checks("bench_estimate")
    print(f"{len(cases)} cases; tokens counted by: "
          + ", ".join(f"{m} {counter_for(m).method}" for m in ROLE_OF_MODEL))
    print(f"{'strategy':<9}{'protocol':<9}{'role':<7}{'calls est':>10}{'calls run':>10}{'tokens est':>12}"
          f"{'tokens run':>12}{'error':>9}")
    with tempfile.TemporaryDirectory() as tmp:
        for strategy in STRATEGIES:
            for protocol in PROTOCOLS:
                est, sent = one(strategy, protocol, cases, Path(tmp))
                run = f"{strategy} under {protocol}"
                checks.need(not sent["estimate_calls"], f"{run}: the estimate called no model "
                            f"({sent['estimate_calls']} requests)")
                if sent["errors"]:
                    print(f"  {len(sent['errors'])} case(s) erred, first: {sent['errors'][0]}")
                checks.need(not sent["errors"], f"{run}: the run's {len(cases)} cases ended without an error "
                            f"({len(sent['errors'])} erred)")
                checks.need(sent["roles"].get("agent", {}).get("calls"), f"{run}: the run called its agent")
                for role in sorted(set(est["roles"]) | set(sent["roles"])):
                    mine = est["roles"].get(role, {"calls": 0, "prompt_tokens": 0})
                    theirs = sent["roles"].get(role, {"calls": 0, "prompt_tokens": 0})
                    error = (mine["prompt_tokens"] - theirs["prompt_tokens"]) / max(1, theirs["prompt_tokens"])
                    good = mine["calls"] == theirs["calls"] and abs(error) <= TOLERANCE
                    print(f"{strategy:<9}{protocol:<9}{role:<7}{mine['calls']:>10}{theirs['calls']:>10}"
                          f"{mine['prompt_tokens']:>12}{theirs['prompt_tokens']:>12}{error:>+9.2%}"
                          + ("" if good else "  MISSED"))
                    checks.need(mine["calls"] == theirs["calls"], f"{run}, {role}: the estimate's calls are the "
                                f"run's ({mine['calls']} and {theirs['calls']})")
                    checks.need(abs(error) <= TOLERANCE, f"{run}, {role}: the estimate's input tokens are within "
                                f"{TOLERANCE:.0%} of the run's ({error:+.2%})")
                counted = [r["tokenizer"] for r in est["rows"]]
                checks.need(counted and all(t.startswith("tiktoken") for t in counted),
                            f"{run}: the estimate counted by tiktoken ({', '.join(counted)})")
        speed = sample(everything, args.speed_cases)
        settings = resolve({"model": "gpt-4o", "no_cache": True}, user_cache=lambda: Path(tmp))
        estimate(settings, speed[:5])  # the tokenizers and price table loaded once, as a run's first estimate does
        times = []
        for _ in range(args.speed_repeat):  # the machine is shared: the median of a few, each printed
            start = time.perf_counter()
            est = estimate(settings, speed)
            times.append(time.perf_counter() - start)
    seconds = statistics.median(times)
    fast = seconds < SPEED_TARGET_S
    verdict = " (not judged at --smoke)" if args.smoke else "" if fast else "  MISSED"
    print(f"estimate of {len(speed)} cases (gpt-4o, the paper's judges): median {seconds:.2f} s of "
          f"{', '.join(f'{t:.2f}' for t in times)} (target < {SPEED_TARGET_S:g} s){verdict}; "
          f"{est['calls']} calls, ${est['cost_usd']:.2f}")
    checks.need(est["calls"] >= len(speed), f"the timed estimate counted a call or more for each of its {len(speed)} "
                f"cases ({est['calls']})")
    if not args.smoke:
        checks.need(fast, f"the estimate of {len(speed)} cases took under {SPEED_TARGET_S:g} s ({seconds:.2f} s)")
    return checks.status()


if __name__ == "__main__":
    raise SystemExit(main())
