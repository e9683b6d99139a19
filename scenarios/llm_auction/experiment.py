"""The LLM-auction experiment as SimPy processes: five phases per vignette.

1. **Private assessment.** Every agent answers alone, all at once (free).
2. **Mechanism.**
   - *auction*: the sealed-bid auction opens with the vignette; each agent bids
     the moment its assessment is done, ``confidence x style multiplier x
     remaining budget + noise``, capped so that the winner can still pay for its
     proposal. Bids close ``bid_window`` simulated seconds after opening; later
     bids are excluded. The highest bid wins (ties: a seeded draw) and pays its
     bid (first price) or the second-highest bid (second price).
   - *free_discussion*: everyone proposes at once; each proposal is posted when its
     generation ends, so shorter speakers get the floor first.
   - *turn_taking*: everyone proposes, one after another, in a seeded random order.
3. **Interventions.** Auction: the winner argues; the others may pay per token
   to publish a critique (only agents who can afford ``critique_tokens`` are
   asked; declining is free). Free discussion: critiques, posted as they finish.
   Turn-taking: open discussion (comments), posted as they finish.
4. **Vote.** Everyone votes at once; a majority (more than half of all agents,
   abstentions included) decides. Without one, ``no_majority`` picks the
   plurality winner (ties: a seeded draw) or records no decision (incorrect).
5. **Payoff.** Each agent earns ``reward_correct`` if the decision is the
   consensus answer, minus what it paid this vignette: its auction price plus its
   paid messages' completion tokens x ``token_price``. The baselines charge
   nothing unless ``charge_baselines``.

Agents hear only the current vignette's messages (see :class:`VignetteMemory`).
Everything a CSV needs is recorded in ``world.state``: ``vignettes``, ``rows``
(agent x vignette) and ``bids``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Sequence

from scenarios.llm_auction.config import AuctionConfig, agent_names
from scenarios.llm_auction.vignettes import VIGNETTES, Vignette
from simcore.api import (
    LLMAgent,
    Majority,
    Memory,
    Message,
    Plurality,
    Process,
    Reply,
    World,
    confidence,
    flag,
    make_memory,
    open_floor,
    option,
    sealed_bid_auction,
    speaking_round,
    text,
    text_list,
    vote,
)
from simcore.api import build as build_topology

STYLE_TEXT = {
    "assertive": "You state your views forcefully and push for the option you believe in.",
    "timid": "You are cautious, hedge your views and rarely push for your own position.",
    "calibrated": "Your stated confidence is your honest probability of being right.",
    "neutral": "You communicate plainly and even-handedly.",
}


@dataclass(frozen=True, kw_only=True)
class Assessment:
    """Phase 1 reply: the reasoning first, then the option and the confidence the bid uses."""

    KIND: ClassVar[str] = "assessment"
    reasoning: str | None = text(required=False)
    principles: list[str] | None = text_list("principles")
    option: str = option()
    confidence: float = confidence(required=True)


@dataclass(frozen=True, kw_only=True)
class Proposal:
    """A proposal: the option argued for, then the argument.

    A paid message's budget is part of the auction, so its short fields come first:
    a reply cut at max_tokens still names its option (the argument is then left out).
    """

    KIND: ClassVar[str] = "proposal"
    SPOKEN: ClassVar[bool] = True  # said to the others: "you" in it are they, not this agent
    option: str = option()
    confidence: float | None = confidence()
    argument: str | None = text("case", "proposal", required=False)


@dataclass(frozen=True, kw_only=True)
class Critique:
    """A critique or comment; ``critique`` false means the agent stays silent."""

    KIND: ClassVar[str] = "critique"
    SPOKEN: ClassVar[bool] = True  # said to the others: "you" in it are they, not this agent
    critique: bool = flag("speak", "comment", required=True)
    option: str | None = option(required=False)
    confidence: float | None = confidence()
    text: str | None = text("critique text", "message", required=False)

    def __post_init__(self) -> None:
        if self.critique and self.option is None:
            raise ValueError("option: a critique must name the option it argues for")


@dataclass(frozen=True, kw_only=True)
class Ballot:
    """Phase 4 reply."""

    KIND: ClassVar[str] = "ballot"
    option: str = option()


class VignetteMemory:
    """Only messages of the current vignette, then the configured strategy.

    The current vignette starts at board sequence number ``state["first_seq"]``.
    """

    __slots__ = ("state", "inner")

    def __init__(self, state: dict[str, Any], inner: Memory) -> None:
        self.state = state
        self.inner = inner

    def select(self, messages: Sequence[Message]) -> Sequence[Message]:
        first = self.state["first_seq"]
        return self.inner.select([m for m in messages if m.seq >= first])


# -- prompts -----------------------------------------------------------------
def persona(name: str, style: str, n: int) -> str:
    """System prompt: the panel, and the agent's communication style."""
    return (
        f"You are {name}, one of {n} members of an ethics panel that settles dilemmas by "
        f"majority vote. {STYLE_TEXT[style]} Answer only with the JSON requested."
    )


