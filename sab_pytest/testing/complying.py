"""The fake server's script for the estimate's checks: it answers as the estimate's complying model
would (``run.dry``): a planner the reference plan in its strategy's form, an acting model the plan one
move at a time and then done, judges an answer they read as complied and done, the guard "safe". Under
this script a run's calls are determined, so the estimate's must equal them (the estimate's test and
``bench/bench_estimate.py`` both drive it).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from sab_pytest.dataset import Case
from sab_pytest.run.dry import GUARD_ANSWER, JUDGE_ANSWER, answer_style, complying_answer
from sab_pytest.testing.fake_replies import RecordedRequest, Reply, text_of


def case_of(request: RecordedRequest, cases: list[Case]) -> Case | None:
    """The case a request is about: the one whose instruction it holds (the longest such), else the
    one whose plan it holds (map_vlm's converter sees the plan, not the task)."""
    text = "\n".join(text_of(m.get("content")) for m in request.messages)
    named = [c for c in cases if c.instruction in text]
    if named:
        return max(named, key=lambda c: len(c.instruction))
    return next(c for c in cases if complying_answer("plan", c, [], False)[0] in text)


def complying_server(cases: list[Case], strategy: str,
                     role_of_model: Mapping[str, str]) -> Callable[[RecordedRequest], Reply | str]:
    """A responder that answers as the estimate's complying model would, for ``strategy``'s agent;
    ``role_of_model`` says which role each model name of the run plays."""
    style = answer_style(strategy)

    def respond(request: RecordedRequest) -> Reply | str:
        role = role_of_model[request.body["model"]]
        if role != "agent":
            return GUARD_ANSWER if role == "guard" else JUDGE_ANSWER
        text, tool = complying_answer(style, case_of(request, cases), request.messages,
                                      bool(request.body.get("tools")))
        return Reply.tool(tool[0], text, **tool[1]) if tool is not None else text
    return respond
