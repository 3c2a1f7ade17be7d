"""Each role's endpoint, resolved once: which provider answers it, the model name to send, the URL, the
variable that holds the key, what the provider accepts, and its batch API with the batch price.

Why one resolver: the client, the batching, the endpoint check, the estimate, the prices, the header
and the summary all need to know where a role's requests go. Worked out in each of them, the rules
drifted (a report printed the judges' URL while a judge on ``groq/...`` called Groq). Here a model spec
is parsed once per role, from the provider registry (``providers.REGISTRY``) and the role's URLs, and
every reader takes the ``RoleEndpoint`` it gives. The environment is read through
``settings.judging.openai_url`` alone.

The routing rules (docs/models.md): ``--base-url`` is the agent's own (and map_vlm's helpers'); the
judges and the guard go to ``--judge-base-url``, else ``$OPENAI_BASE_URL`` or OpenAI's API where the
agent's URL is a server of its own (``Settings.judge_url_default``), else the agent's; a model that
names its provider (``azure/j``, ``groq/llama``) goes to that provider's endpoint, at the role's own URL
when it has one, never at one it only follows.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from sab_pytest.cache import normalise_base_url
from sab_pytest.errors import UsageError
from sab_pytest.models.provider import Capabilities
from sab_pytest.models.providers import REGISTRY, ProviderInfo
from sab_pytest.models.spec import split_model_spec
from sab_pytest.settings import DEFAULT_API_KEY_ENV, OPENAI_API_URL, Settings
from sab_pytest.settings.judging import openai_url

#: the provider a model that names none answers at a base URL: a server of the user's speaking OpenAI's API
COMPATIBLE = "openai-compatible"
_HTTP = re.compile(r"^https?://[^/\s]+")


@dataclass(frozen=True)
class RoleEndpoint:
    """Where one role's requests go (``role``: agent, judge or guard, as prices and records name it).

    ``spec`` is the model as the user named it (its price is looked up by it), ``name`` the model name
    sent, ``provider`` the registry line that answers (``provider_label`` says ``openai-compatible`` for
    an unnamed model at a base URL), ``url`` the base URL the client is given (None: the provider SDK's
    default), ``key_env`` the variable its key is read from."""

    role: str
    spec: str
    name: str
    provider: str
    url: str | None
    key_env: str
    compatible: bool = False  # an unnamed model at a base URL (a server of the user's)
    info: ProviderInfo = field(repr=False, default=REGISTRY["openai"])

    def checked(self) -> RoleEndpoint:
        """This endpoint, its URL checked before a client is built on it (a ``UsageError`` otherwise)."""
        if self.url is not None and not _HTTP.match(self.url):
            raise UsageError(f"--base-url: {self.url!r} is not an http(s) URL (e.g. http://localhost:8000/v1)")
        return self

    @property
    def provider_label(self) -> str:
        """The registry's name, ``openai-compatible`` for a server of the user's (``provider_of``)."""
        return COMPATIBLE if self.compatible else self.provider

    @property
    def capabilities(self) -> Capabilities:
        return self.info.capabilities

    @property
    def batch_api(self) -> str | None:
        """The batch wire format of the provider's batch API (None: it has none)."""
        return self.info.batch_api

    @property
    def batch_price(self) -> float:
        """The part of the price a batched token costs at this provider."""
        return self.info.batch_price

    @property
    def server(self) -> str:
        """The base URL without credentials, for messages and cache keys."""
        return normalise_base_url(self.url)

    @property
    def shown(self) -> str:
        """The URL as reports print it: the SDK's default spelt out, or the provider's own endpoint."""
        if self.url:
            return self.url
        return OPENAI_API_URL if self.provider == "openai" else f"{self.provider}'s endpoint"


