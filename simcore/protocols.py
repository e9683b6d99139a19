"""Reusable timed interaction patterns, written as SimPy processes.

Use them from a scenario process with ``yield from``::

    replies = yield from parallel(world, agents, prompt, schema=Opinion, phase="phase1")
    replies = yield from speaking_round(world, agents, prompt, policy="dominant_first",
                                        round_index=r, phase="discussion")
    decision = yield from vote(world, agents, prompt, rule=decision_rule("majority"),
                               schema=Ballot, choice=lambda r: r.value.option)

Order policies: ``fixed`` (as given), ``dominant_first`` (role "dominant" first,
the rest as given), ``random`` (a fresh shuffle each round, from the world's
"order" stream) and ``rotating`` (round r starts with agent r mod n).

Decision rules count abstentions (None, e.g. unparseable ballots) as votes for no
option: ``majority`` needs more than half of all voters, ``unanimity`` all of
them, ``threshold:Q`` a share of at least Q, and ``plurality`` picks the most
voted option, breaking ties with a seeded draw.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Sequence

from mesa.agent import AgentSet

from simcore.config import ConfigError

if TYPE_CHECKING:
    import numpy as np

    from simcore.agents import LLMAgent
    from simcore.kernel import Process, Reply, World

ORDER_POLICIES = ("fixed", "dominant_first", "random", "rotating")
Prompt = str | Callable[["LLMAgent"], str]


def speaking_order(
    world: "World", agents: Sequence["LLMAgent"], policy: str, round_index: int = 0
) -> list["LLMAgent"]:
    """Order ``agents`` for one round under ``policy`` (see the module docstring)."""
    group = AgentSet(agents, random=world.streams.python("order"))
    if policy == "fixed":
        return list(group)
    if policy == "dominant_first":
        first = group.select(lambda a: a.role == "dominant")
        return list(first) + list(group.select(lambda a: a.role != "dominant"))
    if policy == "random":
        return list(group.shuffle())
    if policy == "rotating":
        ordered = list(group)
        k = round_index % len(ordered) if ordered else 0
        return ordered[k:] + ordered[:k]
    raise ConfigError(f"order: must be one of {', '.join(ORDER_POLICIES)}; got {policy!r}")


def _text(prompt: Prompt, agent: "LLMAgent") -> str:
    return prompt(agent) if callable(prompt) else prompt


def parallel(
    world: "World",
    agents: Sequence["LLMAgent"],
    prompt: Prompt,
    *,
    schema: type | None = None,
    phase: str = "parallel",
    history: bool = True,
    **fields: Any,
) -> "Process":
    """Ask every agent at the same instant; returns their replies in agent order."""
    calls = [
        a.ask(_text(prompt, a), schema=schema, phase=phase, history=history, **fields)
        for a in agents
    ]
    replies = yield world.all_of(calls)
    return replies


def speaking_round(
    world: "World",
    agents: Sequence["LLMAgent"],
    prompt: Prompt,
    *,
    round_index: int,
    policy: str = "fixed",
    schema: type | None = None,
    phase: str = "round",
    speech: Callable[["Reply"], str | None] = lambda r: r.text,
    **fields: Any,
) -> "Process":
    """Let agents speak one after another; each hears what came before.

    Each turn asks the agent, then posts ``speech(reply)`` (if not empty) as a
    public message, so later speakers in the round see it.

    Returns:
        The replies, in speaking order.
    """
    replies = []
    order = speaking_order(world, agents, policy, round_index)
    if world.intervention is not None:
        order = world.intervention.order(phase, round_index, order)
    for agent in order:
        reply = yield agent.ask(
            _text(prompt, agent), schema=schema, phase=phase, round=round_index, **fields
        )
        text = speech(reply)
        if text:
            agent.say(text, phase=phase, round=round_index)
        replies.append(reply)
    return replies


@dataclass(frozen=True, slots=True)
class Decision:
    """The outcome of a vote.

    Attributes:
        choice: The winning option, or None when the rule was not met.
        reached: Whether the rule was met.
        tally: Votes per option, in order of first appearance (abstentions excluded).
        n: Number of voters, abstentions included.
    """

    choice: Any
    reached: bool
    tally: dict[Any, int] = field(default_factory=dict)
    n: int = 0


def tally(votes: Sequence[Any]) -> dict[Any, int]:
    """Count votes per option in order of first appearance; None is an abstention."""
    counts: dict[Any, int] = {}
    for v in votes:
        if v is not None:
            counts[v] = counts.get(v, 0) + 1
    return counts


def _top(counts: dict[Any, int]) -> tuple[Any, int]:
    return max(counts.items(), key=lambda kv: kv[1]) if counts else (None, 0)


@dataclass(frozen=True, slots=True)
class Majority:
    """More than half of all voters agree."""

    def decide(self, votes: Sequence[Any], rng: "np.random.Generator | None" = None) -> Decision:
        counts = tally(votes)
        choice, top = _top(counts)
        ok = top * 2 > len(votes)
        return Decision(choice if ok else None, ok, counts, len(votes))


@dataclass(frozen=True, slots=True)
class Unanimity:
    """Every voter picks the same option."""

    def decide(self, votes: Sequence[Any], rng: "np.random.Generator | None" = None) -> Decision:
        counts = tally(votes)
        choice, top = _top(counts)
        ok = bool(votes) and top == len(votes)
        return Decision(choice if ok else None, ok, counts, len(votes))


@dataclass(frozen=True, slots=True)
class Threshold:
    """At least a share ``q`` of all voters agree."""

    q: float

    def decide(self, votes: Sequence[Any], rng: "np.random.Generator | None" = None) -> Decision:
        counts = tally(votes)
        choice, top = _top(counts)
        ok = bool(votes) and top >= self.q * len(votes) - 1e-12
        return Decision(choice if ok else None, ok, counts, len(votes))


@dataclass(frozen=True, slots=True)
class Plurality:
    """The most voted option wins; ties are broken with a seeded draw."""

    def decide(self, votes: Sequence[Any], rng: "np.random.Generator | None" = None) -> Decision:
        counts = tally(votes)
        if not counts:
            return Decision(None, False, counts, len(votes))
        best = max(counts.values())
        tied = [c for c, k in counts.items() if k == best]
        if len(tied) > 1:
            if rng is None:
                raise ValueError("plurality: a tie needs an rng to break it")
            choice = sorted(tied, key=str)[int(rng.integers(len(tied)))]
        else:
            choice = tied[0]
        return Decision(choice, True, counts, len(votes))


DecisionRule = Majority | Unanimity | Threshold | Plurality
DECISION_RULES = ("majority", "unanimity", "threshold:Q", "plurality")


def decision_rule(spec: str) -> DecisionRule:
    """Parse ``majority``, ``unanimity``, ``plurality`` or ``threshold:Q`` (0 < Q <= 1)."""
    name, _, arg = spec.partition(":")
    if name == "majority" and not arg:
        return Majority()
    if name == "unanimity" and not arg:
        return Unanimity()
    if name == "plurality" and not arg:
        return Plurality()
    if name == "threshold":
        try:
            q = float(arg)
        except ValueError:
            q = -1.0
        if 0 < q <= 1:
            return Threshold(q)
    raise ConfigError(
        f"decision_rule: must be majority, unanimity, plurality or threshold:Q with 0<Q<=1; got {spec!r}"
    )


def vote(
    world: "World",
    agents: Sequence["LLMAgent"],
    prompt: Prompt,
    *,
    rule: DecisionRule,
    schema: type,
    choice: Callable[["Reply"], Any],
    phase: str = "vote",
    history: bool = True,
    **fields: Any,
) -> "Process":
    """All agents vote at once; ``choice(reply)`` reads a ballot (None abstains).

    Emits one "ballot" event per voter and one "decision" event.

    Returns:
        The :class:`Decision`.
    """
    replies = yield from parallel(
        world, agents, prompt, schema=schema, phase=phase, history=history, **fields
    )
    ballots = []
    for agent, reply in zip(agents, replies):
        ballot = None if reply.parse_error else choice(reply)
        ballots.append(ballot)
        world.emit("ballot", agent.name, {"choice": _plain(ballot)}, phase=phase, **fields)
    decision = rule.decide(ballots, world.streams.numpy("vote.tiebreak"))
    world.emit(
        "decision",
        None,
        {"choice": _plain(decision.choice), "tally": {str(k): v for k, v in decision.tally.items()}},
        phase=phase,
        reached=decision.reached,
        **fields,
    )
    return decision


def _plain(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value
