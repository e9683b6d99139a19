"""Tiny scenarios for the batch-runner tests (fast, picklable by reference).

``FLAKY``: two agents answer one question each; a trial fails (an exception in
its SimPy process) when ``seed % fail_every == 0``, and ``boost`` shifts a
metric, so the condition axis has a known effect; ``broken_analysis`` makes every
trial crash in its analysis. ``FLAKY_CMP`` adds a
``compare`` hook that reports what it was given. ``SLOW`` is one agent whose
backend takes wall time and counts the calls in flight, to see trials overlap.
``ONE`` is one agent asking once on the sweep's backend: one request per trial,
so a run of fault rules maps onto trials one to one. ``GATED`` is FLAKY whose trials
after the first few wait for a file, so a test can stop a sweep at a known point.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from backends.base import LLMRequest, LLMResponse
from backends.stub import StubBackend
from simcore.base.config import Config, param
from simcore.runs.scenario import Scenario
from simcore.sim.agents import LLMAgent
from simcore.sim.kernel import World


@dataclass(frozen=True)
class FlakyConfig(Config):
    """Config of the flaky test scenario."""

    boost: float = param(0.0, lo=-10.0, hi=10.0, help="added to the score metric")
    fail_every: int = param(0, lo=0, hi=1000, help="fail trials whose seed is divisible by this (0: never)")
    words: int = param(20, lo=1, hi=200, help="max tokens of each reply")
    broken_analysis: bool = param(False, help="make the analysis raise (a crash outside the runner's handling)")


def build(world: World, cfg: FlakyConfig) -> None:
    agents = [LLMAgent(world, name, max_output_tokens=cfg.words) for name in ("A", "B")]

    def experiment(world: World) -> Any:
        replies = yield world.all_of(a.ask("Say something.", phase="talk") for a in agents)
        world.state["lengths"] = [len(r.text) for r in replies]
        if cfg.fail_every and world.seed % cfg.fail_every == 0:
            raise RuntimeError("planned failure")

    world.process(experiment(world))


def analyze(world: World, cfg: FlakyConfig) -> dict[str, Any]:
    if cfg.broken_analysis:
        raise ZeroDivisionError("analysis bug")
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


class SlowStub:
    """A stub whose calls wait until ``target`` of them are in flight at once, counting the peak.

    So trials that can overlap do, however slowly each starts on a busy machine: the
    first calls are held until the target is reached, and then every call passes. If
    the target is never reached (trials that do not overlap), the calls go on after
    ``patience_s`` and the peak says how many there were.
    """

    name = "slow-stub"
    in_flight = 0
    peak = 0
    target = 1
    reached = False
    patience_s = 60.0

    def __init__(self) -> None:
        self.stub = StubBackend()

    @classmethod
    def reset(cls, target: int) -> None:
        cls.in_flight, cls.peak, cls.target, cls.reached = 0, 0, target, False

    async def complete(self, request: LLMRequest) -> LLMResponse:
        SlowStub.in_flight += 1
        SlowStub.peak = max(SlowStub.peak, SlowStub.in_flight)
        try:
            waited = 0.0
            while not SlowStub.reached and waited < SlowStub.patience_s:
                SlowStub.reached = SlowStub.in_flight >= SlowStub.target
                await asyncio.sleep(0.005)
                waited += 0.005
            return self.stub.respond(request)
        finally:
            SlowStub.in_flight -= 1


def build_slow(world: World, cfg: FlakyConfig) -> None:
    agent = LLMAgent(world, "A", max_output_tokens=cfg.words, backend=SlowStub())

    def experiment(world: World) -> Any:
        reply = yield agent.ask("Say something.", phase="talk")
        world.state["lengths"] = [len(reply.text), 0]

    world.process(experiment(world))


SLOW = dataclasses.replace(FLAKY, name="slow", build=build_slow, counterfactual=None)


def build_one(world: World, cfg: FlakyConfig) -> None:
    agent = LLMAgent(world, "A", max_output_tokens=cfg.words)

    def experiment(world: World) -> Any:
        reply = yield agent.ask("Say something.", phase="talk")
        world.state["lengths"] = [len(reply.text), 0]

    world.process(experiment(world))


ONE = dataclasses.replace(FLAKY, name="one", build=build_one, counterfactual=None)


#: The directory through which a test holds :data:`GATED`'s trials (in every process of a sweep).
GATE_ENV = "SIMCORE_TEST_GATE"
#: How many of GATED's trials pass before the gate holds the rest.
GATE_PASSES = 8


def analyze_gated(world: World, cfg: FlakyConfig) -> dict[str, Any]:
    """FLAKY's analysis, after taking a ticket: from ticket GATE_PASSES on, the trial waits
    (in whichever process runs it) until the file ``open`` appears in the gate directory."""
    gate = Path(os.environ[GATE_ENV])
    ticket = 0
    while True:
        try:
            os.close(os.open(gate / f"ticket-{ticket}", os.O_CREAT | os.O_EXCL))
            break
        except FileExistsError:
            ticket += 1
    while ticket >= GATE_PASSES and not (gate / "open").exists():
        time.sleep(0.01)
    return analyze(world, cfg)


GATED = dataclasses.replace(FLAKY, name="gated", analyze=analyze_gated)
