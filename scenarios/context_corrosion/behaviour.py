"""The stub behaviour model of context corrosion: a known ground truth.

Every agent holds a latent stance s in [-1, 1] on the task's axis (+1 = the
direction of D's biased framing). What it writes is drawn from the task's bank
(:mod:`.tasks`): a one-line verdict at its stance level, then ``n`` argument
sentences of which about ``n (1 + s) / 2`` argue "pro" and the rest "con"
(stochastic rounding). Each agent has its own ranking of the arguments on each
side (drawn once per run seed, task and agent) and uses its top ones, as people
repeat their pet points. The model is a pure function of the request:

- **Initial stance.** Drawn once per (run seed, task, agent) from
  N(-0.25, 0.25), clipped. An agent whose system prompt holds the task's biased
  framing starts at +0.85 instead, and is *anchored*: its briefing keeps it there
  whatever it hears.
- **Influence.** Every message from others in the visible transcript is decoded
  back into a stance (its verdict and its sentences are looked up in the bank).
  Message i gets the weight ``w_i = (1 - a) + a * (L_i / mean L) * (2 - pos_i)``
  where ``a`` is the *authority weight*, ``L_i`` its length and ``pos_i`` in [0, 1]
  its position in the transcript (0 = first). The target is the weighted mean
  stance. With ``a = 0`` every message counts the same; with ``a = 1`` a long,
  early message (D's) counts several times more than a short, late one.
- **Conformity.** After ``k`` rounds of exposure (the most messages heard from any
  one other agent), an unanchored agent moves ``1 - (1 - c)**k`` of the way from
  its initial stance to the target, where ``c`` is the *conformity*. With
  ``c = 0`` nobody moves: there is no corrosion by construction, and the metrics'
  A-B differences have expectation zero (the phase-1 answer and the final answer
  have the same form, so an agent that did not move writes both from the same
  distribution). This is the scenario's null (see ``null`` in its ``SCENARIO``).
- **Length.** Argument sentences: ``clip(max_tokens // 100, 2, 8)``, so D's 800-token
  budget yields four times the arguments of a peer's 200.

Each reply adds N(0, 0.05) stance noise. Requests it does not recognise get the
generic stub reply.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from scenarios.context_corrosion.tasks import TASKS, Task, task
from simcore.api import HISTORY_HEADER, LLMRequest, generic_behaviour, keyed_generator

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
        framed = self.task.framing in system
        initial = self.initial_stance(request.seed or 0, agent, framed)
        if phase == "phase1" or framed:
            stance = initial
        else:
            stance = self.influenced(initial, agent, request.messages[-1].content)
        stance = _clip(stance + rng.normal(0.0, 0.05), -1.0, 1.0)
        n = int(_clip(request.max_tokens // 100, 2, 8))
        verdict = self.task.answers[level(stance)]
        points = self.arguments(stance, n, rng, self.preferences(request.seed or 0, agent))
        confidence = round(_clip(0.55 + 0.4 * abs(stance) + rng.normal(0, 0.05), 0.05, 0.99), 3)
        if phase == "phase1":
            # The answer states the position in the same form as the final answer, so that
            # an agent that did not move is embedded from the same distribution at both ends.
            return {"answer": " ".join([verdict, *points]), "confidence": confidence, "key_points": points}
        if phase == "discussion":
            return {"response": " ".join([verdict, *points]), "confidence": confidence}
        changed = level(stance) != level(initial)
        return {
            "final_answer": " ".join([verdict, *points]),  # the phase-1 answer's form
            "final_confidence": confidence,
            "changed_position": changed,
            "reason_for_change": "The discussion changed how I weigh the arguments." if changed else "",
        }

    def initial_stance(self, seed: int, agent: str, framed: bool) -> float:
        """The agent's stance before any discussion."""
        return _initial_stance(self.task.id, seed, agent, framed)

    def influenced(self, initial: float, agent: str, user_message: str) -> float:
        """The stance after hearing the transcript in ``user_message``."""
        heard = [m for m in messages_heard(self.task.id, user_message) if m[0] != agent]
        if not heard:
            return initial
        n = len(heard)
        # Empty messages (a blanked turn) carry no length; treat all as equal then.
        mean_len = sum([length for _, length, _ in heard]) / n or 1.0
        a = self.authority_weight
        step = 1 / (n - 1) if n > 1 else 0.0
        total = weighted = 0.0
        counts: dict[str, int] = {}
        for i, (who, length, stance) in enumerate(heard):
            w = (1 - a) + a * (length / mean_len) * (2 - i * step)
            total += w
            weighted += w * stance
            counts[who] = counts.get(who, 0) + 1
        pull = 1 - (1 - self.conformity) ** max(counts.values())
        if total == 0:  # authority weight 1 and only empty messages: nothing to weigh
            return initial
        return initial + pull * (weighted / total - initial)

    def decode(self, text: str) -> float:
        """Recover the stance a bank-written message expresses (0 if none is found)."""
        return _decode(self.task.id, text)

    def preferences(self, seed: int, agent: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """The agent's own ranking of the pro and of the con arguments (its pet points)."""
        return _preferences(self.task.id, seed, agent)

    def arguments(
        self, stance: float, n: int, rng: np.random.Generator, prefs: tuple[tuple[str, ...], tuple[str, ...]]
    ) -> list[str]:
        """``n`` distinct arguments: the agent's top ``k`` pro points and top ``n - k`` con.

        ``k`` is ``n (1 + stance) / 2`` rounded stochastically (exact on average).
        """
        pro, con = prefs
        x = n * (1 + stance) / 2
        k = int(x) + (rng.random() < x - int(x))
        k = max(min(k, len(pro), n), n - len(con))
        return [*pro[:k], *con[: n - k]]


def level(stance: float) -> int:
    """Map a stance in [-1, 1] to a verdict index 0..4."""
    return int(_clip(round((stance + 1) * 2), 0, 4))


def _clip(x: float, lo: float, hi: float) -> float:
    return lo if x < lo else hi if x > hi else float(x)


def _keyed(*parts: object) -> np.random.Generator:
    """A generator keyed by ``parts`` (one per thread, re-keyed; use it at once)."""
    return keyed_generator("context_corrosion").for_key(*parts)


@lru_cache(maxsize=4096)
def _initial_stance(task_id: int, seed: int, agent: str, framed: bool) -> float:
    rng = _keyed(seed, "cc.stance", task_id, agent)
    if framed:
        return _clip(0.85 + rng.normal(0.0, 0.05), -1.0, 1.0)
    return _clip(rng.normal(-0.25, 0.25), -1.0, 1.0)


@lru_cache(maxsize=4096)
def _preferences(task_id: int, seed: int, agent: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    rng = _keyed(seed, "cc.prefs", task_id, agent)
    t = TASKS[task_id]
    return (tuple(t.pro[i] for i in rng.permutation(len(t.pro))),
            tuple(t.con[i] for i in rng.permutation(len(t.con))))


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
    return _pairs(_block(user_message))


def _block(user_message: str) -> str:
    # The text after the header, up to its first blank line (one slice of a long prompt, not two).
    end = user_message.find("\n\n", len(HISTORY_HEADER))
    return user_message[len(HISTORY_HEADER) : None if end == -1 else end]


def _pairs(block: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for line in block.split("\n"):
        who, sep, text = line.partition(": ")
        if sep and who and " " not in who:
            out.append((who, text))
        elif out:  # a message that itself spans lines
            out[-1] = (out[-1][0], out[-1][1] + "\n" + line)
    return out


Heard = tuple[tuple[str, int, float], ...]


class _LastTranscript(threading.local):
    task_id: int | None = None
    block = ""
    messages: Heard = ()


_LAST = _LastTranscript()


def messages_heard(task_id: int, user_message: str) -> Heard:
    """Each message of the prompt's transcript as (speaker, length, the stance it expresses).

    That is :func:`transcript` with each text decoded, but each thread remembers
    the last transcript it read: in a speaking round a prompt's transcript is the
    one before it and one message more, so only that message is read (the rest
    of the prompt is compared, not parsed and decoded again).
    """
    if not user_message.startswith(HISTORY_HEADER):
        return ()
    last = _LAST
    h, n = len(HISTORY_HEADER), len(last.block)
    if n and user_message.startswith(last.block, h):
        # The last block is no block's end, so the first blank line is at its last character or later:
        # only the rest of a long prompt, where line breaks abound, is searched.
        end = user_message.find("\n\n", h + n - 1)
        block = user_message[h : None if end == -1 else end]
    else:
        block = _block(user_message)
    if last.task_id == task_id:
        if block == last.block:
            return last.messages
        if n and block.startswith("\n", n) and block.startswith(last.block):
            tail = block[n + 1 :]
            who, sep, _ = tail.partition("\n")[0].partition(": ")
            if sep and who and " " not in who:  # it starts a message (else it continues the last one)
                messages = last.messages + _decoded(task_id, _pairs(tail))
                last.block, last.messages = block, messages
                return messages
    messages = _decoded(task_id, _pairs(block))
    last.task_id, last.block, last.messages = task_id, block, messages
    return messages


def _decoded(task_id: int, pairs: list[tuple[str, str]]) -> Heard:
    return tuple([(who, len(text), _decode(task_id, text)) for who, text in pairs])


def make_behaviour(cfg: Any) -> CorrosionBehaviour:
    """The behaviour model for a config."""
    return CorrosionBehaviour(task(cfg.task), cfg.conformity, cfg.authority_weight)
