"""Calibration marks: the calibration installed beside a scenario, and the marks it puts on comparisons.

``python -m simcore.calibrate SCENARIO --install`` writes ``calibration.json`` into the
package that defines the scenario (:mod:`simcore.runs.calibration` computes it); every
comparison of that scenario reads it back here and marks the metrics that calibration
found confounded under the null.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

from simcore.base.files import read_calibration
from simcore.runs.scenario import Scenario

CALIBRATION_FILE = "calibration.json"


def installed(scenario: Scenario) -> dict[str, Any] | None:
    """The calibration installed beside a scenario (``--install``), or None if there is none.

    Raises:
        DamagedFile: when the installed file is damaged (its marks must not vanish silently).
    """
    path = scenario_dir(scenario) / CALIBRATION_FILE
    return read_calibration(path) if path.is_file() else None


def scenario_dir(scenario: Scenario) -> Path:
    """The directory of the package that defines the scenario."""
    module = inspect.getmodule(scenario.build)
    return Path(inspect.getfile(module)).parent if module is not None else Path(".")


def annotate(scenario: Scenario, difference_summary: dict[str, Any], arms: tuple[Any, Any] | None = None) -> dict[str, Any]:
    """Add each compared metric's installed calibration to a comparison (in place; returned).

    Calibration measured the scenario's counterfactual pair (its field's values A and B,
    A the treatment) under the null. A metric it found **confounded** differs between
    them even when the treatment does nothing, because of what condition A is by design
    (the auction charges for bids): so the mark goes on every comparison of that metric
    that involves A, whatever the other arm, and every output of the comparison shows it.
    The measured rates (false positives, power) belong to the calibrated pair alone.

    Args:
        scenario: The scenario whose installed calibration applies.
        difference_summary: The comparison's per-metric entries, by metric.
        arms: The values of the counterfactual field that the comparison's two arms
            stand for; None: the calibrated pair itself (a Monte Carlo's arms).
    """
    data = installed(scenario)
    if not data or scenario.counterfactual is None and arms is not None:
        return difference_summary
    pair = list(scenario.counterfactual[1:]) if scenario.counterfactual else None
    calibrated = arms is None or pair is None or sorted(arms, key=repr) == sorted(pair, key=repr)
    if not calibrated and pair[0] not in arms:  # type: ignore[index]
        return difference_summary
    where = f"calibrated {data.get('written', '')[:10]}, {data.get('monte_carlos')} Monte Carlos of " \
            f"{data.get('trials')} trials per arm" + (f", {pair[0]} against {pair[1]}" if pair else "")
    for row in data["metrics"]:
        entry = difference_summary.get(row["metric"])
        if not isinstance(entry, dict):
            continue
        if calibrated:
            entry["calibration"] = {
                "false_positive_rate": row["fp_rate"], "fp_ci": [row["fp_low"], row["fp_high"]],
                "power": row["power"], "power_ci": [row["power_low"], row["power_high"]],
                "confounded": row["confounded"], "reason": row["reason"], "where": where,
                "calibrated_pair": pair,
            }
        elif row["confounded"]:
            entry["calibration"] = {"confounded": True, "reason": row["reason"], "where": where,
                                    "calibrated_pair": pair}
    return difference_summary