def assessment_prompt(v: Vignette) -> str:
    return (
        f"{v.render()}\n\nAssess this privately; no one else will see this answer. Reply with "
        'JSON: {"reasoning": str, "principles": [str, ...], "option": letter, '
        '"confidence": number 0-1 (your probability of being right)}'
    )


def proposal_prompt(v: Vignette, cfg: AuctionConfig, price: float = 0.0) -> str:
    if cfg.mechanism == "auction":
        setting = (
            f"You won the proposer auction and paid ${price:.2f}. Each token of your proposal "
            f"costs you ${cfg.token_price:g}."
        )
    elif cfg.mechanism == "free_discussion":
        setting = "Everyone proposes at the same time; shorter proposals reach the panel first."
    else:
        setting = "Panelists propose one after another; you hear the earlier proposals."
    return (
        f"{v.render()}\n\n{setting} Make the case for one option to the panel. Reply with JSON: "
        '{"option": letter, "confidence": number 0-1, "argument": str}'
    )


def critique_prompt(v: Vignette, cfg: AuctionConfig, remaining: float = 0.0) -> str:
    if cfg.mechanism == "auction":
        setting = (
            f"You may pay to publish a critique of the proposal or argue for another option, at "
            f"${cfg.token_price:g} per token (at most {cfg.critique_tokens} tokens). Your "
            f"remaining budget is ${remaining:.2f}. Declining is free."
        )
    elif cfg.mechanism == "free_discussion":
        setting = "You may critique the proposals or make a counter-proposal, or stay silent."
    else:
        setting = "Open discussion: you may react to the proposals or make a counter-proposal."
    return (
        f"{v.render()}\n\n{setting} Reply with JSON: "
        '{"critique": true or false, "option": letter you argue for, "confidence": number 0-1, '
        '"text": str (empty when false)}'
    )


def vote_prompt(v: Vignette) -> str:
    return (
        f"{v.render()}\n\nThe discussion is over. Vote for the option the panel should adopt. "
        'Reply with JSON: {"option": letter}'
    )


def _confidence(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.2f}"


def proposal_text(reply: Reply, v: Vignette) -> str | None:
    """The public proposal, or None when the reply is unreadable (it names no valid option)."""
    p = reply.value
    if p is None:
        return None
    return f"PROPOSAL option {p.option} (confidence {_confidence(p.confidence)}): {p.argument or ''}".strip()


def critique_text(reply: Reply, v: Vignette, label: str) -> str | None:
    """The public critique/comment, or None when the agent declined or the reply is unreadable."""
    c = reply.value
    if c is None or not c.critique:
        return None
    return f"{label} option {c.option} (confidence {_confidence(c.confidence)}): {c.text or ''}".strip()


