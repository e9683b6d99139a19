"""The driver: concurrency, delivery order, simulated durations, failures, many worlds."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from backends.base import LLMResponse, Usage
from backends.stub import StubBackend
from simcore.api import LLMAgent, World
from simcore.sim import kernel
from simcore.sim.kernel import run_worlds, speaking_time
from simcore.sim.protocols import parallel, speaking_round
from tests.helpers import FailingBackend, ShuffledBackend, SlowBackend


@dataclass(frozen=True)
class Opinion:
    view: str
    confidence: float = 0.5


def make_world(backend, n=4, seed=3) -> tuple[World, list[LLMAgent]]:
    world = World(seed, backend, scenario="test")
    agents = [LLMAgent(world, f"A{i}", max_output_tokens=100) for i in range(n)]
    return world, agents


def two_phases(world, agents):
    yield from parallel(world, agents, "Opening view?", schema=Opinion, phase="open")
    for r in (1, 2):
        yield from speaking_round(world, agents, "Respond.", round_index=r, phase="talk")


def test_parallel_phase_has_every_call_in_flight_at_once():
    # All calls in flight together means the phase waits one latency, not one per
    # agent; counting them is exact, where a wall-clock bound flakes on a busy machine.
    backend = SlowBackend(latency=0.3)
    world, agents = make_world(backend, n=8)
    world.process(parallel(world, agents, "Go.", phase="p"))
    world.run()
    assert backend.calls == 8
    assert backend.max_in_flight == 8


def test_sequential_turns_run_one_at_a_time():
    backend = SlowBackend(latency=0.05)
    world, agents = make_world(backend, n=4)
    world.process(speaking_round(world, agents, "Talk.", round_index=1))
    world.run()
    assert backend.calls == 4
    assert backend.max_in_flight == 1


def test_delivery_order_is_creation_order_not_completion_order():
    """A backend with random delays gives the same trace as one without."""
    world_a, agents_a = make_world(StubBackend())
    world_a.process(two_phases(world_a, agents_a))
    world_a.run()

    shuffled = ShuffledBackend(seed=11)
    world_b, agents_b = make_world(shuffled)
    world_b.process(two_phases(world_b, agents_b))
    world_b.run()

    # the shuffled backend really completed the opening calls out of order
    opening = shuffled.completion_order[:4]
    assert opening != sorted(opening)
    assert world_a.trace.to_jsonl() == world_b.trace.to_jsonl()


def test_replies_take_simulated_time_from_the_duration_model():
    world, agents = make_world(StubBackend(), n=2)
    agents[1].speaking_rate = 2.0
    got = {}

    def proc(world):
        replies = yield from parallel(world, agents, "Go.", phase="p")
        got["replies"] = replies
        got["now"] = world.now

    world.process(proc(world))
    world.run()
    for agent, reply in zip(agents, got["replies"]):
        assert reply.t_asked == 0
        assert reply.t_done == pytest.approx(reply.usage.completion_tokens / agent.speaking_rate)
    # the parallel phase ends when the slowest speaker is done
    assert got["now"] == pytest.approx(max(r.t_done for r in got["replies"]))
    # trace: each reply event is stamped with its own delivery time
    reply_events = world.trace.of_kind("llm.reply")
    assert sorted(e.t for e in reply_events) == [e.t for e in reply_events]
    assert {e.t for e in reply_events} == {r.t_done for r in got["replies"]}


def test_custom_duration_model():
    world = World(1, StubBackend(), duration=lambda agent, response: 10.0)
    agent = LLMAgent(world, "X")

    def proc(world):
        yield agent.ask("a")
        yield agent.ask("b")

    world.process(proc(world))
    world.run()
    assert world.now == 20.0


def test_speaking_time_is_tokens_over_rate():
    world = World(1, StubBackend())
    agent = LLMAgent(world, "X", speaking_rate=5.0)
    response = LLMResponse("x" * 40, Usage(3, 10))
    assert speaking_time(agent, response) == 2.0
    # without usage, tokens are estimated at 4 characters each
    assert speaking_time(agent, LLMResponse("x" * 40)) == 2.0


def test_failed_call_fails_its_event_and_can_be_caught():
    world, agents = make_world(FailingBackend(["A1"]), n=3)
    outcome = {}

    def proc(world):
        try:
            yield from parallel(world, agents, "Go.", phase="p")
        except ConnectionError as exc:
            outcome["error"] = str(exc)
        reply = yield agents[0].ask("Still there?")
        outcome["after"] = reply.text

    world.process(proc(world))
    world.run()
    assert outcome["error"] == "simulated transport failure"
    assert outcome["after"]
    errors = world.trace.of_kind("llm.error")
    assert [e.agent for e in errors] == ["A1"]
    assert world.usage["stub"]["errors"] == 1


def test_uncaught_failure_stops_the_world():
    world, agents = make_world(FailingBackend(["A0"]), n=1)
    world.process(parallel(world, agents, "Go.", phase="p"))
    with pytest.raises(ConnectionError):
        world.run()


def test_many_worlds_share_one_loop_concurrently():
    backend = SlowBackend(latency=0.3)
    worlds = []
    for seed in range(6):
        world, agents = make_world(backend, n=3, seed=seed)
        world.process(parallel(world, agents, "Go.", phase="p"))
        worlds.append(world)
    asyncio.run(run_worlds(worlds))
    assert backend.calls == 18
    assert backend.max_in_flight == 18  # every world's calls overlap


def test_per_agent_backend_is_used():
    other = SlowBackend(latency=0.0)
    world, agents = make_world(StubBackend(), n=2)
    agents[1].backend = other
    world.process(parallel(world, agents, "Go.", phase="p"))
    world.run()
    assert other.calls == 1


def test_schema_replies_are_parsed_and_bad_ones_flagged():
    world, agents = make_world(StubBackend(malformed_rate=0.5), n=12)
    got = {}

    def proc(world):
        got["replies"] = yield from parallel(world, agents, "Go.", schema=Opinion, phase="p")

    world.process(proc(world))
    world.run()
    replies = got["replies"]
    bad = [r for r in replies if r.parse_error]
    good = [r for r in replies if not r.parse_error]
    assert bad and good
    assert all(isinstance(r.value, Opinion) for r in good)
    assert all(r.value is None and r.text for r in bad)
    flagged = [e for e in world.trace.of_kind("llm.reply") if e.payload.get("parse_error")]
    assert len(flagged) == len(bad)


def test_agents_are_mesa_agents_in_an_agentset():
    import mesa

    world, agents = make_world(StubBackend(), n=3)
    assert isinstance(world, mesa.Model)
    assert all(isinstance(a, mesa.Agent) for a in agents)
    assert [a.name for a in world.agents] == ["A0", "A1", "A2"]
    with pytest.raises(ValueError, match="already taken"):
        LLMAgent(world, "A0")


@pytest.mark.parametrize("read_first", [False, True])
def test_mesa_agent_sets_hold_every_agent_in_creation_order(read_first):
    # The world fills Mesa's AgentSets on first use; before and after, they say what Mesa's would.
    import mesa

    world, agents = make_world(StubBackend(), n=3)
    if read_first:
        assert len(world.agents) == 3
    agents[1].remove()  # Mesa's Agent.remove deregisters
    LLMAgent(world, "late")
    assert [a.name for a in world.agents] == ["A0", "A2", "late"]
    assert world.agent_types == [LLMAgent]
    assert [a.name for a in world.agents_by_type[LLMAgent]] == ["A0", "A2", "late"]
    assert list(world._agents) == list(world.agents)  # Mesa's hard references agree
    LLMAgent(world, "later")  # sets already made are kept up to date
    assert [a.name for a in world.agents][-1] == "later"
    with pytest.raises(AttributeError, match="used by Mesa itself"):
        world.agents = []
    assert isinstance(world.agents, mesa.agent.AgentSet)


def test_agent_params_are_a_dict_of_their_own():
    world, _ = make_world(StubBackend(), n=0)
    given = {"style": "terse"}
    a, b = LLMAgent(world, "A", params=given), LLMAgent(world, "B")
    assert a.params == given and a.params is not given and b.params == {}
    b.params["x"] = 1
    assert b.params == {"x": 1} and LLMAgent(world, "C").params == {}
    b.params = {"y": 2}
    assert b.params == {"y": 2}


def test_intervention_hooks_alter_requests_responses_delays_and_order():
    from simcore.sim.kernel import Intervention

    class Perturb(Intervention):
        def request(self, agent, request, fields):
            if agent.name == "A1":
                from dataclasses import replace
                return replace(request, max_tokens=7)
            return request

        def response(self, call, response):
            if call.agent.name == "A1":
                return ConnectionError("injected")
            return response

        def delay(self, call, delay):
            return delay + 100.0 if call.agent.name == "A0" else delay

        def order(self, phase, round_index, agents):
            return list(reversed(agents))[:-1]  # reverse and drop the last turn

    world = World(1, StubBackend(), intervention=Perturb())
    agents = [LLMAgent(world, f"A{i}", max_output_tokens=50) for i in range(3)]
    out = {}

    def proc(world):
        try:
            yield from speaking_round(world, agents, "Talk.", round_index=1)
        except ConnectionError as exc:
            out["error"] = str(exc)
        out["order"] = [m.speaker for m in world.board.messages]
        reply = yield agents[0].ask("again")
        out["a0"] = reply

    world.process(proc(world))
    world.run()
    calls = world.trace.of_kind("llm.call")
    # reversed and the last turn (A0) dropped; A1's call failed by injection
    assert [c.agent for c in calls] == ["A2", "A1", "A0"]
    assert calls[1].payload["max_tokens"] == 7 and calls[0].payload["max_tokens"] == 50
    assert out["error"] == "injected" and out["order"] == ["A2"]
    assert out["a0"].t_done - out["a0"].t_asked >= 100.0


def test_worlds_are_not_pinned_by_mesa_after_running_or_release():
    import gc
    import weakref

    import mesa

    ran = make_world(StubBackend(), n=2)[0]
    ran.run()
    built = make_world(StubBackend(), n=2)[0]
    assert built in mesa.Agent._ids  # Mesa registers every model it sees
    built.release()
    assert ran not in mesa.Agent._ids and built not in mesa.Agent._ids
    refs = [weakref.ref(ran), weakref.ref(built)]
    del ran, built
    gc.collect()
    assert [r() for r in refs] == [None, None]


def test_many_calls_of_one_instant_go_in_slices_in_creation_order(monkeypatch):
    monkeypatch.setattr(kernel, "DISPATCH_SLICE", 3)
    sizes = []

    class Counting(StubBackend):
        async def complete_batch(self, requests):
            sizes.append(len(requests))
            return await super().complete_batch(requests)

    def trace_of(backend):
        world = World(2, backend)
        agents = [LLMAgent(world, f"a{i}") for i in range(8)]
        world.process(parallel(world, agents, "Hi."))
        world.run()
        return world.trace.to_jsonl()

    sliced = trace_of(Counting())
    assert sizes == [3, 3, 2]
    monkeypatch.setattr(kernel, "DISPATCH_SLICE", 4096)
    assert trace_of(StubBackend()) == sliced


def test_an_answered_call_releases_its_request():
    world, agents = make_world(StubBackend(), n=2)
    calls = []

    def run(world):
        calls.extend(a.ask("Hi.", phase="p") for a in agents)
        assert all(c.request is not None for c in calls)
        yield world.all_of(calls)

    world.process(run(world))
    world.run()
    assert [c.request for c in calls] == [None, None]
    assert all(c.ok and c.value.digest == c.digest for c in calls)


def test_equal_structural_fields_are_one_dict():
    world, agents = make_world(StubBackend(), n=3)
    a = world.shared_fields({"phase": "talk", "round": 1})
    assert world.shared_fields({"phase": "talk", "round": 1}) is a
    for other in ({"phase": "talk", "round": True}, {"phase": "talk", "round": 1.0}, {"round": 1, "phase": "talk"}):
        assert world.shared_fields(dict(other)) is not a  # other types, or another order, stay apart
    zero, minus_zero = {"x": 0.0}, {"x": -0.0}  # equal, but written apart: floats are never shared
    assert world.shared_fields(zero) is zero and world.shared_fields(minus_zero) is minus_zero
    unhashable = {"phase": "talk", "tags": ["x"]}
    assert world.shared_fields(unhashable) is unhashable
    calls = [ag.ask("Hi", phase="open", round=2) for ag in agents]
    assert len({id(c.fields) for c in calls}) == 1 and calls[0].fields == {"phase": "open", "round": 2}
    msgs = [ag.say("x", phase="open", round=2) for ag in agents]
    assert all(m.fields is calls[0].fields for m in msgs)


def test_shared_fields_stop_growing_at_their_cap(monkeypatch):
    world, _ = make_world(StubBackend(), n=1)
    monkeypatch.setattr(World, "SHARED_FIELDS", 2)
    kept = [world.shared_fields({"turn": i}) for i in range(4)]
    assert world.shared_fields({"turn": 1}) is kept[1]
    assert world.shared_fields({"turn": 3}) is not kept[3]  # past the cap: returned, not kept


def _condition_join(env, events):
    """What World.all_of was: SimPy's Condition, then an event with the values in order."""
    events = list(events)
    done = env.event()

    def finish(cond):
        if cond.ok:
            done.succeed([e.value for e in events])
        else:
            cond.defused = True
            done.fail(cond.value)

    env.all_of(events).callbacks.append(finish)
    return done


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.booleans()), max_size=6), st.integers(0, 3),
       st.lists(st.integers(0, 4), max_size=4))
