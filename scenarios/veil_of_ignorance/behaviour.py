"""The stub behaviour model of the veil of ignorance: a known ground truth.

A pure function of the request (run seed, agent, phase, round and prompt text):

- **Latent preferences.** Each agent holds a utility ``u0`` for each principle:
  a base (``BASE``: the floor constraint is the focal compromise) plus the
  adjustments of every keyword group its personality text mentions
  (:data:`KEYWORDS`), plus N(0, ``preference_noise``) per principle, drawn once
  per (run seed, agent). It also holds a preferred floor and range amount
  (whole thousands), shifted by the same keyword groups.
- **Persuasion.** The agent decodes what the others support from the prompt: the
  public messages ("NAME: I support ..."), the moderator's announcements and its
  own memory notes ("NAME supports ..."), the latest mention of each agent
  winning. With ``s_j`` the share of the known others supporting principle j and
  ``e`` the round (rounds of exposure), its current utility is
  ``u_j = u0_j + persuasion * e * (s_j - 1/4)`` (the pull sums to zero: what
  others back gains, what they ignore loses). For a constraint principle its amount
  moves ``1 - (1 - p)**e`` of the way from its preferred amount to the median
  amount the others propose for it, rounded to the nearest thousand, where the
  pull ``p = min(1, AMOUNT_PULL * persuasion / 0.15)`` is 0.5 at the default
  persuasion (haggling over an amount settles faster than over principles).
  With ``persuasion = 0`` nothing anyone says moves anyone: the null of this
  scenario (see ``null`` in its ``SCENARIO``).
- **Choice.** The principle with the highest ``u_j`` plus Gumbel noise of scale
  ``choice_noise * temperature`` (a softmax draw; at temperature 0, the argmax).
- **Likert ratings.** ``1 + #{u_j > t for t in (-0.3, 0.05, 0.4)}`` with
  N(0, ``choice_noise * temperature / 2``) noise, drawn once per (run seed, agent)
  so that it is the agent's own reading of the scale, the same before and after:
  from ``u0`` before the talk and from ``u`` after it, so persuasion, and only
  persuasion, shows as a Likert shift.
- **Texts.** Messages state the choice ("I support <principle> (floor $X)") and an
  argument; memory notes list the positions known ("NAME supports ..."), so
  LLM-written memory carries the positions forward; the interview cites the final
  choice and whether the group agreed.

With the defaults, about half of the trials reach unanimity within five rounds
(see the README for the measured rate). Requests it does not recognise get the
generic stub reply.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from scenarios.veil_of_ignorance.experiment import SITUATION
from scenarios.veil_of_ignorance.principles import (
    LIKERT,
    PRINCIPLES,
    Choice,
)
from simcore.api import LLMRequest, derive_seed, generic_behaviour

BASE = (0.0, 0.0, 0.3, 0.1)
FLOOR, RANGE = 13000, 16000
# (name, keywords, utility adjustment per principle 1-4, floor shift, range shift)
KEYWORDS: tuple[tuple[str, tuple[str, ...], tuple[float, float, float, float], int, int], ...] = (
    ("efficiency", ("econom", "efficien", "growth", "market", "optimal", "productiv", "entrepreneur",
                    "business", "incentive", "wealth"), (-0.4, 0.6, 0.0, -0.2), -1000, 3000),
    ("fairness", ("justice", "fair", "poor", "vulnerable", "worst", "compassion", "solidarity"),
     (0.6, -0.4, 0.1, 0.1), 2000, -2000),
    ("pragmatism", ("pragmat", "practical", "compromise", "balance", "moderate", "in practice"),
     (-0.1, 0.0, 0.3, 0.1), 0, 0),
    ("caution", ("risk", "cautious", "careful", "security", "safety", "averse", "prudent"),
     (0.4, -0.3, 0.2, 0.0), 1000, -1000),
    ("equality", ("equal", "egalitarian", "gap"), (0.1, -0.2, 0.0, 0.5), 0, -4000),
)
THRESHOLDS = (-0.3, 0.05, 0.4)
AMOUNT_PULL = 0.5  # at the default persuasion (0.15), and proportional to it
ARGUMENTS = {
    1: ("Nobody should be left with too little, whatever class they land in.",
        "Protecting the lowest income is the safest rule when we cannot know our place."),
    2: ("A larger average means more income for society as a whole.",
        "If the average is high, most of us are likely to do well."),
    3: ("A guaranteed floor protects everyone while leaving room for a high average.",
        "With a safety net in place, we can still reward effort and growth."),
    4: ("Limiting the gap keeps society cohesive while the average stays high.",
        "Large gaps between top and bottom breed resentment; a range keeps them in check."),
}
_LABELS = "|".join(re.escape(p.label) for p in PRINCIPLES)
_POSITION = re.compile(
    rf"(?:^(?P<speaker>[A-Za-z][\w.-]*): I support |(?P<who>\b[A-Za-z][\w.-]*) supports )"
    rf"(?P<label>{_LABELS})(?: \((?:floor|range) (?P<amount>\$[\d,]+)\))?",
    re.MULTILINE | re.IGNORECASE,
)
_FINAL = re.compile(
    rf"Your final choice was: (?P<label>{_LABELS})(?: \((?:floor|range) (?P<amount>\$[\d,]+)\))?", re.I
)
_BY_LABEL = {p.label: p.id for p in PRINCIPLES}


def _choice(label: str, amount: str | None) -> Choice | None:
    pid = _BY_LABEL[label.lower()]
    if not PRINCIPLES[pid - 1].needs_amount:
        return Choice(pid)
    value = None if amount is None else int(amount.replace("$", "").replace(",", ""))
    return None if value is None else Choice(pid, value)


def positions(text: str, me: str) -> dict[str, Choice]:
    """What each other agent supports, per the latest statement in ``text``."""
    out: dict[str, Choice] = {}
    for m in _POSITION.finditer(text):
        who = m.group("speaker") or m.group("who")
        choice = _choice(m.group("label"), m.group("amount"))
        if who not in (me, "I") and choice is not None:
            out.pop(who, None)  # re-insert: the order of the latest statements
            out[who] = choice
    return out


@dataclass(frozen=True)
class Latent:
    """An agent's latent preferences."""

    utility: tuple[float, ...]
    floor: int
    range: int


