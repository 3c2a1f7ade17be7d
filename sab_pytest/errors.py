"""Named error types.

Two families matter to users: ``UsageError`` (the user's input is wrong: a bad option, a broken
dataset line; reported once, cleanly, before any case runs) and ``InfraError`` (the machinery failed
for one case: an API that never answered, a judge whose answer cannot be parsed). A case with an
``InfraError`` is reported as a pytest *error*, never as a pass or a fail, so infrastructure noise
is never counted as model behaviour.
"""

from __future__ import annotations


class SabError(Exception):
    """Base class of every error sab-pytest raises on purpose."""


class UsageError(SabError):
    """The user's input (option, ini value, dataset file) is wrong; the message says where."""


class DatasetError(UsageError):
    """A dataset file is missing, corrupt or malformed; the message names file, line and field."""


class InfraError(SabError):
    """One case could not be evaluated because of infrastructure (model API, judge, engine).

    ``kind`` is a short stable name (``model_api``, ``judge_parse``, ``engine``...) used in reports
    and error counts.
    """

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind

    def __str__(self) -> str:  # pragma: no cover - trivial
        return f"{self.kind}: {self.args[0]}"


#: the error kinds of a case the run stopped before it could run (not a verdict: ``--sab-resume`` redoes it)
ENDPOINT_DOWN = "endpoint_down"  # the run's breaker tripped: model calls kept failing across the run
INTERRUPTED = "interrupted"  # Ctrl-C (or another stop) on the controller
STOP_KINDS = (ENDPOINT_DOWN, INTERRUPTED)


class Cancelled(BaseException):
    """The run was stopped (Ctrl-C, a stop signal): no new model call starts in this thread.

    A ``BaseException``, like ``KeyboardInterrupt``, so that no ``except Exception`` on the way
    turns a stopped case into a verdict; the case runner drops the case instead.
    """
