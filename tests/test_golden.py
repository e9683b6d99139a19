"""Golden traces: a small run's trace must not change by accident.

If a change to a scenario or the kernel is meant to alter traces, regenerate with
``SIMCORE_UPDATE_GOLDEN=1 python -m pytest tests/test_golden.py`` and review the diff.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from simcore.runs.runner import run_trial
from simcore.runs.scenario import load_scenario

GOLDEN = Path(__file__).parent / "golden"

CASES = {
    "context_corrosion_small": ("context_corrosion", {"rounds": 1, "n_peers": 2}, 7),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_golden_trace(name):
    scenario_name, fields, seed = CASES[name]
    scenario = load_scenario(scenario_name)
    trace = run_trial(scenario, scenario.config_type.from_mapping(fields), seed).trace.to_jsonl()
    path = GOLDEN / f"{name}.jsonl"
    if os.environ.get("SIMCORE_UPDATE_GOLDEN") == "1":
        path.write_text(trace)
    assert path.exists(), f"missing golden file {path}; set SIMCORE_UPDATE_GOLDEN=1 to create it"
    assert trace == path.read_text()
