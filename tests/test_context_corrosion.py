"""Context corrosion end to end: embeddings, metrics, artifacts, determinism."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from scenarios.context_corrosion import SCENARIO
from scenarios.context_corrosion.metrics import COMPARED, corrosion_metrics
from simcore.analysis.embeddings import EmbeddingStore, encode
from simcore.base.records import read_json
from simcore.cli import main
from simcore.runs.runner import run_trial, write_run

pytest_plugins = ["tests.shared_runs"]  # other_hash_seed
CFG = SCENARIO.config_type(rounds=2)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("runs")
    return write_run(run_trial(SCENARIO, CFG, 21), out)


def test_run_directory_holds_embeddings_metrics_and_plots(run_dir):
    res = read_json(run_dir / "results.json")
    assert res["status"] == "ok"
    for k in COMPARED:
        assert isinstance(res["metrics"][k], float)
    assert set(res["convergence_matrix"]) == {"1", "2"}
    assert set(res["lifecycle_entropy"]) == {"phase1", "round_1", "round_2", "final"}
    assert res["metrics_summary"]["avg_peer_directional_delta"] == res["metrics"]["avg_peer_directional_delta"]
    assert sorted(res["plots"]) == ["entropy_plot", "shift_plot", "similarity_heatmap", "similarity_progression"]
    for rel in res["plots"].values():
        assert (run_dir / rel).stat().st_size > 10_000
    log = read_json(run_dir / "experiment.json")
    assert log["directional_convergence"] == res["directional_convergence"]
    store = EmbeddingStore.load(run_dir / "embeddings.npz")
    assert len(store) == 5 * (2 + 2)
    v = store[("final", 0, "P3")]
    assert v.shape == (384,) and abs(float(np.linalg.norm(v)) - 1) < 1e-5


def test_saved_embeddings_reproduce_the_metrics(run_dir):
    """The metrics are a function of embeddings.npz and the seed: re-analysis offline."""
    res = read_json(run_dir / "results.json")
    store = EmbeddingStore.load(run_dir / "embeddings.npz")
    again = corrosion_metrics(store, "D", ["P1", "P2", "P3", "P4"], 2)
    assert json.loads(json.dumps(again)) == {k: res[k] for k in again}


def test_embeddings_are_of_what_each_agent_said(run_dir):
    log = read_json(run_dir / "experiment.json")
    store = EmbeddingStore.load(run_dir / "embeddings.npz")
    finals = {r["agent"]: r["parsed"]["final_answer"] for r in log["replies"] if r["phase"] == "final"}
    np.testing.assert_allclose(store[("final", 0, "D")], encode([finals["D"]])[0], atol=1e-5)


def test_metrics_are_deterministic_across_processes(run_dir, other_hash_seed):
    """The same run, its metrics included, as an interpreter with another hash seed made it (tests/shared_runs.py)."""
    res = read_json(run_dir / "results.json")
    other = other_hash_seed["context_corrosion_run"]
    assert other["trace_sha256"] == res["trace_sha256"]
    assert other["lifecycle_entropy"] == res["lifecycle_entropy"]
    for k, v in res["metrics"].items():
        assert other["metrics"][k] == pytest.approx(v, abs=1e-6), k


def test_no_metrics_skips_the_model_and_the_plots(tmp_path, capsys):
    assert main(SCENARIO, ["--rounds", "1", "--no-metrics", "--json", "--out", str(tmp_path)]) == 0
    res = json.loads(capsys.readouterr().out)
    assert "avg_peer_directional_delta" not in res["metrics"] and "convergence_matrix" not in res
    run = Path(res["run_dir"])
    assert not (run / "embeddings.npz").exists() and not (run / "plots").exists()
    assert (run / "experiment.json").is_file()


def test_summary_prints_the_metrics(tmp_path, capsys):
    assert main(SCENARIO, ["--rounds", "1", "--seed", "2", "--plots", "none", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "directional delta" in out and "entropy phase1" in out and "run directory:" in out
