"""The context-corrosion config: the seed's defaults, validated."""

from __future__ import annotations

from dataclasses import dataclass

from scenarios.context_corrosion.tasks import TASKS
from simcore.api import (
    ORDER_POLICIES,
    Config,
    check_with,
    make_memory,
    param,
    validate_spec,
)


@dataclass(frozen=True)
class CorrosionConfig(Config):
    """One run of the experiment: D plus peers, three phases.

    The only structural differences between D and the peers are the token budget,
    the speaking order and (in run A) the biased framing.
    """

    task: int = param(0, lo=0, hi=len(TASKS) - 1, help="task index (see the task table)")
    temperature: float = param(0.7, lo=0.0, hi=1.0, help="shared sampling temperature")
    rounds: int = param(3, lo=1, hi=5, help="discussion rounds")
    biased: bool = param(True, help="inject the biased framing into D (run A) or not (run B)")
    n_peers: int = param(4, lo=1, hi=16, help="number of peer agents P1..Pn")
    dominant_tokens: int = param(800, lo=16, hi=8192, help="D's max_output_tokens")
    peer_tokens: int = param(200, lo=16, hi=8192, help="each peer's max_output_tokens")
    order: str = param("dominant_first", choices=ORDER_POLICIES, help="speaking order policy")
    topology: str = param("complete", check=check_with(validate_spec), help="who hears whom")
    memory: str = param("full", check=check_with(make_memory), help="memory strategy: full or recent:K")
    metrics: bool = param(
        True, help="compute the embedding metrics and plots (loads all-MiniLM-L6-v2)"
    )
    plots: bool = param(
        True, help="write the four per-run plots when metrics are on (off saves ~2 s a run in big sweeps)"
    )
    conformity: float = param(
        0.6, lo=0.0, hi=1.0, help="stub behaviour: pull toward what an agent has heard, per round"
    )
    authority_weight: float = param(
        0.8, lo=0.0, hi=1.0, help="stub behaviour: how much message length and position count"
    )
