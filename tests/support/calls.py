"""Telling the fake server's requests apart: sab-pytest's endpoint preflight is one chat call with
``max_tokens=1``; every other chat call belongs to a case."""

from __future__ import annotations

from sab_pytest.testing import RecordedRequest


def is_preflight(request: RecordedRequest) -> bool:
    return isinstance(request.body, dict) and request.body.get("max_tokens") == 1


def case_calls(requests: list[RecordedRequest]) -> list[RecordedRequest]:
    """The chat requests the cases made (the preflight left out)."""
    return [r for r in requests if not is_preflight(r)]
