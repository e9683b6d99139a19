"""What a metric means to a reader: its name in words, its unit, what it measures.

A scenario declares, beside each metric's :class:`~simcore.analysis.metric_kinds.Kind`
(what statistics may do with it), a :class:`Metric` (how people read it):
``Scenario.metrics`` maps a name, or a glob for a family (``"participation_*"``),
to one. The run browser and the glossary page show them: a metric's label and
description on hover and on ``/glossary``, its value in its unit (money with its
currency sign and thousands separators, a share as a percentage where the scenario
says so), and the scenario's *key* metrics, in their declared order, on top of every
page about its runs and in the runs table. A scenario that declares none still works:
its metrics show by name, and the first few numeric ones stand in for key metrics.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from typing import Any, Mapping

#: The unit that marks money (printed ``$1,234.50``); other units are printed after the number.
MONEY = "USD"


@dataclass(frozen=True)
class Metric:
    """How people read one metric (``Scenario.metrics``).

    Attributes:
        label: Its name in words, short, for headlines and tables ("cooperation rate").
        description: What it measures and over what, in a sentence or two (shown on
            hover and on the glossary page).
        unit: ``"USD"`` for money; another unit (``"s"``, ``"bits"``, ``"tokens"``) is
            printed after the number; empty for a pure number.
        percent: A share in [0, 1] shown as a percentage (and a difference of two
            shares in percentage points).
        key: One of the scenario's key metrics: shown, in declaration order, on top
            of every page about its runs and in the runs table.
    """

    label: str
    description: str = ""
    unit: str = ""
    percent: bool = False
    key: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.label, str) or not self.label.strip():
            raise ValueError("metric: label must be a non-empty text")
        if self.percent and self.unit:
            raise ValueError(f"metric {self.label!r}: a percentage has no unit; got unit {self.unit!r}")

    @property
    def money(self) -> bool:
        """Whether its values are amounts of money."""
        return self.unit == MONEY

    def to_dict(self) -> dict[str, Any]:
        return {"label": self.label, "description": self.description, "unit": self.unit,
                "percent": self.percent, "key": self.key}


def metric_of(metrics: Mapping[str, Metric], name: str) -> Metric | None:
    """The declaration of ``name``: an exact name first, then the first glob that matches
    it (in declaration order); None when nothing declares it."""
    if name in metrics:
        return metrics[name]
    for pattern, metric in metrics.items():
        if any(c in pattern for c in "*?[") and fnmatch.fnmatchcase(name, pattern):
            return metric
    return None


def key_metrics(metrics: Mapping[str, Metric]) -> list[str]:
    """The declared key metrics, in declaration order (exact names; a glob cannot be key)."""
    return [name for name, m in metrics.items() if m.key and not any(c in name for c in "*?[")]
