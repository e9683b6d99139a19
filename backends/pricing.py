"""Token prices and costs.

Prices are USD per million tokens, input and output, per model, kept as data in
``backends/prices.json`` with the page each was read from and the day. Where a
provider prices them apart, an entry also has ``cached_input`` (prompt tokens read
from the provider's cache) and ``reasoning`` (reasoning tokens); without them those
tokens cost the input and output prices. Users override or extend them with their own JSON file,
named by the ``SIMCORE_PRICES`` environment variable or passed in (``--prices``).
A model with no price costs nothing but is listed in ``unpriced``, so a missing
price never hides behind a zero silently.

A model string is looked up as written, then without its preset prefix
(``openrouter:``), then without its vendor (``google/``); keys may also be glob
patterns (``"llamacpp:*"``), the longest matching pattern winning. A
:class:`PriceTable` can also declare models free (local servers, the stub).
"""

from __future__ import annotations

import fnmatch
import json
import os
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Mapping

DEFAULT_PRICES = Path(__file__).with_name("prices.json")


@lru_cache(maxsize=8)
def load_prices(path: str | None = None) -> dict[str, dict[str, float]]:
    """The built-in table, updated by ``path`` or ``$SIMCORE_PRICES`` if given."""
    table = _read(DEFAULT_PRICES)
    override = path or os.environ.get("SIMCORE_PRICES")
    if override:
        table.update(_read(Path(override)))
    return table


PRICES = ("input", "output", "cached_input", "reasoning")
_NOTES = ("source", "checked", "note")


def _read(path: Path) -> dict[str, dict[str, float]]:
    try:
        raw = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"prices: cannot read {str(path)!r}: {exc}") from None
    if not isinstance(raw, Mapping):
        raise ValueError(f"prices: {str(path)!r} must hold an object of models")
    out: dict[str, dict[str, float]] = {}
    for model, entry in raw.items():
        if model.startswith("_"):
            continue
        if not isinstance(entry, Mapping) or not {"input", "output"} <= set(entry):
            raise ValueError(f"prices: {model!r} needs 'input' and 'output' USD per million tokens")
        unknown = sorted(set(entry) - set(PRICES) - set(_NOTES))
        if unknown:
            raise ValueError(f"prices: {model}.{unknown[0]}: unknown field; known: {', '.join(PRICES + _NOTES)}")
        prices = {}
        for name in PRICES:
            if name in entry:
                value = entry[name]
                if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                    raise ValueError(f"prices: {model}.{name}: must be a number >= 0 (USD per million tokens), "
                                     f"got {value!r}")
                prices[name] = float(value)
        out[model] = prices
    return out


_FREE = {"input": 0.0, "output": 0.0}


def price_of(model: str, table: Mapping[str, Mapping[str, float]]) -> Mapping[str, float] | None:
    """The price entry of ``model`` (see the module docstring for the lookup order)."""
    if isinstance(table, PriceTable):
        return table.lookup(model)
    candidates = [model]
    rest = model.partition(":")[2] if ":" in model.split("/", 1)[0] else ""
    if rest:
        candidates.append(rest)
    tail = (rest or model).rsplit("/", 1)[-1]
    if tail not in candidates:
        candidates.append(tail)
    for name in candidates:
        entry = table.get(name)
        if entry is not None:
            return entry
    patterns = [k for k in table if any(c in k for c in "*?[") and fnmatch.fnmatchcase(model, k)]
    if patterns:
        return table[max(patterns, key=lambda k: (len(k), k))]
    return None


class PriceTable(Mapping[str, Mapping[str, float]]):
    """A price table (a read-only mapping) plus a rule for models that cost nothing.

    Args:
        entries: Model (or pattern) -> {"input", "output"} USD per million tokens.
        free: Returns True for models that are free whatever the table says.
    """

    def __init__(self, entries: Mapping[str, Mapping[str, float]],
                 free: Callable[[str], bool] | None = None) -> None:
        self._entries = dict(entries)
        self._free = free

    @classmethod
    def load(cls, path: str | None = None, free: Callable[[str], bool] | None = None) -> "PriceTable":
        """The built-in table updated by ``path`` (or ``$SIMCORE_PRICES``)."""
        return cls(load_prices(path), free)

    def lookup(self, model: str) -> Mapping[str, float] | None:
        """The price entry of ``model``, or None."""
        if self._free is not None and self._free(model):
            return _FREE
        return price_of(model, self._entries)

    def __getitem__(self, key: str) -> Mapping[str, float]:
        return self._entries[key]

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)


def cost_usd(model: str, prompt_tokens: int, completion_tokens: int,
             prices: Mapping[str, Mapping[str, float]] | None = None, reasoning_tokens: int = 0,
             cached_tokens: int = 0) -> float | None:
    """Cost of one model's usage, or None when the model has no price.

    ``reasoning_tokens`` are part of ``completion_tokens`` and ``cached_tokens`` part of
    ``prompt_tokens``; each costs its own price where the entry has one.
    """
    table = load_prices() if prices is None else prices
    entry = price_of(model, table)
    if entry is None:
        return None
    cached = min(cached_tokens, prompt_tokens)
    reasoning = min(reasoning_tokens, completion_tokens)
    return ((prompt_tokens - cached) * entry["input"] + cached * entry.get("cached_input", entry["input"])
            + (completion_tokens - reasoning) * entry["output"]
            + reasoning * entry.get("reasoning", entry["output"])) / 1e6


def price_line(model: str) -> str:
    """The --prices file line that would price ``model`` (to be filled in from the provider's page)."""
    name = model.partition(":")[2] if ":" in model.split("/", 1)[0] else model
    return (f'{{"{name}": {{"input": <USD per million input tokens>, "output": <USD per million output '
            f'tokens>}}}} in a JSON file passed with --prices FILE')


def usage_cost(usage: Mapping[str, Mapping[str, Any]],
               prices: Mapping[str, Mapping[str, float]] | None = None) -> dict[str, Any]:
    """Total cost of a run's per-model usage ledger, with the unpriced models listed."""
    total, per_model, unpriced = 0.0, {}, []
    for model, led in usage.items():
        c = cost_usd(model, led.get("prompt_tokens", 0), led.get("completion_tokens", 0), prices,
                     led.get("reasoning_tokens", 0), led.get("cached_tokens", 0))
        if c is None:
            unpriced.append(model)
        else:
            total += c
        per_model[model] = c
    return {"cost_usd": total, "cost_by_model": per_model, "unpriced_models": sorted(unpriced)}