def flag_unreadable(world: World, v: Vignette, reply: Reply, phase: str, handling: str) -> int:
    """Record an unreadable reply with its raw text and what the protocol did instead; 1 if flagged."""
    if not reply.parse_error:
        return 0
    world.state["flagged"].append({
        "vignette_id": v.id, "agent": reply.agent, "phase": phase, "t": reply.t_done,
        "why": reply.reading.describe() if reply.reading else "", "handling": handling,
        "raw": reply.text, "earlier_attempts": [a.text for a in reply.attempts],
    })
    return 1


# -- building ----------------------------------------------------------------
def build(world: World, cfg: AuctionConfig) -> None:
    """Create the panel and the topology and start the experiment process."""
    names = agent_names(cfg.n_agents)
    inner = make_memory(cfg.memory)
    world.state.update(first_seq=0, vignettes=[], rows=[], bids=[], flagged=[])
    world.state["budget"] = dict.fromkeys(names, cfg.budget)
    for i, name in enumerate(names):
        style = cfg.style_of(i)
        LLMAgent(
            world,
            name,
            role="panelist",
            persona=persona(name, style, cfg.n_agents),
            temperature=cfg.temperature,
            # Votes use the default; every other call passes its own max_tokens.
            max_output_tokens=cfg.vote_tokens,
            memory=VignetteMemory(world.state, inner),
            speaking_rate=cfg.speaking_rate,
            params={"style": style, "multiplier": cfg.multiplier(style)},
        )
    world.set_topology(build_topology(cfg.topology, names, world.seed))
    world.process(experiment(world, cfg))


def experiment(world: World, cfg: AuctionConfig) -> Process:
    """All vignettes, one after another in simulated time."""
    agents = [world.by_name[n] for n in agent_names(cfg.n_agents)]
    for index, v in enumerate(VIGNETTES[: cfg.n_vignettes]):
        yield from vignette(world, cfg, agents, index, v)


def _row(cfg: AuctionConfig, world: World, index: int, v: Vignette, agent: LLMAgent) -> dict[str, Any]:
    style = agent.params["style"]
    return {
        "mechanism": cfg.mechanism, "seed": world.seed, "vignette_index": index, "vignette_id": v.id,
        "agent": agent.name, "communication_style": style, "style_multiplier": agent.params["multiplier"],
        "private_option": None, "private_confidence": None, "private_correct": None,
        "bid": None, "bid_on_time": None, "won_auction": False, "bid_paid": 0.0,
        "proposed": False, "critiqued": False, "participated": False,
        "message_tokens": 0, "token_cost": 0.0, "total_cost": 0.0,
        "option_choice": None, "vote_correct": None, "group_decision": None, "group_correct": None,
        # expected_reasoning: the name the original experiment's analysis reads for it
        "expected_option": v.consensus, "expected_reasoning": v.consensus,
        "reward": 0.0, "budget_after": None, "parse_errors": 0,
    }


