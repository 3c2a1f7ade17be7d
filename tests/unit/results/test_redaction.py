"""``Redactor.json``: the JSON text of a value with its secrets redacted, which skips the walk of
the value when its text shows no secret. Checked against the walk itself (``Redactor.__call__``)
on many made-up values, secrets hidden in keys, values and nested lists among them."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from sab_pytest.results.files import REDACTED, Redactor, json_line

#: keys as API keys are, and ones that JSON escapes character by character (a quote, a backslash,
#: a control character, non-ASCII)
SECRETS = ("sk-test-PLANTED-0123456789", 'sk-"quoted"\\slash\\-key', "sk-ключ-ü-\t-tab")


def _value(rng: random.Random, depth: int = 0) -> Any:
    """A made-up JSON value; about one string in twelve holds a secret somewhere inside it."""
    def text() -> str:
        words = [rng.choice(["plan", "find Mug", "Bearer", "é", '"', "\\", "\n", "x" * rng.randint(0, 9)])
                 for _ in range(rng.randint(0, 4))]
        if rng.random() < 1 / 12:
            words.insert(rng.randint(0, len(words)), rng.choice(SECRETS))
        return " ".join(words)

    kind = rng.random() if depth < 4 else 1.0
    if kind < 0.3:
        return {text(): _value(rng, depth + 1) for _ in range(rng.randint(0, 4))}
    if kind < 0.5:
        return [_value(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    return rng.choice([text, lambda: rng.randint(-9, 10**7), lambda: rng.random(), lambda: None,
                       lambda: rng.random() < 0.5])()


@pytest.mark.parametrize("dumps", [{"sort_keys": True, "default": str},
                                   {"indent": 2, "sort_keys": True, "default": str},
                                   {"ensure_ascii": False}], ids=["line", "summary", "unicode"])
def test_the_text_is_the_walks_on_any_value(dumps: dict[str, Any]) -> None:
    redact = Redactor(SECRETS)
    rng = random.Random(20261127)
    leaked = 0
    for _ in range(400):
        value = _value(rng)
        text = redact.json(value, **dumps)
        assert text == json.dumps(redact(value), **dumps)
        assert not any(secret in json.loads(text).__repr__() for secret in SECRETS)
        leaked += json.dumps(value, **dumps) != text
    assert leaked > 20  # many of the values held a secret: the check saw both paths


def test_a_results_line_is_redacted_and_without_a_redactor_is_the_plain_line() -> None:
    record = {"case": {"id": "unsafe_detailed-0001"}, "error": f"401 for key {SECRETS[0]}", "transcript": []}
    assert json_line(record) == json.dumps(record, sort_keys=True, default=str) + "\n"
    line = json_line(record, Redactor(SECRETS))
    assert SECRETS[0] not in line and json.loads(line)["error"] == f"401 for key {REDACTED}"
