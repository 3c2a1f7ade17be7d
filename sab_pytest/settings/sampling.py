"""How the paper's code asks the model under test, by the model's family: the helper functions of its
``methods/utils.py`` at the pinned commit, whose settings ``--sab-protocol paper`` follows.

The paper's released code has three ways to call a model, each with fixed settings:

* ``call_gpt`` (OpenAI's models): a system message "You are a helpful assistant." and the prompt as the
  user message, temperature 0.2, at most 1024 tokens;
* ``call_vllm`` (a self-hosted model behind vLLM's OpenAI-compatible server): the prompt as the only
  (user) message, temperature 0, at most 4096 tokens;
* ``call_deepseek`` (DeepSeek's API): a system message "You are a helpful assistant" (no full stop) and
  the prompt, and neither a temperature nor a token limit: the API's defaults.

Which one a run's model belongs to is read from how the run reaches it (:func:`paper_family`): DeepSeek's
API by its host or the ``deepseek/`` provider; OpenAI's API (no base URL, ``api.openai.com``, Azure, or
a model name of OpenAI's own families behind a gateway) is ``call_gpt``'s; a server of the user's own
(``--base-url``, ``vllm/``) is ``call_vllm``'s. Another hosted provider (``groq/``, ``anthropic/`` ...)
has no function in the paper's code: None, and the run says so. The values are facts of the pinned
source (a test reads them from it). This module imports nothing of the project.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urlsplit


@dataclass(frozen=True)
class PaperCall:
    """One of the paper's model-calling functions and the settings it sends."""

    function: str  # its name in the paper's methods/utils.py
    family: str  # the models it is for, as a reader names them
    temperature: float | None  # None: not sent (the API's default)
    max_tokens: int | None  # None: not sent
    system: str | None  # the system message it sends before the prompt; None: the prompt alone

    def describe(self) -> str:
        """``call_gpt (OpenAI's models): temperature 0.2, at most 1024 tokens``."""
        temperature = "the API's default temperature" if self.temperature is None else \
            f"temperature {self.temperature:g}"
        tokens = "no token limit" if self.max_tokens is None else f"at most {self.max_tokens} tokens"
        return f"{self.function} ({self.family}): {temperature}, {tokens}"


#: family -> how the paper's code calls a model of it (methods/utils.py at the pinned commit)
PAPER_CALLS = {
    "openai": PaperCall("call_gpt", "OpenAI's models", 0.2, 1024, "You are a helpful assistant."),
    "vllm": PaperCall("call_vllm", "self-hosted models", 0.0, 4096, None),
    "deepseek": PaperCall("call_deepseek", "DeepSeek's API", None, None, "You are a helpful assistant"),
}

DEEPSEEK_HOST = "api.deepseek.com"
OPENAI_HOST = "api.openai.com"
#: model names of OpenAI's own families, read as OpenAI's behind any endpoint (a gateway, a proxy);
#: gpt-oss, OpenAI's open-weight model, is served by the user's own servers
_OPENAI_NAMES = re.compile(r"^(?:gpt-(?!oss)|chatgpt-|o\d(?:-|$)|text-davinci)", re.IGNORECASE)


def paper_family(model: str, base_url: str | None, environment: str | None = None) -> str | None:
    """The family whose call of the paper's code reaches ``model`` at ``base_url`` (None: none does).
    ``environment``: the endpoint a model that names no provider goes to without a base URL of its own
    (``judging.openai_url``'s, as the endpoint resolver gives the client)."""
    prefix, _, name = model.partition("/") if "/" in model else ("", "", model)
    prefix = prefix.lower()
    if prefix == "openai":  # the OpenAI-compatible client, named: the rest is the model
        prefix, name = "", name
    if not prefix:
        base_url = base_url or environment
    host = (urlsplit(base_url.strip()).hostname or "").lower() if base_url else None
    if host == DEEPSEEK_HOST or (prefix == "deepseek" and host is None):
        return "deepseek"
    if prefix == "azure" or _OPENAI_NAMES.match(name):
        return "openai"
    if prefix == "vllm":
        return "vllm"
    if prefix and host is None:  # another hosted provider (groq/, together/, anthropic/ ...)
        return None
    if host is None or host == OPENAI_HOST:
        return "openai"
    return "vllm"  # a server of the user's own: the paper's code reaches those through call_vllm

