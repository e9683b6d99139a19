"""Counterfactual pairs and Monte Carlo arms (simcore.runs.counterfactual and the shared CLI).

These use context corrosion with metrics off (no embedding model), so they are fast.
"""

from __future__ import annotations

import csv
import dataclasses
import json
from pathlib import Path

import pytest

from scenarios.context_corrosion import SCENARIO
from simcore.base.config import ConfigError
from simcore.base.files import DamagedFile, read_heartbeat
from simcore.base.records import read_json
from simcore.cli import main
from simcore.runs.counterfactual import (
    TRIALS_DIR,
    compared_metrics,
    generic_compare,
    run_arms,
    trial_dir,
    trial_seeds,
)
from tests.commands import run_module

ROOT = Path(__file__).resolve().parent.parent
FAST = SCENARIO.config_type(metrics=False, rounds=1, n_peers=2)


@pytest.fixture(scope="module")
def monte_carlo(tmp_path_factory) -> tuple[Path, dict]:
    """A 3-trial Monte Carlo (its output directory and summary), written beside a run of the user's."""
    out = tmp_path_factory.mktemp("mc")
    (out / "context_corrosion" / "my-run").mkdir(parents=True)
    return out, run_arms(SCENARIO, FAST, 5, n_trials=3, out=out, progress=False)


def test_trial_seeds_are_drawn_from_the_run_seed():
    assert trial_seeds(7, 3) == trial_seeds(7, 3)
    assert trial_seeds(7, 3) != trial_seeds(8, 3)
    assert trial_seeds(7, 5)[:3] == trial_seeds(7, 3)  # adding trials never shifts earlier ones
    assert len(set(trial_seeds(7, 50))) == 50


def test_pair_uses_the_run_seed_for_both_arms(tmp_path):
    s = run_arms(SCENARIO, FAST, 11, n_trials=None, out=tmp_path, progress=False)
    assert s["mode"] == "counterfactual" and s["trial_seeds"] == [11]
    group = tmp_path / "context_corrosion" / s["experiment_id"]
    a, b = (trial_dir(group, s, rid) for (rid,) in (s["run_A_trial_ids"], s["run_B_trial_ids"]))
    ma = read_json(a / "manifest.json")
    mb = read_json(b / "manifest.json")
    assert ma["seed"] == mb["seed"] == 11
    assert ma["config"]["biased"] is True and mb["config"]["biased"] is False
    assert {k: v for k, v in ma["config"].items() if k != "biased"} == {
        k: v for k, v in mb["config"].items() if k != "biased"
    }
    # Common random numbers: the peers' independent phase-1 answers are identical in
    # both arms; only D's (framed in A) differs.
    ea = read_json(a / "experiment.json")["replies"]
    eb = read_json(b / "experiment.json")["replies"]
    first = {(r["agent"]): r["raw"] for r in ea if r["phase"] == "phase1"}
    second = {(r["agent"]): r["raw"] for r in eb if r["phase"] == "phase1"}
    assert all(first[p] == second[p] for p in ("P1", "P2"))
    assert first["D"] != second["D"]
    comp = s["counterfactual_comparison"]["difference_summary"]
    assert comp["statistical_mode"] == "single_trial_delta"


def test_monte_carlo_shares_seeds_and_writes_summary_and_csv(monte_carlo):
    tmp_path, s = monte_carlo
    assert s["trial_seeds"] == trial_seeds(5, 3)
    root = tmp_path / "context_corrosion"
    group = root / s["experiment_id"]
    for arm in ("A", "B"):
        seeds = [read_json(trial_dir(group, s, rid) / "manifest.json")["seed"] for rid in s[f"run_{arm}_trial_ids"]]
        assert seeds == s["trial_seeds"]
    assert read_json(group / "summary.json") == json.loads(json.dumps(s, default=str))
    with open(group / "trials.csv", newline="") as fh:
        table = list(csv.DictReader(fh))
    assert len(table) == 6
    assert [r["arm"] for r in table] == ["A"] * 3 + ["B"] * 3
    assert [int(r["seed"]) for r in table] == s["trial_seeds"] * 2
    assert {r["biased"] for r in table} == {"True", "False"}
    assert all(r["status"] == "ok" for r in table)
    assert "parse_errors" in table[0]
    # the comparison plot is drawn for N >= 2
    assert (group / "plots" / "comparison.png").is_file()
    assert s["statistical_comparison"]["difference_summary"]["paired"] is True
    # Its heartbeat (what the run browser showed while it ran) says it finished, every trial written.
    beat = read_heartbeat(group)
    assert (beat["kind"], beat["state"], beat["written"], beat["total"]) == ("monte_carlo", "finished", 6, 6)
    assert beat["counterfactual"] == {"field": "biased", "A": True, "B": False}


