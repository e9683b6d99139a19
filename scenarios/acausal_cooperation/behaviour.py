"""The stub behaviour model of acausal cooperation: a known ground truth.

It reads the same prompts a real model would and answers through the same
parsing path. Both phases are pure functions of the request (the stub seeds
``rng`` from the request's hash).

**Strategy agents** (phase ``strategy``). Each agent has a cooperativeness
``c`` in [0, 1]:

- *Disposition.* ``k`` is drawn once per (run seed, agent) from N(0.45, 0.2),
  clipped to [0, 1].
- *Treatment.* If the prompt carries the identical-copies insight, the agent
  takes it up with probability ``insight_uptake``; then ``k`` rises by
  ``insight_uplift`` and its reasoning says why, in words that contain identity
  keywords ("identical", "same model", "logical correlation", "superrational").
  Without the insight (control) the reasoning never uses those words.
- *History.* From round 2 on, the prompt shows last round's share of COOPERATE
  moves ``rho``; then ``c = (1 - reciprocity) * k' + reciprocity * rho``.
  An agent that took up the insight and sees ``rho < 0.5`` also says it is
  surprised that copies defected (the "surprise at defection" indicator).
- *Noise.* ``c`` gets N(0, 0.05) noise, then maps to one of five rules,
  ``round(4c)``: always defect, suspicious tit-for-tat, tit-for-tat, generous
  tit-for-tat, always cooperate (:data:`RULES`). The strategy text is that
  rule's sentence.

**Decision subagents** (phase ``decision``). The subagent finds its rule's
sentence in the strategy block of the prompt and applies it to the opponent's
moves listed under "Your previous games against this opponent" (or, in the
original experiment's prompt, the "Round N: you X, they Y" lines of its game
history; it answers that prompt with the bare word, as asked) (generous
tit-for-tat forgives a defection with probability 1/3; a strategy it cannot
recognise cooperates with probability 1/2). When both powers are shown and
differ by more than 30% (max/min > 1.3), a player whose rule is not "always
cooperate" defects anyway with probability ``asymmetry_defection``. Finally the
move flips with probability ``decision_noise``.

So the treatment raises cooperation only through what strategy agents write, the
control shows no identity reasoning by construction, and cooperation follows
last round's cooperation through ``reciprocity``. Other requests get the generic
stub reply.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from scenarios.acausal_cooperation.game import COOPERATE, DEFECT
from scenarios.acausal_cooperation.prompts import (
    HISTORY_HEADER,
    INSIGHT,
    ORIGINAL_ASK,
    PAIR_HEADER,
    STRATEGY_HEADER,
)
from simcore.api import LLMRequest, derive_seed, generic_behaviour

RULES = (
    ("always_defect", "Defect in every game, whatever the opponent does."),
    ("suspicious_tit_for_tat", "Defect in the first game against an opponent, then copy the opponent's previous move."),
    ("tit_for_tat", "Cooperate in the first game against an opponent, then copy the opponent's previous move."),
    ("generous_tit_for_tat", "Cooperate first and copy the opponent's previous move, but forgive a defection one time in three."),
    ("always_cooperate", "Cooperate in every game, whatever the opponent does."),
)

IDENTITY_REASONS = (
    "All participants are identical copies of the same model, so our choices are logically "
    "correlated: whatever I decide, the others are likely deciding too.",
    "Because every player runs the same model with the same instructions, the superrational "
    "choice is the one I would want every copy to make.",
    "If we are identical, defecting against a copy means defecting against myself; a logical "
    "correlation between our decisions makes cooperation the better bet.",
)
SURPRISE = (
    "It is surprising that copies of the same model defected so often last round; "
    "the defections were unexpected."
)
NEUTRAL_REASONS = (
    "The other participants are independent players whose choices I cannot control.",
    "I cannot know how the other players will act, so my strategy should protect my own score.",
    "Each opponent decides on its own, and I should respond to what it actually does.",
)

_LAST_ROUND = re.compile(r"- Round (\d+): (\d+)% of moves were COOPERATE")
_POWERS = re.compile(r"Your power: ([\d.]+)\. Opponent's power: ([\d.]+)\.")
_PAIR_LINE = re.compile(r"^Round \d+: you (COOPERATE|DEFECT), they (COOPERATE|DEFECT)$", re.MULTILINE)


@dataclass(frozen=True)
class AcausalBehaviour:
    """See the module docstring."""

    insight_uplift: float = 0.4
    insight_uptake: float = 0.85
    reciprocity: float = 0.5
    asymmetry_defection: float = 0.2
    decision_noise: float = 0.02

    def __call__(self, request: LLMRequest, rng: np.random.Generator) -> Any:
        phase = request.metadata.get("phase")
        if phase == "strategy":
            return self.strategy(request, rng)
        if phase == "decision":
            prompt = request.messages[-1].content
            move = self.decision(prompt, rng)
            # The original prompt asks for a plain completion; a model answers it with the word.
            return move if prompt.endswith(ORIGINAL_ASK) else {"action": move}
        return generic_behaviour(request, rng)

    def disposition(self, seed: int, agent: str) -> float:
        """The agent's cooperativeness before insight and history."""
        r = np.random.default_rng(derive_seed(seed, f"acausal.disposition.{agent}"))
        return float(np.clip(r.normal(0.45, 0.2), 0.0, 1.0))

    def strategy(self, request: LLMRequest, rng: np.random.Generator) -> dict[str, str]:
        """A strategy reply: reasoning sentences and a rule sentence."""
        prompt = request.messages[-1].content
        c = self.disposition(request.seed or 0, str(request.metadata.get("agent")))
        took_up = INSIGHT in prompt and rng.random() < self.insight_uptake
        reasons = []
        if took_up:
            c += self.insight_uplift
            reasons.append(IDENTITY_REASONS[int(rng.integers(len(IDENTITY_REASONS)))])
        else:
            reasons.append(NEUTRAL_REASONS[int(rng.integers(len(NEUTRAL_REASONS)))])
        rounds = _LAST_ROUND.findall(prompt)
        if rounds:
            rho = int(rounds[-1][1]) / 100
            c = (1 - self.reciprocity) * c + self.reciprocity * rho
            reasons.append(f"Last round {rho:.0%} of moves were cooperative, and I take that into account.")
            if took_up and rho < 0.5:
                reasons.append(SURPRISE)
        c = float(np.clip(c + rng.normal(0.0, 0.05), 0.0, 1.0))
        _, sentence = RULES[int(round(4 * c))]
        return {"reasoning": " ".join(reasons), "strategy": sentence}

    def decision(self, prompt: str, rng: np.random.Generator) -> str:
        """COOPERATE or DEFECT, following the strategy in the prompt."""
        block = prompt.split(STRATEGY_HEADER, 1)[-1].split("\n\n", 1)[0]
        rule = next((name for name, sentence in RULES if sentence in block), None)
        header = PAIR_HEADER if PAIR_HEADER in prompt else HISTORY_HEADER
        pair = prompt.split(header, 1)[-1].split("\n\n", 1)[0]
        last = _PAIR_LINE.findall(pair)
        opp_last = last[-1][1] if last else None
        if rule == "always_defect":
            move = DEFECT
        elif rule == "always_cooperate":
            move = COOPERATE
        elif rule == "suspicious_tit_for_tat":
            move = opp_last or DEFECT
        elif rule == "tit_for_tat":
            move = opp_last or COOPERATE
        elif rule == "generous_tit_for_tat":
            move = COOPERATE if opp_last != DEFECT or rng.random() < 1 / 3 else DEFECT
        else:
            move = COOPERATE if rng.random() < 0.5 else DEFECT
        powers = _POWERS.search(prompt)
        if powers and rule != "always_cooperate":
            a, b = float(powers.group(1)), float(powers.group(2))
            if max(a, b) / min(a, b) > 1.3 and rng.random() < self.asymmetry_defection:
                move = DEFECT
        if rng.random() < self.decision_noise:
            move = DEFECT if move == COOPERATE else COOPERATE
        return move


def make_behaviour(cfg: Any) -> AcausalBehaviour:
    """The behaviour model for a config."""
    return AcausalBehaviour(
        cfg.insight_uplift, cfg.insight_uptake, cfg.reciprocity, cfg.asymmetry_defection, cfg.decision_noise
    )
