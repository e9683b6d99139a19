"""The counters of the providers' work: per run, per trial, and both at once."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class ProviderStats:
    """Counters of one provider, for a whole run or for one trial (wall-clock side; never traced).

    Attributes:
        requests: Requests made (each may take several attempts).
        attempts: HTTP attempts sent.
        retries: Attempts repeated after a transient fault (probes of an open
            circuit breaker are not retries).
        failures: Requests that failed for good.
        max_in_flight: The most attempts in flight at once.
        prompt_tokens: Prompt tokens the provider reported.
        completion_tokens: Completion tokens the provider reported.
        cost_usd: What the ledger charged (the worst case when usage was missing).
        errors: Failed attempts by error type.
    """

    requests: int = 0
    attempts: int = 0
    retries: int = 0
    failures: int = 0
    in_flight: int = 0
    max_in_flight: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    errors: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {k: (dict(v) if isinstance(v, dict) else v) for k, v in self.__dict__.items() if k != "in_flight"}


class CallTally:
    """One trial's share of its providers' work: :class:`ProviderStats` per provider."""

    def __init__(self) -> None:
        self.providers: dict[str, ProviderStats] = {}

    def of(self, provider: str) -> ProviderStats:
        """The counters of ``provider`` (created on first use)."""
        stats = self.providers.get(provider)
        if stats is None:
            stats = self.providers[provider] = ProviderStats()
        return stats

    def to_dict(self) -> dict[str, Any]:
        return {name: s.to_dict() for name, s in sorted(self.providers.items())}


class Books:
    """The counters one request updates: its provider's and its trial's."""

    __slots__ = ("books",)

    def __init__(self, *books: ProviderStats | None) -> None:
        self.books = [b for b in books if b is not None]

    def add(self, name: str, n: int | float = 1) -> None:
        for b in self.books:
            setattr(b, name, getattr(b, name) + n)

    def error(self, kind: str) -> None:
        for b in self.books:
            b.errors[kind] = b.errors.get(kind, 0) + 1

    def enter(self) -> None:
        for b in self.books:
            b.in_flight += 1
            b.max_in_flight = max(b.max_in_flight, b.in_flight)

    def leave(self) -> None:
        for b in self.books:
            b.in_flight -= 1
