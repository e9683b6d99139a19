"""The browser's figures: at their resolution, in their unit, under their names in words.

A run's metric is read against its scenario's declarations, looked up by name or
pattern as every summary does: its kind and bounds
(:class:`~simcore.analysis.metric_kinds.Kind`) set its resolution (values within
float noise of 0 are shown as 0, :mod:`simcore.analysis.resolution`), and its
:class:`~simcore.analysis.glossary.Metric` its label, description and unit
(:mod:`simcore.view.numbers`). A compared metric's row and a group's aggregate carry
their kind's bounds in their records. Raw files shown as JSON stay exact.

The scenario's *key* metrics (``Scenario.metrics``, ``key=True``, in declaration
order) head every page about its runs and fill the runs table's key-metrics column;
a scenario that declares none gets its first :data:`FALLBACK_KEYS` numeric metrics by name.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from simcore.analysis.glossary import Metric, metric_of
from simcore.analysis.metric_kinds import Kind, kind_of
from simcore.analysis.resolution import at_resolution, scale_of
from simcore.analysis.stats import row_scale
from simcore.perturbation.pairs import PAIR_METRICS
from simcore.perturbation.results import SUMMARY_KINDS, SUMMARY_METRICS
from simcore.runs.scenario import Scenario, load_scenario
from simcore.view.numbers import Format, format_for, is_number

#: Key metrics of a scenario that declares none: its first numeric metrics by name.
FALLBACK_KEYS = 4


@functools.lru_cache(maxsize=64)
def scenario_named(name: str | None) -> Scenario | None:
    """The scenario a run records, or None where it cannot be loaded here."""
    if not name:
        return None
    try:
        return load_scenario(name)
    except Exception:  # noqa: BLE001 - a run of a scenario not installed here still shows, by its names
        return None


@dataclass(frozen=True)
class Name:
    """A metric's name as a page shows it.

    Attributes:
        name: As results.json and the CSV files write it.
        label: In words (its declared label, else its name).
        title: For the hover: the name, the description, the unit and the kind.
        anchor: Its row on the glossary page (None where it is not declared).
    """

    name: str
    label: str
    title: str
    anchor: str | None


@dataclass(frozen=True)
class Figure:
    """One figure as a page shows it: its name, its value in its unit, and a decision if it has one.

    Attributes:
        name: The metric's :class:`Name` (with a ``Δ`` before a difference's label).
        value: The raw value (for sorting).
        text: The value printed by its kind.
        verdict: significant / not significant, for a compared difference.
    """

    name: Name
    value: Any
    text: str
    verdict: str | None = None


def glossary_anchor(scope: str, name: str) -> str:
    """The id of a metric's row on the glossary page (``scope``: a scenario's name, or ``study``)."""
    return "m-" + "".join(c if c.isalnum() or c in "-_" else "-" for c in f"{scope}-{name}")


@dataclass(frozen=True)
class Vocabulary:
    """The declared metrics and kinds of a scenario (or of a perturbation study's tables), and
    how its figures are shown.

    Attributes:
        scope: The scenario's name (``study`` for a study's tables), for glossary anchors.
        metrics: ``Scenario.metrics``: how people read each metric.
        kinds: ``Scenario.declared_kinds()``.
        keys: The declared key metrics, in order.
    """

    scope: str
    metrics: Mapping[str, Metric]
    kinds: Mapping[str, Kind]
    keys: tuple[str, ...] = ()

    def name(self, name: str) -> Name:
        """How ``name`` is shown."""
        info = metric_of(self.metrics, name)
        kind = kind_of(self.kinds, name)
        bits = [name if info is None else f"{info.label} ({name}):"]
        if info is not None and info.description:
            bits.append(info.description)
        extra = [x for x in (info.unit if info is not None else "",
                             "shown as a percentage" if info is not None and info.percent else "",
                             kind.label() if kind is not None else "") if x]
        if extra:
            bits.append(f"[{'; '.join(extra)}]")
        pattern = name if name in self.metrics else next(
            (p for p in self.metrics if metric_of({p: self.metrics[p]}, name) is not None), name)
        return Name(name, info.label if info is not None else name, " ".join(bits),
                    None if info is None else glossary_anchor(self.scope, pattern))

    def format(self, name: str, values: Iterable[Any], trials: bool = False) -> Format:
        """The format of one metric's column of ``values`` (``trials``: one per trial)."""
        return format_for(values, metric_of(self.metrics, name), kind_of(self.kinds, name), trials)

    def resolved(self, metrics: Mapping[str, Any]) -> dict[str, Any]:
        """Metrics with float noise as 0, each against its declared kind's range."""
        out = {}
        for name, value in metrics.items():
            kind = kind_of(self.kinds, name)
            out[name] = at_resolution(value, scale_of(None if kind is None else (kind.low, kind.high), (value,)))
        return out

    def figure(self, name: str, value: Any) -> Figure:
        """One metric's value, shown by its kind."""
        return Figure(self.name(name), value, self.format(name, [value]).text(value))

    def key_names(self, metrics: Mapping[str, Any]) -> list[str]:
        """The key metrics among ``metrics``: the declared ones, in their order, else the first
        :data:`FALLBACK_KEYS` numeric ones by name."""
        if self.keys:
            return [k for k in self.keys if k in metrics]
        return sorted(k for k, v in metrics.items() if is_number(v))[:FALLBACK_KEYS]

    def key_figures(self, metrics: Mapping[str, Any]) -> list[Figure]:
        """A run's key metrics, at their resolution, by their kind."""
        resolved = self.resolved(metrics)
        return [self.figure(k, resolved[k]) for k in self.key_names(resolved)]

    def difference(self, name: str, row: Mapping[str, Any]) -> Figure:
        """A compared metric's difference A - B (a comparison row, with ``delta_mean``) and its decision."""
        unit = row_scale(row)
        fmt = self.format(name, [at_resolution(row.get(k), unit) for k in ("mean_a", "mean_b")])
        shown = self.name(name)
        delta = at_resolution(row.get("delta_mean"), unit)
        significant = row.get("significant")
        decided = None if not isinstance(significant, bool) else "significant" if significant else "not significant"
        return Figure(Name(name, f"Δ {shown.label}", shown.title, shown.anchor), delta, fmt.diff(delta), decided)


@functools.lru_cache(maxsize=64)
def vocabulary(scenario: str | None) -> Vocabulary:
    """The vocabulary of the scenario a run records (empty for one that cannot be loaded here)."""
    found = scenario_named(scenario)
    if found is None:
        return Vocabulary(scenario or "", {}, {})
    return Vocabulary(found.name, found.metrics, found.declared_kinds(), tuple(found.key_metrics()))


@functools.lru_cache(maxsize=1)
def study_vocabulary() -> Vocabulary:
    """The vocabulary of a perturbation study's tables: its pairs' metrics and its summary's columns."""
    return Vocabulary("study", {**PAIR_METRICS, **SUMMARY_METRICS}, SUMMARY_KINDS,
                      tuple(n for n, m in SUMMARY_METRICS.items() if m.key))