def test_a_groups_trials_sit_inside_its_directory(monte_carlo):
    """The scenario's folder gets one entry per group, however many trials: the user's runs stay theirs."""
    tmp_path, s = monte_carlo
    root = tmp_path / "context_corrosion"
    group = root / s["experiment_id"]
    assert sorted(p.name for p in root.iterdir()) == sorted(["my-run", s["experiment_id"]])
    assert s["trials_dir"] == TRIALS_DIR
    ids = s["run_A_trial_ids"] + s["run_B_trial_ids"]
    assert sorted(p.name for p in (group / TRIALS_DIR).iterdir()) == sorted(ids) and len(ids) == 6
    assert all((trial_dir(group, s, rid) / "manifest.json").is_file() for rid in ids)
    assert {p.name for p in group.iterdir()} == {"summary.json", "trials.csv", "plots", "heartbeat.json", TRIALS_DIR}


def test_trial_dir_finds_trials_of_older_groups_beside_them_and_refuses_paths():
    group = Path("runs/x/mc-1")
    assert trial_dir(group, {"trials_dir": "trials"}, "mc-1-A0") == Path("runs/x/mc-1/trials/mc-1-A0")
    assert trial_dir(group, {}, "mc-1-A0") == Path("runs/x/mc-1-A0")  # written before 2026-11-27
    for summary, rid in (({"trials_dir": "../.."}, "a"), ({"trials_dir": "trials"}, "../b"), ({"trials_dir": 3}, "a")):
        with pytest.raises(DamagedFile, match="must be a plain directory name"):
            trial_dir(group, summary, rid)


def test_a_group_that_exists_is_refused_before_any_trial(tmp_path):
    (tmp_path / "context_corrosion" / "mc-taken").mkdir(parents=True)
    with pytest.raises(FileExistsError, match="mc-taken already exists"):
        run_arms(SCENARIO, FAST, 5, n_trials=2, out=tmp_path, progress=False, group_id="mc-taken")
    assert list((tmp_path / "context_corrosion" / "mc-taken").iterdir()) == []


def test_monte_carlo_does_not_hold_finished_worlds(tmp_path, monkeypatch, no_plots):
    import gc

    from simcore.runs import counterfactual
    from simcore.sim.kernel import World

    def worlds() -> set[int]:
        gc.collect()
        return {id(o) for o in gc.get_objects() if type(o) is World}  # no __class__ lookups

    live = []
    summarise = counterfactual.write_summary
    before = worlds()  # other tests' worlds may still be alive

    def counting(*args, **kwargs):
        live.append(len(worlds() - before))
        return summarise(*args, **kwargs)

    monkeypatch.setattr(counterfactual, "write_summary", counting)
    s = run_arms(SCENARIO, FAST, 5, n_trials=4, out=tmp_path, progress=False)
    assert live == [0] and s["n_pairs_compared"] == 4


def test_monte_carlo_is_reproducible(monte_carlo, tmp_path):
    one = monte_carlo[1]
    two = run_arms(SCENARIO, FAST, 5, n_trials=3, out=tmp_path, progress=False)
    drop = ("experiment_id", "run_A_trial_ids", "run_B_trial_ids")
    assert {k: v for k, v in one.items() if k not in drop} == {k: v for k, v in two.items() if k not in drop}


def test_generic_compare_for_scenarios_without_their_own(tmp_path, no_plots):
    plain = dataclasses.replace(SCENARIO, compare=None)
    s = run_arms(plain, FAST, 3, n_trials=2, out=tmp_path, progress=False)
    diff = s["statistical_comparison"]["difference_summary"]
    assert "mean_final_confidence" in diff and "delta_mean" in diff["mean_final_confidence"]
    single = generic_compare([{"seed": 1, "metrics": {"x": 2.0}}], [{"seed": 1, "metrics": {"x": 0.5}}])
    assert single["difference_summary"]["x"] == {"delta_mean": 1.5}


def test_generic_compare_on_named_metrics():
    a = [{"seed": s, "metrics": {"x": x, "flag": f, "y": 1.0}} for s, x, f in [(1, 2.0, True), (2, 3.0, True)]]
    b = [{"seed": s, "metrics": {"x": x, "flag": f, "y": 1.0}} for s, x, f in [(1, 1.0, False), (2, 1.5, True)]]
    diff = generic_compare(a, b, names=["x", "flag", "missing"])["difference_summary"]
    assert compared_metrics({"difference_summary": diff}) == ["x", "flag", "missing"]  # y left out
    assert diff["x"]["delta_mean"] == pytest.approx(1.25) and diff["paired"] is True
    assert diff["flag"]["delta_mean"] == pytest.approx(0.5)  # booleans count as 0/1
    assert diff["missing"]["delta_mean"] is None
    single = generic_compare(a[:1], b[:1], names=["flag", "missing"])["difference_summary"]
    assert single["flag"] == {"delta_mean": 1.0} and single["missing"] == {"delta_mean": None}
    assert "flag" not in generic_compare(a, b)["difference_summary"]  # the default skips booleans
    empty = generic_compare([], [], names=["x"])["difference_summary"]
    assert empty["x"]["delta_mean"] is None


