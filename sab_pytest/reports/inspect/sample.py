"""One case's record as an Inspect sample (``inspect_ai.log.EvalSample``): the agent's transcript as
chat messages, every model call (the agent's, the guard's, the judges') as a model event, each verdict
as a score, and the case's description, engine states and error as metadata.

Built with inspect_ai's own classes, never by writing its file format by hand: the format is theirs to
change, and their validators then tell us. This module imports inspect_ai, an optional extra: only
``inspect_log`` imports it, and only when a log is asked for.

The record keeps each model call's request with its pictures elided (``models.wire.elide_images``) and
the episode keeps small copies of the pictures the agent was shown (``episode.pictures``, at most
``agents.pictures.MAX_KEPT``, the first and the last ones). The transcript puts the kept copies back
where the pictures were, in the order they were shown; a picture not kept is a short text note.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from inspect_ai.event import ModelEvent
from inspect_ai.log import EvalError, EvalSample
from inspect_ai.model import (
    ChatCompletionChoice,
    ChatMessage,
    ChatMessageAssistant,
    ChatMessageSystem,
    ChatMessageTool,
    ChatMessageUser,
    Content,
    ContentImage,
    ContentText,
    GenerateConfig,
    ModelOutput,
    ModelUsage,
)
from inspect_ai.scorer import Score
from inspect_ai.tool import ToolCall

from sab_pytest.prompts.interactive import OLD_PICTURE
from sab_pytest.results.record import StoredRecord

if TYPE_CHECKING:
    from sab_pytest.dataset import Case

#: what an elided or dropped picture becomes in the transcript
PICTURE_NOT_KEPT = "[a camera picture the agent was shown; the record keeps no copy of it]"
#: OpenAI finish reasons as Inspect's stop reasons
_STOP = {"stop": "stop", "length": "max_tokens", "tool_calls": "tool_calls", "function_call": "tool_calls",
         "content_filter": "content_filter"}


# ------------------------------------------------------------------------------------------- scores
def scores(record: Mapping[str, Any]) -> dict[str, Score]:
    """The case's verdicts as Inspect scores, each where it applies (an errored or unjudged verdict
    has none): ``passed`` (the case's pytest outcome), ``rejection``, ``plan_success``,
    ``execution`` (success with its step and goal ratios) and ``long_horizon`` (completed, safe)."""
    judge = record.get("judge") or {}

    def why(name: str) -> str | None:
        part = judge.get(name)
        return str(part.get("explanation")) if isinstance(part, dict) and part.get("explanation") else None

    out = {"passed": Score(value=bool(record.get("passed")), explanation=record.get("message"),
                           answer=_answer(record))}
    if record.get("rejected") is not None:
        out["rejection"] = Score(value=bool(record["rejected"]), explanation=why("rejection"),
                                 metadata={"format": record.get("rejected_format"),
                                           "after_acting": record.get("refused_after_acting")})
    if record.get("plan_success") is not None:
        out["plan_success"] = Score(value=bool(record["plan_success"]), explanation=why("plan"))
    if record.get("exec_success") is not None or record.get("exec_step_ratio") is not None:
        out["execution"] = Score(value={"success": record.get("exec_success"),
                                        "step_ratio": record.get("exec_step_ratio"),
                                        "goal_ratio": record.get("exec_goal_ratio")},
                                 explanation=record.get("unreachable_goal"))
    if record.get("completeness") is not None or record.get("safety") is not None:
        out["long_horizon"] = Score(value={"completed": record.get("completeness"), "safe": record.get("safety")},
                                    explanation=why("long_horizon"))
    return out


def _answer(record: Mapping[str, Any]) -> str | None:
    agent = record.get("agent") or {}
    return agent.get("text")


# ----------------------------------------------------------------------------------------- messages
class _Pictures:
    """The kept copies of the pictures an episode showed, by the order they were shown: ``keep_some``
    kept the first ``len // 2`` and the last ones of ``pictures_shown``, so the n-th shown picture is
    known when it is among them."""

    def __init__(self, episode: Mapping[str, Any] | None) -> None:
        kept = [p.get("image") for p in (episode or {}).get("pictures") or [] if isinstance(p, dict)]
        self.kept = [p if isinstance(p, str) else None for p in kept]
        self.shown = int((episode or {}).get("pictures_shown") or len(self.kept))
        self.next = 0

    def take(self, url: str) -> Content:
        """The next picture of the transcript: its own URL when the record kept it whole, else the
        episode's copy, else a note."""
        index, self.next = self.next, self.next + 1
        if url.startswith("data:") and not url.endswith(" chars>"):
            return ContentImage(image=url)
        head = len(self.kept) // 2
        if self.shown <= len(self.kept):
            copy = self.kept[index] if index < len(self.kept) else None
        elif index < head:
            copy = self.kept[index]
        else:
            tail = index - (self.shown - (len(self.kept) - head))
            copy = self.kept[head + tail] if 0 <= tail < len(self.kept) - head else None
        return ContentImage(image=copy) if copy else ContentText(text=PICTURE_NOT_KEPT)


def _content(content: Any, pictures: _Pictures | None) -> str | list[Content]:
    """An OpenAI message's content as Inspect content: text stays text, pictures are ``ContentImage``
    (with ``pictures``: the kept copies; without: a note)."""
    if not isinstance(content, list):
        return "" if content is None else str(content)
    parts: list[Content] = []
    for part in content:
        if not isinstance(part, dict):
            continue
        if part.get("type") == "image_url":
            image = part.get("image_url")
            url = str(image.get("url", "") if isinstance(image, dict) else image or "")
            parts.append(pictures.take(url) if pictures is not None else ContentText(text=PICTURE_NOT_KEPT))
        elif part.get("text") is not None:
            parts.append(ContentText(text=str(part["text"])))
    return parts


def _tool_calls(calls: Any) -> list[ToolCall] | None:
    """Tool calls in either spelling the record holds (the request's OpenAI form, or the call's
    ``{"id", "name", "arguments"}``) as Inspect's; arguments that are not a JSON object are kept
    as text with the parse error Inspect has a place for."""
    out = []
    for call in calls or []:
        if not isinstance(call, dict):
            continue
        nested = call.get("function")
        function: dict[str, Any] = nested if isinstance(nested, dict) else call
        raw = function.get("arguments")
        error = None
        try:
            arguments = json.loads(raw) if isinstance(raw, str) else dict(raw or {})
        except (ValueError, TypeError) as exc:
            arguments, error = {"text": str(raw)}, f"not a JSON object: {exc}"
        if not isinstance(arguments, dict):
            arguments, error = {"value": arguments}, "not a JSON object"
        out.append(ToolCall(id=str(call.get("id") or ""), function=str(function.get("name") or ""),
                            arguments=arguments, parse_error=error))
    return out or None


def chat_message(message: Mapping[str, Any], pictures: _Pictures | None = None,
                 model: str | None = None) -> ChatMessage:
    """One OpenAI chat message as an Inspect ``ChatMessage``."""
    role = message.get("role")
    content = _content(message.get("content"), pictures)
    if role == "system":
        return ChatMessageSystem(content=content)
    if role == "assistant":
        return ChatMessageAssistant(content=content, tool_calls=_tool_calls(message.get("tool_calls")), model=model)
    if role == "tool":
        return ChatMessageTool(content=content, tool_call_id=message.get("tool_call_id"))
    return ChatMessageUser(content=content)


def _key(message: Mapping[str, Any]) -> tuple[Any, ...]:
    """What makes two requests' messages the same message: role and text, a picture being a picture
    whether it was sent or replaced by the note of an older one (``agents.acting.cap_images``)."""
    content = message.get("content")
    if isinstance(content, list):
        text: Any = tuple("picture" if p.get("type") == "image_url" or p.get("text") == OLD_PICTURE
                          else p.get("text") for p in content if isinstance(p, dict))
    else:
        text = content or ""
    return message.get("role"), text, message.get("tool_call_id")


def _answered(call: Mapping[str, Any]) -> dict[str, Any]:
    """A call's answer as the assistant message the conversation went on with."""
    message: dict[str, Any] = {"role": "assistant", "content": call.get("answer") or ""}
    if call.get("tool_calls"):
        message["tool_calls"] = call["tool_calls"]
    return message


def transcript(record: Mapping[str, Any]) -> list[ChatMessage]:
    """The agent's conversation: every message of its calls once, in order, each call's answer after
    its request. A call that goes on with the conversation so far adds what is new in it; one that
    does not (a two-stage planner's second prompt) starts its messages after the others. An agent
    that made no call (the offline ones) is the instruction and its answer."""
    agent = record.get("agent") or {}
    calls = [c for c in agent.get("calls") or [] if isinstance(c, dict) and c.get("role", "agent") == "agent"]
    if not calls:
        instruction = (record.get("case") or {}).get("instruction") or ""
        out: list[ChatMessage] = [ChatMessageUser(content=str(instruction))]
        if agent:
            out.append(ChatMessageAssistant(content=str(agent.get("text") or ""), model=agent.get("agent")))
        return out
    merged: list[dict[str, Any]] = []
    keys: list[tuple[Any, ...]] = []
    for call in calls:
        sent = [m for m in call.get("messages") or [] if isinstance(m, dict)]
        prefix = [_key(m) for m in sent[:len(keys)]]
        new = sent[len(keys):] if prefix == keys else sent
        for message in (*new, _answered(call)):
            merged.append({**message, "_model": call.get("model")})
            keys.append(_key(message))
    pictures = _Pictures(agent.get("episode"))
    return [chat_message(m, pictures, m["_model"] if m.get("role") == "assistant" else None) for m in merged]


# ------------------------------------------------------------------------------------------- events
def _calls(record: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """Every model call of the case with its role: the agent's and the guard's in order, then each
    judge's (``judge_<name>``, as the eval's model roles name them)."""
    for call in (record.get("agent") or {}).get("calls") or []:
        if isinstance(call, dict):
            yield str(call.get("role") or "agent"), call
    for name, part in (record.get("judge") or {}).items():
        for call in (part.get("calls") or []) if isinstance(part, dict) else []:
            if isinstance(call, dict):
                yield f"judge_{name}", call


def usage_of(call: Mapping[str, Any]) -> ModelUsage:
    prompt, completion = int(call.get("prompt_tokens") or 0), int(call.get("completion_tokens") or 0)
    cached = int(call.get("cached_tokens") or 0) or None  # read from the provider's prompt cache
    return ModelUsage(input_tokens=prompt, output_tokens=completion, total_tokens=prompt + completion,
                      input_tokens_cache_read=cached)


def model_event(role: str, call: Mapping[str, Any]) -> ModelEvent:
    """One model call as Inspect's ``ModelEvent``: its request, its answer (or its error), usage,
    latency, and whether the answer came from the response cache."""
    model = str(call.get("model") or "")
    answer = chat_message(_answered(call), model=model)
    stop = _STOP.get(str(call.get("finish_reason")), "unknown")
    output = ModelOutput(model=model, choices=[ChatCompletionChoice(message=answer, stop_reason=stop)],  # type: ignore[arg-type]
                         completion=str(call.get("answer") or ""), usage=usage_of(call), error=call.get("error"))
    return ModelEvent(model=model, role=role, input=[chat_message(m) for m in call.get("messages") or []
                                                     if isinstance(m, dict)],
                      tools=[], tool_choice="auto", config=GenerateConfig(), output=output, error=call.get("error"),
                      cache="read" if call.get("cache_hit") else None, working_time=call.get("latency_s"))


# ------------------------------------------------------------------------------------------- sample
def target(case: Case | None) -> str | list[str]:
    """What the case asks for: its reference steps, else its goal (the final state), as text."""
    if case is None:
        return ""
    if case.reference_steps:
        return list(case.reference_steps)
    return json.dumps(list(case.final_state), sort_keys=True) if case.final_state else ""


def _metadata(record: Mapping[str, Any]) -> dict[str, Any]:
    """The case's description, how its episode and execution went (the engine's states), its judges'
    findings without their calls (those are events), its error, usage and duration."""
    case = record.get("case") or {}
    agent = record.get("agent") or {}
    episode = dict(agent.get("episode") or {})
    episode.pop("pictures", None)  # they are in the transcript
    judges = {name: {k: v for k, v in part.items() if k != "calls"}
              for name, part in (record.get("judge") or {}).items() if isinstance(part, dict)}
    return {
        "kind": case.get("kind"), "safety": case.get("safety"), "category": case.get("risk_category"),
        "risk_label": case.get("risk_label_raw"), "level": case.get("abstraction_level"), "scene": case.get("scene"),
        "row": case.get("row"), "passed": record.get("passed"), "message": record.get("message"),
        "steps": agent.get("steps"), "refused": agent.get("refused"), "executed": agent.get("executed") or None,
        "episode": episode or None, "execution": record.get("execution"), "judges": judges,
        "unreachable_goal": record.get("unreachable_goal"), "error": record.get("error"),
        "error_kind": record.get("error_kind"), "usage": record.get("usage"), "run_id": record.get("run_id"),
        "resumed": bool(record.get("resumed")),
        **({"suite": case["suite"]} if case.get("suite") else {}),  # a team's own case: its suite
    }


def sample(record: StoredRecord, case: Case | None, *, epoch: int = 1) -> EvalSample:
    """The record of one run of a case as an ``EvalSample`` (``epoch``: which repeat, 1 without)."""
    meta = record["case"]
    events = [model_event(role, call) for role, call in _calls(record)]
    usage: dict[str, ModelUsage] = {}
    for event in events:
        if event.output.usage is not None:
            usage[event.model] = usage[event.model] + event.output.usage if event.model in usage else event.output.usage
    error = None
    if record.get("error"):
        error = EvalError(message=str(record["error"]), traceback="", traceback_ansi="")
    messages = transcript(record)
    model = str((record.get("agent") or {}).get("agent") or "")
    return EvalSample(
        id=str(meta["id"]), epoch=epoch, input=str(meta.get("instruction") or (case.instruction if case else "")),
        target=target(case) or list(meta.get("reference_steps") or []),  # a team's own case: from its record
        messages=messages, output=ModelOutput.from_content(model, _answer(record) or ""),
        scores=scores(record), metadata=_metadata(record), events=list(events), model_usage=usage,
        total_time=record.get("duration_s"), working_time=record.get("duration_s"), error=error,
        uuid=f"{record.get('run_id') or 'run'}-{meta['id']}-{epoch}")


def samples(records: Sequence[StoredRecord], cases: Mapping[str, Case]) -> list[EvalSample]:
    """Every record as a sample, ordered by case id then epoch (a repeat ``-r<N>`` is epoch N)."""
    ordered = sorted(records, key=lambda r: (str(r["case"]["id"]), int(r.get("repeat") or 1)))
    return [sample(r, cases.get(str(r["case"]["id"])), epoch=int(r.get("repeat") or 1)) for r in ordered]
