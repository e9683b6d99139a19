"""Context corrosion: does a structurally dominant agent collapse a group's diversity?

See ``../shared/seeds/context_corrosion.md`` for the experiment and the README for
the CLI and the HTTP API. ``SCENARIO`` is what the framework runs. Modules:
config, tasks (the five tasks and their stance banks), experiment (the SimPy
phases), behaviour (the stub's ground truth), metrics (the seed's metrics and
compare_runs), analysis (embeddings, results, artifacts), plots, service (the
HTTP service, ``serve``).
"""

from scenarios.context_corrosion.analysis import (
    analyze,
    compare,
    summarize,
    write_artifacts,
)
from scenarios.context_corrosion.behaviour import make_behaviour
from scenarios.context_corrosion.config import CorrosionConfig
from scenarios.context_corrosion.experiment import build
from scenarios.context_corrosion.metrics import KINDS, METRICS
from simcore.api import Null, ResultEntry, Scenario


def serve(argv: list[str]) -> int:
    """``python -m scenarios.context_corrosion serve``: the HTTP service (see :mod:`.service`)."""
    # Deferred on purpose: the service brings aiohttp.web (heavy), needed only when serving.
    from scenarios.context_corrosion.service import serve_command

    return serve_command(argv)


def embeds(cfg: CorrosionConfig) -> bool:
    """Whether the analysis embeds texts (a module function: scenarios are pickled for pool workers)."""
    return bool(cfg.metrics)


SCENARIO = Scenario(
    name="context_corrosion",
    description=(
        "Context corrosion: D (800 tokens, speaks first, biased framing in run A) and "
        "peers (200 tokens) answer a task, discuss for N rounds and vote."
    ),
    config_type=CorrosionConfig,
    build=build,
    analyze=analyze,
    behaviour=make_behaviour,
    summarize=summarize,
    write_artifacts=write_artifacts,
    embeds=embeds,
    counterfactual=("biased", True, False),
    compare=compare,
    commands={"serve": serve},
    outcome=ResultEntry("final_positions"),
    kinds=KINDS,
    metrics=METRICS,
    null=Null(
        config={"conformity": 0.0},
        why="no peer is influenced by what it hears, so run A and run B differ only in D's own text",
        notes={
            "avg_peer_convergence_final_round": "it compares peers with D's text, which differs between the arms",
            "avg_peer_directional_delta": "it compares peers with D's text, which differs between the arms",
            "dominant_self_drift": "it measures D itself, whose framing is the treatment",
        },
    ),
)
