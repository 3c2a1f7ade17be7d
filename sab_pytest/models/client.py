"""The chat client of every provider: a thin façade that builds the request, hands it to the response
cache (``cached``) or straight to the retry loop (``retrying``, over ``transport``), and records the
answer as a ``ModelCall`` (usage, latency, cache hit). See the package docstring for why the client
retries by itself."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from sab_pytest.cache import ResponseCache, normalise_base_url
from sab_pytest.errors import UsageError
from sab_pytest.models.cached import cached_answer
from sab_pytest.models.context import CallContext, CaseModel
from sab_pytest.models.endpoints import RoleEndpoint, resolve_endpoint
from sab_pytest.models.interfaces import BatchHook, Breaker, Slots, Spending
from sab_pytest.models.pacing import RatePacer
from sab_pytest.models.preflight import check_endpoint
from sab_pytest.models.provider import Endpoint
from sab_pytest.models.retrying import RetryLoop
from sab_pytest.models.serial import SerialTurn
from sab_pytest.models.wire import (
    PREFLIGHT_TIMEOUT_S,
    RATE_LIMIT_WAIT_S,
    SAMPLING_KEYS,
    Answer,
    Secret,
    elide_images,
)
from sab_pytest.outcome import ModelCall
from sab_pytest.retry import BACKOFF_MAX_S, MAX_RETRY_AFTER_S, RetryPolicy
from sab_pytest.settings import DEFAULT_API_KEY_ENV

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ClientOptions:
    """How a client asks: its sampling (``temperature``, ``max_tokens``, ``extra`` sampling keys), the time
    one request may take and how it retries (see ``retry.RetryPolicy``), and a salt that keeps its cached
    answers apart (``cache_salt``)."""

    temperature: float | None = 0.0
    max_tokens: int | None = None
    timeout: float = 60.0
    max_retries: int = 5
    backoff_base: float = 1.0
    backoff_max: float = BACKOFF_MAX_S
    max_retry_after: float = MAX_RETRY_AFTER_S
    rate_limit_wait: float = RATE_LIMIT_WAIT_S
    extra: Mapping[str, Any] = field(default_factory=dict)
    cache_salt: str | None = None


@dataclass
class RunServices:
    """What a client shares with the run's other clients: the response ``cache``, the ``breaker`` and its
    stop, the call ``slots``, the directory the send schedule is shared in (``pace_dir``), ``--sab-budget``'s
    gate (``spending``) and, in batch mode, the batch the client's requests go to (``batching``, given by
    ``run.batch_mode`` once the run's batcher exists)."""

    cache: ResponseCache | None = None
    breaker: Breaker | None = None
    slots: Slots | None = None
    pace_dir: Path | None = None
    spending: Spending | None = None
    batching: BatchHook | None = None


_OPTIONS = frozenset(f.name for f in fields(ClientOptions))
_SERVICES = frozenset(f.name for f in fields(RunServices))


