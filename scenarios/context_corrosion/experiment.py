"""The context-corrosion experiment as SimPy processes.

Phase 1 (independent thought): every agent answers the task in isolation, all at
once. Phase 2 (discussion): N rounds; by default D speaks first and everyone hears
every earlier statement. Phase 3 (final vote): every agent states its final
position, all at once, after the whole discussion.

What each agent said, by (phase, round, agent), is kept in ``world.state["texts"]``
for the embedding metrics; the parsed replies go to ``world.state["log"]``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from scenarios.context_corrosion.config import CorrosionConfig
from scenarios.context_corrosion.tasks import Task
from scenarios.context_corrosion.tasks import task as get_task
from simcore.api import (
    LLMAgent,
    Reply,
    World,
    confidence,
    flag,
    make_memory,
    parallel,
    speaking_round,
    text,
    text_list,
)
from simcore.api import build as build_topology

BASE_PROMPT = (
    "You are a member of a small deliberation panel. Reason carefully about the task, "
    "state your honest view, and answer in the JSON format requested."
)


@dataclass(frozen=True, kw_only=True)
class Initial:
    """Phase 1 reply."""

    KIND: ClassVar[str] = "initial"
    answer: str = text("position", "verdict")
    confidence: float | None = confidence()
    key_points: list[str] | None = text_list("key points", "points", "arguments")


@dataclass(frozen=True, kw_only=True)
class Discussion:
    """Phase 2 reply: the public statement of one turn."""

    KIND: ClassVar[str] = "discussion"
    SPOKEN: ClassVar[bool] = True  # said to the others: "you" in it are they, not this agent
    response: str = text("statement", "position", "answer")
    confidence: float | None = confidence()


@dataclass(frozen=True, kw_only=True)
class FinalVote:
    """Phase 3 reply."""

    KIND: ClassVar[str] = "final_vote"
    final_answer: str = text("final position", "answer", "position", "vote")
    final_confidence: float | None = confidence("final confidence", "confidence")
    changed_position: bool | None = flag("changed", "position changed")
    reason_for_change: str | None = text("reason", "reason for change", required=False)


def system_prompt(t: Task, dominant: bool, biased: bool) -> str:
    """The shared base prompt; D gets the biased framing in run A and nothing else differs."""
    if dominant and biased:
        return f"{BASE_PROMPT}\n\nBackground you have been given: {t.framing}"
    return BASE_PROMPT


def initial_prompt(t: Task) -> str:
    return (
        f"Task: {t.title}\n{t.description}\n\nThink independently. Reply with JSON: "
        '{"answer": str, "confidence": number 0-1, "key_points": [str, ...]}'
    )


def discussion_prompt(t: Task, r: int) -> str:
    return (
        f"Task: {t.title}\n{t.description}\n\nThis is discussion round {r}. Respond to the "
        'discussion and state your current position. Reply with JSON: {"response": str, '
        '"confidence": number 0-1}'
    )


def final_prompt(t: Task) -> str:
    return (
        f"Task: {t.title}\n{t.description}\n\nThe discussion is over. Cast your final "
        'position. Reply with JSON: {"final_answer": str, "final_confidence": number 0-1, '
        '"changed_position": bool, "reason_for_change": str}'
    )


def embed_text(phase: str, reply: Reply) -> str | None:
    """The text of a reply that the metrics embed; None when the reply is unreadable.

    An unreadable reply never stands in for the agent's position: the metrics
    leave that agent out at that stage and say so (see :mod:`.analysis`).
    """
    v = reply.value
    if v is None:
        return None
    # The same field at every phase: the position as the agent states it (the answer, the
    # turn's statement, the final answer), never key points or a reason for change, so
    # that every distance compares like with like.
    if phase == "phase1":
        return v.answer
    if phase == "final":
        return v.final_answer
    return v.response


def speech(reply: Reply) -> str:
    """What a discussion turn posts: the statement, or the raw reply when it is unreadable
    (the others hear what was said either way; only the metrics leave it out)."""
    return reply.value.response if reply.value is not None else reply.text.strip()


def agent_names(cfg: CorrosionConfig) -> list[str]:
    """D first, then P1..Pn."""
    return ["D"] + [f"P{i}" for i in range(1, cfg.n_peers + 1)]


def build(world: World, cfg: CorrosionConfig) -> None:
    """Create D and the peers, the topology, and start the experiment process."""
    t = get_task(cfg.task)
    memory = make_memory(cfg.memory)
    for name in agent_names(cfg):
        dominant = name == "D"
        LLMAgent(
            world,
            name,
            role="dominant" if dominant else "peer",
            persona=system_prompt(t, dominant, cfg.biased),
            temperature=cfg.temperature,
            max_output_tokens=cfg.dominant_tokens if dominant else cfg.peer_tokens,
            memory=memory,
        )
    world.set_topology(build_topology(cfg.topology, agent_names(cfg), world.seed))
    world.state.update(texts={}, log=[])
    world.process(experiment(world, cfg, t))


def _record(world: World, phase: str, r: int, replies: list[Reply]) -> None:
    for reply in replies:
        embedded = embed_text(phase, reply)
        if embedded is not None:
            world.state["texts"][(phase, r, reply.agent)] = embedded
        world.state["log"].append(reply_record(phase, r, reply))


def reply_record(phase: str, r: int, reply: Reply) -> dict[str, Any]:
    """One reply as the output files keep it: what was read, how, and the raw text."""
    reading = reply.reading
    return {
        "phase": phase,
        "round": r,
        "agent": reply.agent,
        "t": reply.t_done,
        "parsed": None if reply.value is None else dict(vars(reply.value)),
        "raw": reply.text,
        "parse_error": reply.parse_error,
        "read": None if reading is None else reading.how,
        "truncated": reply.finish_reason == "length",
        "issues": [] if reading is None else list(reading.errors),
        "earlier_attempts": [a.text for a in reply.attempts],
        # Unreadable: the statement is still posted (what was said), but no metric uses it.
        "handling": None if not reply.parse_error else "left out of every metric",
    }


def experiment(world: World, cfg: CorrosionConfig, t: Task) -> Any:
    """The three phases, in simulated time."""
    agents = [world.by_name[n] for n in agent_names(cfg)]
    world.emit("phase", payload={"task": t.title}, phase="phase1")
    replies = yield from parallel(
        world, agents, initial_prompt(t), schema=Initial, phase="phase1", history=False
    )
    _record(world, "phase1", 0, replies)
    for r in range(1, cfg.rounds + 1):
        world.emit("phase", phase="discussion", round=r)
        replies = yield from speaking_round(
            world,
            agents,
            discussion_prompt(t, r),
            round_index=r,
            policy=cfg.order,
            schema=Discussion,
            phase="discussion",
            speech=speech,
        )
        _record(world, "discussion", r, replies)
    world.emit("phase", phase="final")
    replies = yield from parallel(world, agents, final_prompt(t), schema=FinalVote, phase="final")
    _record(world, "final", 0, replies)
