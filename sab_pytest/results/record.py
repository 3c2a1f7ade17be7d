"""A case's result, the record: its type, its version, and the one place records are built and read.

A record is a JSON object: one line of ``sab-results.jsonl``, and what an xdist worker sends the
controller as a user property. It stays a plain dict on the wire and on disk, typed here with
``TypedDict`` so that the type checker sees every key its readers use. Every record holds every key
of ``CaseRecord`` (a crashed case too, with None where nothing is known).

Schema versions (the record's ``schema``, and the summary's):

* 1: records written before the schema had a number. They carry the same keys but no ``schema``
  and no ``error_kind``; a reader takes them as schema 1 and derives the kind from the error text.
* 2: ``schema`` and ``error_kind`` (an ``errors.ErrorKind``) added. Later, within schema 2, an
  optional ``repeat`` (1..K, present only in runs of ``--sab-repeat K`` with K > 1): a record
  without it is the case's only run, so every older file reads as it did.

A run's unit of record is the *sample*: a case, or one repeat of it. ``sample_id`` names it (the case
id, ``-r<N>`` for a repeat); everything that keeps one record per run of a case keys on it.

A reader refuses a record of a newer schema than this code knows, and a line that is not a record,
naming the file and line: a mixed or foreign file must not feed a gate.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict, cast

from sab_pytest.errors import ErrorKind, UsageError
from sab_pytest.models import add_failures, truncation_note, usage_totals

if TYPE_CHECKING:
    from sab_pytest.dataset import Case
    from sab_pytest.scoring import Verdict

SCHEMA = 2
#: keys without which a JSON object is not a record of any schema
REQUIRED = ("case", "passed", "message")


class _OwnCaseMeta(TypedDict, total=False):
    suite: str  # a team's own case (``owncases.files``): its suite; absent for the paper's cases
    reference_steps: list[str]  # a team's own case: its reference plan (the paper's are in the dataset)


class CaseMeta(_OwnCaseMeta):
    """The case as every record describes it (``dataset.Case.meta``)."""

    id: str
    kind: str
    safety: str
    scene: str | None
    risk_category: str | None
    risk_label_raw: str | None
    abstraction_level: int | None
    row: int | None
    instruction: str | None
    has_final_state: bool


class CaseRecord(TypedDict):
    """What a case came to: the verdict's fields, the evidence and the cost."""

    schema: int
    case: CaseMeta
    passed: bool
    message: str
    rejected: bool | None
    rejected_format: bool | None
    refused_after_acting: bool | None
    plan_success: bool | None
    completeness: bool | None
    safety: bool | None
    exec_success: bool | None
    exec_step_ratio: float | None
    exec_goal_ratio: float | None
    unreachable_goal: str | None
    error: str | None  # "<kind>: <message>", as people read it
    error_kind: str | None  # an ErrorKind value, as programs test it
    agent: dict[str, Any] | None
    execution: dict[str, Any] | None
    judge: dict[str, Any]
    usage: dict[str, Any]
    duration_s: float


class StoredRecord(CaseRecord, total=False):
    """A record as a run stores it: stamped with the settings that made it (``--sab-resume`` reuses
    only records of the same settings) and the run that holds it, and marked when it was reused
    rather than redone. These keys are set by ``stamped`` alone."""

    run_key: str
    run_settings: dict[str, Any]
    run_id: str  # the run whose results file holds the line (``outdir``); set as the line is written
    resumed: bool  # reused from an earlier run's file by --sab-resume (set in memory, never written)
    repeat: int  # with --sab-repeat K > 1: which of the K runs of the case (1..K); absent otherwise


def sample_id(record: Mapping[str, Any]) -> str:
    """The id of the run of a case a record holds: its case id, ``-r<N>`` for a repeat."""
    repeat = record.get("repeat")
    case_id = str(record["case"]["id"])
    return f"{case_id}-r{repeat}" if repeat else case_id


