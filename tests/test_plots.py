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
