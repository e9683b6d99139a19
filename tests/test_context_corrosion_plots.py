"""The per-run plots and the Monte Carlo comparison figure are written and readable."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from scenarios.context_corrosion.metrics import COMPARED, corrosion_metrics
from scenarios.context_corrosion.plots import PLOT_FILES, write_run_plots
from simcore.analysis.plots import comparison_plot


def results_for(n_peers: int, rounds: int, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    agents = ["D"] + [f"P{i}" for i in range(1, n_peers + 1)]
    keys = [("phase1", 0, a) for a in agents]
    keys += [("discussion", r, a) for r in range(1, rounds + 1) for a in agents]
    keys += [("final", 0, a) for a in agents]
    vec = {k: rng.normal(size=8) + 2.0 for k in keys}
    res = corrosion_metrics(vec, "D", agents[1:], rounds)
    return {**res, "task_id": 0, "task_title": "Predictive Policing AI", "biased_dominant": True, "seed": seed}


@pytest.mark.parametrize(("n_peers", "rounds"), [(4, 3), (1, 1)])
def test_four_run_plots_are_written(tmp_path, n_peers, rounds):
    plots = write_run_plots(tmp_path / "plots", results_for(n_peers, rounds), "run_a")
    assert set(plots) == set(PLOT_FILES)
    for key, rel in plots.items():
        path = tmp_path / rel
        assert path.name == PLOT_FILES[key].format(label="run_a")
        with Image.open(path) as im:
            assert im.format == "PNG" and im.size[0] >= 300 and im.size[1] >= 200
            # not a blank canvas
            assert len(np.unique(np.asarray(im.convert("L")))) > 20


def test_comparison_plot(tmp_path):
    rng = np.random.default_rng(1)
    a = [{k: float(rng.normal(0.1, 0.02)) for k in COMPARED} for _ in range(6)]
    b = [{k: float(rng.normal(0.0, 0.02)) for k in COMPARED} for _ in range(6)]
    diff = {k: {"delta_mean": 0.1, "p_adjusted": 0.001, "significant": True, "cohen_d": 3.0,
                "family": "Holm across 6 metrics"} for k in COMPARED}
    out = tmp_path / "sub" / "comparison.png"
    comparison_plot(a, b, diff, out, metrics=COMPARED, labels=("A: biased", "B: unbiased"), title="t")
    with Image.open(out) as im:
        assert im.format == "PNG" and im.size[0] > 800


def test_plots_survive_missing_replies(tmp_path):
    res = results_for(3, 2)
    res["convergence_matrix"]["1"]["peer_to_dominant"] = {}
    res["convergence_matrix"]["1"]["dominant_drift"] = None
    res["lifecycle_entropy"]["final"] = None
    res["directional_convergence"]["dominant_self_drift"] = None
    plots = write_run_plots(tmp_path / "plots", res, "run_b")
    assert all((tmp_path / rel).is_file() for rel in plots.values())


@pytest.mark.parametrize("unreadable", [("phase1", 0, "D"), ("final", 0, "D")])
def test_plots_survive_a_dominant_agent_whose_answer_is_unreadable(tmp_path, unreadable):
    """No peer has an alignment to D then, so the directional plot has no bar to draw; on
    Gemma 3 270M it raised, and the run was written without its plots (artifact_error)."""
    rng = np.random.default_rng(2)
    agents = ["D", "P1", "P2"]
    keys = [("phase1", 0, a) for a in agents] + [("discussion", 1, a) for a in agents]
    keys += [("final", 0, a) for a in agents]
    vec = {k: rng.normal(size=8) + 2.0 for k in keys if k != unreadable}
    res = {**corrosion_metrics(vec, "D", agents[1:], 1), "task_id": 0, "task_title": "t",
           "biased_dominant": True, "seed": 0}
    assert res["directional_convergence"]["directional_delta"] == {}
    plots = write_run_plots(tmp_path / "plots", res, "run_a")
    assert set(plots) == set(PLOT_FILES) and all((tmp_path / rel).is_file() for rel in plots.values())


def test_a_run_written_with_plots_off_never_imports_matplotlib(tmp_path):
    """matplotlib's import took 0.85 s of every sweep worker's first trial, with plots off."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    code = (
        "import sys\n"
        "from simcore.runs.runner import run_trial, write_run\n"
        "from simcore.runs.scenario import load_scenario\n"
        "s = load_scenario('context_corrosion')\n"
        "cfg = s.config_type.from_mapping({'rounds': 1, 'n_peers': 2, 'plots': False})\n"
        f"run = write_run(run_trial(s, cfg, 3), {str(tmp_path)!r}, 'r')\n"
        "assert (run / 'embeddings.npz').is_file() and not (run / 'plots').exists()\n"
        "print('matplotlib' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parent.parent, env={**os.environ, "SIMCORE_EMBED_CACHE": "none"})
    assert out.stdout.strip() == "False", out.stderr