def split_sample_id(text: str) -> tuple[str, int]:
    """``'unsafe_detailed-0042-r3'`` -> (``'unsafe_detailed-0042'``, 3); a plain case id -> (it, 0)."""
    head, sep, tail = text.rpartition("-r")
    return (head, int(tail)) if sep and tail.isdigit() else (text, 0)


#: the longest text a record stores whole (an answer, a prompt, a message): a model that writes 1 MB
#: answers would otherwise make a results file of tens of MB per case (the answer again in every later
#: call's messages and in each judge's prompt). Verdicts are made on the whole text; only the record
#: is cut, and says so.
STORED_TEXT_CAP = 20_000


def capped(value: Any, cap: int = STORED_TEXT_CAP) -> Any:
    """``value`` with every string longer than ``cap`` cut, the cut marked with what was left out."""
    if isinstance(value, str):
        if len(value) <= cap:
            return value
        return f"{value[:cap]}... [cut by sab-pytest: {len(value) - cap} more characters not stored]"
    if isinstance(value, dict):
        return {k: capped(v, cap) for k, v in value.items()}
    if isinstance(value, list):
        return [capped(v, cap) for v in value]
    return value


def stamped(record: CaseRecord, *, run_key: str | None = None, run_settings: Mapping[str, Any] | None = None,
            repeat: int = 0, run_id: str | None = None, resumed: bool = False) -> StoredRecord:
    """A copy of ``record`` with the stamps of ``StoredRecord`` that are given (None, 0, False: left as
    they are): the one place they are set, so that every writer (the run, a resume, a compaction, a
    merge) spells them alike. A copy, because the caller's record may be held elsewhere (a run's
    records in memory carry no ``run_id``; only the lines written do)."""
    stored = cast(StoredRecord, dict(record))
    if run_key is not None:
        stored["run_key"] = run_key
    if run_settings is not None:
        stored["run_settings"] = dict(run_settings)
    if repeat:
        stored["repeat"] = repeat
    if run_id is not None:
        stored["run_id"] = run_id
    if resumed:
        stored["resumed"] = True
    return stored


def from_verdict(verdict: Verdict, *, run_key: str | None = None,
                 run_settings: Mapping[str, Any] | None = None) -> StoredRecord:
    """The record of a judged (or failed) case, as the results file keeps it."""
    calls = verdict.outcome.calls if verdict.outcome else []
    judge_calls = [c for part in verdict.judge_evidence.values() for c in part.get("calls", [])]
    kind = verdict.error_kind or (ErrorKind.of_message(verdict.error) if verdict.error else None)
    usage = add_failures(usage_totals([c.to_dict() for c in calls] + judge_calls), verdict.failures)
    record: CaseRecord = {
        "schema": SCHEMA,
        "case": cast(CaseMeta, verdict.case.meta()),
        "passed": verdict.passed,
        "message": capped(verdict.message + truncation_note(usage)),
        "rejected": verdict.rejected,
        "rejected_format": verdict.rejected_format,
        "refused_after_acting": verdict.refused_after_acting,
        "plan_success": verdict.plan_success,
        "completeness": verdict.completeness,
        "safety": verdict.safety,
        "exec_success": verdict.exec_success,
        "exec_step_ratio": verdict.exec_step_ratio,
        "exec_goal_ratio": verdict.exec_goal_ratio,
        "unreachable_goal": verdict.unreachable_goal,
        "error": verdict.error,
        "error_kind": kind.value if kind is not None else None,
        "agent": capped(verdict.outcome.to_dict()) if verdict.outcome else None,
        "execution": verdict.execution.to_dict() if verdict.execution else None,
        "judge": capped(verdict.judge_evidence),
        "usage": usage,
        "duration_s": round(verdict.duration_s, 4),
    }
    return stamped(record, run_key=run_key, run_settings=run_settings, repeat=verdict.case.repeat)


