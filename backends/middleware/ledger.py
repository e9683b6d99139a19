"""The cost ledger and the budget: a worst-case reservation before each call, the actual cost after."""

from __future__ import annotations

import math

from backends.base import LLMRequest, Usage
from backends.errors import BudgetExceeded, UnpricedModel
from backends.pricing import PriceTable, cost_usd, price_line


def prompt_upper_estimate(request: LLMRequest) -> int:
    """A generous prompt-token estimate: one token per 3 characters, 4 per message.

    Most tokenizers give about one token per 4 English characters; the margin keeps
    budget reservations and TPM pacing on the safe side.
    """
    return sum(math.ceil(len(m.content) / 3) + 4 for m in request.messages)


class Ledger:
    """Spending so far, per model, and the budget cap.

    Before a request is sent it reserves its worst case (prompt estimate at the
    input price plus ``max_tokens`` at the output price); the request is refused
    with :class:`BudgetExceeded` if spent + reserved + worst case would pass the
    budget. When the response arrives the reservation becomes the actual cost (the
    worst case if the provider reported no usage). Shared by every provider of a
    run, and by every trial of a sweep that shares the backend.
    """

    def __init__(self, prices: PriceTable, budget_usd: float | None = None) -> None:
        self.prices = prices
        self.budget_usd = budget_usd
        self.spent_usd = 0.0
        self.reserved_usd = 0.0
        self.by_model: dict[str, dict[str, float]] = {}

    def worst_case(self, request: LLMRequest, max_out: int | None = None) -> float | None:
        """Upper cost estimate of ``request`` (``max_out``: its output cap as sent, reasoning
        allowance included; default ``max_tokens``), or None when its model has no price."""
        out = request.max_tokens if max_out is None else max_out
        return cost_usd(request.model, prompt_upper_estimate(request), out, self.prices)

    def reserve(self, request: LLMRequest, max_out: int | None = None) -> float:
        """Reserve the worst case of ``request`` (see :meth:`worst_case`); return the amount reserved.

        Raises:
            UnpricedModel: a budget is set and the model has no price.
            BudgetExceeded: the request could take spending past the budget.
        """
        if self.budget_usd is None:
            return 0.0
        worst = self.worst_case(request, max_out)
        if worst is None:
            raise UnpricedModel(
                f"budget: model {request.model!r} has no price, so --budget-usd cannot be enforced; "
                f"add {price_line(request.model)}"
            )
        if self.spent_usd + self.reserved_usd + worst > self.budget_usd + 1e-12:
            raise BudgetExceeded(
                f"budget: a call to {request.model} could cost up to ${worst:.6f}; "
                f"${self.spent_usd:.6f} spent and ${self.reserved_usd:.6f} reserved of ${self.budget_usd:.6f}"
            )
        self.reserved_usd += worst
        return worst

    def release(self, reserved: float) -> None:
        """Drop a reservation whose request failed."""
        self.reserved_usd = max(0.0, self.reserved_usd - reserved)

    def settle(self, request: LLMRequest, reserved: float, usage: Usage | None) -> float:
        """Turn a reservation into the actual cost; return that cost."""
        self.release(reserved)
        led = self.by_model.setdefault(
            request.model, {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "cost_usd": 0.0}
        )
        led["calls"] += 1
        if usage is None:
            cost = reserved  # the worst case when a budget reserved it (reserve refuses unpriced models)
        else:
            led["prompt_tokens"] += usage.prompt_tokens
            led["completion_tokens"] += usage.completion_tokens
            cost = cost_usd(request.model, usage.prompt_tokens, usage.completion_tokens, self.prices,
                            usage.reasoning_tokens, usage.cached_tokens) or 0.0
        led["cost_usd"] += cost
        self.spent_usd += cost
        return cost
