"""Plots of the LLM-auction scenario (matplotlib, Agg backend, imported lazily).

Every plot takes tidy tables with a ``mechanism`` column, so the same function
draws one run or a comparison of all three mechanisms. Error bars are 95% CIs:
Wilson for rates, a proportion interval for mean correctness per trial, t for
other means; their lengths are never negative.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from scenarios.llm_auction.config import MECHANISMS, STYLES
from scenarios.llm_auction.kinds import KINDS
from simcore.api import describe, error_bar, proportion_ci

COLOURS = {"auction": "#1f77b4", "free_discussion": "#ff7f0e", "turn_taking": "#2ca02c"}


def _pyplot():
    # Deferred on purpose: matplotlib (heavy) loads only when a plot is drawn.
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _wilson(flags: pd.Series) -> tuple[float, float, float]:
    """Share of true values and the lengths of its Wilson error bar."""
    arr = flags.dropna().astype(bool)
    n, k = len(arr), int(arr.sum())
    if n == 0:
        return np.nan, 0.0, 0.0
    p = k / n
    return (p, *error_bar(p, *proportion_ci(k, n)))


def _mechanisms(frame: pd.DataFrame) -> list[str]:
    present = set(frame["mechanism"])
    return [m for m in MECHANISMS if m in present]


def _save(fig, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120, bbox_inches="tight")


def participation_by_style(rounds: pd.DataFrame, path: Path) -> None:
    """Share of agent-vignettes with a public message, per style and mechanism."""
    plt = _pyplot()
    mechs = _mechanisms(rounds)
    styles = [s for s in STYLES if s in set(rounds["communication_style"])]
    fig, ax = plt.subplots(figsize=(7, 4))
    width = 0.8 / max(1, len(mechs))
    x = np.arange(len(styles))
    for i, m in enumerate(mechs):
        sub = rounds[rounds["mechanism"] == m]
        stats = [_wilson(sub.loc[sub["communication_style"] == s, "participated"]) for s in styles]
        ax.bar(
            x + (i - (len(mechs) - 1) / 2) * width, [s[0] for s in stats], width,
            yerr=np.array([[s[1] for s in stats], [s[2] for s in stats]]), capsize=3,
            label=m.replace("_", " "), color=COLOURS.get(m),
        )
    ax.set_xticks(x, styles)
    ax.set_ylim(0, 1.05)
    ax.set_xlabel("communication style")
    ax.set_ylabel("participation (share of agent-vignettes\nwith a proposal or critique)")
    ax.set_title("Participation by communication style (95% Wilson CI)")
    ax.legend(title="mechanism", loc="upper center", bbox_to_anchor=(0.5, -0.18), ncol=3)
    _save(fig, path)
    plt.close(fig)


def correctness_labels(vignettes: pd.DataFrame, rounds: pd.DataFrame | None = None) -> list[str]:
    """Each mechanism's bar label: its name, its vignettes and (given ``rounds``) its readable ballots."""
    labels = []
    for m in _mechanisms(vignettes):
        decided = vignettes.loc[vignettes["mechanism"] == m, "correct"]
        label = f"{m.replace('_', ' ')}\nn={int(decided.notna().sum())} vignettes"
        if rounds is not None:
            ballots = rounds.loc[rounds["mechanism"] == m, "vote_correct"]
            label += f"\n{int(ballots.notna().sum())} of {len(ballots)} ballots readable"
        labels.append(label)
    return labels


def correctness_by_mechanism(vignettes: pd.DataFrame, path: Path, rounds: pd.DataFrame | None = None) -> None:
    """Share of vignettes decided for the consensus answer, per mechanism.

    Each bar says what it rests on: its vignettes and, given the agent-round table
    ``rounds``, how many ballots were readable (an unreadable ballot is an abstention).
    """
    plt = _pyplot()
    mechs = _mechanisms(vignettes)
    stats = [_wilson(vignettes.loc[vignettes["mechanism"] == m, "correct"]) for m in mechs]
    # Each bar's label is three lines up to 24 characters wide: room for them side by side.
    fig, ax = plt.subplots(figsize=(max(6.0, 2.8 * len(mechs)), 4))
    ax.bar(
        correctness_labels(vignettes, rounds), [s[0] for s in stats],
        yerr=np.array([[s[1] for s in stats], [s[2] for s in stats]]), capsize=4,
        color=[COLOURS.get(m) for m in mechs],
    )
    ax.set_ylim(0, 1.05)
    ax.set_xlabel("mechanism")
    ax.set_ylabel("correctness (share of vignettes\ndecided for the consensus answer)")
    ax.set_title("Correctness by mechanism (95% Wilson CI)")
    _save(fig, path)
    plt.close(fig)


def cost_vs_correctness(trials: pd.DataFrame, path: Path) -> None:
    """One point per trial (spend per vignette, correctness), plus each mechanism's mean and CI."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.5, 4.5))
    for m in _mechanisms(trials):
        sub = trials[trials["mechanism"] == m]
        colour = COLOURS.get(m)
        ax.scatter(sub["spend_per_vignette"], sub["correctness"], s=14, alpha=0.35, color=colour)
        cx = describe(sub["spend_per_vignette"].tolist(), kind=KINDS["spend_per_vignette"])
        cy = describe(sub["correctness"].tolist(), kind=KINDS["correctness"])
        xerr, yerr = ([[b] for b in error_bar(c.mean, c.ci_low, c.ci_high)] for c in (cx, cy))
        ax.errorbar(
            cx.mean, cy.mean, xerr=xerr, yerr=yerr, fmt="o", ms=8, capsize=4, color=colour,
            markeredgecolor="black", label=f"{m.replace('_', ' ')} (mean, 95% CI)",
        )
    ax.set_xlabel("spend per vignette, USD\n(paid-message tokens x token price + auction payment)")
    ax.set_ylabel("correctness per trial")
    ax.set_ylim(-0.05, 1.05)
    ax.set_title("Cost against correctness (one dot per trial)")
    ax.legend(fontsize=8)
    _save(fig, path)
    plt.close(fig)
