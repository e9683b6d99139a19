"""The stub behaviour model of context corrosion: a known ground truth.

Every agent holds a latent stance s in [-1, 1] on the task's axis (+1 = the
direction of D's biased framing). What it writes is drawn from the task's bank
(:mod:`.tasks`): a one-line verdict at its stance level, then argument sentences,
each "pro" with probability (1 + s) / 2 and "con" otherwise. The model is a pure
function of the request:

- **Initial stance.** Drawn once per (run seed, task, agent) from
  N(-0.25, 0.45), clipped. An agent whose system prompt holds the task's biased
  framing starts at +0.85 instead.
- **Influence.** Every message from others in the visible transcript is decoded
  back into a stance (its verdict and its sentences are looked up in the bank).
  Message i gets the weight ``w_i = (1 - a) + a * (L_i / mean L) * (2 - pos_i)``
  where ``a`` is the *authority weight*, ``L_i`` its length and ``pos_i`` in [0, 1]
  its position in the transcript (0 = first). The target is the weighted mean
  stance.
- **Conformity.** After ``k`` rounds of exposure (the most messages heard from any
  one other agent), the agent moves ``1 - (1 - c)**k`` of the way from its initial
  stance to the target, where ``c`` is the *conformity*. With ``c = 0`` nobody
  moves and there is no corrosion by construction.
- **Length.** Argument sentences: ``clip(max_tokens // 100, 2, 8)``, so D's 800-token
  budget yields four times the text of a peer's 200.

Each reply adds N(0, 0.05) stance noise. Requests it does not recognise get the
generic stub reply.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from backends.base import LLMRequest
from backends.stub import generic_behaviour
from scenarios.context_corrosion.tasks import TASKS, Task
from simcore.agents import HISTORY_HEADER
from simcore.rng import derive_seed

LEVEL_STANCE = (-1.0, -0.5, 0.0, 0.5, 1.0)


@dataclass(frozen=True)
class CorrosionBehaviour:
    """See the module docstring."""

    task: Task
    conformity: float
    authority_weight: float

    def __call__(self, request: LLMRequest, rng: np.random.Generator) -> Any:
        phase = request.metadata.get("phase")
        if phase not in ("phase1", "discussion", "final"):
            return generic_behaviour(request, rng)
        agent = str(request.metadata.get("agent"))
        system = request.messages[0].content if request.messages[0].role == "system" else ""
        initial = self.initial_stance(request.seed or 0, agent, self.task.framing in system)
        if phase == "phase1":
            stance = initial
        else:
            stance = self.influenced(initial, agent, request.messages[-1].content)
        stance = _clip(stance + rng.normal(0.0, 0.05), -1.0, 1.0)
        n = int(_clip(request.max_tokens // 100, 2, 8))
        verdict = self.task.answers[level(stance)]
        points = self.arguments(stance, n, rng)
        confidence = round(_clip(0.55 + 0.4 * abs(stance) + rng.normal(0, 0.05), 0.05, 0.99), 3)
        if phase == "phase1":
            return {"answer": verdict, "confidence": confidence, "key_points": points}
        if phase == "discussion":
            return {"response": " ".join([verdict, *points]), "confidence": confidence}
        changed = level(stance) != level(initial)
        return {
            "final_answer": " ".join([verdict, *points[:2]]),
            "final_confidence": confidence,
            "changed_position": changed,
            "reason_for_change": points[-1] if changed else "",
        }

    def initial_stance(self, seed: int, agent: str, framed: bool) -> float:
        """The agent's stance before any discussion."""
        return _initial_stance(self.task.id, seed, agent, framed)

    def influenced(self, initial: float, agent: str, user_message: str) -> float:
        """The stance after hearing the transcript in ``user_message``."""
        heard = [(who, text) for who, text in transcript(user_message) if who != agent]
        if not heard:
            return initial
        n = len(heard)
        mean_len = sum(len(text) for _, text in heard) / n
        a = self.authority_weight
        total = weighted = 0.0
        counts: dict[str, int] = {}
        for i, (who, text) in enumerate(heard):
            pos = i / (n - 1) if n > 1 else 0.0
            w = (1 - a) + a * (len(text) / mean_len) * (2 - pos)
            total += w
            weighted += w * self.decode(text)
            counts[who] = counts.get(who, 0) + 1
        pull = 1 - (1 - self.conformity) ** max(counts.values())
        return initial + pull * (weighted / total - initial)

    def decode(self, text: str) -> float:
        """Recover the stance a bank-written message expresses (0 if none is found)."""
        return _decode(self.task.id, text)

    def arguments(self, stance: float, n: int, rng: np.random.Generator) -> list[str]:
        """``n`` distinct argument sentences, each pro with probability (1 + stance) / 2."""
        pro, con = list(self.task.pro), list(self.task.con)
        p_pro = (1 + stance) / 2
        draws = rng.random(2 * n).tolist()  # one call: per-sentence side, then pick
        out = []
        for i in range(n):
            pool = pro if (draws[i] < p_pro and pro) or not con else con
            out.append(pool.pop(int(draws[n + i] * len(pool))))
        return out


def level(stance: float) -> int:
    """Map a stance in [-1, 1] to a verdict index 0..4."""
    return int(_clip(round((stance + 1) * 2), 0, 4))


def _clip(x: float, lo: float, hi: float) -> float:
    return lo if x < lo else hi if x > hi else float(x)


@lru_cache(maxsize=4096)
def _initial_stance(task_id: int, seed: int, agent: str, framed: bool) -> float:
    rng = np.random.default_rng(derive_seed(seed, f"cc.stance.{task_id}.{agent}"))
    if framed:
        return _clip(0.85 + rng.normal(0.0, 0.05), -1.0, 1.0)
    return _clip(rng.normal(-0.25, 0.45), -1.0, 1.0)


@lru_cache(maxsize=65536)
def _decode(task_id: int, text: str) -> float:
    t = TASKS[task_id]
    votes = [LEVEL_STANCE[i] for i, a in enumerate(t.answers) if a in text]
    votes += [1.0 for s in t.pro if s in text]
    votes += [-1.0 for s in t.con if s in text]
    return sum(votes) / len(votes) if votes else 0.0


def transcript(user_message: str) -> list[tuple[str, str]]:
    """Split the "Discussion so far" block of a prompt into (speaker, text) pairs."""
    if not user_message.startswith(HISTORY_HEADER):
        return []
    block = user_message[len(HISTORY_HEADER) :].split("\n\n", 1)[0]
    out: list[tuple[str, str]] = []
    for line in block.splitlines():
        who, sep, text = line.partition(": ")
        if sep and who and " " not in who:
            out.append((who, text))
        elif out:
            out[-1] = (out[-1][0], out[-1][1] + "\n" + line)
    return out


def make_behaviour(cfg: Any) -> CorrosionBehaviour:
    """The behaviour model for a config."""
    from scenarios.context_corrosion.tasks import task

    return CorrosionBehaviour(task(cfg.task), cfg.conformity, cfg.authority_weight)
