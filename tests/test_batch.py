"""The batch runner: grid and seeds, validation, executors agree, outputs, resume, budget."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from backends.fake_server import FakeConfig, FakeServer
from backends.pricing import load_prices
from backends.registry import BackendSpec
from simcore.base.config import ConfigError
from simcore.base.files import read_heartbeat
from simcore.batch import (
    VOLATILE_COLUMNS,
    SweepAborted,
    plan_sweep,
    read_results,
    run_sweep,
)
from simcore.batch.command import main as batch_main
from simcore.batch.plan import build_plan, parse_values
from simcore.runs.scenario import load_scenario
from tests.batch_scenarios import FLAKY, FLAKY_CMP, GATE_ENV, GATE_PASSES, SLOW, SlowStub
from tests.commands import run_module

ROOT = Path(__file__).resolve().parent.parent
CC = load_scenario("context_corrosion")
# The runner is under test, not the embedding metrics (which load a model per worker).
CC_BASE = {"n_peers": 2, "metrics": False}


def stable(df: pd.DataFrame) -> pd.DataFrame:
    """The table without the columns that say how it was run (wall time, attempts, retries)."""
    return df.drop(columns=list(VOLATILE_COLUMNS))


# -- grid, conditions and seeds ---------------------------------------------------

def test_grid_is_the_cartesian_product_in_order() -> None:
    plan = build_plan(CC, 3, {"rounds": ["1", "3"], "order": ["fixed", "random", "rotating"]}, ("biased", [True, False]))
    assert plan.cells == [
        {"rounds": r, "order": o} for r in (1, 3) for o in ("fixed", "random", "rotating")
    ]
    assert len(plan.jobs) == 6 * 2 * 3
    assert len({j.run_id for j in plan.jobs}) == len(plan.jobs)
    for job in plan.jobs:
        cell = plan.cells[job.cell]
        assert job.config.rounds == cell["rounds"] and job.config.order == cell["order"]
        assert job.config.biased is (job.condition == 0)
    assert [j.index for j in plan.jobs] == list(range(len(plan.jobs)))


def test_conditions_share_seeds_and_trials_do_not() -> None:
    plan = build_plan(CC, 5, {"rounds": [1, 2]}, ("biased", [True, False]))
    by_key = {(j.cell, j.condition, j.trial): j.seed for j in plan.jobs}
    for c in range(2):
        assert len({by_key[(c, 0, t)] for t in range(5)}) == 5
        for t in range(5):
            assert by_key[(c, 0, t)] == by_key[(c, 1, t)]
    # Independent seeds per cell by default; the same seeds in every cell with scope "sweep".
    assert {by_key[(0, 0, t)] for t in range(5)}.isdisjoint({by_key[(1, 0, t)] for t in range(5)})
    shared = build_plan(CC, 5, {"rounds": [1, 2]}, ("biased", [True, False]), seed_scope="sweep")
    seeds = {(j.cell, j.trial): j.seed for j in shared.jobs}
    assert all(seeds[(0, t)] == seeds[(1, t)] for t in range(5))


def test_seeds_are_stable_when_the_sweep_grows() -> None:
    small = build_plan(CC, 3, {"rounds": [1, 2]}, None, seed=7)
    big = build_plan(CC, 6, {"rounds": [1, 2, 3]}, None, seed=7)
    seeds_small = {(j.config.rounds, j.trial): j.seed for j in small.jobs}
    seeds_big = {(j.config.rounds, j.trial): j.seed for j in big.jobs}
    assert all(seeds_big[k] == v for k, v in seeds_small.items())
    other = build_plan(CC, 3, {"rounds": [1, 2]}, None, seed=8)
    assert {j.seed for j in other.jobs}.isdisjoint({j.seed for j in small.jobs})


def test_dispatch_groups_cover_every_job_once_as_matched_sets() -> None:
    plan = build_plan(CC, 4, {"rounds": [1, 2, 3]}, ("biased", [True, False]))
    groups = list(plan.dispatch_groups())
    flat = [j.index for g in groups for j in g]
    assert sorted(flat) == list(range(len(plan.jobs)))
    for g in groups:
        assert [j.condition for j in g] == [0, 1]
        assert len({(j.cell, j.trial, j.seed) for j in g}) == 1
    # trial-major: every cell's trial 0 goes out before any trial 1
    assert [g[0].trial for g in groups] == sorted(g[0].trial for g in groups)


def test_sweep_id_depends_on_the_definition_only() -> None:
    a = build_plan(CC, 3, {"rounds": [1, 2]}, None)
    assert a.sweep_id == build_plan(CC, 3, {"rounds": ["1", "2"]}, None).sweep_id
    assert a.sweep_id != build_plan(CC, 4, {"rounds": [1, 2]}, None).sweep_id
    assert a.sweep_id != build_plan(CC, 3, {"rounds": [1, 2]}, None, seed=1).sweep_id


def test_parse_values() -> None:
    assert parse_values("rounds=1,2, 3", "grid") == ("rounds", ["1", "2", "3"])
    assert parse_values("n-peers=2", "grid") == ("n_peers", ["2"])
    assert parse_values('topology=["small_world:k=2,p=0.1", "ring"]', "grid") == (
        "topology", ["small_world:k=2,p=0.1", "ring"])
    for bad in ("rounds", "=1,2", "rounds=1,,2", "rounds=[1,", "rounds=[]", "rounds=[1, null"):
        with pytest.raises(ConfigError):
            parse_values(bad, "grid")


@pytest.mark.parametrize(
    ("grid", "conditions", "message"),
    [
        ({"rounds": ["0", "3"]}, None, "rounds: must be an integer from 1 to 5, got 0"),
        ({"rounds": ["x"]}, None, "rounds: must be an integer from 1 to 5, got 'x'"),
        ({"nope": [1]}, None, "nope: unknown field"),
        ({"rounds": [1, "1"]}, None, "grid: rounds: lists 1 more than once"),
        ({"rounds": []}, None, "grid: rounds: needs at least one value"),
        ({"order": ["fixed", "loud"]}, None, "order: must be one of"),
        ({"biased": [True]}, ("biased", [True, False]), "is also a grid field"),
        ({}, ("biased", [True]), "needs at least two values"),
        # only a built world finds this: k=4 neighbours need at least 5 agents
        ({"n_peers": [2, 8]}, None, "topology: small_world k must be in 2..2, got 4"),
    ],
)
def test_grid_validation(grid: dict, conditions: tuple | None, message: str) -> None:
    with pytest.raises(ConfigError, match=None) as err:
        plan_sweep(CC, 2, grid, conditions=conditions, base={"topology": "small_world:k=4"})
    assert message in str(err.value)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(
    "argv",
    [
        ["--trials", "2", "--grid", "rounds=0,3"],
        ["--trials", "2", "--grid", "rounds=1,9"],
        ["--trials", "0"],
        ["--grid", "rounds=1"],
        ["--trials", "2", "--grid", "colour=red"],
        ["--trials", "2", "--conditions", "biased=true"],
        ["--trials", "2", "--no-biased"],
        ["--trials", "2", "--executor", "serial", "--address", "tcp://127.0.0.1:1"],
        ["--trials", "2", "--budget-usd", "-1"],
        ["--trials", "2", "--workers", "0"],
        ["--trials", "2", "--seed", "-5"],
        ["--trials", "2", "--resume"],
        ["--trials", "2", "--grid", "n_peers=2,6", "--topology", "small_world:k=4"],
        ["--trials", "2", "--trial-timeout", "0"],
        ["--trials", "2", "--trial-timeout", "soon"],
        ["--trials", "2", "--max-failed-trials", "0"],
        ["--trials", "2", "--keep-failed"],
        ["--trials", "2", "--timeout", "-1"],
        ["--trials", "2", "--max-retries", "many"],
        ["--trials", "2", "--breaker-threshold", "2"],
        # one request in flight cannot be shared among two worker processes
        ["--trials", "2", "--backend", "openai-compatible", "--base-url", "http://127.0.0.1:9/v1",
         "--max-concurrency", "1", "--workers", "2"],
        # a prompt that cannot fit the window even with its history trimmed: refused before any
        # trial (it was: every trial failed on its own)
        ["--trials", "2", "--context-window", "60"],
    ],
)
def test_cli_bad_input_exits_2_and_writes_nothing(
    argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "sweep"
    with pytest.raises(SystemExit) as exc:
        batch_main(["context_corrosion", *argv, "--out", str(out), "--no-progress"])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err and len(err.splitlines()) == 1, err
    assert not out.exists()


def test_refuses_to_overwrite_or_change_a_sweep(tmp_path: Path) -> None:
    out = tmp_path / "s"
    run_sweep(FLAKY, 1, executor="serial", out=out, plot=False)
    with pytest.raises(ConfigError, match="already holds another sweep; choose another --out"):
        run_sweep(FLAKY, 2, executor="serial", out=out, plot=False)
    with pytest.raises(ConfigError, match="trials differs"):
        run_sweep(FLAKY, 2, executor="serial", out=out, resume=True, plot=False)
    (out / "summary.json").unlink()  # as if the first pass had been killed before its tables
    with pytest.raises(ConfigError, match="already holds this sweep, unfinished; pass --resume to finish it"):
        run_sweep(FLAKY, 1, executor="serial", out=out, plot=False)


def test_a_finished_sweep_run_again_returns_its_results_and_runs_nothing(tmp_path: Path) -> None:
    out = tmp_path / "s"
    first = run_sweep(FLAKY, 2, grid={"words": [3, 5]}, executor="serial", out=out, plot=False)
    beat = read_heartbeat(out)  # what the run browser showed while it ran: every trial written, then finished
    assert (beat["kind"], beat["state"], beat["written"], beat["total"]) == ("sweep", "finished", len(first), len(first))
    files = {p: p.read_bytes() for p in out.rglob("*") if p.is_file() and p.name != ".lock"}
    notes: list[str] = []
    again = run_sweep(FLAKY, 2, grid={"words": [3, 5]}, executor="serial", out=out, plot=False, echo=notes.append)
    assert notes == [f"sweep {first.attrs['summary']['sweep_id']}: finished before in {out.resolve()}; its results "
                     "follow (nothing was run again)"]
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file() and p.name != ".lock"} == files
    pd.testing.assert_frame_equal(again, first)
    assert again.attrs["summary"] == json.loads((out / "summary.json").read_text()) == first.attrs["summary"]
    # A ledger line after the tables (a later pass cut short) makes it unfinished again.
    with (out / "ledger.jsonl").open("a") as fh:
        fh.write((out / "ledger.jsonl").read_text().splitlines()[0] + "\n")
    with pytest.raises(ConfigError, match="unfinished; pass --resume"):
        run_sweep(FLAKY, 2, grid={"words": [3, 5]}, executor="serial", out=out, plot=False)


def test_the_progress_line_ends_on_the_summary_totals(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The last progress line (a log: not a terminal) shows the calls and tokens the summary counts,
    on a first pass and on a resume that re-runs the failed trials."""
    import re

    from tqdm import tqdm

    def last_totals() -> tuple[int, str, int]:
        lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("sweep: ")]
        calls, tokens, fail = re.search(r"fail=(\d+) calls=([\d,]+) tok=(\S+)", lines[-1]).group(2, 3, 1)
        return int(calls.replace(",", "")), tokens, int(fail)

    kw = dict(grid={"words": [5, 9]}, base={"fail_every": 3}, executor="serial", out=tmp_path / "s", plot=False,
              progress=True)
    for resume in (False, True):
        summary = run_sweep(FLAKY, 7, resume=resume, **kw).attrs["summary"]
        assert summary["n_error"] > 0 and summary["calls"] > 0
        assert last_totals() == (summary["calls"], tqdm.format_sizeof(summary["tokens"]), summary["n_error"])


