"""``Settings`` from option values: each converted by its ``Option``, then the values that depend
on other options (the judge's default depends on the model, the judge prompts on the protocol).

Kept apart from the table (``settings``) so that the table stays a declaration of options and this
one function holds every rule by which one option's value follows from others. Front ends (the
pytest layer, tests) call it; it imports nothing of the project but ``settings``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from sab_pytest.settings import (
    DEFAULT_API_KEY_ENV,
    OFFLINE_MODELS,
    OPENAI_API_URL,
    PAPER_JUDGE_MODELS,
    Settings,
    options,
)
from sab_pytest.settings.judging import openai_url


def resolve(values: Mapping[str, Any], *, user_cache: Callable[[], Path]) -> Settings:
    """``Settings`` from option values (by field name, in the option's own form, ``None`` for an
    option nobody set): each converted by its ``to_setting``, then the values that depend on others.

    * ``model``: no ``--model`` is the offline reference agent (``model_given`` False);
    * ``judge_model``: ``rules`` for the offline agents, for a real model the paper's judges unless given
      (``gpt-4o-2024-08-06``, and ``gpt-4`` for detailed tasks' plans unless ``--sab-judge-for`` says);
    * ``judge_prompts``: ``upstream`` (the paper's) under ``--sab-protocol paper`` when the judges are models,
      else ``own``, unless given;
    * ``judge_url_default``: the judges' (and the guard's) endpoint without ``--judge-base-url``: where
      ``--base-url`` names the agent's own server, OpenAI's API (the environment's, ``judging.openai_url``, else
      ``OPENAI_API_URL``), never that server (``judge_endpoint``); else none (the agent's is theirs);
    * ``judge_api_key_env``: the agent's ``--api-key-env`` unless given, or ``OPENAI_API_KEY`` where the
      judges were sent to OpenAI's API by the rule above;
    * ``temperature``, ``max_tokens``: under ``--sab-protocol paper``, for a model agent other than map_vlm,
      the paper's code's settings for the model's family (``settings.sampling``), unless given;
    * ``cache_dir``: ``--sab-cache``, else the user cache, none at all with ``--sab-no-cache``.
    """
    table = dict(options())
    kwargs: dict[str, Any] = {}
    for name, value in values.items():
        option = table[name]
        if value is None:
            continue
        kwargs[name] = option.to_setting(value) if option.to_setting is not None else value
    model = values.get("model")
    kwargs["model_given"] = model is not None
    offline = model is None or model in OFFLINE_MODELS
    if not kwargs.get("judge_model"):
        kwargs["judge_model"] = "rules" if offline else PAPER_JUDGE_MODELS["abstract"]
        if not offline:  # the paper's models, each judge as its evaluator sets it, under the user's own choices
            paper = [f"{j}={m}" for j, m in PAPER_JUDGE_MODELS.items() if m != kwargs["judge_model"]]
            kwargs["judge_for"] = (*paper, *kwargs.get("judge_for", ()))
    if not kwargs.get("judge_prompts"):
        paper = kwargs.get("protocol", "paper") == "paper"
        kwargs["judge_prompts"] = "upstream" if paper and kwargs["judge_model"] != "rules" else "own"
    paper_sampling(kwargs, values)
    to_openai = judge_endpoint(kwargs)
    if not kwargs.get("judge_api_key_env"):
        agents = kwargs.get("api_key_env", DEFAULT_API_KEY_ENV)
        kwargs["judge_api_key_env"] = DEFAULT_API_KEY_ENV if to_openai else agents
    if kwargs.get("no_cache"):
        kwargs["cache_dir"] = None
    elif not values.get("cache_dir"):
        kwargs["cache_dir"] = user_cache()
    return Settings(**kwargs)


def judge_endpoint(kwargs: dict[str, Any]) -> bool:
    """The judges' endpoint without ``--judge-base-url`` (``judge_url_default`` in ``kwargs``); True when
    the judges were sent to OpenAI's API because the agent's endpoint is its own.

    Why: ``--base-url`` is how a user names the server of the model under test (llama.cpp, vLLM,
    Ollama). The judges are the paper's OpenAI models, and a self-hosted server asked for ``gpt-4``
    either answers 404 (vLLM, Ollama) or answers as its own model (llama.cpp): the model under test
    would grade itself while the run reports GPT-4. So the judges go to OpenAI's API unless
    ``--judge-base-url`` says otherwise, and the header says where they went. ``judging.OPENAI_URL_ENV``
    is the environment's OpenAI endpoint (a proxy, an Azure gateway): every client of the SDK reads
    it, the judges too. A ``--base-url`` equal to it is no server of the agent's own.
    """
    if kwargs.get("judge_base_url"):
        return False
    agent_url = kwargs.get("base_url")
    environment = openai_url(None)
    if agent_url and agent_url != environment:
        kwargs["judge_url_default"] = environment or OPENAI_API_URL
        return True
    return False


def paper_sampling(kwargs: dict[str, Any], values: Mapping[str, Any]) -> None:
    """The agent's temperature and token limit under ``--sab-protocol paper``, where not given: those the
    paper's code sends to a model of its family (``Settings.agent_call``: ``call_gpt`` 0.2 and 1024,
    ``call_vllm`` 0 and 4096, ``call_deepseek`` neither). Given values win, and the run names them."""
    call = Settings(**{k: v for k, v in kwargs.items() if k in ("model", "protocol", "strategy", "base_url")}
                    ).agent_call
    if call is None:
        return
    if values.get("temperature") is None:
        kwargs["temperature"] = call.temperature
    if values.get("max_tokens") is None:
        kwargs["max_tokens"] = call.max_tokens
