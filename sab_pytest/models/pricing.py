"""What a model's tokens cost in USD: ``--sab-price MODEL=IN,OUT`` where the user gives it, else the
model's list price in ``genai-prices``' table.

Why a maintained table: prices differ per model and per role (the paper's detailed judge, gpt-4 at
$30 / $60 per million tokens, costs twelve times the agent's gpt-4o per input token), change over
time, and a user should not have to look them up before a first run. ``genai-prices`` (MIT, Pydantic)
ships a dated, sourced table of the providers' list prices with their history; it is read from the
copy inside the installed package: its only network access is its ``UpdatePrices`` helper, which is
never started here, so nothing is fetched at run time. Prices are those in force on the run's date.

A model at a server of the user's own (an OpenAI-compatible base URL the table does not know:
llama.cpp, vLLM, Ollama) has no list price: it is "not priced" unless ``--sab-price`` prices it. The
old form ``--sab-price in=X,out=Y`` (no model) prices every model, as it did. ``genai-prices`` is
imported only when a run is priced.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Protocol

from sab_pytest.errors import BUDGET_SPENT, UsageError
from sab_pytest.models.endpoints import RoleEndpoint, resolve_endpoint, run_endpoints
from sab_pytest.models.providers import REGISTRY
from sab_pytest.models.spec import PRICE_KEYS, Prices, parse_model_spec, parse_prices
from sab_pytest.models.tokens import JUDGE_OUTPUT_TOKENS, counter_for

if TYPE_CHECKING:
    from sab_pytest.models.interfaces import Stop
    from sab_pytest.models.tokens import TokenCounter
    from sab_pytest.settings import Settings

OPTION = "--sab-price"
#: the one entry of the old form, ``in=X,out=Y``: it prices every model
EVERY_MODEL = "*"
#: the registry's provider name -> genai-prices' provider id, where they differ or the provider has no public URL
PROVIDER_IDS = {"openai": "openai", "azure": "azure", "anthropic": "anthropic", "gemini": "google"}
TABLE = "genai-prices"
TABLE_SOURCE = "https://github.com/pydantic/genai-prices"


@dataclass(frozen=True)
class ModelPrice:
    """One model's USD per million tokens (``cached_input_per_m``: a prompt-cache read, where the table
    has one) and where the price comes from."""

    model: str
    input_per_m: float
    output_per_m: float
    source: str
    cached_input_per_m: float | None = None

    def usd(self, prompt_tokens: int, completion_tokens: int, cached_tokens: int = 0) -> float:
        """The cost of a call's tokens; ``cached_tokens`` (part of ``prompt_tokens``) at the cache-read price."""
        cached = min(cached_tokens, prompt_tokens) if self.cached_input_per_m is not None else 0
        return ((prompt_tokens - cached) * self.input_per_m + cached * (self.cached_input_per_m or 0.0)
                + completion_tokens * self.output_per_m) / 1_000_000


def parse_model_prices(entries: Iterable[str] | str | None) -> dict[str, Prices]:
    """``--sab-price`` (repeatable) -> model -> ``Prices``: ``MODEL=IN,OUT`` (USD per 1M tokens) for one
    model, or the old ``in=X,out=Y`` for every model (``EVERY_MODEL``)."""
    if entries is None:
        return {}
    found: dict[str, Prices] = {}
    for entry in [entries] if isinstance(entries, str) else entries:
        text = entry.strip()
        head, sep, rest = text.partition("=")
        if head.strip().lower() in PRICE_KEYS:
            key, prices = EVERY_MODEL, parse_prices(text)
        elif sep and head.strip() and rest:
            key, prices = parse_model_spec(head.strip()), _in_out(head.strip(), rest)
        else:
            raise UsageError(f"{OPTION}: {text!r} is not MODEL=IN,OUT (USD per 1M input and output tokens, e.g. "
                             "gpt-4o=2.5,10; repeat the option for each model) nor the old in=X,out=Y for every model")
        if key in found:
            raise UsageError(f"{OPTION}: {'every model' if key == EVERY_MODEL else key} is priced twice")
        found[key] = prices
    return found


