"""LLM auction: a sealed-bid auction for the proposer role, against free discussion
and turn-taking, on ambiguous ethical vignettes.

See ``../shared/seeds/llm_auction.md`` for the experiment and the README for the
CLI. ``SCENARIO`` is what the framework runs; ``compare`` runs all three
mechanisms on shared seeds.
"""

from scenarios.llm_auction import compare
from scenarios.llm_auction.analysis import (
    analyze,
    compare_arms,
    outcome,
    summarize,
    write_artifacts,
)
from scenarios.llm_auction.behaviour import make_behaviour
from scenarios.llm_auction.config import AuctionConfig
from scenarios.llm_auction.experiment import build
from scenarios.llm_auction.kinds import KINDS, METRICS
from simcore.api import Null, Scenario


def compare_command(argv: list[str]) -> int:
    """``python -m scenarios.llm_auction compare``: every mechanism on shared seeds (see :mod:`.compare`)."""
    return compare.main(SCENARIO, argv)


SCENARIO = Scenario(
    name="llm_auction",
    description=(
        "LLM auction: N agents with communication styles settle ethical vignettes; the "
        "proposer role goes by sealed-bid auction, or everyone speaks (free discussion, "
        "turn-taking); majority vote; payoff = reward if right minus costs."
    ),
    config_type=AuctionConfig,
    build=build,
    analyze=analyze,
    behaviour=make_behaviour,
    summarize=summarize,
    write_artifacts=write_artifacts,
    commands={"compare": compare_command},
    counterfactual=("mechanism", "auction", "free_discussion"),
    compare=compare_arms,
    outcome=outcome,
    kinds=KINDS,
    metrics=METRICS,
    null=Null(
        config={"confidence_signal": 0.0},
        why="stated confidence does not track correctness, so the auction cannot give the floor to the "
            "better-informed",
        notes={
            "spend_per_vignette": "the auction charges for bids and messages by design",
            "cost_per_vignette": "the auction charges for bids and messages by design",
            "mean_reward": "rewards are net of the auction's charges",
            "participation": "the mechanisms hand out the floor differently by design",
        },
    ),
)
