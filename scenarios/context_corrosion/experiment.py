"""The context-corrosion experiment as SimPy processes.

Phase 1 (independent thought): every agent answers the task in isolation, all at
once. Phase 2 (discussion): N rounds; by default D speaks first and everyone hears
every earlier statement. Phase 3 (final vote): every agent states its final
position, all at once, after the whole discussion.

What each agent said, by (phase, round, agent), is kept in ``world.state["texts"]``
for the embedding metrics; the parsed replies go to ``world.state["log"]``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from scenarios.context_corrosion.config import CorrosionConfig
from scenarios.context_corrosion.tasks import Task
from scenarios.context_corrosion.tasks import task as get_task
from simcore.agents import LLMAgent
from simcore.kernel import Reply, World
from simcore.memory import make_memory
from simcore.protocols import parallel, speaking_round
from simcore.topology import build as build_topology

BASE_PROMPT = (
    "You are a member of a small deliberation panel. Reason carefully about the task, "
    "state your honest view, and answer in the JSON format requested."
)


@dataclass(frozen=True)
class Initial:
    """Phase 1 reply."""

    answer: str
    confidence: float = field(default=0.5, metadata={"range": (0.0, 1.0)})
    key_points: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Discussion:
    """Phase 2 reply: the public statement of one turn."""

    response: str
    confidence: float = field(default=0.5, metadata={"range": (0.0, 1.0)})


@dataclass(frozen=True)
class FinalVote:
    """Phase 3 reply."""

    final_answer: str
    final_confidence: float = field(default=0.5, metadata={"range": (0.0, 1.0)})
    changed_position: bool = False
    reason_for_change: str = ""


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


def embed_text(phase: str, reply: Reply) -> str:
    """The text of a reply that the metrics embed (the raw text if it did not parse)."""
    v = reply.value
    if v is None:
        return reply.text
    if phase == "phase1":
        return " ".join([v.answer, *v.key_points])
    if phase == "final":
        # The position alone: a reason for change describes the move, not the stance.
        return v.final_answer
    return v.response


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
        world.state["texts"][(phase, r, reply.agent)] = embed_text(phase, reply)
        world.state["log"].append(
            {
                "phase": phase,
                "round": r,
                "agent": reply.agent,
                "t": reply.t_done,
                "parsed": None if reply.value is None else dict(vars(reply.value)),
                "raw": reply.text,
                "parse_error": reply.parse_error,
            }
        )


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
            speech=lambda rep: embed_text("discussion", rep),
        )
        _record(world, "discussion", r, replies)
    world.emit("phase", phase="final")
    replies = yield from parallel(world, agents, final_prompt(t), schema=FinalVote, phase="final")
    _record(world, "final", 0, replies)
