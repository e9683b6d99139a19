"""Order policies, parallel phases, decision rules and votes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from backends.stub import StubBackend
from simcore.api import LLMAgent, World
from simcore.base.config import ConfigError
from simcore.sim.protocols import (
    Majority,
    Plurality,
    Threshold,
    Unanimity,
    decision_rule,
    speaking_order,
    vote,
)


def world_with(n=5, seed=1):
    world = World(seed, StubBackend())
    agents = [LLMAgent(world, f"A{i}", role="dominant" if i == 3 else "peer") for i in range(n)]
    return world, agents


def names(agents):
    return [a.name for a in agents]


def test_order_policies():
    world, agents = world_with()
    assert names(speaking_order(world, agents, "fixed")) == ["A0", "A1", "A2", "A3", "A4"]
    assert names(speaking_order(world, agents, "dominant_first")) == ["A3", "A0", "A1", "A2", "A4"]
    assert names(speaking_order(world, agents, "rotating", 2)) == ["A2", "A3", "A4", "A0", "A1"]
    shuffles = [names(speaking_order(world, agents, "random", r)) for r in range(5)]
    assert all(sorted(s) == names(agents) for s in shuffles)
    assert len({tuple(s) for s in shuffles}) > 1
    # seeded: a fresh world with the same seed gives the same sequence of shuffles
    world2, agents2 = world_with()
    assert [names(speaking_order(world2, agents2, "random", r)) for r in range(5)] == shuffles
    with pytest.raises(ConfigError, match="^order: "):
        speaking_order(world, agents, "alphabetical")


def test_decision_rules():
    assert Majority().decide(["a", "a", "b"]).choice == "a"
    assert not Majority().decide(["a", "a", "b", "b"]).reached
    assert not Majority().decide(["a", "a", None, None]).reached  # abstentions count
    assert Unanimity().decide(["x", "x"]).reached
    assert not Unanimity().decide(["x", "x", None]).reached
    assert Threshold(0.75).decide(["a", "a", "a", "b"]).reached
    assert not Threshold(0.8).decide(["a", "a", "a", "b"]).reached
    tie = Plurality().decide(["a", "b"], np.random.default_rng(0))
    assert tie.reached and tie.choice in ("a", "b")
    assert decision_rule("threshold:0.6") == Threshold(0.6)
    for bad in ("threshold:0", "threshold:1.5", "supermajority", "majority:2"):
        with pytest.raises(ConfigError, match="^decision_rule: "):
            decision_rule(bad)


@given(st.lists(st.sampled_from(["a", "b", "c", None]), min_size=1, max_size=12))
def test_rules_agree_with_counting(votes):
    counts = {v: votes.count(v) for v in set(votes) if v is not None}
    top = max(counts.values(), default=0)
    assert Majority().decide(votes).reached == (top * 2 > len(votes))
    assert Unanimity().decide(votes).reached == (top == len(votes))
    assert Threshold(0.5).decide(votes).reached == (top >= 0.5 * len(votes))


@dataclass(frozen=True)
class Ballot:
    option: Literal["red", "blue"]


def test_vote_emits_ballots_and_decision():
    world, agents = world_with(n=5, seed=4)
    out = {}

    def proc(world):
        out["d"] = yield from vote(
            world, agents, "Pick a colour.", rule=decision_rule("plurality"), schema=Ballot,
            choice=lambda r: r.value.option,
        )

    world.process(proc(world))
    world.run()
    d = out["d"]
    assert d.n == 5 and sum(d.tally.values()) == 5 and d.choice in ("red", "blue")
    assert len(world.trace.of_kind("ballot")) == 5
    [decision] = world.trace.of_kind("decision")
    assert decision.payload["choice"] == d.choice
