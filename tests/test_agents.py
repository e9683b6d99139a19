"""LLM agents: asking, and re-asking a reply that cannot be read, in the same turn."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from backends.base import LLMRequest, LLMResponse, Usage
from simcore.api import LLMAgent, World
from simcore.replies.schema import choice, likert, text
from simcore.sim.protocols import parallel


@dataclass(frozen=True, kw_only=True)
class Move:
    KIND: ClassVar[str] = "decision"
    reasoning: str | None = text(required=False)
    action: str = choice("COOPERATE", "DEFECT")


class Scripted:
    """Answers each attempt of a turn from a script: attempt k gets ``script[k]`` (text, finish)."""

    name = "scripted"

    def __init__(self, script: list[tuple[str, str]], usage: Usage | None = None) -> None:
        self.script = script
        self.usage = usage or Usage(10, 5)
        self.requests: list[LLMRequest] = []

    async def complete(self, request: LLMRequest) -> LLMResponse:
        self.requests.append(request)
        k = min(int(request.metadata.get("reask", 0)), len(self.script) - 1)
        body, finish = self.script[k]
        return LLMResponse(body, self.usage, finish)


def run_turn(backend: Scripted, reask: int, n: int = 1):
    world = World(1, backend, scenario="test", reask=reask, reask_max_tokens=100)
    agents = [LLMAgent(world, f"A{i}", max_output_tokens=30) for i in range(n)]
    got = {}

    def proc():
        got["replies"] = yield from parallel(world, agents, "Your move?", schema=Move, phase="decision")

    world.process(proc())
    world.run()
    return world, got["replies"]


def test_an_unreadable_reply_is_reasked_quoting_it_and_the_problem():
    backend = Scripted([("I am thinking about it.", "stop"), ('{"action": "DEFECT"}', "stop")])
    world, [reply] = run_turn(backend, reask=1)
    assert reply.value.action == "DEFECT" and not reply.parse_error
    assert [a.text for a in reply.attempts] == ["I am thinking about it."]
    first, again = backend.requests
    assert again.messages[:-2] == first.messages
    assert again.messages[-2].role == "assistant" and again.messages[-2].content == "I am thinking about it."
    assert "could not be read" in again.messages[-1].content and '"action"' in again.messages[-1].content
    assert again.metadata["reask"] == 1 and again.max_tokens == first.max_tokens
    calls = world.trace.of_kind("llm.call")
    assert [e.fields.get("reask") for e in calls] == [None, 1]
    replies = list(world.trace.of_kind("llm.reply"))
    assert replies[0].payload["parse_error"] and "read" not in replies[1].payload
    q = world.parse_quality.to_dict()["decision"]
    assert (q["replies"], q["json"], q["unreadable"], q["reasked"]) == (1, 1, 0, 1)


def test_no_reask_without_permission_and_still_unreadable_after_the_limit():
    backend = Scripted([("hmm", "stop")])
    world, [reply] = run_turn(backend, reask=0)
    assert reply.parse_error and reply.value is None and len(backend.requests) == 1
    backend = Scripted([("hmm", "stop")])
    world, [reply] = run_turn(backend, reask=2)
    assert reply.parse_error and len(backend.requests) == 3 and len(reply.attempts) == 2
    q = world.parse_quality.to_dict()["decision"]
    assert (q["replies"], q["unreadable"], q["reasked"]) == (1, 1, 1)


def test_a_cut_reply_is_reasked_with_a_doubled_budget_up_to_the_cap():
    cut = ('{"reasoning": "They cooperated twice and', "length")
    backend = Scripted([cut, cut, ('{"action": "COOPERATE"}', "stop")])
    world, [reply] = run_turn(backend, reask=2)
    assert reply.value.action == "COOPERATE"
    assert [r.max_tokens for r in backend.requests] == [30, 60, 100]  # doubled, then capped at 100
    assert "cut off" in backend.requests[1].messages[-1].content
    q = world.parse_quality.to_dict()["decision"]
    assert (q["truncated"], q["salvaged"], q["reasked"], q["json"]) == (1, 0, 1, 1)


def test_a_cut_reply_with_its_fields_complete_is_salvaged_not_reasked():
    backend = Scripted([('{"action": "DEFECT", "reasoning": "because they', "length")])
    world, [reply] = run_turn(backend, reask=1)
    assert reply.value.action == "DEFECT" and reply.reading.salvaged and len(backend.requests) == 1
    assert world.trace.of_kind("llm.reply")[0].payload["salvaged"] is True


def test_reasks_are_part_of_the_turn_in_simulated_time():
    backend = Scripted([("no idea", "stop"), ('{"action": "DEFECT"}', "stop")])
    world, replies = run_turn(backend, reask=1, n=3)
    for reply in replies:
        assert reply.t_done > reply.attempts[0].t_done >= reply.attempts[0].t_asked == 0.0


@dataclass(frozen=True, kw_only=True)
class TwoRatings:
    KIND: ClassVar[str] = "rating"
    reasoning: str | None = text(required=False)
    fairness: int = likert("fairness")
    growth: int = likert("growth")


def test_a_reply_missing_one_field_keeps_the_other_and_the_reask_asks_for_the_missing_one_only():
    backend = Scripted([('{"reasoning": "Floors protect.", "fairness": "agree", "growth": "somewhat agree"}', "stop"),
                        ('{"growth": "disagree"}', "stop")])
    world = World(1, backend, scenario="test", reask=1)
    agent = LLMAgent(world, "A0")
    got = {}

    def proc():
        got["reply"] = yield agent.ask("Rate both.", schema=TwoRatings, phase="rating")

    world.process(proc())
    world.run()
    first = got["reply"].attempts[0].reading
    assert first.fields == {"reasoning": "Floors protect.", "fairness": 3} and first.kept_some
    assert [(f.field, f.raw) for f in first.flags] == [("growth", "somewhat agree")]
    ask = backend.requests[1].messages[-1].content
    assert "gave reasoning, fairness, but not growth" in ask and ask.endswith('{"growth": label}')
    assert "fairness\": label" not in ask
    reply = got["reply"]
    assert reply.value == TwoRatings(reasoning="Floors protect.", fairness=3, growth=2) and not reply.parse_error
    q = world.parse_quality.to_dict()["rating"]
    assert (q["replies"], q["json"], q["unreadable"], q["partial"], q["reasked"]) == (1, 1, 0, 0, 1)


def test_an_echo_of_the_prompt_is_flagged_as_an_echo_and_counted_as_one():
    prompt = ("You are playing one game of the prisoner's dilemma. Payoffs per game (you, opponent): "
              "both cooperate 3, 3; both defect 1, 1. Reply with JSON: {\"action\": \"COOPERATE\" or \"DEFECT\"}")
    backend = Scripted([("You are playing one game of the prisoner's dilemma. Payoffs per game (you, opponent): "
                         "both cooperate 3,", "length")])
    world = World(1, backend, scenario="test")
    agent = LLMAgent(world, "A0")
    got = {}

    def proc():
        got["reply"] = yield agent.ask(prompt, schema=Move, phase="decision")

    world.process(proc())
    world.run()
    assert got["reply"].parse_error and got["reply"].reading.echo
    q = world.parse_quality.to_dict()["decision"]
    assert (q["unreadable"], q["echo"], q["partial"]) == (1, 1, 0)
    assert "repeats what it was given" in world.trace.of_kind("llm.reply")[0].payload["why"]


def test_an_empty_reply_is_reasked_without_an_empty_assistant_message():
    # Claude may refuse with no content at all; the Messages API refuses an empty message.
    backend = Scripted([("", "content_filter"), ('{"action": "DEFECT"}', "stop")])
    world, [reply] = run_turn(backend, reask=1)
    first, again = backend.requests
    assert reply.value.action == "DEFECT"
    assert again.messages[:-1] == first.messages and again.messages[-1].role == "user"
    assert all(m.content.strip() for m in again.messages)


def test_a_reply_cut_by_its_reasoning_is_counted_apart_and_reasked_with_room_to_reason():
    backend = Scripted([("", "reasoning"), ("", "reasoning"), ('{"action": "COOPERATE"}', "stop")],
                       usage=Usage(10, 3000, 3000))
    world, [reply] = run_turn(backend, reask=2)
    assert reply.value.action == "COOPERATE"
    first, second, third = backend.requests
    assert first.reasoning_tokens is None and (second.reasoning_tokens, third.reasoning_tokens) == (6000, 12000)
    assert [r.max_tokens for r in backend.requests] == [30, 30, 30]  # the answer's budget is unchanged
    assert "thinking" in second.messages[-1].content and second.messages[-2].role == "user"
    assert reply.attempts[0].reading.reasoning_cut and not reply.attempts[0].reading.readable
    q = world.parse_quality.to_dict()["decision"]
    assert (q["reasoning_cut"], q["unreadable"], q["json"], q["reasked"]) == (0, 0, 1, 1)
    backend = Scripted([("", "reasoning")], usage=Usage(10, 3000, 3000))
    world, [reply] = run_turn(backend, reask=0)
    q = world.parse_quality.to_dict()["decision"]
    assert (q["reasoning_cut"], q["unreadable"]) == (1, 0) and reply.parse_error
    assert "cut off by its own reasoning" in world.trace.of_kind("llm.reply")[0].payload["why"]
