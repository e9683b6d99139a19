"""Comparison tables as the run browser shows them: one row per compared metric, the
reasons that apply to many rows said once under the table.

A comparison's rows (a Monte Carlo's, a sweep cell's, a mechanism pair's) come from
:func:`simcore.analysis.stats.compare_metrics` and its kin. Every row's figures
print in its metric's unit at its resolution (:mod:`simcore.view.numbers`); a row
without an interval shows ``n/a`` with a note mark, and the notes (why there is no
interval, what calibration found confounded, trials left out) are listed once under
the table, each with the rows it applies to.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from simcore.analysis.resolution import at_resolution
from simcore.analysis.stats import level_text, levels_vary, percent, row_scale, verdict
from simcore.view.figures import Name, Vocabulary
from simcore.view.numbers import effect_text, is_number, p_text


@dataclass
class Row:
    """One compared metric, printed."""

    cells: list[str]
    name: Name
    kind: str
    mean_a: str
    mean_b: str
    delta: str
    delta_value: float | None
    interval: str
    level: str
    test: str
    p: str
    p_adjusted: str
    cohen_d: str
    decision: str
    significant: bool | None
    interval_notes: list[int] = field(default_factory=list)
    decision_notes: list[int] = field(default_factory=list)


@dataclass
class Table:
    """A comparison table: its rows, whether they vary in level, and the notes under it.

    Attributes:
        head: The leading cells' headings (a mechanism pair's ``a`` and ``b``).
        rows: The rows.
        vary: Whether the rows' intervals have more than one level (then each row shows its own).
        family: What the adjusted p adjusts over.
        levels: The intervals' level(s), in words.
        decided_by: The decision rule.
        notes: Numbered notes: (text, the labels of the rows it applies to).
    """

    head: list[str]
    rows: list[Row]
    vary: bool
    family: str | None
    levels: str | None
    decided_by: str | None
    notes: list[tuple[str, list[str]]]


def comparison_table(entries: Sequence[tuple[list[str], str, Mapping[str, Any]]], words: Vocabulary,
                     head: Sequence[str] = ()) -> Table:
    """The table of ``entries``: (leading cells, metric name, its row of the comparison)."""
    notes: dict[str, list[str]] = {}
    rows = []
    records = [d for _, _, d in entries]
    for cells, metric, d in entries:
        name = words.name(metric)
        unit = row_scale(d)
        means = [at_resolution(d.get(k), unit) for k in ("mean_a", "mean_b")]
        fmt = words.format(metric, means)
        delta = at_resolution(d.get("delta_mean"), unit)
        said: dict[str, list[str]] = {"interval": [], "decision": []}
        if d.get("no_interval"):
            interval = "n/a"
            said["interval"].append(f"no interval: {d['no_interval']}")
        else:
            low, high = (at_resolution(d.get(k), unit) for k in ("ci_low", "ci_high"))
            interval = fmt.interval(low, high) if d.get("family") else ""
        left_out = (d.get("n_undefined_a") or 0) + (d.get("n_undefined_b") or 0)
        if left_out:
            said["decision"].append(f"{left_out} trials without readable data left out")
        calibration = d.get("calibration") or {}
        if calibration.get("confounded"):
            said["decision"].append(f"confounded under the null: {calibration.get('reason')}")
        for text in said["interval"] + said["decision"]:
            notes.setdefault(text, []).append(" ".join([*cells, name.label]))
        marks = {k: [list(notes).index(text) + 1 for text in texts] for k, texts in said.items()}
        decision = verdict(d) if "significant" in d or d.get("not_tested") else ""
        rows.append(Row(
            cells=list(cells), name=name, kind=str(d.get("kind") or ""), mean_a=fmt.text(means[0]),
            mean_b=fmt.text(means[1]), delta=fmt.diff(delta), delta_value=delta if is_number(delta) else None,
            interval=interval, level=percent(d["ci_level"]) if d.get("ci_level") else "",
            test=str(d.get("test") or ""), p=p_text(d.get("p_value")), p_adjusted=p_text(d.get("p_adjusted")),
            cohen_d=effect_text(d.get("cohen_d")), decision=decision,
            significant=d.get("significant") if isinstance(d.get("significant"), bool) else None,
            interval_notes=marks["interval"], decision_notes=marks["decision"]))
    first = next((d for d in records if d.get("family")), {})
    return Table(list(head), rows, levels_vary(records), first.get("family"), level_text(records),
                 first.get("decided_by"), [(text, where) for text, where in notes.items()])
