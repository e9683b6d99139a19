"""Plots shared by scenarios (matplotlib Figure objects, Agg, no pyplot state)."""

from __future__ import annotations

import contextlib
import io
import os
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping, Sequence

import numpy as np

from simcore.analysis import stats
from simcore.analysis.resolution import figure
from simcore.base.records import atomic_write

if TYPE_CHECKING:
    from matplotlib.figure import Figure

ARM_COLORS = ("#c0392b", "#2e86c1")
PLOT_LEVELS = ("all", "summary", "none")
PLOTS_ENV = "SIMCORE_PLOTS"  # set from --plots by the command lines; pool workers inherit it


def plot_level() -> str:
    """Which figures to draw: ``all``, ``summary`` or ``none`` (``SIMCORE_PLOTS``; default all)."""
    level = os.environ.get(PLOTS_ENV, "").strip() or "all"
    return level if level in PLOT_LEVELS else "all"


def run_plots_wanted() -> bool:
    """Whether a run's own figures are drawn (``--plots all``)."""
    return plot_level() == "all"


def summary_plots_wanted() -> bool:
    """Whether the figure of a Monte Carlo or a sweep is drawn (``--plots all`` or ``summary``)."""
    return plot_level() != "none"


_pool: ProcessPoolExecutor | None = None
_pool_users = 0
_pool_lock = threading.Lock()


@contextlib.contextmanager
def pooled() -> Iterator[None]:
    """Within it, :func:`draw_all` renders in worker processes (a Monte Carlo drawing every run's plots).

    Drawing is pure Python under the interpreter lock: on a thread it slows the
    encoder and the analyses of other trials, in a process it does not. The pool
    starts on first use and is shut down when the last ``pooled`` block ends.
    """
    global _pool, _pool_users
    with _pool_lock:
        _pool_users += 1
    try:
        yield
    finally:
        with _pool_lock:
            _pool_users -= 1
            pool, _pool = (_pool, None) if _pool_users == 0 else (None, _pool)
        if pool is not None:
            pool.shutdown(wait=True)


def _exit_with_parent(parent: int) -> None:
    # A pool's workers outlive a parent that is killed (they wait on a queue the parent
    # fed), holding its stdout and stderr open: they leave when it is gone.
    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(0)

    threading.Thread(target=watch, name="simcore-plot-parent-watch", daemon=True).start()


def draw_all(jobs: Sequence[tuple[Callable[..., Any], tuple[Any, ...]]]) -> list[Any]:
    """Call each ``(function, args)`` and return the results in order.

    Inside :func:`pooled` they run in worker processes (the functions must be
    importable module-level functions and the arguments picklable); outside, here.
    Either way every file is written when this returns.
    """
    global _pool
    with _pool_lock:
        use = _pool_users > 0 and len(jobs) > 1
        if use and _pool is None:
            import multiprocessing

            # spawn: this process has threads (encoder, analyses), which fork would copy mid-state.
            _pool = ProcessPoolExecutor(max_workers=min(4, os.cpu_count() or 1),
                                        mp_context=multiprocessing.get_context("spawn"),
                                        initializer=_exit_with_parent, initargs=(os.getpid(),))
        pool = _pool if use else None
    if pool is None:
        return [fn(*args) for fn, args in jobs]
    futures = [pool.submit(fn, *args) for fn, args in jobs]
    return [f.result() for f in futures]


def save_figure(fig: Figure, path: str | Path, *, dpi: int = 110, tight: bool = False) -> None:
    """Write ``fig`` to ``path`` as a PNG, atomically (no reader sees half an image).

    ``tight`` crops to the drawn content, which keeps labels and legends placed
    outside the axes inside the image.
    """
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, **({"bbox_inches": "tight"} if tight else {}))
    atomic_write(path, buf.getvalue())


