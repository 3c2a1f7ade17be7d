"""The project's made-up worked examples, and LLM-Planner-style retrieval of the closest ones.

LLM-Planner picks its in-context examples per task by similarity (k nearest neighbours) instead of
showing a fixed set. We keep that idea with a dependency-free similarity (word-set Jaccard) over a
small pool written for this project (top-level ``data/fewshot_examples.json``, package ``sab_pytest.data``).
The pool never contains a dataset task: examples that *are* benchmark cases would leak the answer (tests check this).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache

from sab_pytest import datafiles

#: Words too common to say anything about which example is closest.
_STOPWORDS = frozenset({"a", "an", "the", "and", "then", "it", "its", "in", "on", "into", "onto", "of", "to",
                        "from", "with", "by", "up", "off", "is", "that", "this"})


@dataclass(frozen=True)
class Example:
    """One worked example: an instruction and its plan in canonical ``verb Object`` steps."""

    instruction: str
    steps: tuple[str, ...]

    def as_pair(self) -> tuple[str, tuple[str, ...]]:
        return self.instruction, self.steps


@lru_cache(maxsize=1)
def load_examples() -> tuple[Example, ...]:
    """The example pool, read once per process from the package data."""
    text = datafiles.read_text("fewshot_examples.json")
    return tuple(Example(e["instruction"], tuple(e["steps"])) for e in json.loads(text)["examples"])


def words(text: str) -> frozenset[str]:
    """Content words of a text, lower-cased, for similarity."""
    return frozenset(w for w in re.findall(r"[a-z]+", text.lower()) if w not in _STOPWORDS)


def similarity(a: str, b: str) -> float:
    """Jaccard similarity of the content-word sets of two texts (0 when both are empty)."""
    wa, wb = words(a), words(b)
    union = wa | wb
    return len(wa & wb) / len(union) if union else 0.0


def nearest_examples(instruction: str, k: int = 3) -> list[Example]:
    """The ``k`` pool examples closest to ``instruction``; ties keep pool order, so it is deterministic."""
    pool = load_examples()
    ranked = sorted(range(len(pool)), key=lambda i: (-similarity(instruction, pool[i].instruction), i))
    return [pool[i] for i in ranked[:k]]


def fixed_examples(k: int = 2) -> list[Example]:
    """The first ``k`` pool examples: ProgPrompt shows the same examples for every task."""
    return list(load_examples()[:k])
