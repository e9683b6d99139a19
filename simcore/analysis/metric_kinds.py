"""What kind of quantity a metric is, and the range its values cannot leave.

Every scenario declares a :class:`Kind` for each metric its results carry
(``Scenario.kinds``; a glob such as ``participation_*`` covers a family). The
statistics (:mod:`simcore.analysis.stats`) choose every interval and test from it:

- ``proportion``: a yes/no outcome per trial (true/false, or 1/0), or a share of
  such outcomes; values in [0, 1].
- ``score``: a bounded mean or share (a Likert mean in [1, 4], a share of agents
  in [0, 1], a normalized distance); values in [low, high].
- ``count``: a whole number of things, at least 0.
- ``continuous``: any other number, optionally with bounds (a time is at least 0).
- ``category``: a label (a chosen principle, a manifestation); no mean, no interval.
"""

from __future__ import annotations

import fnmatch
import math
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

KIND_NAMES = ("proportion", "score", "count", "continuous", "category")


@dataclass(frozen=True)
class Kind:
    """A metric's kind and bounds (see the module docstring).

    Attributes:
        name: One of :data:`KIND_NAMES`.
        low: The smallest value it can take (None: no bound).
        high: The largest value it can take (None: no bound).
    """

    name: str
    low: float | None = None
    high: float | None = None

    def __post_init__(self) -> None:
        if self.name not in KIND_NAMES:
            raise ValueError(f"kind: must be one of {', '.join(KIND_NAMES)}; got {self.name!r}")
        for end in (self.low, self.high):
            if end is not None and not (isinstance(end, (int, float)) and math.isfinite(end)):
                raise ValueError(f"kind: bounds must be finite numbers or None; got {end!r}")
        if self.low is not None and self.high is not None and self.low >= self.high:
            raise ValueError(f"kind: low must be below high; got [{self.low}, {self.high}]")
        if self.name == "score" and (self.low is None or self.high is None):
            raise ValueError("kind: a score needs both bounds")

    @property
    def bounded(self) -> bool:
        """Whether both ends are finite (then every interval of it stays inside them)."""
        return self.low is not None and self.high is not None

    @property
    def numeric(self) -> bool:
        """Whether its values are numbers (everything but ``category``)."""
        return self.name != "category"

    def span(self) -> float | None:
        """high - low, the largest possible difference of two values (None if unbounded)."""
        return None if not self.bounded else float(self.high) - float(self.low)  # type: ignore[arg-type]

    def violation(self, value: Any) -> str | None:
        """Why ``value`` cannot be a value of this kind, or None when it can (None values always can)."""
        if value is None:
            return None
        if self.name == "category":
            return None if isinstance(value, str) else f"a category is a label (text), not {value!r}"
        if isinstance(value, str) or not isinstance(value, (int, float)):
            return f"{self.name} values are numbers, not {value!r}"
        x = float(value)
        if math.isnan(x):
            return None
        if self.name == "count" and (x != int(x) if math.isfinite(x) else True):
            return f"a count is a whole number, not {value!r}"
        if self.low is not None and x < self.low or self.high is not None and x > self.high:
            return f"{value!r} lies outside {self.range_text()}"
        return None

    def range_text(self) -> str:
        """The bounds in words: ``[0, 1]``, ``>= 0``, ``any number``."""
        fmt = "{:g}".format
        if self.bounded:
            return f"[{fmt(self.low)}, {fmt(self.high)}]"
        if self.low is not None:
            return f">= {fmt(self.low)}"
        if self.high is not None:
            return f"<= {fmt(self.high)}"
        return "any number"

    def label(self) -> str:
        """The kind in words, for tables: ``score in [1, 4]``, ``count >= 0``."""
        if self.name == "category":
            return "category"
        return f"{self.name} {'in ' if self.bounded else ''}{self.range_text()}"

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "low": self.low, "high": self.high}


def proportion() -> Kind:
    """A yes/no outcome per trial, or a share of them: values in [0, 1]."""
    return Kind("proportion", 0.0, 1.0)


def score(low: float, high: float) -> Kind:
    """A bounded mean or share: values in [low, high]."""
    return Kind("score", float(low), float(high))


def count() -> Kind:
    """A whole number of things: 0, 1, 2, ..."""
    return Kind("count", 0.0, None)


def continuous(low: float | None = None, high: float | None = None) -> Kind:
    """Any other number, with optional bounds."""
    return Kind("continuous", None if low is None else float(low), None if high is None else float(high))


def category() -> Kind:
    """A label: no mean, no interval, no test."""
    return Kind("category")


def kind_of(kinds: Mapping[str, Kind], metric: str, proportions: Iterable[str] = ()) -> Kind | None:
    """The declared kind of ``metric``: an exact name first, then the first glob that
    matches it (in declaration order), then ``proportions`` (the older
    ``Scenario.proportions``); None when nothing declares it."""
    if metric in kinds:
        return kinds[metric]
    for pattern, kind in kinds.items():
        if any(c in pattern for c in "*?[") and fnmatch.fnmatchcase(metric, pattern):
            return kind
    return proportion() if metric in set(proportions) else None


def inferred(values: Iterable[Any]) -> Kind:
    """The kind of an undeclared metric, from its values: true/false values are a
    proportion, text a category, anything else continuous (so t intervals, as before kinds)."""
    seen = [v for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]
    if seen and all(isinstance(v, bool) for v in seen):
        return proportion()
    if seen and all(isinstance(v, str) for v in seen):
        return category()
    return continuous()


def check_metrics(kinds: Mapping[str, Kind], metrics: Mapping[str, Any],
                  proportions: Iterable[str] = ()) -> list[str]:
    """One line per metric of a results object that has no declared kind or a value
    its kind does not allow (empty when all is well)."""
    problems = []
    for name, value in metrics.items():
        kind = kind_of(kinds, name, proportions)
        if kind is None:
            problems.append(f"{name}: no declared kind (value {value!r})")
            continue
        why = kind.violation(value)
        if why:
            problems.append(f"{name}: {why} (declared {kind.label()})")
    return problems