def comparison_plot(
    rows_a: Sequence[Mapping[str, Any]],
    rows_b: Sequence[Mapping[str, Any]],
    difference: Mapping[str, Any],
    path: str | Path,
    *,
    metrics: Sequence[str],
    labels: tuple[str, str] = ("A", "B"),
    titles: Mapping[str, str] | None = None,
    title: str = "",
    dpi: int = 100,
) -> None:
    """Arm A against arm B, one panel per metric: boxes, trials, and pairs joined.

    Args:
        rows_a: Arm A's scalar metrics, one mapping per trial.
        rows_b: Arm B's, in the same order; equal lengths are drawn as pairs
            (trials that share a seed), joined by grey lines.
        difference: Per metric, the comparison (``delta_mean``, ``cohen_d``, the
            adjusted p and the decision) for the panel subtitle.
        path: Output PNG.
        metrics: The metrics to draw.
        labels: Names of the two arms.
        titles: Readable panel titles per metric (default: the metric name).
        title: Figure title.
        dpi: Resolution.
    """
    titles = titles or {}
    n = len(metrics)
    cols = min(3, max(n, 1))
    nrows = max(1, (n + cols - 1) // cols)
    from matplotlib.figure import Figure

    fig = Figure(figsize=(4.3 * cols, 3.5 * nrows + 0.9), layout="constrained")
    axes = fig.subplots(nrows, cols, squeeze=False).ravel()
    paired = len(rows_a) == len(rows_b)
    jitter = np.linspace(-0.08, 0.08, max(len(rows_a), len(rows_b), 1))  # deterministic spread
    for ax, name in zip(axes, metrics):
        a = np.array([np.nan if r.get(name) is None else r[name] for r in rows_a], dtype=float)
        b = np.array([np.nan if r.get(name) is None else r[name] for r in rows_b], dtype=float)
        bp = ax.boxplot([a[~np.isnan(a)], b[~np.isnan(b)]], positions=[0, 1], widths=0.45,
                        patch_artist=True, showfliers=False, medianprops={"color": "black"})
        for patch, color in zip(bp["boxes"], ARM_COLORS):
            patch.set_facecolor(color)
            patch.set_alpha(0.25)
        if paired:
            for i in range(len(a)):
                ax.plot([jitter[i], 1 + jitter[i]], [a[i], b[i]], color="grey", lw=0.6, alpha=0.5)
        ax.scatter(jitter[: len(a)], a, color=ARM_COLORS[0], s=18, zorder=3, label=labels[0])
        ax.scatter(1 + jitter[: len(b)], b, color=ARM_COLORS[1], s=18, zorder=3, label=labels[1])
        ax.set_xticks([0, 1], [_arm_tick(label) for label in labels])
        ax.set_xlim(-0.5, 1.5)
        ax.set_xlabel("arm")
        ax.set_ylabel(name, fontsize=8)
        d = difference.get(name, {})
        p = stats.decision_p(d)
        verdict = {True: "significant", False: "not significant"}.get(d.get("significant"), "not tested")
        stats_line = (
            f"Δ(A−B) = {figure(d.get('delta_mean'), '+.3f', stats.row_scale(d))}, adj. p = {_num(p, '.2g')} ({verdict}), "
            f"d = {_num(d.get('cohen_d'), '.2f')}"
        )
        calibration = d.get("calibration") or {}
        if calibration.get("confounded"):  # said on the figure, as everywhere the comparison shows
            stats_line += "\nCONFOUNDED UNDER THE NULL (see calibration)"
        ax.set_title(f"{titles.get(name, name.replace('_', ' '))}\n{stats_line}", fontsize=9,
                     color="firebrick" if calibration.get("confounded") else "black")
        ax.grid(axis="y", alpha=0.3)
    for ax in axes[n:]:
        ax.set_visible(False)
    handles, names = axes[0].get_legend_handles_labels()
    note = "grey lines join trials that share a seed" if paired else None
    fig.legend(handles, names, loc="outside lower center", ncols=2, fontsize=9, title=note, title_fontsize=8)
    family = next((d.get("family") for d in difference.values() if isinstance(d, Mapping) and d.get("family")), None)
    if title or family:
        fig.suptitle("\n".join(x for x in (title, f"p adjusted: {family}" if family else "") if x), fontsize=11)
    save_figure(fig, path, dpi=dpi, tight=True)  # a panel title wider than its panel is kept whole


def _arm_tick(label: str) -> str:
    """An arm's label in lines short enough to stand beside the other's ("A:\nmechanism=\nauction")."""
    head, sep, condition = label.partition(": ")
    if len(condition) > 16:
        condition = condition.replace("=", "=\n", 1)
    return f"{head}:\n{condition}" if sep else label


def _num(x: float | None, spec: str) -> str:
    return "n/a" if x is None else format(x, spec)
