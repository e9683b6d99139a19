"""Scripted (non-LLM) players: the classic iterated prisoner's dilemma strategies.

A scripted player sees only its own history against the current opponent: the
moves of earlier turns, one turn per round (each pair meets once a round). So with
power scaling off, a tournament of scripted players over R rounds is exactly a
round robin of R-turn iterated matches, the setting of Axelrod's tournaments
(``axelrod.Tournament(players, turns=R)``), and the total scores agree.

| name | rule | Axelrod class |
| --- | --- | --- |
| ``always_cooperate`` | always C | ``Cooperator`` |
| ``always_defect`` | always D | ``Defector`` |
| ``tit_for_tat`` | C first, then the opponent's last move | ``TitForTat`` |
| ``grudger`` | C until the opponent defects once, then D forever | ``Grudger`` |
| ``win_stay_lose_shift`` | C first; C after CC or DD, else D (Pavlov) | ``WinStayLoseShift`` |
| ``random:P`` | C with probability P (default 0.5) | ``Random(P)`` |

Random draws come from the player's own named stream, so they are reproducible
and independent of every other player's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from scenarios.acausal_cooperation.game import COOPERATE as C
from scenarios.acausal_cooperation.game import DEFECT as D
from simcore.api import ConfigError

Rule = Callable[[Sequence[str], Sequence[str], float, np.random.Generator], str]


def _always_cooperate(own: Sequence[str], opp: Sequence[str], p: float, rng: np.random.Generator) -> str:
    return C


def _always_defect(own: Sequence[str], opp: Sequence[str], p: float, rng: np.random.Generator) -> str:
    return D


def _tit_for_tat(own: Sequence[str], opp: Sequence[str], p: float, rng: np.random.Generator) -> str:
    return opp[-1] if opp else C


def _grudger(own: Sequence[str], opp: Sequence[str], p: float, rng: np.random.Generator) -> str:
    return D if D in opp else C


def _win_stay_lose_shift(own: Sequence[str], opp: Sequence[str], p: float, rng: np.random.Generator) -> str:
    if not own:
        return C
    return C if own[-1] == opp[-1] else D


def _random(own: Sequence[str], opp: Sequence[str], p: float, rng: np.random.Generator) -> str:
    # Draw even at p = 0 or 1, so the stream advances the same way for every p.
    return C if rng.random() < p else D


RULES: dict[str, Rule] = {
    "always_cooperate": _always_cooperate,
    "always_defect": _always_defect,
    "tit_for_tat": _tit_for_tat,
    "grudger": _grudger,
    "win_stay_lose_shift": _win_stay_lose_shift,
    "random": _random,
}
ALLOWED = "comma-separated names from " + ", ".join(n if n != "random" else "random[:P]" for n in RULES)


@dataclass(frozen=True)
class Script:
    """One scripted player's strategy: a rule name and, for ``random``, its P."""

    name: str
    p: float = 0.5

    @property
    def label(self) -> str:
        """The spec form: ``tit_for_tat``, ``random:0.3``."""
        return f"random:{self.p:g}" if self.name == "random" else self.name

    def decide(self, own: Sequence[str], opp: Sequence[str], rng: np.random.Generator) -> str:
        """The move given this pair's earlier turns (own and opponent's moves, oldest first)."""
        return RULES[self.name](own, opp, self.p, rng)


def parse_scripted(spec: str) -> tuple[Script, ...]:
    """Parse ``"tit_for_tat,grudger,random:0.3"`` (empty: no scripted players).

    Raises:
        ConfigError: naming ``scripted`` and the allowed names.
    """
    out: list[Script] = []
    for item in (s.strip() for s in spec.split(",")):
        if not item:
            continue
        name, sep, arg = item.partition(":")
        if name not in RULES or (sep and name != "random"):
            raise ConfigError(f"scripted: must be {ALLOWED}; got {item!r}")
        p = 0.5
        if sep:
            try:
                p = float(arg)
            except ValueError:
                p = -1.0
            if not 0.0 <= p <= 1.0:
                raise ConfigError(f"scripted: random:P needs 0 <= P <= 1; got {item!r}")
        out.append(Script(name, p))
    return tuple(out)