def test_the_readme_sweep_run_twice_prints_its_table_and_resume_finds_its_directory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)  # the default directory, runs/sweeps/<scenario>-<id>, lands here
    argv = ["context_corrosion", "--trials", "2", "--grid", "rounds=1,2", "--n-peers", "2", "--no-metrics",
            "--executor", "serial", "--no-progress", "--no-plot"]
    assert batch_main(argv) == 0
    first = capsys.readouterr()
    (sweep,) = (tmp_path / "runs" / "sweeps").iterdir()
    ledger = (sweep / "ledger.jsonl").read_bytes()
    assert batch_main([*argv, "--verbose"]) == 0
    again = capsys.readouterr()
    assert "nothing was run again" in again.err and (sweep / "ledger.jsonl").read_bytes() == ledger
    assert again.out != first.out and again.out.splitlines()[0] == first.out.splitlines()[0]
    assert " ci_low " in again.out  # the verbose table: every summary column
    assert batch_main(argv) == 0 and capsys.readouterr().out == first.out
    # --resume without --out: the directory the first run chose from the same flags
    (sweep / "summary.json").unlink()
    assert batch_main([*argv, "--resume"]) == 0
    assert f"-> {sweep}" in capsys.readouterr().err and (sweep / "summary.json").is_file()
    with pytest.raises(SystemExit) as exc:
        batch_main([*argv[:2], "3", *argv[3:], "--resume"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: resume: these flags started no sweep here (runs/sweeps/context_corrosion-")
    assert err.count("\n") == 1


# -- executors agree ----------------------------------------------------------------

@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    words=st.lists(st.integers(1, 60), min_size=1, max_size=3, unique=True),
    trials=st.integers(1, 4),
    seed=st.integers(0, 2**32 - 1),
    fail_every=st.sampled_from([0, 2, 3]),
    concurrency=st.integers(1, 8),
)
def test_serial_equals_asyncio(tmp_path_factory: pytest.TempPathFactory, words: list[int], trials: int,
                               seed: int, fail_every: int, concurrency: int) -> None:
    base = tmp_path_factory.mktemp("agree")
    kw = dict(grid={"words": words}, base={"fail_every": fail_every}, seed=seed, plot=False)
    serial = run_sweep(FLAKY, trials, executor="serial", out=base / "serial", **kw)
    asyncio_ = run_sweep(FLAKY, trials, executor="asyncio", concurrency=concurrency, out=base / "asyncio", **kw)
    pd.testing.assert_frame_equal(stable(serial), stable(asyncio_))
    assert (serial["status"] == "error").any() == bool(fail_every and any(s % fail_every == 0 for s in serial["seed"]))


@pytest.mark.parametrize(("executor", "concurrency", "peak"), [("serial", 6, 1), ("asyncio", 6, 6), ("asyncio", 3, 3)])
def test_asyncio_overlaps_trials_up_to_the_concurrency(tmp_path: Path, executor: str, concurrency: int, peak: int) -> None:
    SlowStub.reset(target=peak)
    df = run_sweep(SLOW, 12, executor=executor, concurrency=concurrency, out=tmp_path / "s", plot=False)
    assert (df["status"] == "ok").all()
    assert SlowStub.peak == peak


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> pd.DataFrame:
    """An uninterrupted serial context-corrosion sweep."""
    out = tmp_path_factory.mktemp("ref") / "serial"
    # without the scenario's own compare hook, to test the generic comparison
    return run_sweep(dataclasses.replace(CC, compare=None), 3, {"rounds": [1, 2]}, base=CC_BASE,
                     executor="serial", out=out)


def test_serial_equals_local_pool_and_dask_localcluster(reference: pd.DataFrame, tmp_path: Path) -> None:
    kw = dict(grid={"rounds": [1, 2]}, base=CC_BASE, plot=False)
    # Two pool processes finish trials out of order; the table is in plan order all the same.
    local = run_sweep("context_corrosion", 3, executor="local", workers=2, out=tmp_path / "local", **kw)
    # With Dask's default port taken (as by another cluster), the LocalCluster takes another one
    # quietly: dask warned "Port 8787 is already in use" when its scheduler asked for that port.
    with socket.socket() as held, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with contextlib.suppress(OSError):  # (held by something else already: as good)
            held.bind(("127.0.0.1", 8787))
            held.listen()
        # One Dask worker process (each costs a fresh interpreter that imports simcore; two of
        # them, out of order, are test_batch_faults.py's backend_flags[dask]).
        dask = run_sweep("context_corrosion", 3, executor="dask", workers=1, out=tmp_path / "dask", **kw)
    assert not [w for w in caught if "already in use" in str(w.message)]
    for other in (local, dask):
        pd.testing.assert_frame_equal(stable(reference), stable(other))
    assert (reference["status"] == "ok").all() and len(reference) == 2 * 2 * 3
    # the traces themselves are identical, run by run
    for run_dir in reference["run_dir"]:
        ref_trace = (Path(reference.attrs["sweep_dir"]) / run_dir / "trace.jsonl").read_bytes()
        assert (tmp_path / "dask" / run_dir / "trace.jsonl").read_bytes() == ref_trace


# -- outputs ------------------------------------------------------------------------

def test_outputs(reference: pd.DataFrame) -> None:
    sweep = Path(reference.attrs["sweep_dir"])
    for name in ("results.csv", "results.parquet", "summary.json", "summary.csv", "sweep.json",
                 "ledger.jsonl", "plots/metrics.png"):
        assert (sweep / name).is_file(), name
    assert (sweep / "plots/metrics.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    pd.testing.assert_frame_equal(read_results(sweep), reference)
    csv = pd.read_csv(sweep / "results.csv")
    assert list(csv.columns) == list(reference.columns)
    assert len(csv) == 12 and csv["run_id"].is_unique
    for col in ("sweep_id", "cell", "rounds", "condition", "biased", "trial", "seed", "status",
                "metric_changed_position_count", "tokens", "cost_usd", "wall_s"):
        assert col in reference.columns, col
    run_dirs = sorted((sweep / "context_corrosion").iterdir())
    assert [d.name for d in run_dirs] == sorted(reference["run_id"])
    # each row's metrics are the run directory's results
    row = reference.iloc[5]
    results = json.loads((sweep / row["run_dir"] / "results.json").read_text())
    assert results["seed"] == row["seed"]
    assert results["metrics"]["mean_final_confidence"] == row["metric_mean_final_confidence"]
    assert sum(u["prompt_tokens"] + u["completion_tokens"] for u in results["usage"].values()) == row["tokens"]

    summary = json.loads((sweep / "summary.json").read_text())
    assert summary["n_planned"] == summary["n_ok"] == 12
    group = summary["groups"][0]
    assert group["params"] == {"rounds": 1} and group["condition"] == "biased=true" and group["n"] == 3
    sel = reference[(reference["cell"] == 0) & (reference["condition"] == "biased=true")]
    d = group["metrics"]["mean_final_confidence"]
    assert d["mean"] == pytest.approx(sel["metric_mean_final_confidence"].mean())
    assert d["std"] == pytest.approx(sel["metric_mean_final_confidence"].std())
    assert d["ci_low"] < d["mean"] < d["ci_high"]
    comp = summary["comparisons"][0]
    assert comp["method"] == "generic" and comp["n_pairs"] == 3 and (comp["a"], comp["b"]) == ("biased=true", "biased=false")
    r = comp["result"]["mean_initial_confidence"]
    assert r["delta_mean"] == pytest.approx(r["mean_a"] - r["mean_b"])
    assert r["test"] == "exact sign-flip" and r["p_value"] is not None and r["p_adjusted"] >= r["p_value"]
    assert r["family"].startswith("Holm across ") and r["kind"] == "score"
    constant = comp["result"]["n_agents"]  # equal in every pair: nothing to test
    assert constant["p_value"] is None and constant["p_adjusted"] is None
    assert constant["not_tested"] == "equal in every pair"


def test_the_printed_summary_is_a_compact_table_and_verbose_prints_the_detail(reference: pd.DataFrame) -> None:
    from simcore.batch.report import format_summary

    plan = plan_sweep(dataclasses.replace(CC, compare=None), 3, {"rounds": [1, 2]}, base=CC_BASE)
    summary = reference.attrs["summary"]
    text = format_summary(plan, summary)
    lines = text.splitlines()
    # config echoes (context_corrosion reports rounds among its metrics) are left out
    assert "metric_rounds" in reference.columns
    assert all("rounds" not in g["metrics"] for g in summary["groups"])
    assert not any(line.split()[:1] == ["rounds"] for line in lines)
    # per cell and condition: n, each metric's mean and CI
    assert "rounds=1" in text and "biased=true (n=3)" in text and "biased=false (n=3)" in text
    row = next(line for line in lines if line.split()[:1] == ["changed_position_count"])
    d = summary["groups"][0]["metrics"]["changed_position_count"]
    assert f"{d['mean']:.3g} [{d['ci_low']:.3g}, {d['ci_high']:.3g}]" in row
    # the comparisons: difference, interval (at the family's level), test, p, adjusted p, decision
    assert sum("biased=true - biased=false (3 pairs by trial seed); intervals at" in line for line in lines) == 2
    assert any("a - b" in line and "interval" in line and "adj. p" in line and "decision" in line for line in lines)
    assert "decided by: paired test chosen by each metric's kind (named per row), Holm across" in text
    assert len(lines) < 80
    detail = format_summary(plan, summary, verbose=True)
    assert "ci_high" in detail and "p_adjusted" in detail and len(detail.splitlines()) > len(lines)


def test_failed_trials_are_rows_and_scenario_compare_is_used(tmp_path: Path) -> None:
    df = run_sweep(FLAKY_CMP, 6, base={"fail_every": 2}, executor="serial", out=tmp_path / "s", seed=3,
                   plot=False)
    failed = df[df["status"] == "error"]
    assert len(df) == 12 and 0 < len(failed) < 12
    assert failed["error"].str.contains("planned failure").all()
    assert (failed["seed"] % 2 == 0).all() and (df.loc[df["status"] == "ok", "seed"] % 2 == 1).all()
    summary = df.attrs["summary"]
    assert summary["n_error"] == len(failed)
    (comp,) = summary["comparisons"]
    n_ok_pairs = int((df[df["condition"] == "boost=1.0"]["status"] == "ok").sum())
    assert comp["method"] == "scenario" and comp["n_pairs"] == n_ok_pairs
    assert comp["result"] == {"n_a": n_ok_pairs, "n_b": n_ok_pairs, "seeds_paired": True,
                              "mean_score_diff": pytest.approx(1.0)}


def test_fail_fast_skips_the_rest(tmp_path: Path) -> None:
    df = run_sweep(FLAKY, 20, base={"fail_every": 1}, conditions=None, executor="serial",
                   out=tmp_path / "s", fail_fast=True, plot=False)
    assert list(df["status"].iloc[:1]) == ["error"]
    assert (df["status"].iloc[1:] == "skipped").all()
    assert (df["error"].iloc[1:] == "fail-fast").all()


def test_a_crashing_trial_is_a_durable_error_row(tmp_path: Path) -> None:
    kw = dict(base={"broken_analysis": True}, conditions=None, executor="serial", out=tmp_path / "s", plot=False)
    df = run_sweep(FLAKY, 3, **kw)
    assert (df["status"] == "error").all()
    assert (df["error"] == "crash: ZeroDivisionError: analysis bug").all()
    assert df["run_dir"].isna().all() and not (tmp_path / "s" / "flaky").exists()
    kept = run_sweep(FLAKY, 3, resume=True, keep_failed=True, **kw)  # recorded in the ledger
    assert kept.attrs["summary"]["timing"]["trials_run"] == 0
    pd.testing.assert_frame_equal(stable(kept), stable(df))
    again = run_sweep(FLAKY, 3, resume=True, **kw)  # failed trials run again, and fail again
    assert again.attrs["summary"]["timing"]["trials_rerun"] == 3
    assert (again["attempt"] == 2).all() and (again["error"] == df["error"]).all()
    ledger = [json.loads(line) for line in (tmp_path / "s" / "ledger.jsonl").read_text().splitlines()]
    assert sorted((r["run_id"], r["attempt"]) for r in ledger) == sorted(
        (run_id, n) for run_id in df["run_id"] for n in (1, 2))


# -- resume -------------------------------------------------------------------------

def test_resume_repairs_every_kind_of_crash_damage(reference: pd.DataFrame, tmp_path: Path) -> None:
    sweep = tmp_path / "s"
    shutil.copytree(reference.attrs["sweep_dir"], sweep)
    runs = sweep / "context_corrosion"
    lines = (sweep / "ledger.jsonl").read_text().splitlines(keepends=True)
    by_id = {json.loads(line)["run_id"]: line for line in lines}
    ids = sorted(by_id)
    lost = ids[:3]          # crashed before the run finished: no run dir, no ledger line
    unledgered = ids[3]     # crashed after the rename, before the ledger append
    for run_id in lost:
        shutil.rmtree(runs / run_id)
    kept = [by_id[i] for i in ids[4:]]
    torn = by_id[ids[-1]][: len(by_id[ids[-1]]) // 2]   # killed mid-append
    (sweep / "ledger.jsonl").write_text("".join(kept[:-1]) + torn)
    staging = runs / f".{lost[0]}.abc123.tmp"            # a half-written run dir
    staging.mkdir()
    (staging / "trace.jsonl").write_text("partial")
    for name in ("results.csv", "results.parquet", "summary.json"):
        (sweep / name).unlink()
    before = {d.name: d.stat().st_mtime_ns for d in runs.iterdir() if not d.name.startswith(".")}
    assert unledgered in before and lost[0] not in before

    notes: list[str] = []
    df = run_sweep("context_corrosion", 3, {"rounds": [1, 2]}, base=CC_BASE, executor="serial",
                   out=sweep, resume=True, echo=notes.append, plot=False)
    pd.testing.assert_frame_equal(stable(df), stable(reference))
    assert not staging.exists()
    after = {d.name: d.stat().st_mtime_ns for d in runs.iterdir()}
    assert sorted(after) == ids
    assert all(after[k] == v for k, v in before.items())  # finished trials were not redone
    assert df.attrs["summary"]["timing"]["trials_run"] == len(lost)
    assert any("recovered 2" in n for n in notes), notes     # the unledgered one and the torn one
    ledger = [json.loads(line) for line in (sweep / "ledger.jsonl").read_text().splitlines()]
    assert sorted(r["run_id"] for r in ledger) == ids      # complete, no duplicates

    # resuming a finished sweep runs nothing and changes nothing
    again = run_sweep("context_corrosion", 3, {"rounds": [1, 2]}, base=CC_BASE, executor="serial",
                      out=sweep, resume=True, plot=False)
    pd.testing.assert_frame_equal(stable(again), stable(reference))
    assert again.attrs["summary"]["timing"]["trials_run"] == 0


def test_a_write_failure_aborts_and_resume_redoes_the_trial(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import simcore.batch.worker as worker

    real = worker.write_run

    def disk_full(trial, out, run_id):  # type: ignore[no-untyped-def]
        if run_id.endswith("trial2"):
            raise OSError(28, "No space left on device")
        return real(trial, out, run_id)

    monkeypatch.setattr(worker, "write_run", disk_full)
    with pytest.raises(SweepAborted, match="No space left"):
        run_sweep(FLAKY, 4, conditions=None, executor="serial", out=tmp_path / "s", plot=False)
    partial = read_results(tmp_path / "s")
    assert list(partial["status"]) == ["ok", "ok", "pending", "pending"]
    monkeypatch.setattr(worker, "write_run", real)
    done = run_sweep(FLAKY, 4, conditions=None, executor="serial", out=tmp_path / "s", resume=True, plot=False)
    assert (done["status"] == "ok").all() and done.attrs["summary"]["timing"]["trials_run"] == 2


def test_kill_9_mid_sweep_then_resume(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The sweep's process group (the command and its pool workers) is killed while trials are
    in flight: the gate holds every trial after the first GATE_PASSES, so the kill lands after
    exactly those were written, however fast or slow the machine. Resuming finishes the sweep
    with every trial once, as an uninterrupted sweep has it."""
    sweep = tmp_path / "killed"
    gate = tmp_path / "gate"
    gate.mkdir()
    monkeypatch.setenv(GATE_ENV, str(gate))
    flags = ["tests.batch_scenarios:GATED", "--trials", "6", "--grid", "words=3,5", "--seed", "11",
             "--out", str(sweep)]
    proc = subprocess.Popen(
        [sys.executable, "-m", "simcore.batch", *flags, "--executor", "local", "--workers", "2"], cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        start_new_session=True,
    )
    ledger = sweep / "ledger.jsonl"
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            if ledger.is_file() and ledger.read_text().count("\n") >= GATE_PASSES:
                break
            time.sleep(0.02)
        assert proc.poll() is None, proc.stderr.read()[-2000:]
        # both workers hold a trial at the gate
        while len(list(gate.glob("ticket-*"))) < GATE_PASSES + 2 and time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # parent and pool workers, mid-trial
        proc.wait()
        proc.stderr.close()
    assert ledger.read_text().count("\n") == GATE_PASSES
    assert not (sweep / "results.csv").exists()

    (gate / "open").touch()
    res = run_module("simcore.batch", flags[0], "--resume", "--out", str(sweep), "--executor", "serial", "--no-plot",
                     cwd=ROOT)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "fail=0" in res.stderr  # the progress bar
    resumed = read_results(sweep)
    assert len(resumed) == 24 and resumed["run_id"].is_unique and (resumed["status"] == "ok").all()
    assert json.loads((sweep / "summary.json").read_text())["timing"]["trials_run"] == 24 - GATE_PASSES
    rows = [json.loads(line) for line in ledger.read_text().splitlines()]
    assert len(rows) == 24 and len({r["run_id"] for r in rows}) == 24
    assert not [p for p in (sweep / flags[0]).iterdir() if p.name.startswith(".")]

    fresh = run_sweep(flags[0], 6, {"words": [3, 5]}, seed=11, executor="asyncio", out=tmp_path / "fresh", plot=False)
    pd.testing.assert_frame_equal(stable(resumed), stable(fresh))


# -- budget -------------------------------------------------------------------------

@pytest.fixture(scope="module")
def fake_server():
    """The fake OpenAI-compatible server on 127.0.0.1 (stub calls cost nothing, its don't)."""
    srv = FakeServer(FakeConfig())
    with srv.in_thread():
        yield srv


@pytest.fixture()
def priced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Price the fake server's model at $1 per million input and $2 per million output tokens."""
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"fake-1": {"input": 1.0, "output": 2.0}}))
    monkeypatch.setenv("SIMCORE_PRICES", str(prices))
    load_prices.cache_clear()
    yield prices
    load_prices.cache_clear()


def test_budget_caps_the_sweep_and_resume_finishes_it(fake_server, priced: Path, tmp_path: Path) -> None:
    spec = BackendSpec("openai-compatible", "fake-1", base_url=fake_server.openai_url)
    kw = dict(grid={"rounds": [1, 2]}, base=CC_BASE, executor="serial", plot=False, spec=spec)
    full = run_sweep("context_corrosion", 5, out=tmp_path / "full", **kw)
    per_trial = full["cost_usd"]
    assert (per_trial > 0).all()
    cap = float(per_trial.sum()) / 2
    notes: list[str] = []
    df = run_sweep("context_corrosion", 5, out=tmp_path / "capped", budget_usd=cap, echo=notes.append, **kw)
    spent = df["cost_usd"].sum()
    skipped = df[df["status"] == "skipped"]
    refused = df[df["status"] == "error"]  # a call the hard cap refused fails its trial
    assert 0 < len(skipped) < len(df) and (skipped["error"] == "budget").all()
    assert (refused["error_kind"] == "budget").all()
    assert spent <= cap and df.attrs["summary"]["spent_usd"] == pytest.approx(spent)  # never over
    assert spent + per_trial.max() > cap  # it did not stop early either
    assert any(n.startswith("cost estimate: $") for n in notes)
    assert any(n.startswith("budget: stopped") for n in notes)
    summary = df.attrs["summary"]
    assert summary["n_skipped"] == len(skipped) and len(summary["skipped"]) == len(skipped)
    # matched pairs are dispatched together: no condition runs without its partner
    done = df[df["status"] != "skipped"]
    assert (done.groupby(["cell", "trial"]).size() == 2).all()
    # a larger budget on resume runs exactly the skipped and the refused trials
    more = run_sweep("context_corrosion", 5, out=tmp_path / "capped", budget_usd=cap * 3, resume=True, **kw)
    assert more.attrs["summary"]["timing"]["trials_run"] == len(skipped) + len(refused)
    assert more.attrs["summary"]["timing"]["trials_rerun"] == len(refused)
    pd.testing.assert_frame_equal(stable(more), stable(full))


def test_cli_budget_prints_the_estimate(fake_server, priced: Path, tmp_path: Path) -> None:
    out = tmp_path / "cli"
    res = run_module(
        "simcore.batch", "context_corrosion", "--trials", "4", "--rounds", "1", "--n-peers", "2", "--budget-usd", "0.01",
        "--executor", "serial", "--backend", "openai-compatible", "--base-url", fake_server.openai_url,
        "--model", "fake-1", "--out", str(out), "--no-progress", "--no-plot", cwd=ROOT)
    assert res.returncode == 1, res.stderr  # some trials were skipped
    assert "cost estimate: $" in res.stderr and "budget: stopped dispatching" in res.stderr
    df = read_results(out)
    assert (df["status"] == "skipped").any() and df.loc[df["status"] == "ok", "cost_usd"].sum() <= 0.0105
    assert "skipped" in res.stdout


def test_an_undeclared_true_false_metric_is_summarised_and_compared_as_a_proportion(tmp_path: Path) -> None:
    """The table holds it as 1/0; read as numbers it got a t interval outside [0, 1]."""
    assert FLAKY.kind_of("long") is None
    df = run_sweep(FLAKY, 12, executor="serial", out=tmp_path / "s", plot=False)
    summary = df.attrs["summary"]
    for group in summary["groups"]:
        long = group["metrics"]["long"]
        assert long["kind"] == "proportion" and 0 <= long["ci_low"] <= long["mean"] <= long["ci_high"] <= 1
        assert group["metrics"]["total_length"]["kind"] != "proportion"  # a number stays one
    [comparison] = summary["comparisons"]
    assert comparison["result"]["long"]["kind"] == "proportion"
    assert comparison["result"]["score"]["kind"] == "continuous"


def test_conditions_with_no_pair_of_finished_trials_are_not_compared(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """Every trial failed: the scenario's own comparison is not called on empty arms (context
    corrosion's raised an IndexError there, printed as "the comparison failed")."""
    df = run_sweep(FLAKY_CMP, 2, base={"fail_every": 1}, executor="serial", out=tmp_path / "s", plot=False)
    [comparison] = df.attrs["summary"]["comparisons"]
    assert comparison["n_pairs"] == 0 and "result" not in comparison and "error" not in comparison
    assert comparison["not_compared"] == "no trial finished ok in both conditions"
    from simcore.batch.report import format_summary

    assert "not compared: no trial finished ok in both conditions" in format_summary(
        plan_sweep(FLAKY_CMP, 2, base={"fail_every": 1}), df.attrs["summary"])