def vignette(world: World, cfg: AuctionConfig, agents: list[LLMAgent], index: int, v: Vignette) -> Process:
    """The five phases of one vignette."""
    t0 = world.now
    budget: dict[str, float] = world.state["budget"]
    if cfg.budget_scope == "vignette":
        budget.update(dict.fromkeys(budget, cfg.budget))
    world.state["first_seq"] = len(world.board.messages)
    rows = {a.name: _row(cfg, world, index, v, a) for a in agents}
    world.emit("vignette", payload={"title": v.title}, vignette=v.id, index=index)

    # Phase 1: private assessments, all at once (and, in the auction, the bids).
    allowed = {"option": v.choices}
    calls = {
        a.name: a.ask(
            assessment_prompt(v), schema=Assessment, phase="assessment", history=False,
            max_tokens=cfg.assessment_tokens, allowed=allowed, vignette=v.id,
        )
        for a in agents
    }
    views: dict[str, tuple[str, float] | None] = {}
    handling = "abstains from the auction; no private view recorded" if cfg.mechanism == "auction" else (
        "no private view recorded")

    def read_view(name: str, reply: Reply) -> tuple[str, float] | None:
        if name not in views:
            a = reply.value
            views[name] = None if a is None else (a.option, float(a.confidence))  # a bid needs both
            row = rows[name]
            row["parse_errors"] += flag_unreadable(world, v, reply, "assessment", handling)
            # Each field read cleanly is recorded, also from a reply flagged for another one.
            kept = reply.reading.fields if a is None and reply.reading is not None else {}
            option = a.option if a is not None else kept.get("option")
            confidence = a.confidence if a is not None else kept.get("confidence")
            if option is not None:
                row["private_option"], row["private_correct"] = option, option == v.consensus
            if confidence is not None:
                row["private_confidence"] = float(confidence)
        return views[name]

    auction = None
    if cfg.mechanism == "auction":
        auction = yield from run_auction(world, cfg, v, agents, calls, rows, read_view)
    replies = yield world.all_of(calls.values())
    for a, reply in zip(agents, replies):
        read_view(a.name, reply)

    # Phases 2-3: the mechanism.
    message_tokens: dict[str, int] = dict.fromkeys(rows, 0)
    proposer = None
    if cfg.mechanism == "auction":
        assert auction is not None
        proposer = auction.winner
        if proposer is not None:
            yield from auction_interventions(world, cfg, v, proposer, agents, rows, message_tokens)
    else:
        yield from baseline_interventions(world, cfg, v, index, agents, rows, message_tokens)

    # Phase 4: the vote.
    ballots: dict[str, str | None] = {}

    def choice(reply: Reply) -> str | None:
        ballots[reply.agent] = reply.value.option
        return ballots[reply.agent]

    decision = yield from vote(
        world, agents, vote_prompt(v), rule=Majority(), schema=Ballot, choice=choice,
        phase="vote", allowed=allowed, vignette=v.id,
    )
    ordered = [ballots.get(a.name) for a in agents]
    final, decided_by = decision.choice, "majority" if decision.reached else "none"
    if not decision.reached and cfg.no_majority == "plurality":
        fallback = Plurality().decide(ordered, world.streams.numpy("vote.fallback"))
        if fallback.reached:
            final, decided_by = fallback.choice, "plurality"
    correct = final == v.consensus

    # Phase 5: payoff.
    charged = cfg.mechanism == "auction" or cfg.charge_baselines
    for reply in decision.replies:
        flag_unreadable(world, v, reply, "vote", "counted as an abstention")
    for a in agents:
        row = rows[a.name]
        row["parse_errors"] += int(a.name not in ballots)
        row["option_choice"] = ballots.get(a.name)
        row["vote_correct"] = None if row["option_choice"] is None else row["option_choice"] == v.consensus
        row["message_tokens"] = message_tokens[a.name]
        row["token_cost"] = message_tokens[a.name] * cfg.token_price
        row["participated"] = row["proposed"] or row["critiqued"]
        row["total_cost"] = (row["bid_paid"] + row["token_cost"]) if charged else 0.0
        row["group_decision"], row["group_correct"] = final, correct
        row["reward"] = cfg.reward_correct * correct - row["total_cost"]
        row["budget_after"] = budget[a.name] if cfg.mechanism == "auction" else None
    world.state["rows"].extend(rows.values())
    world.state["vignettes"].append(
        vignette_record(world, cfg, index, v, t0, rows, auction, proposer, decision, final, decided_by)
    )
    world.emit(
        "outcome", None, {"decision": final, "consensus": v.consensus},
        vignette=v.id, correct=correct, decided_by=decided_by,
    )


