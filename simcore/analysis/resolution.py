"""Figures at their resolution: a value within float noise of 0 is shown as 0.

Floating-point arithmetic leaves residues where the exact answer is 0: the cosine
distance of a text to itself is 3.55e-15, the mean of such values 8.88e-16. Shown as
figures they read as effects. What counts as noise depends on the metric's scale: its
declared range where it has one (a score in [0, 2] has scale 2), else the magnitude of
the values the figure comes from. A value within :data:`NOISE` of that scale is shown
as 0 in every table, printout, CSV summary and browser cell; the per-trial data that
figures are computed from (``results.csv``, ``trials.csv``, each run's
``results.json``) stay exact.

:func:`figure` is the one way a figure becomes text; :func:`at_resolution` the one way
a value is rounded to its resolution (for tables written as numbers).
"""

from __future__ import annotations

import math
from typing import Any, Iterable, Sequence

#: Relative size below which a value is float noise of 0.
NOISE = 1e-12


def scale_of(bounds: Sequence[float | None] | None = None, values: Iterable[Any] = ()) -> float | None:
    """The scale a metric's figures are read against: the width of its declared range
    (``bounds``: [low, high]) where it has both ends, else the largest magnitude among
    ``values`` (None without any)."""
    if bounds is not None and len(bounds) == 2 and bounds[0] is not None and bounds[1] is not None:
        return float(bounds[1]) - float(bounds[0])
    seen = [abs(float(v)) for v in values if _number(v) and math.isfinite(float(v))]
    return max(seen) if seen else None


def at_resolution(x: Any, scale: float | None) -> Any:
    """``x``, or 0.0 where it is a number within :data:`NOISE` of 0 relative to ``scale``
    (anything else, and every value without a scale, is returned as it is)."""
    if not _number(x) or scale is None or not math.isfinite(scale) or scale <= 0:
        return x
    return 0.0 if abs(float(x)) <= NOISE * scale else x


def figure(x: Any, spec: str = ".3g", scale: float | None = None, missing: str = "n/a") -> str:
    """A value as text: ``missing`` for None or NaN, 0 for float noise (:func:`at_resolution`),
    never a negative zero, else ``format(x, spec)``."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return missing
    if not _number(x):
        return str(x)
    x = at_resolution(x, scale)
    return format(x + 0.0 if isinstance(x, float) else x, spec)  # -0.0 + 0.0 is 0.0


def _number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)