def _thousands(x: float) -> int:
    return int(round(x / 1000.0)) * 1000


@dataclass(frozen=True)
class VeilBehaviour:
    """See the module docstring."""

    persuasion: float
    preference_noise: float
    choice_noise: float

    def latent(self, seed: int, agent: str, personality: str) -> Latent:
        """The agent's latent preferences (independent of everything but these inputs)."""
        text = personality.lower()
        u = np.array(BASE, dtype=float)
        floor, rng_ = float(FLOOR), float(RANGE)
        for _, words, adjust, df, dr in KEYWORDS:
            if any(w in text for w in words):
                u += adjust
                floor += df
                rng_ += dr
        rng = np.random.default_rng(derive_seed(seed, f"veil.latent.{agent}"))
        u += rng.normal(0.0, self.preference_noise, 4)
        floor = float(np.clip(floor + rng.normal(0.0, 1000.0), 10000, 16000))
        rng_ = float(np.clip(rng_ + rng.normal(0.0, 2000.0), 4000, 25000))
        return Latent(tuple(float(x) for x in u), _thousands(floor), _thousands(rng_))

    def __call__(self, request: LLMRequest, rng: np.random.Generator) -> Any:
        meta = request.metadata
        phase, agent = meta.get("phase"), str(meta.get("agent"))
        user = request.messages[-1].content
        if phase == "interview_question":
            target = meta.get("target")
            return f"{target}, why did you make your final choice, and how did you find the discussion?"
        system = request.messages[0].content if request.messages[0].role == "system" else ""
        if SITUATION not in system or phase not in (
            "rating_initial", "memory", "deliberation", "rating_final", "interview"
        ):
            return generic_behaviour(request, rng)
        latent = self.latent(request.seed or 0, agent, system.split(SITUATION, 1)[0])
        noise = self.choice_noise * request.temperature
        if phase == "rating_initial":
            return self.ratings(np.array(latent.utility), noise, self.scale_reading(request.seed or 0, agent),
                                "My first impression.")
        if phase == "interview":
            return self.interview(user)
        known = positions(user, agent)
        exposure = int(meta.get("round", 1) or 1)
        u = np.array(latent.utility) + self.persuasion * exposure * self.shares(known)
        if phase == "rating_final":
            return self.ratings(u, noise, self.scale_reading(request.seed or 0, agent),
                                "The discussion changed how I weigh the principles.")
        choice = self.choose(u, latent, known, exposure, noise, rng)
        if phase == "memory":
            return self.memory(str(meta.get("step")), known, choice)
        if any(c.principle == choice.principle for c in known.values()):
            strategy = f"Join the others on {choice.describe()} to reach agreement."
        elif choice.principle == int(np.argmax(latent.utility)) + 1:
            strategy = f"Hold to {choice.describe()} and explain why it protects us all."
        else:
            strategy = f"Offer {choice.describe()} as a middle ground."
        argument = ARGUMENTS[choice.principle][int(rng.integers(2))]
        return {
            "strategy": strategy,
            "message": f"I support {choice.describe()}. {argument}",
            "principle": choice.principle,
            "constraint_amount": choice.amount,
        }

    @staticmethod
    def shares(known: dict[str, Choice]) -> np.ndarray:
        """Share of the known others supporting each principle, minus 1/4 (zero-sum pull)."""
        s = np.zeros(4)
        for c in known.values():
            s[c.principle - 1] += 1
        return s / len(known) - 0.25 if known else s

    def choose(
        self, u: np.ndarray, latent: Latent, known: dict[str, Choice], exposure: int,
        noise: float, rng: np.random.Generator,
    ) -> Choice:
        """The principle (softmax draw) and, for a constraint, the amount."""
        pid = int(np.argmax(u + noise * rng.gumbel(size=4))) + 1
        if not PRINCIPLES[pid - 1].needs_amount:
            return Choice(pid)
        own = latent.floor if pid == 3 else latent.range
        others = [c.amount for c in known.values() if c.principle == pid and c.amount is not None]
        if others:
            pull = min(1.0, AMOUNT_PULL * self.persuasion / 0.15)
            own = own + (1 - (1 - pull) ** exposure) * (float(np.median(others)) - own)
        return Choice(pid, max(1000, _thousands(own)))

    @staticmethod
    def scale_reading(seed: int, agent: str) -> np.random.Generator:
        """The generator of an agent's rating jitter: the same draw before and after the talk."""
        return np.random.default_rng(derive_seed(seed, f"veil.ratings.{agent}"))

    @staticmethod
    def ratings(u: np.ndarray, noise: float, rng: np.random.Generator, reasoning: str) -> dict[str, Any]:
        """Likert labels from utilities."""
        jitter = rng.normal(0.0, noise / 2, 4) if noise > 0 else np.zeros(4)
        out: dict[str, Any] = {}
        for p, value in zip(PRINCIPLES, u + jitter):
            out[p.key] = LIKERT[sum(value > t for t in THRESHOLDS)]
        out["reasoning"] = reasoning
        return out

    @staticmethod
    def memory(step: str, known: dict[str, Choice], mine: Choice) -> str:
        """A memory note (or one decomposed step) that lists the known positions."""
        listing = " ".join(f"{who} supports {c.describe()}." for who, c in known.items())
        if step == "dynamics":
            keys = {c.key for c in known.values()} | {mine.key}
            return "The group agrees." if len(keys) == 1 else f"The group is split {len(keys)} ways."
        if step == "plan":
            return f"Aim for agreement on {mine.describe()}."
        return f"{listing or 'Nobody has stated a position yet.'} I lean toward {mine.describe()}."

    @staticmethod
    def interview(user: str) -> dict[str, str]:
        """Explain the final choice and the experience."""
        m = _FINAL.search(user)
        choice = None if m is None else _choice(m.group("label"), m.group("amount"))
        agreed = "did not reach agreement" not in user
        return {
            "explanation": (
                "I had no valid final choice." if choice is None
                else f"I chose {choice.describe()}. {ARGUMENTS[choice.principle][0]}"
            ),
            "experience": (
                "The discussion was constructive and we reached agreement." if agreed
                else "The discussion was frustrating; we could not agree."
            ),
        }


def make_behaviour(cfg: Any) -> VeilBehaviour:
    """The behaviour model for a config."""
    return VeilBehaviour(cfg.persuasion, cfg.preference_noise, cfg.choice_noise)
