"""Plots of context corrosion (matplotlib, Agg, no pyplot state).

Per run, into ``<run dir>/plots/`` (``label`` is run_a or run_b):

- ``similarity_heatmap_{label}.png``: cosine of each peer with D, per round;
- ``similarity_progression_{label}.png``: three panels, peer->D per peer,
  peer<->peer mean, and D's similarity to its round-1 statement;
- ``entropy_lifecycle_{label}.png``: k=2 split entropy from phase 1 to the vote;
- ``directional_convergence_{label}.png``: initial vs final alignment to D per
  peer, and the signed directional delta.

The Monte Carlo comparison figure is generic: :func:`simcore.analysis.plots.comparison_plot`.

Figures are built as :class:`matplotlib.figure.Figure` objects, never through
pyplot, so plotting holds no global state and is safe from worker threads.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
from matplotlib.colors import Normalize
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.transforms import offset_copy

from simcore.api import draw_all

DPI = 100
PLOT_FILES = {
    "similarity_heatmap": "similarity_heatmap_{label}.png",
    "similarity_progression": "similarity_progression_{label}.png",
    "entropy_plot": "entropy_lifecycle_{label}.png",
    "shift_plot": "directional_convergence_{label}.png",
}


def _run_title(results: Mapping[str, Any]) -> str:
    arm = "run A, biased D" if results.get("biased_dominant") else "run B, unbiased D"
    return f"task {results.get('task_id')}: {results.get('task_title')} ({arm}, seed {results.get('seed')})"


def _basis_note(results: Mapping[str, Any], *metrics: str) -> str:
    """A line for the figure when a metric rests on fewer replies than it could: said, not a silent gap."""
    for m in metrics:
        b = (results.get("basis") or {}).get(m) or {}
        if b.get("of") and b.get("n", 0) < b["of"]:
            return f"\n{m}: {b['n']} of {b['of']} {b.get('unit', 'replies')} readable ({b.get('reason')})"
    return ""


def _nan(x: float | None) -> float:
    return np.nan if x is None else x


def _fmt(x: float | None, spec: str) -> str:
    return "n/a" if x is None or np.isnan(x) else format(x, spec)


def _peers(cm: Mapping[str, Any]) -> list[str]:
    """Every peer seen in any round, in first-seen order (a perturbed run may skip some)."""
    return list(dict.fromkeys(p for r in cm.values() for p in r["peer_to_dominant"]))


def _save(fig: Figure, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=DPI)


def _limits(values: Sequence[float | None]) -> tuple[float, float]:
    """Axis limits for similarities: the data's range plus a margin, within [-1, 1]."""
    vals = [v for v in values if v is not None]
    if not vals:
        return 0.0, 1.02
    lo, hi = min(vals), max(vals)
    pad = max(0.04, (hi - lo) * 0.25)
    return max(-1.02, lo - pad), min(1.02, hi + pad)


def heatmap(results: Mapping[str, Any], path: Path) -> None:
    """Peers (rows) x rounds (columns), cell = cos(peer, D)."""
    cm = results["convergence_matrix"]
    rounds = sorted(cm, key=int)
    peers = _peers(cm)
    grid = np.array([[_nan(cm[r]["peer_to_dominant"].get(p)) for r in rounds] for p in peers])
    fig = Figure(figsize=(max(4.8, 1.6 + 1.1 * len(rounds)), max(2.8, 1.4 + 0.45 * len(peers))), layout="constrained")
    ax = fig.subplots()
    norm = Normalize(0.0, 1.0)
    im = ax.imshow(grid, cmap="YlOrRd", norm=norm, aspect="auto")
    for i in range(len(peers)):
        for j in range(len(rounds)):
            v = grid[i, j]
            ax.text(j, i, "n/a" if np.isnan(v) else f"{v:.2f}", ha="center", va="center", fontsize=9,
                    color="white" if v > 0.65 else "black")
    ax.set_xticks(range(len(rounds)), [f"round {r}" for r in rounds])
    ax.set_yticks(range(len(peers)), peers)
    ax.set_xlabel("discussion round")
    ax.set_ylabel("peer")
    ax.set_title("Peer → D similarity per round", fontsize=11)
    fig.colorbar(im, ax=ax, label="cosine similarity to D")
    fig.suptitle(_run_title(results) + _basis_note(results, "avg_peer_convergence_final_round"), fontsize=8)
    _save(fig, path)