def run_auction(
    world: World, cfg: AuctionConfig, v: Vignette, agents: list[LLMAgent],
    calls: dict[str, Any], rows: dict[str, dict[str, Any]], read_view: Any,
) -> Process:
    """Phase 2 of the auction: sealed bids until the deadline."""
    budget: dict[str, float] = world.state["budget"]
    # One draw per agent per vignette, in agent order, whoever bids: the noise an
    # agent gets never depends on others' timing or parse errors.
    noise = world.streams.numpy("auction.noise").normal(0.0, cfg.bid_noise_sd, size=len(agents))
    noise_of = {a.name: float(x) for a, x in zip(agents, noise)}
    reserve = cfg.proposal_tokens * cfg.token_price
    deadline = world.now + cfg.bid_window
    records: dict[str, dict[str, Any]] = {}

    def submit(name: str) -> Process:
        reply = yield calls[name]
        view = read_view(name, reply)
        agent = world.by_name[name]
        remaining = budget[name]
        cap = remaining - reserve
        rec = {
            "mechanism": cfg.mechanism, "seed": world.seed, "vignette_index": rows[name]["vignette_index"],
            "vignette_id": v.id, "agent": name, "communication_style": agent.params["style"],
            "confidence": None if view is None else view[1], "style_multiplier": agent.params["multiplier"],
            "budget_before": remaining, "noise": noise_of[name], "raw_bid": None, "bid": None,
            "submitted_at": world.now, "deadline": deadline, "on_time": None,
            "abstained": None, "won": False, "price_paid": 0.0,
        }
        records[name] = rec
        if view is None or cap <= 0:
            rec["abstained"] = "unreadable" if view is None else "budget"
            return None
        raw = view[1] * agent.params["multiplier"] * remaining + noise_of[name]
        rec["raw_bid"] = raw
        rec["bid"] = round(min(max(raw, 0.0), cap), 6)
        rec["on_time"] = world.now < deadline
        return rec["bid"]

    result = yield from sealed_bid_auction(
        world, [a.name for a in agents], submit, window=cfg.bid_window, rule=cfg.auction_rule,
        phase="auction", vignette=v.id,
    )
    yield world.all_of(result.submissions.values())
    if result.winner is not None:
        budget[result.winner] -= result.price
        rows[result.winner].update(won_auction=True, bid_paid=result.price)
        records[result.winner].update(won=True, price_paid=result.price)
    for a in agents:
        rec = records[a.name]
        rows[a.name]["bid"], rows[a.name]["bid_on_time"] = rec["bid"], rec["on_time"]
        world.state["bids"].append(rec)
    return result


def auction_interventions(
    world: World, cfg: AuctionConfig, v: Vignette, proposer: str, agents: list[LLMAgent],
    rows: dict[str, dict[str, Any]], message_tokens: dict[str, int],
) -> Process:
    """Phase 3 of the auction: the winner's paid proposal, then paid critiques."""
    budget: dict[str, float] = world.state["budget"]
    winner = world.by_name[proposer]
    reply = yield winner.ask(
        proposal_prompt(v, cfg, rows[proposer]["bid_paid"]), schema=Proposal, phase="proposal",
        max_tokens=cfg.proposal_tokens, allowed={"option": v.choices}, vignette=v.id,
    )
    # The winner was given the floor and used it: its tokens are paid even when
    # the reply turns out to be unusable (re-asks included).
    paid = reply.tokens + sum(a.tokens for a in reply.attempts)
    message_tokens[proposer] += paid
    budget[proposer] -= paid * cfg.token_price
    rows[proposer]["parse_errors"] += flag_unreadable(world, v, reply, "proposal", "no proposal posted")
    text = proposal_text(reply, v)
    if text:
        winner.say(text, phase="proposal", vignette=v.id)
        rows[proposer]["proposed"] = True
    afford = cfg.critique_tokens * cfg.token_price
    critics = [a for a in agents if a.name != proposer and budget[a.name] >= afford]
    replies = yield from open_floor(
        world, critics, lambda a: critique_prompt(v, cfg, budget[a.name]), schema=Critique,
        phase="critique", speech=lambda r: critique_text(r, v, "CRITIQUE"),
        max_tokens=cfg.critique_tokens, allowed={"option": v.choices}, vignette=v.id,
    )
    for r in replies:
        rows[r.agent]["parse_errors"] += flag_unreadable(world, v, r, "critique", "no critique posted")
        if critique_text(r, v, "CRITIQUE"):
            rows[r.agent]["critiqued"] = True
            message_tokens[r.agent] += r.tokens
            budget[r.agent] -= r.tokens * cfg.token_price


