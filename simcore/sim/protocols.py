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

``open_floor`` lets everyone speak at once and posts each message when its
generation ends (free discussion as a race); ``sealed_bid_auction`` collects bids
until a deadline and picks a first- or second-price winner.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from mesa.agent import AgentSet

from simcore.base.config import ConfigError
from simcore.sim.trace import RACE

if TYPE_CHECKING:
    import numpy as np

    from simcore.sim.agents import LLMAgent
    from simcore.sim.kernel import Process, Reply, World

ORDER_POLICIES = ("fixed", "dominant_first", "random", "rotating")
Prompt = str | Callable[["LLMAgent"], str]


def speaking_order(
    world: "World", agents: Sequence["LLMAgent"], policy: str, round_index: int = 0, phase: str = ""
) -> list["LLMAgent"]:
    """Order ``agents`` for one round under ``policy`` (see the module docstring).

    A world's intervention (a perturbation study) may then change the order;
    ``phase`` is what it selects on.
    """
    order = _policy_order(world, agents, policy, round_index)
    if world.intervention is not None:
        order = world.intervention.order(phase, round_index, order)
    return order


def _policy_order(
    world: "World", agents: Sequence["LLMAgent"], policy: str, round_index: int
) -> list["LLMAgent"]:
    # Plain lists for the deterministic policies: an AgentSet (and its weak references)
    # per round is needed only to shuffle, with Mesa's shuffle on the "order" stream.
    # Like an AgentSet, the order keeps each agent once, where it first appears.
    unique = list(dict.fromkeys(agents))
    if policy == "fixed":
        return unique
    if policy == "dominant_first":
        return [a for a in unique if a.role == "dominant"] + [a for a in unique if a.role != "dominant"]
    if policy == "random":
        return list(AgentSet(unique, random=world.streams.python("order")).shuffle())
    if policy == "rotating":
        ordered = unique
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
    allowed: Mapping[str, Any] | None = None,
    trim: Callable[["LLMAgent"], Callable[[int], str]] | None = None,
    **fields: Any,
) -> "Process":
    """Ask every agent at the same instant; returns their replies in agent order.

    ``allowed`` narrows the schema's choices for these calls and ``trim(agent)`` is
    an agent's prompt trim (see :meth:`LLMAgent.ask`).
    """
    calls = [
        a.ask(_text(prompt, a), schema=schema, phase=phase, history=history, allowed=allowed,
              trim=None if trim is None else trim(a), **fields)
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
    allowed: Mapping[str, Any] | None = None,
    **fields: Any,
) -> "Process":
    """Let agents speak one after another; each hears what came before.

    Each turn asks the agent, then posts ``speech(reply)`` (if not empty) as a
    public message, so later speakers in the round see it.

    Returns:
        The replies, in speaking order.
    """
    replies = []
    for agent in speaking_order(world, agents, policy, round_index, phase):
        reply = yield agent.ask(
            _text(prompt, agent), schema=schema, phase=phase, round=round_index, allowed=allowed, **fields
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
        replies: The ballots' replies, in voter order (when the vote asked an LLM).
    """

    choice: Any
    reached: bool
    tally: dict[Any, int] = field(default_factory=dict)
    n: int = 0
    replies: tuple["Reply", ...] = ()


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
    allowed: Mapping[str, Any] | None = None,
    **fields: Any,
) -> "Process":
    """All agents vote at once; ``choice(reply)`` reads a ballot (None abstains).

    An unreadable ballot is an abstention. Emits one "ballot" event per voter and
    one "decision" event.

    Returns:
        The :class:`Decision`, with the ballots' replies.
    """
    replies = yield from parallel(
        world, agents, prompt, schema=schema, phase=phase, history=history, allowed=allowed, **fields
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
    return replace(decision, replies=tuple(replies))


def _plain(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def open_floor(
    world: "World",
    agents: Sequence["LLMAgent"],
    prompt: Prompt,
    *,
    schema: type | None = None,
    phase: str = "open_floor",
    speech: Callable[["Reply"], str | None] = lambda r: r.text,
    max_tokens: int | None = None,
    allowed: Mapping[str, Any] | None = None,
    **fields: Any,
) -> "Process":
    """Everyone speaks at once; each message is posted the moment its generation ends.

    All agents are asked at the same instant, so their calls run concurrently.
    Each reply arrives after its simulated duration (by default its tokens over
    the speaker's rate), so shorter speakers get the floor first. ``speech(reply)``
    is posted when the reply arrives (nothing when it is empty). Requests are
    created in a seeded random order (the "order" stream), so agents that finish
    at exactly the same time are not ranked by their position in ``agents``.
    Since the order of arrival decides, a ``race`` event (:data:`simcore.sim.trace.RACE`,
    with the calls' fields) comes first, and divergence metrics keep these replies
    in arrival order instead of comparing them as a set.

    Returns:
        The replies in the order they arrived, which is the order of the posts.
    """
    arrived: list["Reply"] = []

    def turn(agent: "LLMAgent") -> "Process":
        reply = yield agent.ask(
            _text(prompt, agent), schema=schema, phase=phase, max_tokens=max_tokens, allowed=allowed, **fields
        )
        text = speech(reply)
        if text:
            agent.say(text, phase=phase, **fields)
        arrived.append(reply)

    order = speaking_order(world, agents, "random", fields.get("round", 0), phase)
    world.emit(RACE, None, phase=phase, **fields)
    yield world.all_of([world.process(turn(a)) for a in order])
    return arrived


AUCTION_RULES = ("first_price", "second_price")


@dataclass(frozen=True, slots=True)
class Bid:
    """A sealed bid and the simulated time it arrived."""

    bidder: str
    amount: float
    t: float


@dataclass(frozen=True, slots=True)
class AuctionResult:
    """The outcome of a sealed-bid auction.

    Attributes:
        winner: The winning bidder, or None when no bid arrived before the deadline.
        price: What the winner pays (0 without a winner).
        bids: The bids that arrived before the deadline, in order of arrival.
        tied: The bidders tied at the highest bid, sorted (the winner was drawn among them).
        deadline: Simulated time at which the auction closed.
        submissions: Each bidder's submission process; its value is the :class:`Bid`,
            or None for an abstention. Wait on them to see the late bids.
    """

    winner: str | None
    price: float
    bids: tuple[Bid, ...]
    tied: tuple[str, ...]
    deadline: float
    submissions: dict[str, Any] = field(default_factory=dict)


def resolve_auction(
    bids: Sequence[Bid], rule: str, rng: "np.random.Generator"
) -> tuple[str | None, float, tuple[str, ...]]:
    """Pick the winner and the price of a sealed-bid auction.

    The highest bid wins. Bidders tied at the top are sorted by name and one is
    drawn with ``rng``, so arrival order never decides. Under ``first_price`` the
    winner pays its own bid; under ``second_price`` the highest other bid (its own
    when tied, 0 when it bid alone).

    Returns:
        (winner, price, tied bidders); (None, 0.0, ()) without bids.
    """
    if rule not in AUCTION_RULES:
        raise ConfigError(f"auction_rule: must be one of {', '.join(AUCTION_RULES)}; got {rule!r}")
    if not bids:
        return None, 0.0, ()
    top = max(b.amount for b in bids)
    tied = tuple(sorted(b.bidder for b in bids if b.amount == top))
    winner = tied[int(rng.integers(len(tied)))] if len(tied) > 1 else tied[0]
    if rule == "first_price":
        return winner, top, tied
    others = [b.amount for b in bids if b.bidder != winner]
    return winner, (max(others) if others else 0.0), tied


def sealed_bid_auction(
    world: "World",
    bidders: Sequence[str],
    submit: Callable[[str], "Process"],
    *,
    window: float,
    rule: str = "first_price",
    phase: str = "auction",
    stream: str = "auction.tiebreak",
    **fields: Any,
) -> "Process":
    """Collect sealed bids until a deadline, then pick the winner.

    The auction opens now and closes ``window`` simulated seconds later (a SimPy
    timeout). ``submit(bidder)`` is a process that returns the bidder's amount, or
    None to abstain, when the bidder is ready; a bid counts only if it arrives
    strictly before the deadline. Each arriving bid is traced ("bid", with
    ``on_time``), as is the close ("auction.close"). Ties are broken with the
    world's ``stream`` (see :func:`resolve_auction`).

    Returns:
        The :class:`AuctionResult`, at the deadline.
    """
    if window < 0:
        raise ValueError(f"window: must be >= 0, got {window}")
    deadline = world.now + window
    received: list[Bid] = []

    def submission(bidder: str) -> "Process":
        amount = yield from submit(bidder)
        if amount is None:
            return None
        bid = Bid(bidder, float(amount), world.now)
        received.append(bid)
        world.emit("bid", bidder, {"amount": bid.amount}, phase=phase, on_time=bid.t < deadline, **fields)
        return bid

    procs = {b: world.process(submission(b)) for b in bidders}
    yield world.timeout(window)
    on_time = tuple(b for b in received if b.t < deadline)
    winner, price, tied = resolve_auction(on_time, rule, world.streams.numpy(stream))
    world.emit(
        "auction.close",
        winner,
        {"price": price, "n_bids": len(on_time), "tied": list(tied)},
        phase=phase,
        **fields,
    )
    return AuctionResult(winner, price, on_time, tied, deadline, procs)
