"""Figures as the run browser prints them: each by its kind, every column at one resolution.

A metric's declaration (:class:`~simcore.analysis.glossary.Metric`) says its unit and
whether it is a percentage; its :class:`~simcore.analysis.metric_kinds.Kind` whether it
counts things. :func:`format_for` turns those and the values a column will show into a
:class:`Format`, which prints every value of the column alike:

- money: ``$14,000``, ``$0.911`` (currency sign, thousands separators);
- a percentage: ``82.2%``, and a difference of two in percentage points, ``+16.7 pp``;
- a count: ``1,234``;
- any other number: three significant digits of the column's largest value, the same
  number of decimals for every row (``0.744``, ``0.030``; ``264``; ``3.67``), thousands
  separated, and its unit after it (``264 s``);
- true/false as yes/no (and a yes/no proportion whose values are all 0 or 1), a label as
  it is, a missing value as ``-``.

p-values print as ``0.046`` or ``<0.001``. Values within float noise of 0 are made 0
before they get here (:mod:`simcore.view.figures`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable

from simcore.analysis.glossary import Metric
from simcore.analysis.metric_kinds import Kind

MISSING = "-"
#: Significant digits of a column's largest value.
DIGITS = 3
MAX_DECIMALS = 6


def is_number(v: Any) -> bool:
    """A finite int or float (not a bool)."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def decimals_for(values: Iterable[Any], digits: int = DIGITS) -> int:
    """Decimals that give the largest of ``values`` ``digits`` significant digits (0 for whole numbers)."""
    nums = [v for v in values if is_number(v)]
    if not nums or all(isinstance(v, int) or float(v).is_integer() and abs(v) >= 10 ** (digits - 1)
                       for v in nums):
        return 0
    top = max(abs(v) for v in nums)
    if top == 0:
        return digits
    return min(MAX_DECIMALS, max(0, digits - 1 - math.floor(math.log10(top))))


@dataclass(frozen=True)
class Format:
    """How one column's values print (see the module docstring)."""

    decimals: int = DIGITS
    money: bool = False
    percent: bool = False
    unit: str = ""
    yes_no: bool = False

    def text(self, v: Any) -> str:
        """A value."""
        return self._text(v, signed=False)

    def diff(self, v: Any) -> str:
        """A difference of two values: signed; of percentages, in percentage points."""
        return self._text(v, signed=True)

    def interval(self, low: Any, high: Any) -> str:
        """An interval of a difference, its unit said once: ``[+0.011, +0.119]``, ``[-1.2, +3.4] pp``;
        ``n/a`` without both ends."""
        if not (is_number(low) and is_number(high)):
            return "n/a"
        bare = Format(self.decimals, self.money)
        if self.percent:
            return f"[{bare.diff(low * 100)}, {bare.diff(high * 100)}] pp"
        return f"[{bare.diff(low)}, {bare.diff(high)}]" + (f" {self.unit}" if self.unit else "")

    def span(self, low: Any, high: Any) -> str:
        """A range of values, its unit said once: ``0.403 to 0.437``, ``30.0% to 90.3%``; empty without both ends."""
        if not (is_number(low) and is_number(high)):
            return ""
        if self.unit:
            bare = Format(self.decimals)
            return f"{bare.text(low)} to {bare.text(high)} {self.unit}"
        return f"{self.text(low)} to {self.text(high)}"

    def _text(self, v: Any, signed: bool) -> str:
        if isinstance(v, bool) or self.yes_no and v in (0, 1):
            return "yes" if v else "no"
        if isinstance(v, str):
            return v
        if not is_number(v):
            return MISSING
        v = v + 0.0 if isinstance(v, float) else v  # never a negative zero
        if self.percent:
            body = f"{abs(v) * 100:,.1f}"
            sign = _sign(v, signed)
            return f"{sign}{body} pp" if signed else f"{sign}{body}%"
        body = f"{abs(v):,.{self.decimals}f}"
        if float(body.replace(",", "")) == 0:
            sign = "+" if signed else ""  # a value that rounds to 0 shows no minus
        else:
            sign = _sign(v, signed)
        if self.money:
            return f"{sign}${body}"
        return f"{sign}{body}" + (f" {self.unit}" if self.unit else "")


def _sign(v: float, signed: bool) -> str:
    return "-" if v < 0 else ("+" if signed else "")


def format_for(values: Iterable[Any], metric: Metric | None = None, kind: Kind | None = None,
               trials: bool = False) -> Format:
    """The format of a column of one metric's ``values`` (or of one value); ``trials``: one value
    per trial, where a yes/no outcome stored as 0 and 1 (a sweep's ledger) reads as yes/no."""
    values = list(values)
    if metric is not None and metric.percent:
        return Format(1, percent=True)
    nums = [v for v in values if is_number(v)]
    if trials and kind is not None and kind.name == "proportion" and nums and all(v in (0, 1) for v in nums):
        return Format(0, yes_no=True)
    decimals = 0 if kind is not None and kind.name == "count" and all(
        isinstance(v, int) or is_number(v) and float(v).is_integer() for v in values if is_number(v)) \
        else decimals_for(values)
    money = metric is not None and metric.money
    if money and decimals:  # cents at least; a column of zeros as $0.00
        decimals = 2 if all(v == 0 for v in values if is_number(v)) else max(decimals, 2)
    return Format(decimals, money=money, unit="" if metric is None or money else metric.unit)


def p_text(p: Any) -> str:
    """A p-value: three decimals, ``<0.001`` below them."""
    if not is_number(p):
        return MISSING
    return "<0.001" if p < 0.0005 else f"{p:.3f}"


def effect_text(d: Any) -> str:
    """An effect size (Cohen's d): signed, two decimals."""
    return f"{d + 0.0:+.2f}" if is_number(d) else MISSING