def baseline_interventions(
    world: World, cfg: AuctionConfig, v: Vignette, index: int, agents: list[LLMAgent],
    rows: dict[str, dict[str, Any]], message_tokens: dict[str, int],
) -> Process:
    """Phases 2-3 of the baselines: everyone proposes, then critiques or comments."""
    if cfg.mechanism == "free_discussion":
        proposals = yield from open_floor(
            world, agents, proposal_prompt(v, cfg), schema=Proposal, phase="proposal",
            speech=lambda r: proposal_text(r, v), max_tokens=cfg.proposal_tokens,
            allowed={"option": v.choices}, vignette=v.id,
        )
        phase, label = "critique", "CRITIQUE"
    else:
        proposals = yield from speaking_round(
            world, agents, proposal_prompt(v, cfg), round_index=index, policy="random",
            schema=Proposal, phase="proposal", speech=lambda r: proposal_text(r, v),
            max_tokens=cfg.proposal_tokens, allowed={"option": v.choices}, vignette=v.id,
        )
        phase, label = "discussion", "COMMENT"
    for r in proposals:
        rows[r.agent]["parse_errors"] += flag_unreadable(world, v, r, "proposal", "no proposal posted")
        if proposal_text(r, v):
            rows[r.agent]["proposed"] = True
            message_tokens[r.agent] += r.tokens
    comments = yield from open_floor(
        world, agents, critique_prompt(v, cfg), schema=Critique, phase=phase,
        speech=lambda r: critique_text(r, v, label), max_tokens=cfg.critique_tokens,
        allowed={"option": v.choices}, vignette=v.id,
    )
    for r in comments:
        rows[r.agent]["parse_errors"] += flag_unreadable(world, v, r, phase, f"no {phase} posted")
        if critique_text(r, v, label):
            rows[r.agent]["critiqued"] = True
            message_tokens[r.agent] += r.tokens


def vignette_record(
    world: World, cfg: AuctionConfig, index: int, v: Vignette, t0: float,
    rows: dict[str, dict[str, Any]], auction: Any, proposer: str | None, decision: Any,
    final: str | None, decided_by: str,
) -> dict[str, Any]:
    """One row of vignette_results."""
    rs = list(rows.values())
    privates = [r["private_correct"] for r in rs if r["private_correct"] is not None]
    bids = [r for r in world.state["bids"] if r["vignette_index"] == index and r["bid"] is not None]
    prow = rows.get(proposer) if proposer else None
    return {
        "mechanism": cfg.mechanism, "seed": world.seed, "vignette_index": index, "vignette_id": v.id,
        "title": v.title, "consensus": v.consensus, "decision": final, "correct": final == v.consensus,
        "decided_by": decided_by, "majority_reached": decision.reached,
        "votes_for_decision": decision.tally.get(final, 0) if final else 0,
        "abstentions": decision.n - sum(decision.tally.values()), "n_agents": len(rs),
        "proposer": proposer, "proposer_style": prow["communication_style"] if prow else None,
        "proposer_option": prow["private_option"] if prow else None,
        "proposer_correct": prow["private_option"] == v.consensus if prow else None,
        "winning_bid": prow["bid"] if prow else None,
        "price_paid": auction.price if auction is not None else None,
        "n_bids": len(bids) if auction is not None else 0,
        "n_late_bids": sum(not b["on_time"] for b in bids) if auction is not None else 0,
        "n_proposals": sum(r["proposed"] for r in rs), "n_critiques": sum(r["critiqued"] for r in rs),
        "participants": sum(r["participated"] for r in rs),
        "message_tokens": sum(r["message_tokens"] for r in rs),
        "token_cost": sum(r["token_cost"] for r in rs),
        "auction_payment": sum(r["bid_paid"] for r in rs),
        "total_cost": sum(r["total_cost"] for r in rs),
        "total_reward": sum(r["reward"] for r in rs),
        "private_accuracy": sum(privates) / len(privates) if privates else None,
        "t_start": t0, "t_end": world.now, "duration": world.now - t0,
    }