def progression(results: Mapping[str, Any], path: Path) -> None:
    """Three stacked panels: peer->D per peer, peer<->peer mean, D's drift."""
    cm = results["convergence_matrix"]
    rounds = sorted(cm, key=int)
    x = [int(r) for r in rounds]
    peers = _peers(cm)
    fig = Figure(figsize=(7, 8), layout="constrained")
    top, mid, bottom = fig.subplots(3, 1, sharex=True)
    ptd = []
    for p in peers:
        ys = [cm[r]["peer_to_dominant"].get(p) for r in rounds]
        ptd += ys
        ys = [_nan(y) for y in ys]
        top.plot(x, ys, marker="o", label=p)
    top.set_ylim(*_limits(ptd))
    top.set_ylabel("cosine to D")
    top.set_title("Peer → D similarity (rising = peers gravitate to D)", fontsize=10)
    top.legend(title="peer", fontsize=8, ncols=min(4, len(peers)), loc="best")
    ptp = [cm[r]["peer_to_peer_avg"] for r in rounds]
    if any(v is not None for v in ptp):
        mid.plot(x, [np.nan if v is None else v for v in ptp], marker="s", color="#7d3c98",
                 label="mean over peer pairs")
        mid.legend(fontsize=8, loc="best")
    else:
        mid.text(0.5, 0.5, "one peer: no peer pairs", ha="center", va="center", transform=mid.transAxes)
    mid.set_ylim(*_limits(ptp))
    mid.set_ylabel("cosine peer ↔ peer")
    mid.set_title("Peer ↔ peer similarity (herding)", fontsize=10)
    drift = [cm[r]["dominant_drift"] for r in rounds]
    bottom.plot(x, [_nan(v) for v in drift], marker="D", color="black", label="D vs D round 1")
    bottom.set_ylim(*_limits(drift))
    bottom.set_ylabel("cosine to D round 1")
    bottom.set_title("D self-consistency (near 1 = D holds its position)", fontsize=10)
    bottom.legend(fontsize=8, loc="best")
    bottom.set_xlabel("discussion round")
    bottom.set_xticks(x)
    for ax in (top, mid, bottom):
        ax.grid(alpha=0.3)
    fig.suptitle("Convergence triangulation\n" + _run_title(results)
                 + _basis_note(results, "avg_peer_convergence_final_round", "dominant_self_drift"), fontsize=10)
    _save(fig, path)


def entropy(results: Mapping[str, Any], path: Path) -> None:
    """Bar and line of entropy over the lifecycle, phase 1 to final vote."""
    le = results["lifecycle_entropy"]
    # JSON files sort keys; put the stages back in lifecycle order.
    labels = sorted(le, key=lambda k: (k == "final", k != "phase1", int(k.split("_")[-1]) if "_" in k else 0))
    names = ["Phase 1" if k == "phase1" else "Final vote" if k == "final" else k.replace("_", " ").title()
             for k in labels]
    vals = [_nan(le[k]) for k in labels]
    x = np.arange(len(labels))
    fig = Figure(figsize=(max(7.5, 1.5 + 1.1 * len(labels)), 4.6), layout="constrained")
    ax = fig.subplots()
    ax.axvspan(-0.5, 0.5, color="#27ae60", alpha=0.15, label="phase 1 (diversity baseline)")
    ax.axvspan(len(labels) - 1.5, len(labels) - 0.5, color="#c0392b", alpha=0.15,
               label="final vote (outcome diversity)")
    ax.bar(x, vals, color="#5d6d7e", alpha=0.6, width=0.6, label="entropy per stage")
    ax.plot(x, vals, color="black", marker="o", label="trend")
    for xi, v in zip(x, vals):
        ax.text(xi, 0.02 if np.isnan(v) else v + 0.02, "n/a" if np.isnan(v) else f"{v:.2f}",
                ha="center", va="bottom", fontsize=9)
    ax.set_xticks(x, names)
    ax.set_xlim(-0.5, len(labels) - 0.5)
    ax.set_ylim(0, 1.12)
    ax.set_xlabel("stage")
    ax.set_ylabel("Shannon entropy of k=2 split (bits)")
    decay = vals[0] - vals[-1]
    ax.set_title(f"Lifecycle entropy (decay phase 1 − final = {_fmt(decay, '+.2f')} bits)", fontsize=11)
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncols=4)
    fig.suptitle(_run_title(results) + _basis_note(results, "entropy_phase1", "entropy_final"), fontsize=8)
    _save(fig, path)


