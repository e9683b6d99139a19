"""simcore.analysis.plots: drawing in worker processes gives the same files as drawing here."""

from __future__ import annotations

import os

from scenarios.context_corrosion.plots import PLOT_FILES, write_run_plots
from simcore.analysis import plots
from tests.test_context_corrosion_plots import results_for


def test_draw_all_runs_in_order_here_or_in_workers():
    jobs = [(os.getpid, ()), (abs, (-3,)), (os.getpid, ())]
    here = plots.draw_all(jobs)
    assert here == [os.getpid(), 3, os.getpid()]
    with plots.pooled():
        pooled = plots.draw_all(jobs)
        assert pooled[1] == 3 and os.getpid() not in (pooled[0], pooled[2])
    assert plots._pool is None  # shut down with the last pooled block
    assert plots.draw_all(jobs[:1]) == [os.getpid()]


def test_pooled_plots_are_the_same_files(tmp_path):
    results = results_for(4, 3)
    inline = write_run_plots(tmp_path / "a" / "plots", results, "run_a")
    with plots.pooled():
        pooled = write_run_plots(tmp_path / "b" / "plots", results, "run_a")
    assert inline == pooled and set(inline) == set(PLOT_FILES)
    for rel in inline.values():
        assert (tmp_path / "a" / rel).read_bytes() == (tmp_path / "b" / rel).read_bytes()


def test_drawing_processes_leave_with_a_killed_parent(tmp_path):
    import subprocess
    import sys
    import time
    from pathlib import Path

    code = ("import os; from simcore import plots\n"
            "with plots.pooled():\n"
            "    print(*plots.draw_all([(os.getpid, ()), (os.getpid, ())]), flush=True)\n"
            "    os._exit(0)  # killed mid-run: no pool shutdown\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         cwd=Path(__file__).resolve().parent.parent)
    workers = {int(p) for p in out.stdout.split()}
    assert workers, out.stderr
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(Path(f"/proc/{p}").exists() for p in workers):
        time.sleep(0.1)
    assert not any(Path(f"/proc/{p}").exists() for p in workers)


# -- layouts: nothing drawn over anything else, nothing cut off ---------------------------------

def _captured(monkeypatch, module, name: str = "save_figure"):
    """Make ``module.name`` keep the figure (and how it is saved) instead of writing it."""
    kept = {}

    def keep(fig, path, **kw):
        kept.update(fig=fig, **kw)

    monkeypatch.setattr(module, name, keep)
    return kept


def _extent(fig, artist):
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    renderer = (fig.canvas if isinstance(fig.canvas, FigureCanvasAgg) else FigureCanvasAgg(fig)).get_renderer()
    fig.draw_without_rendering()
    return artist.get_window_extent(renderer), renderer


def test_the_divergence_position_legend_sits_below_the_axis_label(monkeypatch, tmp_path):
    import pandas as pd

    from simcore.perturbation.results import (
        PerturbationResults,
        plot_divergence_position,
    )

    kept = _captured(monkeypatch, plots)
    pairs = pd.DataFrame({"perturbation": ["drop:agent=P1,round=2"] * 3 + ["truncate:agent=D"] * 3,
                          "t_star_norm": [0.57, 0.57, 0.58, None, None, None],
                          "point_share": [0.52, 0.52, 0.52, 0.26, 0.26, 0.26]})
    res = PerturbationResults({"scenario": "context_corrosion", "perturbations": list(dict.fromkeys(pairs["perturbation"]))},
                              pairs, {"floor": 0.0})
    plot_divergence_position(res, tmp_path / "x.png")
    fig = kept["fig"]
    [ax] = fig.axes
    legend = fig.legends[0] if fig.legends else ax.get_legend()
    box, _ = _extent(fig, legend)
    label, _ = _extent(fig, ax.xaxis.label)
    assert box.y1 <= label.y0 and not box.overlaps(label)


def test_a_comparison_keeps_long_panel_titles_and_arm_labels_whole(monkeypatch, tmp_path):
    kept = _captured(monkeypatch, plots)
    rows_a = [{"m1": 0.5, "m2": 0.1, "m3": 0.9}, {"m1": 0.6, "m2": 0.2, "m3": 0.8}]
    rows_b = [{"m1": 0.4, "m2": 0.3, "m3": 0.7}, {"m1": 0.3, "m2": 0.2, "m3": 0.6}]
    diff = {m: {"delta_mean": -0.12, "cohen_d": -3.74, "paired_p_value_holm": 0.17, "significant": False}
            for m in ("m1", "m2", "m3")}
    plots.comparison_plot(rows_a, rows_b, diff, tmp_path / "c.png", metrics=["m1", "m2", "m3"],
                          labels=("A: mechanism=auction", "B: mechanism=free_discussion"),
                          titles={"m3": "strategy similarity mean of the agents' written strategies"})
    fig = kept["fig"]
    fig.draw_without_rendering()
    _, renderer = _extent(fig, fig.axes[0].title)
    saved = fig.get_tightbbox(renderer).transformed(fig.dpi_scale_trans) if kept.get("tight") else fig.bbox
    for ax in fig.axes:
        title, _ = _extent(fig, ax.title)
        assert saved.x0 <= title.x0 and title.x1 <= saved.x1 + 1, ax.get_title()
        a, b = (t.get_window_extent(renderer) for t in ax.get_xticklabels())
        assert not a.overlaps(b)


def test_the_auction_correctness_labels_do_not_overlap(monkeypatch, tmp_path):
    import pandas as pd

    import scenarios.llm_auction.plots as auction_plots

    kept = {}
    monkeypatch.setattr(auction_plots, "_save", lambda fig, path: kept.update(fig=fig))
    monkeypatch.setattr(auction_plots._pyplot(), "close", lambda fig: None)
    mechs = ["auction", "free_discussion", "turn_taking"]
    vignettes = pd.DataFrame({"mechanism": [m for m in mechs for _ in range(4)], "correct": [1, 0, 1, 1] * 3})
    rounds = pd.DataFrame({"mechanism": [m for m in mechs for _ in range(20)], "vote_correct": [1] * 60})
    auction_plots.correctness_by_mechanism(vignettes, tmp_path / "c.png", rounds)
    fig = kept["fig"]
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    boxes = [t.get_window_extent(renderer) for t in fig.axes[0].get_xticklabels()]
    assert len(boxes) == 3 and not any(a.overlaps(b) for a, b in zip(boxes, boxes[1:]))
