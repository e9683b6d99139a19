"""The stub behaviour model of the LLM auction: a known ground truth.

A pure function of the request, so runs replay exactly. Four documented config
parameters drive it; everything else is a fixed constant below.

- **Private view.** For each (run seed, vignette, agent) the model draws once
  whether the agent sees the consensus answer, with probability ``stub_accuracy``.
  An agent that misses it picks the vignette's distractor with probability 0.6,
  else another wrong option. Mechanisms that share a seed share these views, so
  comparisons between mechanisms are paired.
- **Confidence** (the documented link to correctness). The stated confidence is
  ``0.6 + 0.25 * confidence_signal * (+1 if right else -1) + STYLE_BIAS + noise``,
  clipped to [0.05, 0.99], with noise sd ``STYLE_NOISE``. At ``confidence_signal =
  0`` confidence says nothing about correctness; at 1 right and wrong agents are
  0.5 apart on average. Assertive agents overstate (+0.15), timid ones understate
  (-0.15), calibrated ones are the least noisy.
- **Length.** Assertive agents are terse and timid ones hedge, so their messages
  take fewer or more tokens (``STYLE_SENTENCES``, plus 0-1 at random). Under the
  default duration model, terse speakers finish first: they bid earlier and get
  the floor earlier in free discussion.
- **Critiques.** An agent critiques (or comments) when its own option differs
  from the option with the most confidence-weighted support among the messages
  it has heard, and its confidence is at least ``CRITIQUE_THRESHOLD`` of its style.
- **Vote.** Each heard message k (in the order heard, the agent's own excluded)
  gets the weight ``(1 - primacy) ** k``; an option's support is the weighted mean
  of the stated confidences of the messages for it. The agent scores its own
  option ``(1 - persuasion) * own confidence`` and every option ``persuasion *
  support``, adds Gumbel noise of scale 0.05 and votes for the best score.

Messages are decoded from the transcript the prompt carries (``A07: PROPOSAL
option B (confidence 0.82): ...``), the same text a real model reads. Requests of
other phases get the generic stub reply.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from scenarios.llm_auction.config import AuctionConfig, agent_names
from scenarios.llm_auction.vignettes import BY_ID, Vignette
from simcore.api import LLMRequest, derive_seed, generic_behaviour

STYLE_BIAS = {"assertive": 0.15, "timid": -0.15, "calibrated": 0.0, "neutral": 0.0}
STYLE_NOISE = {"assertive": 0.12, "timid": 0.12, "calibrated": 0.05, "neutral": 0.12}
STYLE_SENTENCES = {"assertive": 1, "timid": 3, "calibrated": 2, "neutral": 2}
CRITIQUE_THRESHOLD = {"assertive": 0.5, "timid": 0.75, "calibrated": 0.6, "neutral": 0.6}
DISTRACTOR_SHARE = 0.6
VOTE_NOISE = 0.05

MESSAGE = re.compile(
    r"^(?P<who>\S+): (?:PROPOSAL|CRITIQUE|COMMENT) option (?P<opt>[A-D]) "
    r"\(confidence (?P<conf>[0-9.]+)\)",
    re.MULTILINE,
)

SUPPORT = (
    "It weighs the interests of everyone the decision affects.",
    "It keeps faith with the professional duties at stake.",
    "The alternatives leave someone exposed to a serious and avoidable harm.",
    "It is the choice that could be defended openly to those affected.",
    "It treats the people involved as agents, not as means.",
    "It matches the guidance that professional bodies have converged on.",
    "It avoids a precedent that would be dangerous if it became the rule.",
    "Its costs are real but smaller and easier to undo than the alternatives'.",
)
HEDGES = (
    "I may be missing something here.",
    "Reasonable people could see this differently.",
    "I hold this view tentatively.",
)
FIRM = ("This is clear.", "The case is strong.", "We should not hesitate.")


@dataclass(frozen=True)
class View:
    """An agent's private view of a vignette."""

    option: str
    correct: bool
    confidence: float