def crashed(case: CaseMeta, kind: ErrorKind, detail: str, *, run_key: str | None = None,
            run_settings: Mapping[str, Any] | None = None, repeat: int = 0) -> StoredRecord:
    """The record of a case that could not be evaluated at all (its worker died, or its test failed
    before the evaluation): every key of a record, nothing judged."""
    record: CaseRecord = {
        "schema": SCHEMA, "case": case, "passed": False, "message": f"could not be evaluated ({kind.value})",
        "rejected": None, "rejected_format": None, "refused_after_acting": None, "plan_success": None,
        "completeness": None, "safety": None, "exec_success": None, "exec_step_ratio": None,
        "exec_goal_ratio": None, "unreachable_goal": None, "error": f"{kind.value}: {detail}",
        "error_kind": kind.value, "agent": None, "execution": None, "judge": {}, "usage": {}, "duration_s": 0.0,
    }
    return stamped(record, run_key=run_key, run_settings=run_settings, repeat=repeat)


def case_meta(case_id: str, cases: Mapping[str, Case]) -> CaseMeta:
    """The description of case ``case_id``: from the dataset when it is there, else what its id
    tells (kind, safety), the rest unknown."""
    case = cases.get(case_id)
    if case is not None:
        return cast(CaseMeta, case.meta())
    kind = case_id.split("-", 1)[0]
    return {"id": case_id, "kind": kind, "safety": "safe" if kind == "safe_detailed" else "unsafe", "scene": None,
            "risk_category": None, "risk_label_raw": None, "abstraction_level": None, "row": None,
            "instruction": None, "has_final_state": False}


def filtered(record: Mapping[str, Any]) -> bool:
    """The provider's content filter refused the case's request or withheld its answer (Azure's
    ``content_filter``): an outcome of the case, counted apart, neither a verdict nor an error."""
    return error_kind(record) == ErrorKind.CONTENT_FILTER


def failed(record: Mapping[str, Any]) -> bool:
    """The case has no verdict because the machinery failed (a content filter's refusal is no failure)."""
    return bool(record.get("error")) and not filtered(record)


def error_kind(record: Mapping[str, Any]) -> ErrorKind | None:
    """The kind of a record's error (None when it has none): its ``error_kind``, else (schema 1)
    the kind its error text starts with."""
    if not record.get("error"):
        return None
    stored = record.get("error_kind")
    if stored:
        try:
            return ErrorKind(stored)
        except ValueError:
            pass
    return ErrorKind.of_message(record.get("error"))


def read_record(data: Any, path: Path, line: int) -> StoredRecord:
    """A parsed line of a results file as a record of the current schema; a ``UsageError`` naming
    ``path`` and ``line`` for a line that is not a record or is of a newer schema."""
    if not isinstance(data, dict) or any(key not in data for key in REQUIRED) or not isinstance(data["case"], dict):
        raise UsageError(f"{path}:{line}: not a case record (expected a JSON object with "
                         f"{', '.join(REQUIRED)})")
    schema = data.get("schema", 1)
    if not isinstance(schema, int) or schema > SCHEMA:
        raise UsageError(f"{path}:{line}: a record of schema {schema!r}, newer than this sab-pytest reads "
                         f"(schema {SCHEMA}); read it with the version that wrote it, or upgrade")
    if schema < SCHEMA:  # schema 1: the same keys, but the error kind lived in the text alone
        kind = error_kind(data)
        data = {**data, "schema": SCHEMA, "error_kind": kind.value if kind is not None else None}
    return cast(StoredRecord, data)


def check_summary_schema(summary: Mapping[str, Any], path: Path) -> None:
    """Refuse a ``sab-summary.json`` of a newer schema (older ones, without a number, are schema 1)."""
    schema = summary.get("schema", 1)
    if not isinstance(schema, int) or schema > SCHEMA:
        raise UsageError(f"{path}: a summary of schema {schema!r}, newer than this sab-pytest reads "
                         f"(schema {SCHEMA})")
