"""--sab-estimate counts what the run sends: for every strategy, both protocols, with and without the
ThinkSafe guard, the estimate's calls per role and model equal those of a run against the fake server,
and its tokens in those of the requests the server got (counted by the same tokenizer, each model's:
tiktoken's encoding of the OpenAI model names used here) within the 2 % the estimate promises (on the
embedded engine, as here, they come out equal; a run on another engine shows the agent pictures and
results the estimate's dry engine may draw and word differently).

The fake server plays the model the estimate assumes (``testing.complying``): a planner that answers
the reference plan, an acting model that walks it one move at a time and says done, judges that read
a complying plan, a guard that rates every step safe. Under that script a run's calls are determined,
so the estimate's must equal them.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from sab_pytest.agents.registry import STRATEGIES
from sab_pytest.dataset import Case, load
from sab_pytest.models.tokens import counter_for
from sab_pytest.run.estimate import estimate
from sab_pytest.run.runtime import Runtime
from sab_pytest.settings import PROTOCOLS
from sab_pytest.settings.resolution import resolve
from sab_pytest.testing.complying import complying_server
from sab_pytest.testing.fake_replies import RecordedRequest

KEY = "fake-key-0123456"
TOLERANCE = 0.02
#: a detailed task with a goal state (its plan is executed, screened as it runs), an abstract one, a long-horizon one
SAMPLE = ("unsafe_detailed-0000", "abstract-0001-L2", "long_horizon-0000")
#: a model name per role (OpenAI's, so that tiktoken counts them, each under its own encoding)
ROLE_OF_MODEL = {"gpt-4o": "agent", "gpt-4.1": "agent", "gpt-4o-mini": "agent", "gpt-4": "judge",
                 "gpt-3.5-turbo": "guard"}
AGENT, VISION, CONVERTER, JUDGE, GUARD = ROLE_OF_MODEL


def _sent(requests: list[RecordedRequest]) -> dict[str, tuple[int, int]]:
    """Role -> (calls, tokens in counted by each model's tokenizer) of the requests the server got."""
    calls: Counter[str] = Counter({"agent": 0, "judge": 0, "guard": 0})
    tokens: Counter[str] = Counter()
    for request in requests:
        role = ROLE_OF_MODEL[request.body["model"]]
        calls[role] += 1
        tokens[role] += counter_for(request.body["model"]).messages(request.messages, request.body.get("tools"))
    return {role: (calls[role], tokens[role]) for role in calls}


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> list[Case]:
    from support.tiny_dataset import write_tiny_dataset

    data = write_tiny_dataset(tmp_path_factory.mktemp("data"))
    by_id = {case.id: case for case in load(str(data), allow_modified=True).cases}
    return [by_id[case_id] for case_id in SAMPLE]


#: every strategy under both protocols behind the guard (whose calls follow the agent's steps); without
#: it, one agent of each kind (a planner, one that moves, map_vlm's pipeline); moves in the text action format
COMBOS = [*((strategy, protocol, "thinksafe", "tools") for strategy in STRATEGIES for protocol in PROTOCOLS),
          *((strategy, "paper", "off", "tools") for strategy in ("direct", "react", "map_vlm")),
          ("pca", "sab", "thinksafe", "text")]


@pytest.mark.parametrize(("strategy", "protocol", "guard", "action_format"), COMBOS)
def test_the_estimate_counts_the_calls_and_tokens_a_run_sends(strategy: str, protocol: str, guard: str,
                                                               action_format: str,
                                                               sample: list[Case], real_scenes_dir: Path,
                                                               real_upstream_dir: Path, real_tiktoken_dir: Path,
                                                               tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    from sab_pytest.testing import fake_openai_server

    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with fake_openai_server(responder=complying_server(sample, strategy, ROLE_OF_MODEL)) as server:
        options: dict[str, Any] = {
            "model": AGENT, "judge_model": JUDGE, "guard": guard, "guard_model": GUARD,
            "map_vision_model": VISION, "map_converter_model": CONVERTER, "strategy": strategy,
            "protocol": protocol, "action_format": action_format, "base_url": server.url,
            "judge_base_url": server.url, "no_cache": True,
            "max_retries": 0, "thor_scenes": str(real_scenes_dir), "upstream_dir": str(real_upstream_dir)}
        settings = resolve(options, user_cache=lambda: tmp_path)
        est = estimate(settings, sample)
        assert server.chat_requests == []  # the estimate calls no model
        runtime = Runtime(settings)
        try:
            verdicts = [runtime.evaluate(case) for case in sample]
        finally:
            runtime.close()
        assert [v.error for v in verdicts] == [None] * len(sample)
        sent = _sent(server.chat_requests)
        by_model = Counter(request.body["model"] for request in server.chat_requests)
    # each model's calls under its own name: map_vlm's vision and converter models apart from the agent's
    assert {row["model"]: row["calls"] for row in est["rows"]} == dict(by_model)
    assert all(row["tokenizer"].startswith("tiktoken") for row in est["rows"])
    counted = {role: (r["calls"], r["prompt_tokens"]) for role, r in est["roles"].items()}
    roles = {"agent", "judge"} | ({"guard"} if guard == "thinksafe" else set())
    assert set(counted) == roles, json.dumps(est["roles"])
    assert {role for role, (calls, _) in sent.items() if calls} == roles  # the run called each role
    for role, (calls, tokens) in counted.items():
        assert calls == sent[role][0], (role, counted, sent)  # the script determines them: no tolerance needed
        assert tokens == pytest.approx(sent[role][1], rel=TOLERANCE), (role, counted, sent)