def test_bad_trials_and_scenarios_without_an_axis():
    with pytest.raises(ConfigError, match="trials"):
        run_arms(SCENARIO, FAST, 1, n_trials=0, progress=False)
    with pytest.raises(ConfigError, match="counterfactual"):
        run_arms(dataclasses.replace(SCENARIO, counterfactual=None), FAST, 1, n_trials=2, progress=False)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--trials", "0"], "trials: must be an integer from 2"),
        (["--trials", "1"], "trials: must be an integer from 2 to 10000"),
        (["--trials", "two"], "trials: must be an integer from 2"),
        (["--counterfactual", "--trials", "3"], "trials: --counterfactual runs one pair"),
        (["--trials", "3"], "metrics: --trials N compares the arms' metrics and --no-metrics computes none"),
        (["--counterfactual"], "metrics: --counterfactual compares"),
        (["--counterfactual", "--no-biased"], "biased: set per arm"),
        (["--counterfactual", "--rounds", "9"], "rounds: must be an integer from 1 to 5"),
    ],
)
def test_cli_bad_input_exits_2_and_writes_nothing(tmp_path, capsys, argv, message):
    with pytest.raises(SystemExit) as exc:
        main(SCENARIO, [*argv, "--out", str(tmp_path), "--no-metrics"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
    assert not any(tmp_path.iterdir())


def test_cli_monte_carlo_json_prints_only_json(tmp_path):
    proc = run_module("scenarios.context_corrosion", "--trials", "2", "--rounds", "1", "--n-peers", "2",
                      "--plots", "none", "--seed", "3", "--json", "--out", str(tmp_path), cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["mode"] == "monte_carlo" and summary["n_trials"] == 2
    assert "trial" in proc.stderr  # the tqdm bar went to stderr
    assert (tmp_path / "context_corrosion" / summary["experiment_id"] / "summary.json").is_file()


def test_cli_counterfactual_prints_a_table(tmp_path, capsys):
    assert main(SCENARIO, ["--counterfactual", "--rounds", "1", "--n-peers", "2", "--plots", "none",
                           "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "counterfactual: 1 trial(s) per arm" in out and "summary directory:" in out


def test_monte_carlo_trials_count_their_own_calls_and_they_add_up(tmp_path, no_plots):
    """Each trial's timings.json holds its own share of the shared backend's work (not
    the running totals), and the shares sum to the totals and to what the server saw."""
    from backends.fake_server import FakeConfig, FakeServer, Fault, Latency
    from backends.registry import BackendSpec

    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"fake-1": {"input": 1.0, "output": 2.0}}))
    srv = FakeServer(FakeConfig(Latency("fixed", 0.005), faults=(Fault("500", rate=0.2), Fault("drop", rate=0.05)),
                                seed=3))
    with srv.in_thread():
        spec = BackendSpec("openai-compatible", "fake-1", base_url=srv.openai_url,
                           options={"backoff_base_s": 0.01, "backoff_max_s": 0.02, "max_retries": 8,
                                    "prices": str(prices)})
        s = run_arms(SCENARIO, FAST, 5, n_trials=3, spec=spec, out=tmp_path, progress=False)
        server = srv.stats()
    assert not s["failed_trials"]
    totals = s["backend"]["providers"]["openai-compatible"]
    group = tmp_path / "context_corrosion" / s["experiment_id"]
    trials = [read_json(trial_dir(group, s, rid) / "timings.json")["backend"]
              for rid in s["run_A_trial_ids"] + s["run_B_trial_ids"]]
    mine = [t["providers"]["openai-compatible"] for t in trials]
    for counter in ("requests", "attempts", "retries", "failures", "prompt_tokens", "completion_tokens"):
        assert sum(m[counter] for m in mine) == totals[counter], counter
    assert sum(m["cost_usd"] for m in mine) == pytest.approx(totals["cost_usd"]) == pytest.approx(s["backend"]["spent_usd"])
    assert sum(t["spent_usd"] for t in trials) == pytest.approx(s["backend"]["spent_usd"])
    assert s["backend"]["spent_usd"] > 0
    errors = {k: sum(m["errors"].get(k, 0) for m in mine) for k in totals["errors"]}
    assert errors == totals["errors"] and totals["retries"] > 0
    assert totals["attempts"] == server["requests"] and totals["retries"] == sum(server["faults"].values())
    # Each trial's calls are its own: the requests it made, as its results say.
    for rid, m in zip(s["run_A_trial_ids"] + s["run_B_trial_ids"], mine):
        assert m["requests"] == read_json(trial_dir(group, s, rid) / "results.json")["usage"]["fake-1"]["calls"]
