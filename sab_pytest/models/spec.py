"""What a user names on the command line: a model (``--model``, ``--judge-model``) and the prices
that turn token counts into cost (``--sab-price``). Checked before any case runs."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from sab_pytest.errors import UsageError
from sab_pytest.models.providers import REGISTRY

KNOWN_PROVIDERS = tuple(REGISTRY)
#: prefixes read as a provider in a two-part name even where a base URL is in effect: no server
#: names its models ``openai/...`` or ``azure/...`` (OpenRouter does name them ``anthropic/...``)
ALWAYS_PROVIDERS = ("openai", "azure")
_WHITESPACE = re.compile(r"\s")


def split_model_spec(text: str, *, base_url_in_effect: bool = True) -> tuple[str | None, str]:
    """The provider a model name names (None: none, today's OpenAI-compatible client) and the model
    name to send.

    ``groq/llama-3.1-8b`` names Groq, ``vllm/Qwen/Qwen2.5-7B`` vLLM serving ``Qwen/Qwen2.5-7B``. Where a
    base URL is in effect (the role's, or the environment's: ``endpoints.resolve_endpoint`` says) a
    two-part name keeps its old meaning, a name that server knows (OpenRouter's
    ``anthropic/claude-3.5-sonnet``), unless its prefix is ``openai/`` or ``azure/``.
    """
    model = parse_model_spec(text)
    spec = text.strip()
    head, _, rest = spec.partition("/")
    head = head.lower()
    if head not in REGISTRY or not rest:
        return None, model
    if spec.count("/") == 1 and base_url_in_effect and head not in ALWAYS_PROVIDERS:
        return None, model
    return head, rest


def parse_model_spec(text: str) -> str:
    """The model name to send, from what the user typed after ``--model``.

    ``openai/gpt-4o`` and ``gpt-4o`` both mean ``gpt-4o``, ``azure/dep`` the deployment ``dep``; any
    other two-part name (``Qwen/Qwen2.5-7B``) is kept whole, because OpenAI-compatible servers
    (vLLM, OpenRouter) name models that way (``split_model_spec`` says when its prefix names a
    provider). Three or more parts need a known provider prefix (``vllm/Qwen/Qwen2.5-7B``):
    ``foo/bar/baz`` is rejected instead of guessed.
    """
    spec = (text or "").strip()
    if not spec:
        raise UsageError("--model: the model name is empty")
    if _WHITESPACE.search(spec):
        raise UsageError(f"--model: {text!r} contains whitespace; give the model name as the API knows it")
    parts = spec.split("/")
    if any(not p for p in parts):
        raise UsageError(f"--model: {text!r} has an empty path segment (leading, trailing or double '/')")
    if parts[0].lower() in KNOWN_PROVIDERS and (len(parts) != 2 or parts[0].lower() in ALWAYS_PROVIDERS):
        if len(parts) == 1:
            raise UsageError(f"--model: {text!r} names a provider but no model (e.g. openai/gpt-4o)")
        return "/".join(parts[1:])
    if len(parts) >= 3:
        raise UsageError(
            f"--model: {text!r}: unknown provider prefix {parts[0]!r}; supported: "
            + ", ".join(f"'{p}/'" for p in KNOWN_PROVIDERS)
            + " (any OpenAI-compatible server works through --base-url with the model's served name)"
        )
    return spec


@dataclass(frozen=True)
class Prices:
    """USD per one million tokens."""

    input_per_m: float = 0.0
    output_per_m: float = 0.0

    def usd(self, prompt_tokens: int, completion_tokens: int) -> float:
        return (prompt_tokens * self.input_per_m + completion_tokens * self.output_per_m) / 1_000_000


PRICE_KEYS = {"in": "input_per_m", "input": "input_per_m", "prompt": "input_per_m",
               "out": "output_per_m", "output": "output_per_m", "completion": "output_per_m"}


def parse_prices(text: str) -> Prices:
    """``"in=2.5,out=10"`` (USD per 1M input / output tokens) -> ``Prices``."""
    option = "--sab-price"
    if not text or not text.strip():
        raise UsageError(f"{option}: empty; expected e.g. in=2.5,out=10 (USD per 1M tokens)")
    values: dict[str, float] = {}
    for item in text.split(","):
        name, sep, raw = item.partition("=")
        name = name.strip().lower()
        if not sep or name not in PRICE_KEYS:
            raise UsageError(f"{option}: {item.strip()!r} is not in=<USD> or out=<USD> "
                             "(USD per 1M tokens, e.g. in=2.5,out=10)")
        field_name = PRICE_KEYS[name]
        if field_name in values:
            raise UsageError(f"{option}: the {name!r} price is given twice")
        try:
            value = float(raw.strip())
        except ValueError:
            raise UsageError(f"{option}: {raw.strip()!r} (for {name!r}) is not a number") from None
        if not math.isfinite(value) or value < 0:
            raise UsageError(f"{option}: {raw.strip()!r} (for {name!r}) must be a non-negative number")
        values[field_name] = value
    return Prices(**values)
