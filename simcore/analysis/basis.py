"""What a figure rests on: how many readable replies (or agents, or moves) of how many.

A metric is computed from readable replies only. Its *basis* says how many it
used (``n``) of how many it could have used (``of``), in which unit, and why
some (or all) were left out. A scenario's results carry ``basis``: metric name ->
:meth:`Basis.to_dict`; the printed summary shows the basis wherever it is less
than all (``-0.420 (2 of 3 peers readable)``) and ``n/a`` with the reason where
it is none; batch tables carry ``readable.<metric>`` (n / of).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Mapping


@dataclass(frozen=True)
class Basis:
    """How many items a figure rests on.

    Attributes:
        n: Items used (readable).
        of: Items the figure could have used.
        unit: What an item is ("peers", "agents", "moves", "replies", ...).
        reason: Why items were left out (None when none were).
    """

    n: int
    of: int
    unit: str = "replies"
    reason: str | None = None

    @property
    def share(self) -> float | None:
        """n / of (None when there was nothing to use)."""
        return self.n / self.of if self.of else None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def basis(n: int, of: int, unit: str, reason: str | None = None) -> Basis:
    """A :class:`Basis`; when items were left out, ``reason`` (default: how many were
    unreadable or missing) says why."""
    if n >= of:
        return Basis(n, of, unit, None)
    return Basis(n, of, unit, reason or f"{of - n} of {of} {unit} unreadable or missing")


def shown(value: float | None, b: Mapping[str, Any] | Basis | None, spec: str = ".3f") -> str:
    """A figure for the terminal: the value, its basis when partial, n/a with the reason when none."""
    if isinstance(b, Basis):
        b = b.to_dict()
    if value is None:
        if b and b.get("of"):
            return f"n/a ({b.get('reason') or 'no readable ' + b.get('unit', 'replies')})"
        return "n/a"
    text = format(value, spec)
    if b and b.get("of") and b.get("n", 0) < b["of"]:
        text += f" ({b['n']} of {b['of']} {b.get('unit', 'replies')} readable)"
    return text


def shares(bases: Mapping[str, Mapping[str, Any]]) -> dict[str, float | None]:
    """Flat columns for results tables: ``readable.<metric>`` = n / of."""
    return {f"readable.{m}": (b["n"] / b["of"] if b.get("of") else None) for m, b in bases.items()}
