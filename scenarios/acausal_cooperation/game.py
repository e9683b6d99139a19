"""The game itself: payoffs, power scaling, power updates, pairings and anonymous labels.

**Payoffs.** The classic prisoner's dilemma matrix, with ``C`` = COOPERATE and
``D`` = DEFECT::

                 they C   they D
        you C    3, 3     0, 5
        you D    5, 0     1, 1

**Power scaling.** The seed scales payoffs "by log(power/100)". A raw logarithm
would be negative below power 100, so a player's payoff is its base payoff times
``1 + ln(power / 100)``, using its own power before the game. The multiplier is 1
at power 100, about 0.307 at 50 and about 1.405 at 150. With scaling off it is 1,
and the payoffs are the classic ones.

**Power updates.** The winner of a game is the player with the higher *base*
payoff, i.e. the defector against a cooperator. Its power rises by ``step`` (1%)
and the loser's falls by ``step``, both clamped to [50, 150]. Mutual cooperation and
mutual defection have no winner and leave both powers unchanged. Base payoffs, not
scaled ones, decide the winner, so that equal moves never transfer power from the
weaker to the stronger player.
"""

from __future__ import annotations

import math
from itertools import combinations

import numpy as np

COOPERATE, DEFECT = "COOPERATE", "DEFECT"
POWER_MIN, POWER_MAX = 50.0, 150.0

# (my action, their action) -> my base payoff: R = 3, S = 0, T = 5, P = 1.
BASE_PAYOFF = {
    (COOPERATE, COOPERATE): 3.0,
    (COOPERATE, DEFECT): 0.0,
    (DEFECT, COOPERATE): 5.0,
    (DEFECT, DEFECT): 1.0,
}


def power_multiplier(power: float, scaling: bool = True) -> float:
    """The payoff multiplier of a player with ``power``: ``1 + ln(power / 100)``, or 1."""
    return 1.0 + math.log(power / 100.0) if scaling else 1.0


def payoffs(
    a1: str, a2: str, power1: float = 100.0, power2: float = 100.0, scaling: bool = True
) -> tuple[float, float]:
    """The two players' payoffs for actions ``a1``, ``a2`` (see the module docstring)."""
    return (
        BASE_PAYOFF[(a1, a2)] * power_multiplier(power1, scaling),
        BASE_PAYOFF[(a2, a1)] * power_multiplier(power2, scaling),
    )


def clamp_power(power: float) -> float:
    """Clamp a power level to [50, 150]."""
    return min(POWER_MAX, max(POWER_MIN, power))


def update_power(power: float, won: bool, step: float = 0.01) -> float:
    """The power after a game that the player won (``* (1 + step)``) or lost (``* (1 - step)``)."""
    return clamp_power(power * (1.0 + step) if won else power * (1.0 - step))


def winner(a1: str, a2: str) -> int | None:
    """0 if player 1 won (it defected against a cooperator), 1 if player 2 did, else None."""
    if a1 == a2:
        return None
    return 0 if a1 == DEFECT else 1


def powers_after(
    a1: str, a2: str, power1: float, power2: float, step: float = 0.01
) -> tuple[float, float]:
    """Both powers after a game: the winner's rises by ``step``, the loser's falls."""
    w = winner(a1, a2)
    if w is None:
        return power1, power2
    return update_power(power1, w == 0, step), update_power(power2, w == 1, step)


def round_robin(n: int) -> list[tuple[int, int]]:
    """Every pair ``(i, j)`` with ``i < j`` once, in the seed's order: (0,1), (0,2), ..."""
    return list(combinations(range(n), 2))


def draw_powers(rng: np.random.Generator, n: int) -> list[float]:
    """``n`` power levels drawn uniformly from [50, 150]."""
    return [float(x) for x in rng.uniform(POWER_MIN, POWER_MAX, size=n)]


def letters(k: int) -> str:
    """Spreadsheet-style label of index ``k``: A..Z, AA, AB, ..."""
    out = ""
    k += 1
    while k:
        k, r = divmod(k - 1, 26)
        out = chr(65 + r) + out
    return out


def anonymous_labels(rng: np.random.Generator, n: int) -> list[str]:
    """A random relabelling of players 0..n-1: entry i is player i's label this round."""
    return [letters(int(k)) for k in rng.permutation(n)]
