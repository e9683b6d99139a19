"""What the compare page says about two runs: how they are labelled, and where their texts differ.

Two runs come to the compare page as a perturbation pair (a baseline and the same
run perturbed) or as two conditions of a Monte Carlo or sweep (``biased=true``
against ``biased=false``, on one seed). The structural distance of
:mod:`simcore.analysis.divergence` is the measure for the first: a perturbation shows in
what happens. Two conditions usually make the same calls in the same order, so
their structures match while every reply may differ; for them the page leads with
the texts: of the aligned events that carry text (messages and replies), how many
differ, and each agent's first one that does.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from simcore.analysis.divergence import Comparison


@dataclass(frozen=True)
class Pair:
    """How two runs relate.

    Attributes:
        kind: "perturbation" (one run is the other perturbed) or "conditions".
        a, b: Each run's label: "baseline" / "perturbed: SPEC", or its condition
            ("biased=true"), or its seed where only the seeds differ.
    """

    kind: str
    a: str
    b: str


def _value(v: Any) -> str:
    return v if isinstance(v, str) else json.dumps(v, sort_keys=True)


def pair_of(ma: Mapping[str, Any], mb: Mapping[str, Any]) -> Pair:
    """The relation of two runs from their manifests."""
    pa, pb = ma.get("perturbation"), mb.get("perturbation")
    if pa != pb:
        return Pair("perturbation", f"perturbed: {pa}" if pa else "baseline", f"perturbed: {pb}" if pb else "baseline")
    ca, cb = ma.get("config") or {}, mb.get("config") or {}
    differ = [k for k in sorted(set(ca) | set(cb)) if ca.get(k) != cb.get(k)]
    if differ:
        return Pair("conditions", ", ".join(f"{k}={_value(ca.get(k))}" for k in differ),
                    ", ".join(f"{k}={_value(cb.get(k))}" for k in differ))
    if ma.get("seed") != mb.get("seed"):
        return Pair("conditions", f"seed {ma.get('seed')}", f"seed {mb.get('seed')}")
    return Pair("conditions", "A", "B")


@dataclass
class TextDifferences:
    """Where two runs' texts differ, over the structural alignment.

    Attributes:
        compared: Aligned pairs (match or substitution) whose events both carry text.
        differ: Of those, the pairs whose texts differ.
        only_a, only_b: Text-carrying events that only one run has.
        first: Per agent, its first differing pair: (alignment index, event A, event B,
            the character at which their texts part).
    """

    compared: int = 0
    differ: int = 0
    only_a: int = 0
    only_b: int = 0
    first: dict[str, tuple[int, Any, Any, int]] = field(default_factory=dict)

    @property
    def share(self) -> float | None:
        """The share of compared texts that differ (None when none were compared)."""
        return self.differ / self.compared if self.compared else None


def event_text(event: Any) -> str | None:
    """The text an event carries (a message or a reply), or None."""
    text = (event.payload or {}).get("text") if event is not None else None
    return text if isinstance(text, str) else None


def text_differences(events_a: Sequence[Any], events_b: Sequence[Any], order_a: Sequence[int],
                     order_b: Sequence[int], comparison: Comparison) -> TextDifferences:
    """The texts of two runs compared along ``comparison``'s alignment (events in comparison order)."""
    out = TextDifferences()
    for k, p in enumerate(comparison.alignment):
        left = None if p.i is None else events_a[order_a[p.i]]
        right = None if p.j is None else events_b[order_b[p.j]]
        ta, tb = event_text(left), event_text(right)
        if ta is None and tb is None:
            continue
        if ta is None or tb is None:
            out.only_a += ta is not None
            out.only_b += tb is not None
            continue
        out.compared += 1
        if ta != tb:
            out.differ += 1
            agent = left.agent or right.agent or "-"
            if agent not in out.first:
                out.first[agent] = (k, left, right, len(os.path.commonprefix([ta, tb])))
    return out