def test_all_of_steps_exactly_like_simpys_condition(specs, ready_at, others):
    # Events that end at equal times, some failing, some processed before the join is made,
    # and bystander processes at the same instants: the log of who ran when is the same.
    def run(join):
        world = World(1, StubBackend())
        env, log = world.env, []

        def ender(i, delay, fails):
            yield env.timeout(delay)
            log.append((env.now, "end", i))
            if fails:
                raise RuntimeError(f"event {i}")
            return i

        def bystander(k, delay):
            yield env.timeout(delay)
            for step in range(4):  # zero-delay steps at one instant: they interleave with the join's hops
                log.append((env.now, "bystander", k, step))
                yield env.timeout(0)

        def waiter():
            procs = [env.process(ender(i, d, f)) for i, (d, f) in enumerate(specs)]
            yield env.timeout(ready_at)  # some have ended (and been processed) by now
            try:
                values = yield join(world, procs)
                log.append((env.now, "joined", tuple(values)))
            except RuntimeError as exc:
                log.append((env.now, "failed", str(exc)))

        for k, d in enumerate(others):
            env.process(bystander(k, d))
        env.process(waiter())
        try:
            env.run()
        except RuntimeError as exc:  # a second failure nobody waits for crashes the clock, in both
            log.append((env.now, "crashed", str(exc)))
        return log

    assert run(lambda w, evs: w.all_of(evs)) == run(lambda w, evs: _condition_join(w.env, evs))


def test_all_of_refuses_events_of_another_clock_before_it_waits_on_any():
    world, other = World(1, StubBackend()), World(2, StubBackend())
    mine = world.env.event()
    with pytest.raises(ValueError, match="^all_of: "):
        world.all_of([mine, other.env.event()])
    assert mine.callbacks == []  # nothing was hung on the events it was given
