"""The browser's figures at their resolution (:mod:`simcore.analysis.resolution`).

A run's metric is read against its scenario's declared kind (looked up by name or
pattern, :func:`~simcore.analysis.metric_kinds.kind_of`, as every summary does); a
compared metric's row and a group's aggregate carry their kind's bounds in their
records. Values within float noise of 0 are shown as 0; raw files shown as JSON stay exact.
"""

from __future__ import annotations

import functools
from typing import Any, Mapping

from simcore.analysis.metric_kinds import Kind, kind_of
from simcore.analysis.resolution import at_resolution, scale_of
from simcore.analysis.stats import group_scale, row_scale
from simcore.runs.scenario import load_scenario


@functools.lru_cache(maxsize=64)
def declared_kinds(scenario: str) -> Mapping[str, Kind]:
    """A scenario's declared kinds, by its recorded name (none for one that cannot be loaded here)."""
    try:
        return load_scenario(scenario).declared_kinds()
    except Exception:  # noqa: BLE001 - a run of a scenario not installed here still shows, unresolved
        return {}


def resolved_metrics(scenario: str | None, metrics: Mapping[str, Any]) -> dict[str, Any]:
    """A run's metrics with float noise as 0, each against its declared kind's range."""
    kinds = declared_kinds(scenario) if scenario else {}
    out = {}
    for name, value in metrics.items():
        kind = kind_of(kinds, name)
        out[name] = at_resolution(value, scale_of(None if kind is None else (kind.low, kind.high), (value,)))
    return out


def entry_scale(entry: Mapping[str, Any]) -> float | None:
    """The scale of a record's figures: a compared metric's row (with ``delta_mean``) or a
    group's aggregate (with ``bounds``, ``min`` and ``max``)."""
    return row_scale(entry) if "delta_mean" in entry else group_scale(entry)
