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


def annotate(scenario: Scenario, difference_summary: dict[str, Any]) -> dict[str, Any]:
    """Add each compared metric's installed calibration to a comparison (in place; returned).

    Every metric that calibration found confounded under the null gets
    ``calibration.confounded`` and its reason, which every output of the comparison shows.
    """
    data = installed(scenario)
    if not data:
        return difference_summary
    where = f"calibrated {data.get('written', '')[:10]}, {data.get('monte_carlos')} Monte Carlos of " \
            f"{data.get('trials')} trials per arm"
    for row in data["metrics"]:
        entry = difference_summary.get(row["metric"])
        if isinstance(entry, dict):
            entry["calibration"] = {
                "false_positive_rate": row["fp_rate"], "fp_ci": [row["fp_low"], row["fp_high"]],
                "power": row["power"], "power_ci": [row["power_low"], row["power_high"]],
                "confounded": row["confounded"], "reason": row["reason"], "where": where,
            }
    return difference_summary