def _in_out(model: str, text: str) -> Prices:
    """``IN,OUT`` (or ``in=X,out=Y``) of ``MODEL=...``."""
    if "=" in text:
        return parse_prices(text)
    parts = [p.strip() for p in text.split(",")]
    try:
        values = [float(p) for p in parts]
    except ValueError:
        values = []
    if len(values) != 2 or not all(math.isfinite(v) and v >= 0 for v in values):
        raise UsageError(f"{OPTION}: {model}={text!r}: expected two non-negative numbers IN,OUT (USD per 1M input "
                         f"and output tokens, e.g. {model}=2.5,10)")
    return Prices(values[0], values[1])


def table_version() -> str | None:
    """The installed genai-prices' version (None: not installed)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("genai-prices")
    except PackageNotFoundError:
        return None


@lru_cache(maxsize=256)
def list_price(model: str, provider: str, base_url: str | None, day: dt.date) -> ModelPrice | None:
    """``model``'s list price on ``day`` in genai-prices' bundled table (None: not in it, a server of the
    user's, or the package is missing). ``provider`` is the registry's name (``provider_of``)."""
    try:
        from genai_prices import data_snapshot
    except ImportError:
        return None
    provider_id = PROVIDER_IDS.get(provider)
    url = base_url or (REGISTRY[provider].base_url if provider in REGISTRY else None)
    if provider_id is None and not url:
        return None
    snapshot = data_snapshot.get_snapshot()  # the package's own copy: UpdatePrices is never started
    try:
        found_provider, info = snapshot.find_provider_model(model, None, provider_id, None if provider_id else url)
    except LookupError:
        return None
    moment = dt.datetime.combine(day, dt.time(12), tzinfo=dt.timezone.utc)
    price = info.get_prices(moment)
    per_m = [_number(getattr(price, key, None)) for key in ("input_mtok", "output_mtok", "cache_read_mtok")]
    if per_m[0] is None or per_m[1] is None:
        return None
    pages = list(getattr(found_provider, "pricing_urls", None) or [])
    where = f"{TABLE} {table_version()}: {found_provider.id} {info.id}" + (f", {pages[0]}" if pages else "")
    return ModelPrice(model, per_m[0], per_m[1], where, per_m[2])


def _number(value: Any) -> float | None:
    """A price per million tokens as a float; a tiered price at its first tier (the base)."""
    if value is None:
        return None
    base = getattr(value, "base", value)
    try:
        return float(base)
    except (TypeError, ValueError):
        return None


@dataclass
class PriceBook:
    """The prices of a run: ``given`` by ``--sab-price`` (model -> prices; ``EVERY_MODEL`` the old form),
    else the list price on ``day``. ``base_urls``: model -> the base URL its role calls (a model at a
    server of the user's is not in the table)."""

    given: dict[str, Prices] = field(default_factory=dict)
    day: dt.date = field(default_factory=lambda: dt.datetime.now(dt.timezone.utc).date())
    table: bool = True  # whether the list prices are looked up (False: only ``given``)

    def price(self, spec: str, base_url: str | None) -> ModelPrice | None:
        """The price of model ``spec`` reached at ``base_url`` (None: not priced)."""
        return self.price_at(resolve_endpoint(spec, inherited_url=base_url))

    def price_at(self, endpoint: RoleEndpoint) -> ModelPrice | None:
        """The price of a role's model at its endpoint (None: not priced): ``--sab-price`` by the name
        sent or as the user named it, else the list price of the provider that answers it."""
        name = parse_model_spec(endpoint.spec)
        given = self.given.get(name) or self.given.get(endpoint.spec) or self.given.get(EVERY_MODEL)
        if given is not None:
            return ModelPrice(name, given.input_per_m, given.output_per_m, OPTION)
        if not self.table:
            return None
        return list_price(endpoint.name, endpoint.provider_label, endpoint.url, self.day)

    def table_line(self) -> str:
        """Where the prices come from, with their date and version, as the estimate and summary print it."""
        version = table_version()
        if version is None:
            return f"prices: {TABLE} is not installed: only --sab-price prices a model"
        return (f"prices: list prices on {self.day.isoformat()} from {TABLE} {version}'s table ({TABLE_SOURCE}, "
                "the copy inside the installed package: nothing fetched); --sab-price MODEL=IN,OUT overrides")


def price_book(entries: Iterable[str] | str | None, day: dt.date | None = None) -> PriceBook:
    """The run's ``PriceBook`` from ``--sab-price`` (checked: a bad entry is a ``UsageError``)."""
    book = PriceBook(parse_model_prices(entries))
    if day is not None:
        book.day = day
    return book


def unpriced_hint(models: Iterable[str]) -> str:
    """The line naming the models no price covers and how to price them."""
    names = sorted(set(models))
    example = f"{names[0]}=IN,OUT" if names else "MODEL=IN,OUT"
    return (f"not priced: {', '.join(names)} (not in the {TABLE} table, e.g. a model of a server of your own): give "
            f"{OPTION} {example} (USD per 1M input and output tokens, once per model) to price "
            f"{'it' if len(names) == 1 else 'them'}")


def api_models(settings: Settings) -> list[RoleEndpoint]:
    """The endpoint of every model the run calls over an API (``endpoints.run_endpoints``): the agent and
    map_vlm's helpers, each judge's model or its panel's, the guard's; one per role and model."""
    s = settings
    roles = run_endpoints(s).roles
    found = [roles[key] for key in ("agent", "vision", "converter") if key in roles]
    for judge in s.asked_judges:
        panel = s.judge_panels.get(judge)
        found += [roles[f"judge:{judge}:{name}"] for name in panel] if panel else [roles[f"judge:{judge}"]]
    found += [roles["guard"]] if "guard" in roles else []
    return list({(e.role, e.spec): e for e in found}.values())


def sent_names(settings: Settings) -> dict[tuple[str, str], RoleEndpoint]:
    """(role, the model name a request sends) -> the role's endpoint for that model: a call record keeps
    the name it sent (``claude-3-5-sonnet``), its price is looked up by the spec the user wrote
    (``anthropic/claude-3-5-sonnet``, ``RoleEndpoint.spec``)."""
    found: dict[tuple[str, str], RoleEndpoint] = {}
    for endpoint in api_models(settings):
        found.setdefault((endpoint.role, endpoint.name), endpoint)
        found.setdefault((endpoint.role, parse_model_spec(endpoint.spec)), endpoint)
    return found


# -- ``--sab-budget``'s gate before each call ---------------------------------------------------------
#
# ``--sab-budget USD``: the run stops before the model call that would take its cost past the budget.
#
# Why before a call, not after a case: a case of an acting agent makes dozens of calls and a detailed
# judge on gpt-4 costs twelve times the agent per token, so counting finished cases lets a run pass its
# budget by a case's worth, in every process at once. Here each live request is priced before it is
# sent: its prompt counted by its model's tokenizer (``models.tokens``), its answer at the estimate's
# assumption for the role, at the model's price (``--sab-price MODEL=IN,OUT`` or its list price,
# ``models.pricing``). That expected cost is set aside in the run's spending (all processes, the run
# directory's state, under its lock, so calls sent at once cannot pass the budget together); where it
# would pass the budget, the run stops (``budget_spent``) and the call is not made; after an answer its
# real usage takes the place of what was set aside (a request that got no answer gives it back).
# Batched requests (``--sab-batch``) are not sent one by one: their cost is added as each case finishes
# (``runtime``), at the batch price.
#
# Every model a run calls must be priced for a budget to mean anything: ``check_priced`` names the
# ones no price covers, and the option that prices them, before any case runs.

#: the answer's tokens a live request is assumed to cost before it is sent, per role (the estimate's
#: assumptions: a judge's the judge corpus' mean; an agent's a little above the reference plans' mean, 33
#: tokens as a direct planner writes them for all 1050 cases; a guard's its one rating line)
EXPECTED_OUT = {"agent": 40, "judge": JUDGE_OUTPUT_TOKENS, "guard": 6}


def check_priced(settings: Settings, book: PriceBook) -> None:
    """A budget needs every model priced: a ``UsageError`` naming those no price covers."""
    missing = [e.spec for e in api_models(settings) if book.price_at(e) is None]
    if missing:
        raise UsageError("--sab-budget: a budget needs a price for every model the run calls; "
                         + unpriced_hint(missing))


class RunTotal(Protocol):
    """What the gate needs of the run's shared state (``run.breaker.RunState`` is one): its spending,
    kept for every process, and its stop."""

    def reserve(self, usd: float, budget: float) -> tuple[bool, float]: ...

    def spend(self, usd: float, budget: float | None) -> float: ...

    def request_stop(self, reason: str, message: str) -> Stop: ...


@dataclass
class BudgetGate:
    """The budget of one process's clients: ``before`` a live request (stops the run rather than send
    one that would pass the budget), ``after`` its answer (adds its cost to the run's)."""

    budget: float
    book: PriceBook
    state: RunTotal
    _prices: dict[tuple[str, str | None], ModelPrice | None] = field(default_factory=dict)
    _counters: dict[str, TokenCounter] = field(default_factory=dict)
    _reserved: dict[int, float] = field(default_factory=dict)  # id(request params) -> USD set aside for it

    def _price(self, model: Any) -> ModelPrice | None:
        key = (str(model.spec), model.server)
        if key not in self._prices:
            self._prices[key] = self.book.price_at(model.endpoint)
        return self._prices[key]

    def before(self, model: Any, params: dict[str, Any], role: str) -> None:
        """Stop the run (and raise its stop) when this request's expected cost would pass the budget."""
        price = self._price(model)
        if price is None:
            return
        name = str(params.get("model") or model.name)
        if name not in self._counters:
            self._counters[name] = counter_for(name)
        tokens = self._counters[name].messages(params.get("messages") or [], params.get("tools"))
        expected = price.usd(tokens, EXPECTED_OUT.get(role, 40))
        taken, spent = self.state.reserve(expected, self.budget)
        if taken:
            self._reserved[id(params)] = expected
        else:
            stop = self.state.request_stop(
                BUDGET_SPENT, f"--sab-budget ${self.budget:g}: ${spent:.4f} spent, and the next call "
                f"({role}, {name}, about ${expected:.4f}) would pass it; it was not made")
            raise stop.error()

    def after(self, model: Any, params: dict[str, Any], prompt_tokens: int, completion_tokens: int,
              cached_tokens: int = 0) -> None:
        """Put an answered request's cost (its usage as the API returned it) in place of what ``before`` set
        aside for it."""
        price = self._price(model)
        reserved = self._reserved.pop(id(params), 0.0)
        if price is not None:
            self.state.spend(price.usd(prompt_tokens, completion_tokens, cached_tokens) - reserved, None)

    def failed(self, params: dict[str, Any]) -> None:
        """A request that got no answer: what ``before`` set aside for it goes back (a failed request is
        not billed by the providers whose prices the table has)."""
        reserved = self._reserved.pop(id(params), 0.0)
        if reserved:
            self.state.spend(-reserved, None)


def make_gate(settings: Settings, state: RunTotal | None) -> BudgetGate | None:
    """The run's ``BudgetGate`` (None without ``--sab-budget`` or a run state to keep the total in)."""
    if settings.budget is None or state is None:
        return None
    return BudgetGate(settings.budget, price_book(settings.prices), state)