def directional(results: Mapping[str, Any], path: Path) -> None:
    """Left: initial vs final alignment to D; right: signed delta per peer."""
    dc = results["directional_convergence"]
    peers = list(dc["directional_delta"])
    y = np.arange(len(peers))
    fig = Figure(figsize=(10, max(3.0, 1.8 + 0.55 * len(peers))), layout="constrained")
    left, right = fig.subplots(1, 2)
    h = 0.38
    init = [dc["initial_alignment"][p] for p in peers]
    final = [dc["final_alignment"][p] for p in peers]
    left.barh(y - h / 2, init, height=h, color="#aab7b8")
    left.barh(y + h / 2, final, height=h, color="#34495e")
    left.set_yticks(y, peers)
    left.invert_yaxis()
    left.set_xlim(min([0.0, *init, *final]) - 0.02, 1.0)
    left.set_xlabel("cosine similarity to D")
    left.set_ylabel("peer")
    left.set_title("Alignment to D: initial vs final", fontsize=10)

    def legend_below(ax: Any, *entries: tuple[str, str]) -> None:
        # A fixed distance below the axis label: a fraction of the axes' height put the legend
        # on the label when there were one or two peers.
        ax.legend(handles=[Patch(color=color, label=label) for color, label in entries], loc="upper center",
                  bbox_to_anchor=(0.5, 0), bbox_transform=offset_copy(ax.transAxes, fig=fig, y=-34, units="points"),
                  fontsize=8, ncols=2)

    legend_below(left, ("#aab7b8", "initial (phase 1)"), ("#34495e", "final (vote)"))
    deltas = [dc["directional_delta"][p] for p in peers]
    colors = ["#c0392b" if d > 0 else "#2e86c1" for d in deltas]
    right.barh(y, deltas, color=colors)
    if peers:
        right.axvline(0, color="black", lw=0.8)
    right.set_yticks(y, peers)
    right.invert_yaxis()
    span = max([0.05, *(abs(d) for d in deltas)]) * 1.35
    right.set_xlim(-span, span)
    for yi, d in zip(y, deltas):
        right.text(d, yi, f" {d:+.3f} ", va="center", ha="left" if d >= 0 else "right", fontsize=9)
    if not peers:  # D's own answers unreadable: no alignment to D, and each panel says so
        for ax in (left, right):
            ax.text(0.5, 0.5, "no peer's alignment to D could be read", transform=ax.transAxes,
                    ha="center", va="center", fontsize=9, color="#7f8c8d")
    right.set_xlabel("directional delta = final − initial alignment")
    legend_below(right, ("#c0392b", "moved toward D"), ("#2e86c1", "moved away from D"))
    right.set_title(
        f"Signed delta (mean {_fmt(dc['avg_peer_directional_delta'], '+.3f')}); "
        f"D self-drift {_fmt(dc['dominant_self_drift'], '.3f')}",
        fontsize=10,
    )
    fig.suptitle("Directional convergence\n" + _run_title(results)
                 + _basis_note(results, "avg_peer_directional_delta"), fontsize=10)
    _save(fig, path)


def write_run_plots(plot_dir: Path, results: Mapping[str, Any], label: str) -> dict[str, str]:
    """Write the four per-run plots; return {seed key: path relative to the run dir}."""
    drawers = {
        "similarity_heatmap": heatmap,
        "similarity_progression": progression,
        "entropy_plot": entropy,
        "shift_plot": directional,
    }
    names = {key: PLOT_FILES[key].format(label=label) for key in drawers}
    draw_all([(draw, (results, plot_dir / names[key])) for key, draw in drawers.items()])
    return {key: f"{plot_dir.name}/{name}" for key, name in names.items()}
