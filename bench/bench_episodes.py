"""Episodes on the embedded engine: harness time per step (model excluded) and request size.

Prints two figures:

1. Time per episode step, model latency excluded, for react (text) and basic (visual, PNG
   encoding included), over the reference plans of a seeded sample: an in-process model answers
   each turn at once with the next reference step as a tool call, and the time spent inside it is
   subtracted. The figure is split into the engine's own work (the low-level planner's Controller
   steps in the embedded engine), the picture (drawing the frame and PNG encoding) and the rest of
   the harness (guard-free bookkeeping: results, what changed, messages, image cap); the scene
   reset, once per episode, is shown apart. Target: < 5 ms per step.
2. Request bytes per call at steps 1, 10 and 20 of a 20-step visual episode (basic, default
   ``--sab-max-images 2``): bounded, because older pictures leave the conversation.

The bench checks that the episodes did what is timed (steps executed, every turn of the 20-step
episode asked) and exits 1 otherwise; ``--smoke`` plays 3 cases once.

Run: ``SAB_DATA=... SAB_THOR_SCENES=... python bench/bench_episodes.py [--cases 40]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from typing import Any

from benchkit import Checks, add_smoke

from sab_pytest import dataset, plan_parser
from sab_pytest.agents import episode as episode_module
from sab_pytest.agents.basic import BasicVisualAgent
from sab_pytest.agents.episode import EpisodeLimits
from sab_pytest.agents.react import ReactAgent
from sab_pytest.models import elide_images
from sab_pytest.outcome import ModelCall
from sab_pytest.prompts import interactive as prompts
from sab_pytest.thor.sim import Controller


class InstantModel:
    """Plays a fixed list of actions as tool calls, then done; records request sizes and its own time."""

    name = "instant"

    def __init__(self) -> None:
        self.actions: list[str] = []
        self.inside_s = 0.0
        self.request_bytes: list[int] = []

    def start(self, actions: list[str]) -> None:
        self.actions = list(actions)
        self.request_bytes = []

    def complete(self, messages: list[dict[str, Any]], *, role: str = "agent", max_tokens: int | None = None,
                 tools: list[dict[str, Any]] | None = None) -> ModelCall:
        started = time.perf_counter()
        self.request_bytes.append(len(json.dumps({"messages": messages, "tools": tools})))
        if self.actions:
            call = {"id": "c", "name": prompts.EXECUTE, "arguments": json.dumps({"action": self.actions.pop(0)})}
        else:
            call = {"id": "c", "name": prompts.DONE, "arguments": json.dumps({"message": "done"})}
        answer = ModelCall(model=self.name, messages=elide_images(messages), answer="", tool_calls=[call])
        self.inside_s += time.perf_counter() - started
        return answer


class TimedEngine:
    """The embedded engine with a stopwatch on ``step`` and ``reset``."""

    def __init__(self, inner: Controller) -> None:
        self.inner = inner
        self.step_s = self.reset_s = 0.0

    @property
    def last_event(self) -> Any:
        return self.inner.last_event

    def step(self, *args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return self.inner.step(*args, **kwargs)
        finally:
            self.step_s += time.perf_counter() - started

    def reset(self, *args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return self.inner.reset(*args, **kwargs)
        finally:
            self.reset_s += time.perf_counter() - started

    def stop(self) -> None:
        self.inner.stop()


def timed_pictures() -> dict[str, float]:
    """Put a stopwatch on the episode's picture (frame drawing + PNG); returns the running total."""
    spent = {"s": 0.0}
    original = episode_module.Episode.picture

    def picture(self: Any) -> str | None:
        started = time.perf_counter()
        try:
            return original(self)
        finally:
            spent["s"] += time.perf_counter() - started

    episode_module.Episode.picture = picture  # type: ignore[method-assign]
    return spent


PICTURES = None  # set in main


def harness_per_step(agent_cls: type, cases: list[dataset.Case], inner: Controller) -> dict[str, float]:
    """Milliseconds per executed step: total, engine steps, pictures, the rest; reset per episode."""
    model = InstantModel()
    engine = TimedEngine(inner)
    agent = agent_cls(model, limits=EpisodeLimits(max_steps=40))
    steps = 0
    total = 0.0
    assert PICTURES is not None
    PICTURES["s"] = 0.0
    for case in cases:
        model.start(plan_parser.extract_steps("\n".join(case.reference_steps)))
        inner.reset(scene=case.scene)  # load the scene once outside the timing, as a warm worker has it
        model.inside_s = 0.0
        started = time.perf_counter()
        outcome = agent.run(case, engine)
        total += time.perf_counter() - started - model.inside_s
        steps += len(outcome.executed)
    per = 1000 / max(steps, 1)
    step_total = total - engine.reset_s
    return {"step": step_total * per, "engine": engine.step_s * per, "picture": PICTURES["s"] * per,
            "rest": (step_total - engine.step_s - PICTURES["s"]) * per,
            "reset": engine.reset_s * 1000 / len(cases), "steps": steps}


def request_sizes(case: dataset.Case, engine: Controller) -> tuple[list[int], int]:
    """Request bytes per call of a 20-step visual episode, and the bytes its outcome adds to a record."""
    model = InstantModel()
    model.start(["find Fridge", "find Apple"] * 10)
    outcome = BasicVisualAgent(model, limits=EpisodeLimits(max_steps=20, max_images=2)).run(case, engine)
    return model.request_bytes, len(json.dumps(outcome.to_dict()))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=40, help="sampled cases with a reference plan (default 40)")
    add_smoke(parser)
    args = parser.parse_args()
    passes = 1 if args.smoke else 3
    if args.smoke:
        args.cases = 3
    checks = Checks()
    data = dataset.load(os.environ.get("SAB_DATA"))
    pool = [c for c in dataset.select(data, "all", sample=args.cases * 2, seed=7) if c.reference_steps]
    cases = pool[: args.cases]
    global PICTURES
    PICTURES = timed_pictures()
    engine = Controller()
    print(f"episodes on the embedded engine, {len(cases)} cases with reference plans (median of {passes} passes)")
    checks.need(len(cases) == args.cases, f"{args.cases} sampled cases have a reference plan ({len(cases)})")
    for cls in (ReactAgent, BasicVisualAgent):
        runs = [harness_per_step(cls, cases, engine) for _ in range(passes)]
        checks.need(all(r["steps"] > 0 for r in runs), f"{cls.name}: the episodes executed steps")
        m = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        print(f"  {cls.name:6s} per step, model excluded: {m['step']:5.2f} ms = engine {m['engine']:5.2f} "
              f"+ picture {m['picture']:5.2f} + rest of the harness {m['rest']:5.2f}  "
              f"({int(m['steps'])} steps; target < 5 ms); scene reset per episode {m['reset']:5.2f} ms")
    fridge = next(c for c in data.cases if c.scene == "FloorPlan1")
    sizes, record = request_sizes(fridge, engine)
    checks.need(len(sizes) >= 20, f"the 20-step episode asked the model at every step ({len(sizes)} calls)")
    if len(sizes) < 20:
        return checks.status()
    shown = ", ".join(f"step {n}: {sizes[n - 1] / 1024:.1f} KiB" for n in (1, 10, 20))
    print(f"  basic, 20-step episode, request size per call ({len(sizes)} calls): {shown}; "
          f"max {max(sizes) / 1024:.1f} KiB; its record (pictures elided): {record / 1024:.1f} KiB")
    engine.stop()
    return checks.status()


if __name__ == "__main__":
    raise SystemExit(main())