def resolve_endpoint(spec: str, *, role: str = "agent", own_url: str | None = None,
                     inherited_url: str | None = None, key_env: str = DEFAULT_API_KEY_ENV,
                     inherited_key_env: str | None = None) -> RoleEndpoint:
    """The endpoint of a role on model ``spec``: ``own_url`` is the role's own option, ``inherited_url`` the
    one it follows (another role's), used only by a model that names no provider. A key variable the role
    only inherited (``inherited_key_env``) is not sent to a provider the role names: its own is read (a key
    never goes to another provider's endpoint). ``key_env`` at its default means the provider's own."""
    compat_url = openai_url(own_url, inherited_url)
    kind, name = split_model_spec(spec, base_url_in_effect=compat_url is not None)
    info = REGISTRY[kind or "openai"]
    url = compat_url if info.name == "openai" else (own_url or info.default_url())
    if kind not in (None, "openai") and key_env == inherited_key_env:
        key_env = DEFAULT_API_KEY_ENV
    return RoleEndpoint(role=role, spec=spec, name=name, provider=info.name, url=url.strip() if url else None,
                        key_env=info.key_env if key_env == DEFAULT_API_KEY_ENV else key_env,
                        compatible=kind is None and compat_url is not None, info=info)


def role_endpoint(settings: Settings, role: str, spec: str) -> RoleEndpoint:
    """``spec``'s endpoint as role ``role`` of the run (agent, map_vlm's helpers: the agent's URL and key;
    a judge, a panel member, the guard: the judges')."""
    s = settings
    if role == "agent":
        return resolve_endpoint(spec, role=role, own_url=s.base_url, key_env=s.api_key_env)
    return resolve_endpoint(spec, role=role, own_url=s.judge_base_url, inherited_url=s.judge_url_default or s.base_url,
                            key_env=s.judge_api_key_env, inherited_key_env=s.api_key_env)


@dataclass(frozen=True)
class RunEndpoints:
    """The endpoints of every role of a run that calls a model, by the summary's role keys: ``agent``,
    ``judge:<judge>``, ``judge:<judge>:<model>`` (a panel's member), ``guard``, and map_vlm's ``vision``
    and ``converter`` (on the agent's endpoint)."""

    roles: dict[str, RoleEndpoint]

    def of(self, role: str, spec: str) -> RoleEndpoint:
        """The endpoint of ``spec`` as ``role`` (agent, judge, guard)."""
        found = next((e for e in self.roles.values() if e.role == role and e.spec == spec), None)
        if found is None:
            raise KeyError(f"no {role} on {spec!r} in this run")
        return found

    def reported(self) -> dict[str, RoleEndpoint]:
        """The roles reports name (map_vlm's helpers are the agent's: not listed apart)."""
        return {key: e for key, e in self.roles.items() if key not in ("vision", "converter")}

    @property
    def judges(self) -> list[RoleEndpoint]:
        """The judges', their panels' and the guard's endpoints."""
        return [e for e in self.roles.values() if e.role in ("judge", "guard")]

    @property
    def judges_shown(self) -> str | None:
        """The judges' and the guard's URL as reports print it (several, joined), None without one."""
        shown = list(dict.fromkeys(e.shown for e in self.judges))
        return ", ".join(shown) if shown else None


def run_endpoints(settings: Settings) -> RunEndpoints:
    """Every role's endpoint, each resolved once (the roles ``run.wiring.role_models`` makes clients for)."""
    s = settings
    roles: dict[str, RoleEndpoint] = {}
    if not s.offline_agent:
        roles["agent"] = role_endpoint(s, "agent", s.model)
        if s.helpers:  # the strategy's helper models (settings/strategies.py)
            roles["vision"] = role_endpoint(s, "agent", s.map_vision_model)
            roles["converter"] = role_endpoint(s, "agent", s.map_converter_model)
    for judge, model in s.asked_judges.items():
        roles[f"judge:{judge}"] = role_endpoint(s, "judge", model)
    for judge, panel in s.judge_panels.items():
        roles |= {f"judge:{judge}:{model}": role_endpoint(s, "judge", model) for model in panel}
    if s.guard_uses_api:
        roles["guard"] = role_endpoint(s, "guard", s.guard_model_name)
    return RunEndpoints(roles)


def provider_of(spec: str, base_url: str | None) -> str:
    """Which provider answers model ``spec`` at ``base_url`` (the URL it has, its own or followed): a
    registry name, ``openai-compatible`` for an unnamed model at a base URL (a server of the user's),
    ``openai`` for an unnamed one without (the SDK's default endpoint)."""
    return resolve_endpoint(spec, inherited_url=base_url).provider_label


def capabilities_of(spec: str, base_url: str | None) -> Capabilities:
    """What the provider answering ``spec`` at ``base_url`` accepts (``models.providers``)."""
    return resolve_endpoint(spec, inherited_url=base_url).capabilities
