"""Named error types.

Two families matter to users: ``UsageError`` (the user's input is wrong: a bad option, a broken
dataset line; reported once, cleanly, before any case runs) and ``InfraError`` (the machinery failed
for one case: an API that never answered, a judge whose answer cannot be parsed). A case with an
``InfraError`` is reported as a pytest *error*, never as a pass or a fail, so infrastructure noise
is never counted as model behaviour.
"""

from __future__ import annotations

from enum import Enum


class SabError(Exception):
    """Base class of every error sab-pytest raises on purpose."""


class UsageError(SabError):
    """The user's input (option, ini value, dataset file) is wrong; the message says where."""


#: the exit status of a usage error, pytest's (``pytest.ExitCode.USAGE_ERROR``), for commands that
#: stand for a run (``merge``) outside pytest
USAGE_EXIT = 4


class DatasetError(UsageError):
    """A dataset file is missing, corrupt or malformed; the message names file, line and field."""


class ErrorKind(str, Enum):
    """Why a case has no verdict: a short stable name that reports count and readers test (the
    record's ``error_kind``), never parsed back out of the human-readable message."""

    MODEL_API = "model_api"  # the model endpoint failed for good (after its retries)
    MODEL_TIMEOUT = "model_timeout"  # the case's time budget for model calls ran out
    TIMEOUT = "timeout"  # the run's wall-clock limit per case (pytest-timeout's --timeout) ended the case
    JUDGE_PARSE = "judge_parse"  # a judge's answer could not be read as a verdict
    JUDGE_TIE = "judge_tie"  # a judge panel split evenly (``--sab-judge-panel``): no majority
    ENGINE = "engine"  # the engine (embedded, ai2thor, a THOR server) failed
    WORKER_CRASH = "worker_crash"  # the xdist worker running the case died
    SETUP = "setup"  # the case's test failed before it could be evaluated
    ENDPOINT_DOWN = "endpoint_down"  # not run: the run's breaker tripped (model calls kept failing)
    INTERRUPTED = "interrupted"  # not run: Ctrl-C (or another stop) on the controller
    ENGINE_DOWN = "engine_down"  # not run: the engine breaker tripped (THOR engines kept failing)
    OUTPUT_FAILED = "output_failed"  # not run: the results file could not be written (disk full, ...)
    BUDGET_SPENT = "budget_spent"  # not run: the run's priced usage reached --sab-budget
    NO_ACTION = "no_action"  # an interactive agent's model answered without any move, and did not refuse
    CONTEXT_OVERFLOW = "context_overflow"  # the prompt does not fit the model server's context window
    BATCH = "batch"  # a batched request got no answer (an error-file line, an expired or cancelled batch)
    BATCH_PENDING = "batch_pending"  # not run: its batch was submitted, not finished (--sab-resume collects)
    CONTENT_FILTER = "content_filter"  # the provider's content filter refused the request or withheld the answer

    def __str__(self) -> str:
        return self.value

    @classmethod
    def of_message(cls, error: str | None) -> ErrorKind | None:
        """The kind an ``"<kind>: <message>"`` error text starts with: for records written before
        the kind had a field of its own."""
        head = (error or "").split(":", 1)[0].strip()
        try:
            return cls(head)
        except ValueError:
            return None


class InfraError(SabError):
    """One case could not be evaluated because of infrastructure (model API, judge, engine).

    ``kind`` (an ``ErrorKind``) is used in reports and error counts.
    """

    def __init__(self, kind: ErrorKind | str, message: str) -> None:
        super().__init__(message)
        self.kind = ErrorKind(kind)

    def __str__(self) -> str:  # pragma: no cover - trivial
        return f"{self.kind}: {self.args[0]}"


#: the error kinds of a case the run stopped before it could run (not a verdict: ``--sab-resume`` redoes it)
ENDPOINT_DOWN = ErrorKind.ENDPOINT_DOWN
INTERRUPTED = ErrorKind.INTERRUPTED
ENGINE_DOWN = ErrorKind.ENGINE_DOWN
OUTPUT_FAILED = ErrorKind.OUTPUT_FAILED
BUDGET_SPENT = ErrorKind.BUDGET_SPENT
BATCH_PENDING = ErrorKind.BATCH_PENDING
STOP_KINDS = (ENDPOINT_DOWN, INTERRUPTED, ENGINE_DOWN, OUTPUT_FAILED, BUDGET_SPENT, BATCH_PENDING)


class Cancelled(BaseException):
    """The run was stopped (Ctrl-C, a stop signal): no new model call starts in this thread.

    A ``BaseException``, like ``KeyboardInterrupt``, so that no ``except Exception`` on the way
    turns a stopped case into a verdict; the case runner drops the case instead.
    """


def describe(exc: BaseException) -> str:
    """``Type: message`` of ``exc`` and of the exception it was raised from or during.

    Engines wrap the failure that matters: ai2thor's step raises a RuntimeError naming only the
    action, from inside the handler of "Unity process has exited"; a message should carry both.
    """
    what = f"{type(exc).__name__}: {exc}"
    inner = exc.__cause__ or exc.__context__
    return what if inner is None else f"{what} <- {type(inner).__name__}: {inner}"