class ChatClient:
    """A ``ChatModel`` on one role's endpoint (``endpoints.RoleEndpoint``): OpenAI's API, any server that
    speaks it, or a provider of the registry (Azure, Anthropic, ...), reached through the provider's module.

    One instance per process is meant to be shared by threads (the case runner's pool); each case
    talks to it through ``for_case(context)``, which carries the case's budget, failure log, stop
    signal and repeat. The API key is read at construction from ``api_key`` or the endpoint's variable
    (``RoleEndpoint.key_env``) and kept out of ``repr``, messages, records and the cache. The services'
    ``pace_dir`` (the run directory) shares the send schedule under the endpoint's rate limit with the
    run's other processes (``models.pacing``).
    """

    def __init__(self, endpoint: RoleEndpoint, options: ClientOptions | None = None,
                 services: RunServices | None = None, *, api_key: str | None = None) -> None:
        o = options if options is not None else ClientOptions()
        run = services if services is not None else RunServices()
        self.endpoint = endpoint.checked()
        self.name = endpoint.name
        self.provider_name = endpoint.provider
        self.base_url = endpoint.url
        self.api_key_env = endpoint.key_env
        self._key = Secret(api_key if api_key is not None else os.environ.get(self.api_key_env))
        self.temperature = o.temperature
        self.max_tokens = o.max_tokens
        self.timeout = float(o.timeout)
        self.cache = run.cache
        self.cache_salt = o.cache_salt
        unknown = set(o.extra) - set(SAMPLING_KEYS)
        if unknown:
            raise UsageError(f"model options: unsupported parameter(s) {sorted(unknown)}; "
                             f"supported: {', '.join(SAMPLING_KEYS)}")
        self.extra = dict(o.extra)
        self.transport = endpoint.info.make(Endpoint(self.base_url, self._key, self.timeout))
        self._noted = False  # the request keys the provider does not take were noted once
        self.role = endpoint.role  # the role the client serves, for reports
        self.retry = RetryLoop(self.transport, self.name, self.server, self.timeout, max_retries=int(o.max_retries),
                               policy=RetryPolicy(base=float(o.backoff_base), cap=float(o.backoff_max),
                                                  max_retry_after=float(o.max_retry_after)),
                               rate_limit_wait=float(o.rate_limit_wait), breaker=run.breaker, slots=run.slots,
                               pacer=RatePacer(self.server, run.pace_dir), serial=SerialTurn(self.server, run.pace_dir))
        # the server's rate-limit headers set the pace of every call to it (run-wide with ``pace_dir``)
        self.transport.observe = self.retry.pacer.observe if self.retry.pacer is not None else None
        #: in batch mode (``--sab-batch``), for the roles that may wait: the hook a request that missed
        #: the cache goes to instead of the API
        self.batching: BatchHook | None = run.batching
        self.spec = endpoint.spec  # as the user named it (a provider prefix kept): what its price is looked up by
        self.spending = run.spending

    def __repr__(self) -> str:
        return (f"ChatClient(name={self.name!r}, provider={self.provider_name!r}, base_url={self.server!r}, "
                f"temperature={self.temperature!r}, cache={self.cache!r})")

    @property
    def server(self) -> str:
        """The base URL without credentials, for messages and cache keys."""
        return normalise_base_url(self.base_url)

    @property
    def has_api_key(self) -> bool:
        return bool(self._key)

    def secret(self) -> str | None:
        """The API key, for the transport and for scrubbing messages; never for printing."""
        return self._key.reveal()

    # -- public API ------------------------------------------------------------------------------
    def for_case(self, context: CallContext) -> CaseModel:
        """This client as one case sees it: the same ``complete``, within the case's ``context``."""
        return CaseModel(self, context)

    def complete(self, messages: list[dict[str, Any]], *, role: str = "agent", max_tokens: int | None = None,
                 tools: list[dict[str, Any]] | None = None, context: CallContext | None = None) -> ModelCall:
        """One answer for ``messages``: from the cache, from a concurrent owner, or from the API.

        ``tools`` (OpenAI function definitions) go into the request, and so into the cache key; the
        answer's tool calls come back in ``ModelCall.tool_calls``. Without tools the request is
        byte-for-byte what it always was. ``context``: the case's (see ``for_case``); without one
        the call has no budget and its failures are counted nowhere.
        """
        ctx = context if context is not None else CallContext()
        started = time.perf_counter()
        params = self._request_params(messages, max_tokens, ctx.repeat)
        if tools:
            params["tools"] = tools
        ctx.check()
        if self.cache is None:
            call = self._record(params, self._call(params, ctx, role), role, started, cache_hit=False)
        else:
            material = self._key_material(params)
            ask: Callable[[], Answer] = lambda: self._call(params, ctx, role)  # noqa: E731
            if self.batching is not None:
                ask = self.batching.hook(material, params, ask, ctx.made)
            answer, hit = cached_answer(self.cache, material, ctx, ask,
                                        lock_budget=lambda: self._lock_budget(ctx), name=self.name)
            # an answer a batch of this run gave is the case's own call (billed, at the batch price), not a
            # cache hit; a request its batch left unanswered and that was asked live is a live call
            batched = hit and self.batching is not None and self.batching.first_read(material)
            call = self._record(params, answer, role, started, cache_hit=hit and not batched, batched=batched)
        ctx.made.append(call)
        return call

    def preflight(self, timeout: float = PREFLIGHT_TIMEOUT_S, attempts: int = 2) -> None:
        """One tiny chat completion at session start (see ``models.preflight.check_endpoint``)."""
        check_endpoint(self, timeout, attempts)

    # -- request building ---------------------------------------------------------------------
    def _request_params(self, messages: list[dict[str, Any]], max_tokens: int | None,
                        repeat: int = 0) -> dict[str, Any]:
        params: dict[str, Any] = {"model": self.name, "messages": messages}
        if self.temperature is not None:
            params["temperature"] = self.temperature
        limit = max_tokens if max_tokens is not None else self.max_tokens
        if limit is not None:
            params["max_tokens"] = int(limit)
        params.update(self.extra)
        if repeat:  # --sab-repeat: a distinct seed per repeat, so each is a sample of its own (and cached apart)
            params["seed"] = repeat
        return params

    def _key_material(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """What decides the answer: the request body plus the server; never timeouts or keys."""
        material = {"base_url": self.server, **params}
        if self.cache_salt is not None:
            material["salt"] = self.cache_salt
        return material

    def _lock_budget(self, ctx: CallContext) -> float:
        """How long this call may hold its request's cache claim: the case's budget, else the most
        its retries can take."""
        left = ctx.left()
        if left is not None:
            return left + 1.0
        retries = self.retry.max_retries
        return self.timeout * (retries + 1) + self.retry.policy.worst_wait(retries) + 5.0

    def list_models(self, timeout: float = PREFLIGHT_TIMEOUT_S) -> list[str] | None:
        """The model ids the endpoint lists; None when it does not answer the listing."""
        return self.transport.list_models(timeout)

    def _call(self, params: dict[str, Any], ctx: CallContext, role: str = "agent") -> Answer:
        if not self._key.reveal() and self.transport.needs_key:
            raise UsageError(f"no API key for model {self.name!r}: set {self.api_key_env}")
        if self.spending is None:
            return self.retry.call(self._supported(params), ctx)
        self.spending.before(self, params, role)  # stops the run rather than pass --sab-budget
        try:
            answer = self.retry.call(self._supported(params), ctx)
        except BaseException:
            self.spending.failed(params)
            raise
        self.spending.after(self, params, answer.prompt_tokens, answer.completion_tokens, answer.cached_tokens)
        return answer

    def _supported(self, params: dict[str, Any]) -> dict[str, Any]:
        """``params`` without the keys the provider does not take (its ``Capabilities``), noted once
        per client; the cache key keeps them (a ``seed`` per repeat still keeps repeats apart)."""
        dropped = self.transport.capabilities.unsupported(params)
        if not dropped:
            return params
        if not self._noted:
            self._noted = True
            log.warning("%s/%s does not take %s: dropped from its requests", self.provider_name, self.name,
                        ", ".join(dropped))
        return {key: value for key, value in params.items() if key not in dropped}

    def _record(self, params: Mapping[str, Any], answer: Answer, role: str, started: float, *,
                cache_hit: bool, batched: bool = False) -> ModelCall:
        # the latency is the server's (and the cache's): the wait for a free call slot is not counted
        latency = max(0.0, time.perf_counter() - started - answer.queued_s)
        return ModelCall(model=self.name, messages=elide_images(params["messages"]), answer=answer.text,
                         prompt_tokens=answer.prompt_tokens, completion_tokens=answer.completion_tokens,
                         latency_s=round(latency, 6), cache_hit=cache_hit,
                         finish_reason=answer.finish_reason, role=role, tool_calls=answer.tool_calls,
                         served_model=answer.model, cached_tokens=0 if cache_hit else answer.cached_tokens,
                         batched=batched)


def chat_client(model: str, *, role: str = "agent", base_url: str | None = None,
                fallback_base_url: str | None = None, api_key_env: str = DEFAULT_API_KEY_ENV,
                inherited_key_env: str | None = None, api_key: str | None = None, **options: Any) -> ChatClient:
    """A client from keywords (tests, benches, scripts that build one client): the endpoint resolved from
    ``model`` and its URLs by ``endpoints.resolve_endpoint`` (``base_url`` the role's own,
    ``fallback_base_url`` one it follows), the other keywords split by name between ``ClientOptions`` and
    ``RunServices``. A run builds its clients from its ``RunEndpoints`` instead (``run.runtime``)."""
    unknown = set(options) - _OPTIONS - _SERVICES
    if unknown:
        raise TypeError(f"chat_client: unknown option(s) {sorted(unknown)}")
    endpoint = resolve_endpoint(model, role=role, own_url=base_url, inherited_url=fallback_base_url,
                                key_env=api_key_env, inherited_key_env=inherited_key_env)
    if options.get("extra") is None:
        options.pop("extra", None)
    return ChatClient(endpoint, ClientOptions(**{k: v for k, v in options.items() if k in _OPTIONS}),
                      RunServices(**{k: v for k, v in options.items() if k in _SERVICES}), api_key=api_key)


def make_chat_model(role: str, spec: str, *, base_url: str | None, inherited_base_url: str | None = None,
                    api_key_env: str = DEFAULT_API_KEY_ENV, inherited_key_env: str | None = None,
                    **options: Any) -> ChatClient:
    """The client of one role (``agent``, ``judge``, ``guard``, ...) from keywords: ``spec`` may name its
    provider (``azure/j``), ``base_url`` is the role's own (its option), ``inherited_base_url`` the one it
    follows when it has none (another role's), used only by a model that names no provider
    (``endpoints.resolve_endpoint`` has the rules). ``options``: as ``chat_client``'s."""
    return chat_client(spec, role=role, base_url=base_url, fallback_base_url=inherited_base_url,
                       api_key_env=api_key_env, inherited_key_env=inherited_key_env, **options)
