"""Null calibration: false-positive rates and power, the confounded mark, and where it shows."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pandas as pd
import pytest

from simcore.cli import format_arms
from simcore.runs.calibration import (
    MetricCalibration,
    effect_tests,
    markdown_section,
    markdown_table,
    summarize,
)
from simcore.runs.marks import annotate, installed
from simcore.runs.scenario import load_scenario
from tests.commands import Ran, run_module

ROOT = Path(__file__).resolve().parent.parent


def outcomes(null: list[bool], default: list[bool]) -> dict:
    return {"null": [{"m": {"significant": s, "delta": 0.0, "p": 0.0}} for s in null],
            "default": [{"m": {"significant": s, "delta": 0.0, "p": 0.0}} for s in default]}


def test_rates_intervals_and_the_confounded_mark():
    scenario = load_scenario("context_corrosion")
    [row] = summarize(scenario, outcomes([True] * 9 + [False], [True] * 10), alpha=0.05)
    assert (row.false_positives, row.n_null, row.fp_rate) == (9, 10, 0.9)
    assert row.fp_low > 0.05 and row.confounded and "9 of 10 null Monte Carlos" in row.reason
    assert (row.detections, row.power, row.power_high) == (10, 1.0, 1.0)
    [row] = summarize(scenario, outcomes([False] * 19 + [True], [False] * 20), alpha=0.05)
    assert row.fp_rate == 0.05 and row.fp_low < 0.05 and not row.confounded and row.reason is None
    # A metric the rule could not decide in a Monte Carlo is left out of its count.
    [row] = summarize(scenario, outcomes([None, True, True], [None]), alpha=0.05)
    assert (row.n_null, row.n_default, row.power) == (2, 0, None)


def test_a_known_cause_is_named_in_the_reason():
    scenario = load_scenario("acausal_cooperation")
    data = {"null": [{"identity_reasoning_frequency": {"significant": True, "delta": 0.5, "p": 0.0}}] * 10,
            "default": [{"identity_reasoning_frequency": {"significant": True, "delta": 0.5, "p": 0.0}}] * 10}
    [row] = summarize(scenario, data, alpha=0.05)
    assert row.confounded and row.reason.endswith("its keywords echo the treatment prompt itself")


def test_effects_are_tested_against_zero_with_holm():
    rows = [{"a": 0.0, "b": 0.5 + 0.01 * i, "c": None} for i in range(8)]
    out = effect_tests(rows, ("a", "b", "c"), alpha=0.05)
    assert out["a"]["significant"] is False and out["a"]["p"] is None  # exactly 0 every time: nothing to test
    assert out["b"]["significant"] is True and out["b"]["delta"] == pytest.approx(0.535)
    assert out["b"]["p"] == pytest.approx(2 * 2.0**-8)  # the exact sign-flip test, Holm across the one tested
    assert out["c"]["significant"] is None  # no data
    three = effect_tests(rows[:3], ("b",), alpha=0.05)
    assert three["b"]["significant"] is False and three["b"]["p"] == pytest.approx(0.25)  # never p = 0


def test_comparisons_mark_metrics_calibration_found_confounded(tmp_path, monkeypatch):
    scenario = load_scenario("context_corrosion")
    row = MetricCalibration("dominant_self_drift", 30, 30, 1.0, 0.89, 1.0, 30, 30, 1.0, 0.89, 1.0, True,
                            "30 of 30 null Monte Carlos significant: it measures D itself")
    record = {"metrics": [row.__dict__], "written": "2026-11-23", "monte_carlos": 30, "trials": 10}
    (tmp_path / "calibration.json").write_text(json.dumps(record))
    monkeypatch.setattr("simcore.runs.marks.scenario_dir", lambda s: tmp_path)
    diff = annotate(scenario, {"dominant_self_drift": {"delta_mean": 0.1, "significant": True}, "x": {}})
    assert diff["dominant_self_drift"]["calibration"]["confounded"] is True and "calibration" not in diff["x"]
    summary = {"mode": "monte_carlo", "scenario": "context_corrosion", "n_trials": 10, "failed_trials": [],
               "counterfactual": {"field": "biased", "A": True, "B": False},
               "statistical_comparison": {"difference_summary": diff},
               "run_A_aggregate": {}, "run_B_aggregate": {}}
    assert "CONFOUNDED UNDER THE NULL: dominant_self_drift: 30 of 30 null Monte Carlos significant" in format_arms(summary)


def run(*args: str, cwd: Path = ROOT) -> Ran:
    return run_module("simcore.calibrate", *args, cwd=cwd)


def test_cli_writes_the_calibration_and_its_table(tmp_path):
    res = run("veil_of_ignorance", "--trials", "3", "--monte-carlos", "2", "--max-rounds", "1", "--n-agents", "3",
              "--out", str(tmp_path), "--no-progress")
    assert res.returncode == 0, res.stderr
    assert "false positives (null)" in res.stdout and "likert_shift_mean" in res.stdout
    [out] = (tmp_path / "calibration").iterdir()
    record = json.loads((out / "calibration.json").read_text())
    assert record["null"]["config"] == {"persuasion": 0.0} and record["monte_carlos"] == 2
    by_metric = {m["metric"]: m for m in record["metrics"]}
    # The null is inert: with nobody persuaded, no rating shifts, so no Monte Carlo is significant.
    assert by_metric["likert_abs_shift_mean"]["false_positives"] == 0
    assert (out / "calibration.csv").read_text().startswith("metric,setting,n_monte_carlos")
    assert (out / "plots" / "calibration.png").stat().st_size > 0


@pytest.mark.parametrize("args, message", [
    (["veil_of_ignorance", "--trials", "1"], "trials: must be an integer from 2 to 1000"),
    (["veil_of_ignorance", "--alpha", "2"], "alpha: must be a number between 0 and 1"),
    (["no_such_scenario"], "no_such_scenario"),
    (["veil_of_ignorance", "--max-rounds", "0"], "max_rounds"),
])
def test_bad_input_is_one_line_and_writes_nothing(tmp_path, args, message):
    res = run(*args, "--out", str(tmp_path / "out"))
    assert res.returncode == 2 and message in res.stderr and len(res.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


def install(tmp_path: Path, monkeypatch, record: dict) -> None:
    (tmp_path / "calibration.json").write_text(json.dumps(record))
    monkeypatch.setattr("simcore.runs.marks.scenario_dir", lambda s: tmp_path)


CONFOUNDED = MetricCalibration("dominant_self_drift", 30, 30, 1.0, 0.89, 1.0, 30, 30, 1.0, 0.89, 1.0, True,
                               "it measures D itself")
RECORD = {"metrics": [CONFOUNDED.__dict__], "written": "2026-11-23", "monte_carlos": 30, "trials": 10}


@pytest.mark.parametrize("damage, message", [
    ({"metrics": [{**CONFOUNDED.__dict__, "confounded": "yes"}]}, "metrics[0].confounded: must be true or false"),
    ({"metrics": [{**CONFOUNDED.__dict__, "fp_rate": 3}]}, "metrics[0].fp_rate: must be a number from 0 to 1"),
    ({"metrics": "all"}, "metrics: must be a list"),
    ({"metrics": [7]}, "metrics[0]: must be an object"),
])
def test_a_damaged_calibration_is_named_not_dropped(tmp_path, monkeypatch, damage, message):
    from simcore.base.files import DamagedFile
    from simcore.runs.marks import installed

    install(tmp_path, monkeypatch, {**RECORD, **damage})
    with pytest.raises(DamagedFile, match=re.escape(message)):
        installed(load_scenario("context_corrosion"))
    (tmp_path / "calibration.json").write_text('{"metrics": [')
    with pytest.raises(DamagedFile, match="calibration.json"):
        installed(load_scenario("context_corrosion"))


def test_a_monte_carlo_refuses_a_damaged_calibration_before_any_trial(tmp_path, monkeypatch, capsys):
    from simcore.cli import main

    install(tmp_path, monkeypatch, {**RECORD, "trials": -1})
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as exit_:
        main(load_scenario("context_corrosion"), ["--trials", "2", "--out", str(out)])
    err = capsys.readouterr().err.strip()
    assert exit_.value.code == 2 and "calibration.json: trials: must be an integer >= 0" in err
    assert len(err.splitlines()) == 1 and not out.exists()


def test_a_sweep_comparison_carries_the_calibration_only_on_the_counterfactual_axis(tmp_path, monkeypatch):
    from simcore.batch import plan_sweep
    from simcore.batch.report import compare_conditions, condition_arms

    install(tmp_path, monkeypatch, RECORD)
    # The generic comparison (no run directories to read); the calibration is context_corrosion's.
    cc = dataclasses.replace(load_scenario("context_corrosion"), compare=None)
    plan = plan_sweep(cc, 4)  # the default condition axis is the counterfactual: biased=true,false
    assert condition_arms(plan, 1) == (True, False)
    assert condition_arms(plan_sweep(cc, 4, conditions=("biased", [False, True])), 1) == (False, True)
    assert condition_arms(plan_sweep(cc, 4, conditions=("rounds", [2, 3])), 1) is None
    assert condition_arms(plan_sweep(cc, 4, conditions=None), 1) is None
    a, b = plan.condition_labels
    rows = [{"cell": 0, "trial": t, "condition": c, "status": "ok", "run_dir": f"r{t}{c}",
             "metric_dominant_self_drift": t * 0.1 + (0.5 if c == a else 0.0)} for t in range(4) for c in (a, b)]
    [entry] = compare_conditions(plan, pd.DataFrame(rows), tmp_path, ["metric_dominant_self_drift"])
    assert entry["result"]["dominant_self_drift"]["calibration"]["confounded"] is True
    other = plan_sweep(cc, 4, conditions=("rounds", [2, 3]))
    a, b = other.condition_labels
    rows = [{**r, "condition": a if r["condition"].endswith("true") else b} for r in rows]
    [entry] = compare_conditions(other, pd.DataFrame(rows), tmp_path, ["metric_dominant_self_drift"])
    assert "calibration" not in entry["result"]["dominant_self_drift"]


def test_the_readme_table_is_the_installed_calibration():
    names = ("context_corrosion", "acausal_cooperation", "llm_auction", "veil_of_ignorance")
    table = markdown_table([load_scenario(n) for n in names])
    assert table.count("\n") >= 2 + len(names)  # every scenario has calibrated metrics installed
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert table in readme
    for name in names:  # the paragraph above the table says when the calibrations ran
        assert f"run {installed(load_scenario(name))['written'][:10]}" in readme, name


def test_the_calibration_page_shows_each_installed_calibration():
    page = (ROOT / "docs" / "calibration.md").read_text(encoding="utf-8")
    for name in ("context_corrosion", "acausal_cooperation", "llm_auction", "veil_of_ignorance"):
        section = markdown_section(load_scenario(name))
        assert section and section in page, f"docs/calibration.md: rewrite the {name} section with markdown_section()"
