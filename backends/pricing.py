"""Token prices and costs.

Prices are USD per million tokens, input and output, per model, kept as data in
``backends/prices.json``. Users override or extend them with their own JSON file,
named by the ``SIMCORE_PRICES`` environment variable or passed in. A model with no
price costs nothing but is listed in ``unpriced``, so a missing price never hides
behind a zero silently.
"""

from __future__ import annotations

import json
import os
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping

DEFAULT_PRICES = Path(__file__).with_name("prices.json")


@lru_cache(maxsize=8)
def load_prices(path: str | None = None) -> dict[str, dict[str, float]]:
    """The built-in table, updated by ``path`` or ``$SIMCORE_PRICES`` if given."""
    table = _read(DEFAULT_PRICES)
    override = path or os.environ.get("SIMCORE_PRICES")
    if override:
        table.update(_read(Path(override)))
    return table


def _read(path: Path) -> dict[str, dict[str, float]]:
    try:
        raw = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"prices: cannot read {str(path)!r}: {exc}") from None
    out: dict[str, dict[str, float]] = {}
    for model, entry in raw.items():
        if model.startswith("_"):
            continue
        if not isinstance(entry, Mapping) or not {"input", "output"} <= set(entry):
            raise ValueError(f"prices: {model!r} needs 'input' and 'output' USD per million tokens")
        out[model] = {"input": float(entry["input"]), "output": float(entry["output"])}
    return out


def cost_usd(model: str, prompt_tokens: int, completion_tokens: int,
             prices: Mapping[str, Mapping[str, float]] | None = None) -> float | None:
    """Cost of one model's usage, or None when the model has no price."""
    table = load_prices() if prices is None else prices
    entry = table.get(model)
    if entry is None:
        return None
    return (prompt_tokens * entry["input"] + completion_tokens * entry["output"]) / 1e6


def usage_cost(usage: Mapping[str, Mapping[str, Any]],
               prices: Mapping[str, Mapping[str, float]] | None = None) -> dict[str, Any]:
    """Total cost of a run's per-model usage ledger, with the unpriced models listed."""
    total, per_model, unpriced = 0.0, {}, []
    for model, led in usage.items():
        c = cost_usd(model, led.get("prompt_tokens", 0), led.get("completion_tokens", 0), prices)
        if c is None:
            unpriced.append(model)
        else:
            total += c
        per_model[model] = c
    return {"cost_usd": total, "cost_by_model": per_model, "unpriced_models": sorted(unpriced)}
