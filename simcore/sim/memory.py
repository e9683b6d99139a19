"""Memory strategies: which visible messages enter an agent's prompt.

- ``full``: everything the agent has seen;
- ``recent:K``: the last K messages.

Both take an optional context budget in (estimated) tokens: the oldest messages
are dropped until the rest fit. ``trim`` applies a tighter budget for one prompt:
that is how a request is fitted to a model's context window
(:mod:`simcore.sim.fitting`). Summary memory needs an LLM call, so it is a scenario
step, not a strategy here (see the veil-of-ignorance scenario).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from backends.base import estimate_tokens
from simcore.base.config import ConfigError
from simcore.sim.messages import Message


def render(messages: Sequence[Message]) -> str:
    """Render messages as ``speaker: text`` lines."""
    return "\n".join([f"{m.speaker}: {m.text}" for m in messages])  # (a list joins faster than a generator)


def _fit(messages: Sequence[Message], budget: int | None) -> Sequence[Message]:
    if budget is None:
        return messages
    kept, used = 0, 0
    for m in reversed(messages):
        cost = estimate_tokens(m.speaker) + estimate_tokens(m.text) + 1
        if used + cost > budget:
            break
        used += cost
        kept += 1
    return messages[len(messages) - kept :]


@dataclass(frozen=True, slots=True)
class FullMemory:
    """Every visible message, within ``budget_tokens`` if set."""

    budget_tokens: int | None = None

    def select(self, messages: Sequence[Message]) -> Sequence[Message]:
        """Return the messages that enter the prompt."""
        return _fit(messages, self.budget_tokens)

    def trim(self, messages: Sequence[Message], budget: int) -> Sequence[Message]:
        """The selection within ``budget`` tokens at most: the oldest messages dropped first."""
        return _fit(self.select(messages), budget)


@dataclass(frozen=True, slots=True)
class RecentMemory:
    """The last ``k`` visible messages, within ``budget_tokens`` if set."""

    k: int = 5
    budget_tokens: int | None = None

    def select(self, messages: Sequence[Message]) -> Sequence[Message]:
        """Return the messages that enter the prompt."""
        return _fit(messages[-self.k :] if self.k else [], self.budget_tokens)

    def trim(self, messages: Sequence[Message], budget: int) -> Sequence[Message]:
        """The selection within ``budget`` tokens at most: the oldest messages dropped first."""
        return _fit(self.select(messages), budget)


Memory = FullMemory | RecentMemory


def make_memory(spec: str, budget_tokens: int | None = None) -> Memory:
    """Build a strategy from ``"full"`` or ``"recent:K"``.

    Raises:
        ValueError: for an unknown strategy or a bad K.
    """
    name, _, arg = spec.partition(":")
    if name == "full" and not arg:
        return FullMemory(budget_tokens)
    if name in ("recent", "recent_k", "recent-k"):
        k = int(arg) if arg.isdigit() else 5 if not arg else -1
        if k < 1:
            raise ConfigError(f"memory: recent:K needs an integer K >= 1, got {spec!r}")
        return RecentMemory(k, budget_tokens)
    raise ConfigError(f"memory: must be 'full' or 'recent:K', got {spec!r}")
