"""A comparison as a table for the terminal: the one formatter every command's comparison uses.

A Monte Carlo (``--trials N``, ``--counterfactual``), a sweep's comparisons between
conditions and ``llm_auction compare`` all print their compared metrics through
:func:`comparison_lines`, so a column, a format or a mark changes in one place. A row
is a metric's entry of :func:`simcore.analysis.stats.compare_metrics` (or of a
scenario's own comparison, which has the same fields): the difference, its interval
at the level of the Holm step that decided it, the test, the raw and the adjusted p,
the decision, and what must be said beside it (trials left out for want of readable
data, a confound that calibration found). Under the rows: the one rule that decided
them, then each confounded metric's reason, once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from simcore.analysis.resolution import figure
from simcore.analysis.stats import (
    decision_p,
    group_scale,
    interval_text,
    level_text,
    levels_vary,
    percent,
    row_notes,
    row_scale,
    verdict,
)

FORMAT = ".3f"  # means, differences and interval ends
P_FORMAT = ".2g"


@dataclass(frozen=True)
class ComparisonRow:
    """One compared metric.

    Attributes:
        metric: Its name.
        entry: Its compared entry (``delta_mean``, ``ci_low``/``ci_high``, ``test``,
            ``p_value``, ``p_adjusted``, ``significant`` ...).
        pair: Which two arms, where one table compares several pairs (``"auction - turn_taking (10)"``).
        means: Each arm's summary of the metric (its ``mean``, and the range that sets its
            resolution), where the table shows the arms' means.
    """

    metric: str
    entry: Mapping[str, Any]
    pair: str | None = None
    means: tuple[Mapping[str, Any], Mapping[str, Any]] | None = None


def comparison_lines(title: str | None, rows: Sequence[ComparisonRow], arms: tuple[str, str] = ("a", "b"),
                     indent: str = "  ") -> list[str]:
    """``title`` with the intervals' level, a header, one line per row, the rule that decided them
    and each confound's reason.

    Args:
        title: What is compared (its level is appended: ``"...; intervals at 95%"``); None: no
            title line (the caller's says what ran, and the level).
        rows: The compared metrics.
        arms: The names of the two arms, for the column heads (``A - B``, ``mean A``).
        indent: Put before every line but the title.
    """
    entries = [r.entry for r in rows]
    level = level_text(entries)
    lines = [] if title is None else [title + (f"; {level}" if level else "")]
    if not rows:
        return lines
    a, b = arms
    diff = f"{a} - {b}"
    pairs, means, vary = any(r.pair for r in rows), any(r.means for r in rows), levels_vary(entries)
    mw = max(len(r.metric) for r in rows) + 2
    pw = max(len(diff), *(len(r.pair or "") for r in rows)) + 2
    tests = [r.entry.get("test") or "-" for r in rows]
    tw = max(len(t) for t in tests) + 2
    intervals = [interval_text(d, "+" + FORMAT) for d in entries]
    iw = max(20, *(len(t) + 2 for t in intervals))
    if pairs:  # several pairs of arms: a column names each row's pair
        arms_head, dw = f"{diff:<{pw}}", len("difference")
    else:
        arms_head, dw = (f"{'mean ' + a:>9} {'mean ' + b:>9} " if means else ""), max(9, len(diff))
    lines.append(f"{indent}{'metric':<{mw}}{arms_head}{'difference' if pairs else diff:>{dw}}  {'interval':<{iw}}"
                 + (f"{'level':>8}  " if vary else "") + f"{'test':<{tw}}{'p':>8}{'adj. p':>8}  decision")
    reasons: dict[str, str] = {}
    for row, test, interval in zip(rows, tests, intervals):
        d = row.entry
        calibration = d.get("calibration") or {}
        if calibration.get("confounded"):
            reasons.setdefault(row.metric, calibration.get("reason") or "no reason recorded")
        if pairs:
            arms_cell = f"{row.pair or '':<{pw}}"
        else:
            arms_cell = "".join(f"{_mean(m):>9} " for m in row.means) if row.means else " " * 20 if means else ""
        notes = row_notes(d)
        lines.append(
            f"{indent}{row.metric:<{mw}}{arms_cell}{figure(d.get('delta_mean'), '+' + FORMAT, row_scale(d)):>{dw}}"
            f"  {interval:<{iw}}" + (f"{percent(d['ci_level']) if d.get('ci_level') else '':>8}  " if vary else "")
            + f"{test:<{tw}}{figure(d.get('p_value'), P_FORMAT, missing='-'):>8}"
            f"{figure(decision_p(d), P_FORMAT, missing='-'):>8}  "
            # One pair (``--counterfactual``) has a difference and no test: no decision either.
            + (verdict(d) if "significant" in d else "")
            + (f"  ({'; '.join(notes)})" if notes else ""))
    rule = next((d["decided_by"] for d in entries if d.get("decided_by")), None)
    if rule:
        lines.append(f"{indent}decided by: {rule}")
    lines += [f"{indent}CONFOUNDED UNDER THE NULL: {metric}: {why}" for metric, why in reasons.items()]
    return [line.rstrip() for line in lines]


def _mean(summary: Mapping[str, Any]) -> str:
    return figure(summary.get("mean"), FORMAT, group_scale(summary))
