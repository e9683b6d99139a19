"""Tiny scenarios for the batch-runner tests (fast, picklable by reference).

``FLAKY``: two agents answer one question each; a trial fails (an exception in
its SimPy process) when ``seed % fail_every == 0``, and ``boost`` shifts a
metric, so the condition axis has a known effect. ``FLAKY_CMP`` adds a
``compare`` hook that reports what it was given.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from simcore.agents import LLMAgent
from simcore.config import Config, param
from simcore.kernel import World
from simcore.scenario import Scenario


@dataclass(frozen=True)
class FlakyConfig(Config):
    """Config of the flaky test scenario."""

    boost: float = param(0.0, lo=-10.0, hi=10.0, help="added to the score metric")
    fail_every: int = param(0, lo=0, hi=1000, help="fail trials whose seed is divisible by this (0: never)")
    words: int = param(20, lo=1, hi=200, help="max tokens of each reply")


def build(world: World, cfg: FlakyConfig) -> None:
    agents = [LLMAgent(world, name, max_output_tokens=cfg.words) for name in ("A", "B")]

    def experiment(world: World) -> Any:
        replies = yield world.all_of(a.ask("Say something.", phase="talk") for a in agents)
        world.state["lengths"] = [len(r.text) for r in replies]
        if cfg.fail_every and world.seed % cfg.fail_every == 0:
            raise RuntimeError("planned failure")

    world.process(experiment(world))


def analyze(world: World, cfg: FlakyConfig) -> dict[str, Any]:
    lengths = world.state.get("lengths", [0, 0])
    noise = world.streams.numpy("score").normal()
    return {
        "metrics": {
            "score": float(noise + cfg.boost),
            "total_length": sum(lengths),
            "long": lengths[0] > lengths[1],
            "label": "x",
        },
        "lengths": lengths,
    }


def compare(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "n_a": len(a),
        "n_b": len(b),
        "seeds_paired": [x["seed"] for x in a] == [y["seed"] for y in b],
        "mean_score_diff": sum(x["metrics"]["score"] - y["metrics"]["score"] for x, y in zip(a, b)) / max(1, len(a)),
    }


FLAKY = Scenario(
    name="flaky",
    description="test scenario",
    config_type=FlakyConfig,
    build=build,
    analyze=analyze,
    counterfactual=("boost", 1.0, 0.0),
)
FLAKY_CMP = dataclasses.replace(FLAKY, compare=compare)
