"""simcore.plots: drawing in worker processes gives the same files as drawing here."""

from __future__ import annotations

import os

from scenarios.context_corrosion.plots import PLOT_FILES, write_run_plots
from simcore import plots
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
