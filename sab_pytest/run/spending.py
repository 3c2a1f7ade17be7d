"""``--sab-budget USD``: the run stops before the model call that would take its cost past the budget.

Why before a call, not after a case: a case of an acting agent makes dozens of calls and a detailed
judge on gpt-4 costs twelve times the agent per token, so counting finished cases lets a run pass its
budget by a case's worth, in every process at once. Here each live request is priced before it is
sent: its prompt counted by its model's tokenizer (``models.tokens``), its answer at the estimate's
assumption for the role, at the model's price (``--sab-price MODEL=IN,OUT`` or its list price,
``models.pricing``). That expected cost is set aside in the run's spending (all processes, the run
directory's state, under its lock, so calls sent at once cannot pass the budget together); where it
would pass the budget, the run stops (``budget_spent``) and the call is not made; after an answer its
real usage takes the place of what was set aside (a request that got no answer gives it back).
Batched requests (``--sab-batch``) are not sent one by one: their cost is added as each case finishes
(``runtime``), at the batch price.

Every model a run calls must be priced for a budget to mean anything: ``check_priced`` names the
ones no price covers, and the option that prices them, before any case runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sab_pytest.errors import BUDGET_SPENT, UsageError

if TYPE_CHECKING:
    from sab_pytest.models.pricing import ModelPrice, PriceBook
    from sab_pytest.models.tokens import TokenCounter
    from sab_pytest.run.breaker import RunState
    from sab_pytest.settings import Settings

#: the answer's tokens a live request is assumed to cost before it is sent, per role (the estimate's
#: assumptions: a judge's from the judge corpus; an agent's plan, about the mean reference plan)
EXPECTED_OUT = {"agent": 40, "judge": 14, "guard": 6}


def check_priced(settings: Settings, book: PriceBook) -> None:
    """A budget needs every model priced: a ``UsageError`` naming those no price covers."""
    from sab_pytest.models.pricing import api_models, unpriced_hint

    missing = [spec for _role, spec, url in api_models(settings) if book.price(spec, url) is None]
    if missing:
        raise UsageError("--sab-budget: a budget needs a price for every model the run calls; "
                         + unpriced_hint(missing))


@dataclass
class BudgetGate:
    """The budget of one process's clients: ``before`` a live request (stops the run rather than send
    one that would pass the budget), ``after`` its answer (adds its cost to the run's)."""

    budget: float
    book: PriceBook
    state: RunState
    _prices: dict[tuple[str, str | None], ModelPrice | None] = field(default_factory=dict)
    _counters: dict[str, TokenCounter] = field(default_factory=dict)
    _reserved: dict[int, float] = field(default_factory=dict)  # id(request params) -> USD set aside for it

    def _price(self, model: Any) -> ModelPrice | None:
        key = (str(model.spec), model.server)
        if key not in self._prices:
            self._prices[key] = self.book.price(str(model.spec), model.server)
        return self._prices[key]

    def before(self, model: Any, params: dict[str, Any], role: str) -> None:
        """Stop the run (and raise its stop) when this request's expected cost would pass the budget."""
        from sab_pytest.models.tokens import counter_for

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

    def after(self, model: Any, params: dict[str, Any], prompt_tokens: int, completion_tokens: int) -> None:
        """Put an answered request's cost (its usage as the API returned it) in place of what ``before`` set
        aside for it."""
        price = self._price(model)
        reserved = self._reserved.pop(id(params), 0.0)
        if price is not None:
            self.state.spend(price.usd(prompt_tokens, completion_tokens) - reserved, None)

    def failed(self, params: dict[str, Any]) -> None:
        """A request that got no answer: what ``before`` set aside for it goes back (a failed request is
        not billed by the providers whose prices the table has)."""
        reserved = self._reserved.pop(id(params), 0.0)
        if reserved:
            self.state.spend(-reserved, None)


def make_gate(settings: Settings, state: RunState | None) -> BudgetGate | None:
    """The run's ``BudgetGate`` (None without ``--sab-budget`` or a run state to keep the total in)."""
    if settings.budget is None or state is None:
        return None
    from sab_pytest.models.pricing import price_book

    return BudgetGate(settings.budget, price_book(settings.prices), state)


