"""The veil-of-ignorance task: principles, the Likert scale, choices and the veil.

Four principles of distributive justice, described neutrally (no philosophers or
authorities are named, so agents judge the rules, not their authors):

====  ====================  ======================================================
 id   key                   rule
====  ====================  ======================================================
 1    maximize_minimum      pick the distribution whose lowest income is highest
 2    maximize_average      pick the distribution whose average income is highest
 3    floor_constraint      highest average among those whose lowest income is at
                            least the floor amount
 4    range_constraint      highest average among those whose gap between highest
                            and lowest income is at most the range amount
====  ====================  ======================================================

Choices and consensus are matched in code, never by an LLM: a choice is a
principle id plus, for the two constraint principles, a whole-dollar amount. Two
choices agree when both match exactly. A constraint principle without an amount
is an incomplete choice and counts as an abstention.

When the veil lifts, the chosen principle picks one distribution of a documented
set (:data:`DISTRIBUTIONS`, five income classes in the style of the experiments
of Frohlich and Oppenheimer, 1992; the figures are illustrative), and each agent
draws an income class from the world's ``veil.classes`` stream. Without
consensus the group gets a distribution drawn uniformly from the set (stream
``veil.fallback``). A constraint no distribution meets picks the one that comes
closest (highest lowest income, or smallest range), ties by higher average, and
the outcome is flagged ``constraint_met: false``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from simcore.api import Config, ConfigError, Decision, DecisionRule, param, tally


@dataclass(frozen=True)
class Principle:
    """One principle of distributive justice."""

    id: int
    key: str
    label: str
    description: str
    needs_amount: bool


PRINCIPLES: tuple[Principle, ...] = (
    Principle(
        1, "maximize_minimum", "maximize the minimum income",
        "Choose the income distribution in which the lowest income is as high as possible. "
        "The position of the worst-off member of society decides.",
        False,
    ),
    Principle(
        2, "maximize_average", "maximize the average income",
        "Choose the income distribution with the highest average income, however that "
        "income is spread across society.",
        False,
    ),
    Principle(
        3, "floor_constraint", "maximize the average with a floor constraint",
        "Guarantee every member a minimum income (the floor, in dollars a year); among the "
        "distributions that meet the floor, choose the one with the highest average income.",
        True,
    ),
    Principle(
        4, "range_constraint", "maximize the average with a range constraint",
        "Limit the gap between the highest and the lowest income to a set amount (the range, "
        "in dollars a year); among the distributions within the range, choose the one with "
        "the highest average income.",
        True,
    ),
)
KEYS = tuple(p.key for p in PRINCIPLES)
BY_ID = {p.id: p for p in PRINCIPLES}
BY_KEY = {p.key: p for p in PRINCIPLES}

LIKERT = ("strongly disagree", "disagree", "agree", "strongly agree")  # scores 1..4


@dataclass(frozen=True, order=True)
class Choice:
    """A principle and, for the constraint principles, the amount in dollars."""

    principle: int
    amount: int | None = None

    @property
    def key(self) -> str:
        """Ballot key: ``floor_constraint:13000`` or ``maximize_average``."""
        name = BY_ID[self.principle].key
        return name if self.amount is None else f"{name}:{self.amount}"

    def describe(self) -> str:
        """Human-readable form for prompts and summaries."""
        label = BY_ID[self.principle].label
        if self.principle == 3:
            return f"{label} (floor ${self.amount:,})"
        if self.principle == 4:
            return f"{label} (range ${self.amount:,})"
        return label


def choice_from_key(key: str) -> Choice:
    """Inverse of :attr:`Choice.key`."""
    name, _, amount = key.partition(":")
    return Choice(BY_KEY[name].id, int(amount) if amount else None)


def detect_consensus(
    choices: Sequence[Choice | None], rule: DecisionRule, rng: np.random.Generator
) -> Decision:
    """Apply a decision rule to the agents' choices (None abstains).

    Choices agree only when principle and amount both match. The decision's
    ``choice`` is a ballot key (see :attr:`Choice.key`) or None.
    """
    return rule.decide([None if c is None else c.key for c in choices], rng)


def agreement(choices: Sequence[Choice | None], by_principle: bool = False) -> float:
    """Share of agents holding the most common choice (abstentions hold none)."""
    if not choices:
        return 0.0
    counts = tally([None if c is None else (c.principle if by_principle else c.key) for c in choices])
    return max(counts.values(), default=0) / len(choices)


# -- the veil lifts --------------------------------------------------------

CLASSES = ("high", "medium high", "medium", "medium low", "low")


@dataclass(frozen=True)
class Distribution(Config):
    """Yearly income (dollars) per income class, highest class first (validated)."""

    name: str = param("Dist.", help="label")
    incomes: tuple[int, ...] = param((), help="yearly income per class, highest class first")

    def check(self) -> None:
        if not self.incomes or not all(type(x) is int and x > 0 for x in self.incomes):
            raise ConfigError(
                f"incomes: must be a list of positive whole dollar amounts; got {list(self.incomes)!r}"
            )

    @property
    def average(self) -> float:
        """Mean income over classes, weighted equally."""
        return sum(self.incomes) / len(self.incomes)

    @property
    def floor(self) -> int:
        """Lowest income."""
        return min(self.incomes)

    @property
    def range(self) -> int:
        """Highest minus lowest income."""
        return max(self.incomes) - min(self.incomes)


DISTRIBUTIONS: tuple[Distribution, ...] = (
    Distribution("Dist. 1", (32000, 27000, 24000, 13000, 12000)),
    Distribution("Dist. 2", (28000, 22000, 20000, 17000, 13000)),
    Distribution("Dist. 3", (31000, 24000, 21000, 16000, 14000)),
    Distribution("Dist. 4", (21000, 20000, 19000, 16000, 15000)),
)


def apply_principle(choice: Choice, dists: Sequence[Distribution]) -> tuple[int, bool]:
    """Index of the distribution ``choice`` selects, and whether its constraint is met.

    Ties go to the earlier distribution (``max`` keeps the first maximum).
    """
    idx = range(len(dists))
    avg = lambda i: dists[i].average  # noqa: E731
    if choice.principle == 1:
        return max(idx, key=lambda i: (dists[i].floor, dists[i].average)), True
    if choice.principle == 2:
        return max(idx, key=avg), True
    assert choice.amount is not None
    if choice.principle == 3:
        ok = [i for i in idx if dists[i].floor >= choice.amount]
        if ok:
            return max(ok, key=avg), True
        return max(idx, key=lambda i: (dists[i].floor, dists[i].average)), False
    ok = [i for i in idx if dists[i].range <= choice.amount]
    if ok:
        return max(ok, key=avg), True
    return max(idx, key=lambda i: (-dists[i].range, dists[i].average)), False


@dataclass(frozen=True)
class Outcome:
    """What the veil reveals.

    Attributes:
        choice: The agreed choice, or None without consensus.
        distribution: Index into the distribution set.
        fallback: True when the distribution was drawn because no consensus was reached.
        constraint_met: Whether the agreed constraint is met (None without one).
        classes: Each agent's income class index, in agent order.
        incomes: Each agent's yearly income, in agent order.
    """

    choice: Choice | None
    distribution: int
    fallback: bool
    constraint_met: bool | None
    classes: tuple[int, ...]
    incomes: tuple[int, ...]


def draw_classes(n_agents: int, weights: Sequence[float], rng: np.random.Generator) -> tuple[int, ...]:
    """Each agent's income class, drawn independently with probabilities ``weights``."""
    p = np.asarray(weights, dtype=float)
    return tuple(int(c) for c in rng.choice(len(p), size=n_agents, p=p / p.sum()))


def lift_veil(
    choice: Choice | None,
    dists: Sequence[Distribution],
    classes: tuple[int, ...],
    fallback_rng: np.random.Generator,
) -> Outcome:
    """Pick the distribution and pay each agent the income of its class.

    The classes are drawn before and independently of the outcome, so conditions
    that share a seed share the class draw (common random numbers).
    """
    if choice is None:
        idx, met, fallback = int(fallback_rng.integers(len(dists))), None, True
    else:
        idx, met = apply_principle(choice, dists)
        met = met if BY_ID[choice.principle].needs_amount else None
        fallback = False
    incomes = tuple(dists[idx].incomes[c] for c in classes)
    return Outcome(choice, idx, fallback, met, classes, incomes)