@dataclass(frozen=True)
class AuctionBehaviour:
    """See the module docstring."""

    styles: dict[str, str]
    stub_accuracy: float
    confidence_signal: float
    persuasion: float
    primacy: float

    def __call__(self, request: LLMRequest, rng: np.random.Generator) -> Any:
        meta = request.metadata
        phase, agent = meta.get("phase"), str(meta.get("agent"))
        v = BY_ID.get(str(meta.get("vignette")))
        if v is None or agent not in self.styles or phase not in (
            "assessment", "proposal", "critique", "discussion", "vote"
        ):
            return generic_behaviour(request, rng)
        style = self.styles[agent]
        view = self.view(request.seed or 0, v, agent, style)
        opt = v.option(view.option)
        limit = request.max_tokens * 4  # the stub's characters-per-token rule
        if phase == "assessment":
            lead = f"{opt.text} It rests on the principle that {opt.principle}."
            return fit(
                lambda text: {
                    "option": view.option, "confidence": view.confidence,
                    "reasoning": text, "principles": [opt.principle],
                },
                self.prose(lead, style, rng), limit,
            )
        if phase == "proposal":
            return fit(
                lambda text: {"option": view.option, "confidence": view.confidence, "argument": text},
                self.prose(f"I propose option {opt.key}: {opt.text}", style, rng), limit,
            )
        heard = [(o, c) for who, o, c in heard_messages(request.messages[-1].content) if who != agent]
        if phase == "vote":
            return {"option": self.ballot(view, heard, v, rng)}
        lead = leading_option(heard, self.primacy)
        if lead is None or lead == view.option or view.confidence < CRITIQUE_THRESHOLD[style]:
            return {"critique": False, "option": view.option, "confidence": view.confidence, "text": ""}
        first = f"I disagree with option {lead}. Option {opt.key} is better: {opt.principle}."
        return fit(
            lambda text: {"critique": True, "option": view.option, "confidence": view.confidence, "text": text},
            self.prose(first, style, rng, extra=-1), limit,
        )

    def view(self, seed: int, v: Vignette, agent: str, style: str) -> View:
        """The agent's private view: the same in every phase and every mechanism."""
        return _view(seed, v, agent, style, self.stub_accuracy, self.confidence_signal)

    def ballot(self, view: View, heard: list[tuple[str, float]], v: Vignette, rng: np.random.Generator) -> str:
        """The option the agent votes for after hearing ``heard`` (see the module docstring)."""
        scores = {k: 0.0 for k in v.keys}
        scores[view.option] += (1 - self.persuasion) * view.confidence
        for k, s in support(heard, self.primacy).items():
            if k in scores:
                scores[k] += self.persuasion * s
        noise = rng.gumbel(0.0, VOTE_NOISE, size=len(v.keys))
        return max(zip(v.keys, noise), key=lambda kn: scores[kn[0]] + kn[1])[0]

    @staticmethod
    def prose(lead: str, style: str, rng: np.random.Generator, extra: int = 0) -> list[str]:
        """``lead`` plus supporting sentences; how many depends on the style."""
        n = max(0, STYLE_SENTENCES[style] + int(rng.integers(0, 2)) + extra)
        picks = rng.permutation(len(SUPPORT))[:n]
        parts = [lead, *(SUPPORT[i] for i in picks)]
        if style == "timid":
            parts.append(HEDGES[int(rng.integers(len(HEDGES)))])
        elif style == "assertive":
            parts.append(FIRM[int(rng.integers(len(FIRM)))])
        return parts


def fit(make: Any, sentences: list[str], limit: int) -> dict[str, Any]:
    """``make(text)`` with as many leading ``sentences`` as keep its JSON within ``limit`` characters.

    A model that is told its token limit writes to it; this keeps the stub's
    replies whole instead of cut off mid-JSON.
    """
    for n in range(len(sentences), 0, -1):
        out = make(" ".join(sentences[:n]))
        if len(json.dumps(out, ensure_ascii=False)) <= limit:
            return out
    return make("")


def heard_messages(user_message: str) -> list[tuple[str, str, float]]:
    """(speaker, option, confidence) of every proposal, critique or comment in a prompt."""
    out = []
    for m in MESSAGE.finditer(user_message):
        try:
            conf = float(m["conf"])
        except ValueError:
            continue
        out.append((m["who"], m["opt"], conf))
    return out


def support(heard: list[tuple[str, float]], primacy: float) -> dict[str, float]:
    """Each option's primacy-weighted mean stated confidence over the messages heard."""
    if not heard:
        return {}
    weights = (1.0 - primacy) ** np.arange(len(heard))
    total = float(weights.sum())
    out: dict[str, float] = {}
    for (option, conf), w in zip(heard, weights):
        out[option] = out.get(option, 0.0) + float(w) * conf / total
    return out


def leading_option(heard: list[tuple[str, float]], primacy: float) -> str | None:
    """The option with the most support (the first heard wins a tie), or None."""
    s = support(heard, primacy)
    return max(s, key=lambda k: s[k]) if s else None


def make_behaviour(cfg: AuctionConfig) -> AuctionBehaviour:
    """The behaviour model for a config."""
    styles = {name: cfg.style_of(i) for i, name in enumerate(agent_names(cfg.n_agents))}
    return AuctionBehaviour(styles, cfg.stub_accuracy, cfg.confidence_signal, cfg.persuasion, cfg.primacy)


@lru_cache(maxsize=65536)
def _view(seed: int, v: Vignette, agent: str, style: str, accuracy: float, signal: float) -> View:
    # Cached: every reply of an agent on a vignette needs its view, and seeding a
    # fresh generator costs more than the rest of the reply.
    rng = np.random.default_rng(derive_seed(seed, f"llm_auction.view.{v.id}.{agent}"))
    u_right, u_distractor, u_other, noise = rng.random(), rng.random(), rng.random(), rng.normal()
    correct = u_right < accuracy
    if correct:
        option = v.consensus
    else:
        others = [k for k in v.keys if k not in (v.consensus, v.distractor)]
        take_distractor = u_distractor < DISTRACTOR_SHARE or not others
        option = v.distractor if take_distractor else others[int(u_other * len(others))]
    sign = 1.0 if correct else -1.0
    conf = 0.6 + 0.25 * signal * sign + STYLE_BIAS[style] + STYLE_NOISE[style] * noise
    return View(option, correct, round(float(np.clip(conf, 0.05, 0.99)), 2))
