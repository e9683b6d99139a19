"""Acausal cooperation: do LLM agents told they are identical copies cooperate more?

A prisoner's dilemma tournament (see ``../shared/seeds/acausal_cooperation.md``
and the README): strategy agents write strategies, decision subagents play a
round robin, payoffs scale with power, and scripted classic strategies can join.
``SCENARIO`` is what the framework runs; its ``compare`` command runs several
configs (the original's baseline, high_temp and low_temp) side by side.
"""

from scenarios.acausal_cooperation import compare_configs
from scenarios.acausal_cooperation.analysis import (
    KINDS,
    METRICS,
    analyze,
    compare,
    outcome,
    summarize,
    write_artifacts,
)
from scenarios.acausal_cooperation.behaviour import make_behaviour
from scenarios.acausal_cooperation.config import AcausalConfig
from scenarios.acausal_cooperation.experiment import build
from simcore.api import Null, Scenario


def embeds(cfg: AcausalConfig) -> bool:
    """Whether the analysis embeds texts (a module function: scenarios are pickled for pool workers)."""
    return bool(cfg.embeddings)


def compare_command(argv: list[str]) -> int:
    """``python -m scenarios.acausal_cooperation compare``: several configs side by side (see :mod:`.compare_configs`)."""
    return compare_configs.main(SCENARIO, argv)


SCENARIO = Scenario(
    name="acausal_cooperation",
    description=(
        "Acausal cooperation: LLM strategy agents (told they are identical copies in the "
        "treatment) write strategies that decision subagents follow in a round-robin "
        "prisoner's dilemma with power-scaled payoffs; scripted players can join."
    ),
    config_type=AcausalConfig,
    build=build,
    analyze=analyze,
    behaviour=make_behaviour,
    summarize=summarize,
    write_artifacts=write_artifacts,
    commands={"compare": compare_command},
    embeds=embeds,
    counterfactual=("identity_insight", True, False),
    compare=compare,
    outcome=outcome,
    kinds=KINDS,
    metrics=METRICS,
    null=Null(
        config={"insight_uplift": 0.0},
        why="taking up the identity insight makes no strategy more cooperative",
        notes={
            "identity_reasoning_frequency": "its keywords echo the treatment prompt itself",
            "superrationality_score": "it counts identity keywords, which echo the treatment prompt",
        },
    ),
)
