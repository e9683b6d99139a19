"""The kernel: a Mesa model on a SimPy clock, with LLM calls as SimPy events.

Scenario logic is written as SimPy processes. ``agent.ask(...)`` returns an
:class:`LLMCall` event at once and queues its request; the driver
(:meth:`World.run_async`) co-schedules SimPy and asyncio:

1. process every SimPy event due at the current instant;
2. if requests are outstanding, await them all concurrently, then deliver each
   result in request-creation order (never completion order), each scheduled
   ``duration(agent, reply)`` simulated seconds later;
3. otherwise advance SimPy to its next event, and stop when none is left.

So requests made at the same simulated instant run concurrently, dependent turns
run in sequence, and the trace never depends on network timing. The kernel does no
I/O and draws no randomness: the backend does the former, named streams
(:mod:`simcore.base.rng`) the latter.
"""

from __future__ import annotations

import asyncio
import json
import math
from typing import (
    TYPE_CHECKING,
    Any,
    Callable,
    Generator,
    Iterable,
    Mapping,
    NamedTuple,
    Sequence,
)

import mesa
import simpy
from simpy.events import NORMAL, PENDING

from backends.base import (
    Backend,
    LLMRequest,
    LLMResponse,
    Usage,
    complete_all,
    estimate_tokens,
)
from simcore.base.rng import Streams
from simcore.replies.quality import ParseQuality
from simcore.replies.reading import Reading, read_reply
from simcore.replies.schema import reply_kind
from simcore.sim import collector
from simcore.sim.fitting import Fitter, Trim
from simcore.sim.messages import Board
from simcore.sim.trace import Fields, StreamedTrace, Trace

if TYPE_CHECKING:
    import networkx as nx

    from simcore.sim.agents import LLMAgent

Process = Generator[simpy.Event, Any, Any]

#: Value types of structural fields that :meth:`World.shared_fields` shares.
_SHAREABLE = frozenset({str, int, bool, type(None)})

#: The most calls of one instant sent to the backend together; more go in
#: successive slices (delivery order and the trace are the same either way).
DISPATCH_SLICE = 4096


class Reply(NamedTuple):
    """What an :class:`LLMCall` delivers (a named tuple: one is built per call).

    Attributes:
        agent: Name of the agent that asked.
        text: Raw completion text.
        value: The reply read into its schema, or None (no schema, or unreadable).
        parse_error: True when a schema was asked for and the reply is unreadable.
        usage: Token usage, or None when the backend did not report it.
        finish_reason: As reported by the backend.
        t_asked: Simulated time of the request.
        t_done: Simulated time of delivery.
        digest: sha256 of the canonical request.
        reading: How the reply was read (:class:`~simcore.replies.reading.Reading`), or
            None when no schema was asked for.
        attempts: Earlier replies of the same turn that were re-asked, oldest first.
    """

    agent: str
    text: str
    value: Any
    parse_error: bool
    usage: Usage | None
    finish_reason: str
    t_asked: float
    t_done: float
    digest: str
    reading: Reading | None = None
    attempts: tuple["Reply", ...] = ()

    @property
    def tokens(self) -> int:
        """Completion tokens, estimated from the text when usage is missing."""
        return completion_tokens(self.usage, self.text)


def completion_tokens(usage: Usage | None, text: str) -> int:
    """Completion tokens as reported, or estimated from the text (at least 1) when usage is missing."""
    return usage.completion_tokens if usage is not None else max(1, estimate_tokens(text))


def speaking_time(agent: "LLMAgent", response: LLMResponse) -> float:
    """Default duration model: completion tokens / the agent's speaking rate.

    ``agent.speaking_rate`` is in tokens per simulated second (default 4, about
    three spoken words a second), so an 800-token turn lasts 200 simulated seconds.
    """
    return completion_tokens(response.usage, response.text) / agent.speaking_rate


DurationModel = Callable[["LLMAgent", LLMResponse], float]


class Intervention:
    """Hooks through which a perturbation study alters a run; identity by default.

    Subclass and override what you need. The kernel consults a world's
    intervention (if any) when a request is made, when its response arrives,
    when the reply's simulated duration is set, when a speaking order is drawn
    (:func:`simcore.sim.protocols.speaking_order`) and when an agent posts a message
    (:meth:`simcore.sim.agents.LLMAgent.say`). Interventions are deterministic
    functions of their arguments, so a perturbed run replays like any other.
    They are not traced; :meth:`describe` is what run records keep of them.
    """

    def describe(self) -> str | None:
        """A spec that rebuilds this intervention (recorded in the run's manifest), or None."""
        return None

    def request(self, agent: "LLMAgent", request: LLMRequest, fields: Mapping[str, Any]) -> LLMRequest:
        """Change a request before it is sent (e.g. its token budget)."""
        return request

    def response(
        self, call: "LLMCall", response: LLMResponse | BaseException
    ) -> LLMResponse | BaseException:
        """Change a response before it is parsed; return an exception to fail the call."""
        return response

    def delay(self, call: "LLMCall", delay: float) -> float:
        """Change a reply's simulated duration."""
        return delay

    def order(self, phase: str, round_index: int, agents: list["LLMAgent"]) -> list["LLMAgent"]:
        """Change a speaking order (swap, drop a turn)."""
        return agents

    def message(self, agent: "LLMAgent", text: str, fields: Mapping[str, Any]) -> str:
        """Change a public message before it is posted (replace, truncate, blank, inject)."""
        return text


class LLMCall(simpy.Event):
    """A pending LLM request, as a SimPy event that succeeds with a :class:`Reply`.

    ``request`` is released (set to None) once the call is answered: a million
    answered calls waiting for the rest of their round need not hold a million
    prompts. Keep a reference of your own to read it later.
    """

    __slots__ = ("agent", "request", "schema", "fields", "digest", "t_asked", "allowed", "reask_of", "instruction",
                 "trim")

    def __init__(
        self,
        world: "World",
        agent: "LLMAgent",
        request: LLMRequest,
        schema: type | None,
        fields: Mapping[str, Any],
        allowed: Mapping[str, Any] | None = None,
        reask_of: Reply | None = None,
        instruction: str = "",
    ) -> None:
        super().__init__(world.env)
        self.agent = agent
        self.request = request
        self.schema = schema
        self.fields = fields
        self.allowed = allowed
        self.reask_of = reask_of
        self.instruction = instruction
        self.digest = request.digest()
        self.t_asked = world.env.now
        self.trim: Trim | None = None  # how to shorten the prompt to fit a context window (simcore.sim.fitting)
        # First callback, so the reply is traced before any process resumes on it; the
        # world's one bound method and a list of one (not a new method and a list of four).
        self.callbacks = [world._trace_delivery]

    def _deliver(self, reply: Reply, delay: float) -> None:
        # Same mechanism as simpy.Timeout: mark triggered, schedule in the future.
        self._ok = True
        self._value = reply
        self.env.schedule(self, NORMAL, delay)


class World(mesa.Model):
    """A simulation: Mesa agents, a SimPy clock, a topology, a trace and a backend.

    Args:
        seed: The run seed; every random stream derives from it.
        backend: Default backend for agents that have none of their own.
        scenario: Scenario name, recorded in request metadata.
        model_name: Default LLM model for agents that name none.
        topology: Who hears whom (edge u->v: v hears u); None means everyone.
        duration: Simulated duration of a delivered reply.
        intervention: Perturbation hooks, or None for a clean run.
        reask: Re-asks per turn for a reply that cannot be read (see
            :meth:`simcore.sim.agents.LLMAgent.ask`).
        reask_max_tokens: The largest token budget a re-ask of a cut reply gets.
        fit: Fits requests to the models' context windows (:mod:`simcore.sim.fitting`),
            or None to send them as asked.
    """

    def __init__(
        self,
        seed: int,
        backend: Backend,
        *,
        scenario: str = "",
        model_name: str = "stub",
        topology: "nx.DiGraph | None" = None,
        duration: DurationModel = speaking_time,
        intervention: Intervention | None = None,
        reask: int = 0,
        reask_max_tokens: int = 2048,
        fit: Fitter | None = None,
    ) -> None:
        self.streams = Streams(seed)
        super().__init__(rng=self.streams.numpy("mesa"))
        self.seed = seed
        self.backend = backend
        self.scenario = scenario
        self.model_name = model_name
        self.env = simpy.Environment()
        self.trace: Trace | StreamedTrace = Trace()
        self.board = Board(topology)
        self.duration = duration
        self.intervention = intervention
        self.reask = reask
        self.reask_max_tokens = reask_max_tokens
        self.fit = fit
        self.parse_quality = ParseQuality()
        self.usage: dict[str, dict[str, int]] = {}
        self.latency_s: dict[str, float] = {}  # wall-clock, per model; never traced
        self.by_name: dict[str, LLMAgent] = {}
        self.state: dict[str, Any] = {}
        self._pending: list[LLMCall] = []
        self._trace_delivery = self._on_delivered
        self._fields: dict[tuple, dict[str, Any]] = {}

    # -- Mesa's agent registry ---------------------------------------------
    # Mesa registers each agent in two weakly keyed AgentSets (all agents, and by
    # type) as it is built: two weak references, about 220 bytes and a microsecond an
    # agent, that a million-agent world need not pay before anyone asks. A world keeps
    # Mesa's hard references as agents are built and fills those sets, in creation
    # order, the first time they are read; from then on agents register as in Mesa.
    # NOTE: register_agent, deregister_agent and _agent_sets write Mesa's private
    # ``Model._agents`` (its hard references) for performance at a million agents:
    # Mesa's own code inlined here, which is why setup.cfg pins mesa below 3.4.
    _agent_sets_ready = False

    def register_agent(self, agent: mesa.Agent) -> None:
        """Register ``agent`` (called by ``mesa.Agent.__init__``)."""
        if self._agent_sets_ready:
            super().register_agent(agent)
        else:
            self._agents[agent] = None

    def deregister_agent(self, agent: mesa.Agent) -> None:
        """Deregister ``agent`` (called by ``mesa.Agent.remove``)."""
        if self._agent_sets_ready:
            super().deregister_agent(agent)
        else:
            del self._agents[agent]

    def _agent_sets(self) -> None:
        if not self._agent_sets_ready:
            self._agent_sets_ready = True
            for agent in self._agents:
                super().register_agent(agent)  # (sets the hard reference again: no change)

    @property
    def agents(self) -> mesa.agent.AgentSet:
        """Every agent, in creation order (Mesa's AgentSet)."""
        self._agent_sets()
        return super().agents

    @agents.setter
    def agents(self, value: Any) -> None:
        mesa.Model.agents.fset(self, value)  # Mesa's refusal, with its message

    @property
    def agents_by_type(self) -> dict[type, mesa.agent.AgentSet]:
        """An AgentSet per agent class (as in Mesa)."""
        self._agent_sets()
        return super().agents_by_type

    @property
    def agent_types(self) -> list[type]:
        """The agent classes, in the order of their first agent (as in Mesa)."""
        self._agent_sets()
        return super().agent_types

    def set_topology(self, graph: "nx.DiGraph | None") -> None:
        """Set who hears whom; must happen before the first message."""
        if self.board.messages:
            raise RuntimeError("topology: cannot change after messages were posted")
        if graph is not None:
            unknown = [n for n in graph.nodes if n not in self.by_name]
            if unknown:
                raise ValueError(f"topology: nodes {unknown[:5]} are not agents")
        self.board = Board(graph)

    # -- time and processes -------------------------------------------------
    @property
    def now(self) -> float:
        """Current simulated time."""
        return self.env.now

    def process(self, generator: Process) -> simpy.Process:
        """Start a SimPy process."""
        return self.env.process(generator)

    def timeout(self, delay: float, value: Any = None) -> simpy.Timeout:
        """An event that fires ``delay`` simulated seconds from now."""
        return self.env.timeout(delay, value)

    def all_of(self, events: Iterable[simpy.Event]) -> simpy.Event:
        """An event that succeeds with the list of the events' values, in the given order.

        It fails with the first failure among them. It triggers at the same step as
        ``env.all_of(events)`` would: a join event stands where SimPy's Condition
        would be scheduled, so the order of events at one instant (and the trace)
        is the same. Unlike a Condition, it hangs one function on every event, not a
        bound method per event (a million calls of one instant need not pay for a
        million).
        """
        events = list(events)
        env = self.env
        if any(event.env is not env for event in events):
            raise ValueError("all_of: the events belong to another world's clock")
        done = env.event()
        join = env.event()
        left = len(events)

        def check(event: simpy.Event) -> None:
            nonlocal left
            if join._value is not PENDING:
                return
            if not event._ok:
                event._defused = True
                join.fail(event._value)
                return
            left -= 1
            if not left:
                join.succeed()

        def finish(join: simpy.Event) -> None:
            if join._ok:
                done.succeed([e._value for e in events])
            else:
                join._defused = True
                done.fail(join._value)

        if not events:
            join.succeed()
        for event in events:
            if event.callbacks is None:  # processed already
                check(event)
            else:
                event.callbacks.append(check)
        join.callbacks.append(finish)
        return done

    #: The most distinct structural-field dicts a world shares (see :meth:`shared_fields`).
    SHARED_FIELDS = 4096

    def shared_fields(self, fields: dict[str, Any]) -> dict[str, Any]:
        """One read-only dict for equal structural fields (a :class:`~simcore.sim.trace.Fields`).

        The calls of one round, and the messages they post, carry equal fields
        (phase, round): a million calls need not hold a million equal dicts, and
        the trace need not encode them a million times (a ``Fields`` carries its
        canonical JSON). Equal means the same keys in the same order with values
        of the same types (1 and True stay apart). Only fields whose values are
        strings, integers, booleans or None are shared (equal floats may still be
        written apart, as 0.0 and -0.0 are); others, and fields past
        :data:`SHARED_FIELDS` distinct dicts, are returned as they are.
        """
        types = tuple(map(type, fields.values()))
        if not _SHAREABLE.issuperset(types):
            return fields
        key = (*fields.items(), *types)
        shared = self._fields.get(key)
        if shared is not None:
            return shared
        if len(self._fields) < self.SHARED_FIELDS:
            shared = self._fields[key] = Fields(fields)
            return shared
        return fields

    # -- trace --------------------------------------------------------------
    def emit(
        self,
        kind: str,
        agent: str | None = None,
        payload: Mapping[str, Any] | None = None,
        **fields: Any,
    ) -> None:
        """Record an event at the current simulated time.

        Keyword arguments are structural fields (phase, round, ...) and enter the
        event's signature; ``payload`` holds content and does not.
        """
        self.trace.emit(self.env.now, kind, agent, fields, payload)

    # -- LLM calls ----------------------------------------------------------
    def request(
        self,
        agent: "LLMAgent",
        request: LLMRequest,
        schema: type | None = None,
        fields: Mapping[str, Any] | None = None,
        allowed: Mapping[str, Any] | None = None,
        reask_of: Reply | None = None,
        instruction: str = "",
    ) -> LLMCall:
        """Queue ``request`` for ``agent`` and return the event of its reply.

        ``allowed`` narrows a schema's choices for this call and ``instruction`` is
        what the reply answers (see :func:`simcore.replies.reading.read_reply`); ``reask_of``
        is the reply this request re-asks.
        """
        return self._request(agent, request, schema, dict(fields or {}), allowed, reask_of, instruction)

    def _request(
        self,
        agent: "LLMAgent",
        request: LLMRequest,
        schema: type | None,
        fields: dict[str, Any],
        allowed: Mapping[str, Any] | None,
        reask_of: Reply | None,
        instruction: str,
    ) -> LLMCall:
        # The hot path of every call: ``fields`` is a dict no one changes (made for this call, or shared).
        if self.intervention is not None:
            request = self.intervention.request(agent, request, fields)
        call = LLMCall(self, agent, request, schema, fields, allowed, reask_of, instruction)
        if self.fit is None or self.fit.window(request.model) is None:
            self._trace_call(call)
        # (else traced when it is sent, as fitted: simcore.sim.fitting)
        self._pending.append(call)
        return call

    def _trace_call(self, call: LLMCall) -> None:
        self.trace.emit(self.env.now, "llm.call", call.agent.name, call.fields,
                        {"request": call.digest[:16], "max_tokens": call.request.max_tokens})

    async def run_async(self, until: float | None = None) -> None:
        """Run the simulation to completion (or to simulated time ``until``)."""
        env, inf = self.env, math.inf
        try:
            with collector.running(len(self.by_name)):
                while True:
                    now = env.now
                    while env.peek() == now:
                        env.step()
                    if self._pending:
                        await self._dispatch()
                        continue
                    nxt = env.peek()
                    if nxt == inf or (until is not None and nxt > until):
                        break
                    env.step()
        finally:
            self.release()

    def release(self) -> None:
        """Let this world be garbage-collected once unreferenced.

        Mesa keeps a class-level agent-id counter per model, which would pin every
        world ever built (run or not) for the life of the process.
        """
        # NOTE: ``mesa.Agent._ids`` is Mesa's private per-model id counter; dropping this
        # world's entry is the only way to free it (why setup.cfg pins mesa below 3.4).
        mesa.Agent._ids.pop(self, None)

    def run(self, until: float | None = None) -> None:
        """Run on a fresh asyncio loop (for callers that are not async)."""
        asyncio.run(self.run_async(until))

    async def _dispatch(self) -> None:
        batch, self._pending = self._pending, []
        if self.fit is not None:
            await self.fit.dispatch(self, batch)
            return
        default = self.backend
        if all(c.agent.backend is None for c in batch):  # the common case: one backend
            # In slices, so that a million simultaneous calls never hold a million responses at once.
            for i in range(0, len(batch), DISPATCH_SLICE):
                part = batch[i : i + DISPATCH_SLICE]
                for call, res in zip(part, await complete_all(default, [c.request for c in part])):
                    self._deliver(call, res)
            return
        for call, res in zip(batch, await self._complete(batch)):
            self._deliver(call, res)

    async def _complete(self, calls: Sequence[LLMCall]) -> list[LLMResponse | BaseException | None]:
        """The results of ``calls``, each sent to its agent's backend (or the world's), in order."""
        groups: dict[int, tuple[Backend, list[int]]] = {}
        for i, call in enumerate(calls):
            backend = call.agent.backend or self.backend
            groups.setdefault(id(backend), (backend, []))[1].append(i)
        results: list[LLMResponse | BaseException | None] = [None] * len(calls)

        async def run_group(backend: Backend, idx: list[int]) -> None:
            out = await complete_all(backend, [calls[i].request for i in idx])
            for i, res in zip(idx, out):
                results[i] = res

        await asyncio.gather(*(run_group(b, idx) for b, idx in groups.values()))
        return results

    def _deliver(self, call: LLMCall, res: LLMResponse | BaseException | None) -> None:
        if self.intervention is not None and res is not None:
            res = self.intervention.response(call, res)
        model = call.request.model
        ledger = self.usage.get(model)
        if ledger is None:
            ledger = self.usage[model] = dict.fromkeys(
                ("calls", "errors", "prompt_tokens", "completion_tokens", "missing_usage"), 0
            )
        ledger["calls"] += 1
        if not isinstance(res, LLMResponse):
            ledger["errors"] += 1
            call.request = None
            call.fail(res if isinstance(res, BaseException) else RuntimeError("no response"))
            return
        self.latency_s[model] = self.latency_s.get(model, 0.0) + res.latency_s
        if res.usage is None:
            ledger["missing_usage"] += 1
        else:
            ledger["prompt_tokens"] += res.usage.prompt_tokens
            ledger["completion_tokens"] += res.usage.completion_tokens
            # Only where reported (real providers), so that runs without them record what they always did.
            if res.usage.reasoning_tokens:
                ledger["reasoning_tokens"] = ledger.get("reasoning_tokens", 0) + res.usage.reasoning_tokens
            if res.usage.cached_tokens:
                ledger["cached_tokens"] = ledger.get("cached_tokens", 0) + res.usage.cached_tokens
        reading = None
        if call.schema is not None:
            prev = call.reask_of
            reading = read_reply(res.text, call.schema, finish_reason=res.finish_reason, allowed=call.allowed,
                                 instruction=call.instruction, given=call.request.messages,
                                 known=None if prev is None else prev.reading)
            earlier = () if prev is None else tuple(a.reading for a in (*prev.attempts, prev))
            self.parse_quality.record(reply_kind(call.schema), reading, earlier, _slot(call))
        delay = max(0.0, float(self.duration(call.agent, res)))
        if self.intervention is not None:
            delay = max(0.0, float(self.intervention.delay(call, delay)))
        reply = Reply(
            call.agent.name, res.text, None if reading is None else reading.value,
            reading is not None and not reading.readable, res.usage, res.finish_reason,
            call.t_asked, self.env.now + delay, call.digest, reading,
        )
        call.request = None
        call._deliver(reply, delay)

    def _on_delivered(self, call: simpy.Event) -> None:
        assert isinstance(call, LLMCall)
        if call.ok:
            r: Reply = call.value
            payload: dict[str, Any] = {
                "text": r.text,
                "finish_reason": r.finish_reason,
                "tokens": None if r.usage is None else [r.usage.prompt_tokens, r.usage.completion_tokens],
            }
            reading = r.reading
            if reading is not None and reading.how != "json":
                payload["read"] = reading.how
                if r.parse_error:
                    payload["parse_error"] = True
                    payload["why"] = reading.describe()
            if reading is not None and reading.salvaged:
                payload["salvaged"] = True
            self.trace.emit(self.env.now, "llm.reply", r.agent, call.fields, payload)
        else:
            exc = call.value
            self.trace.emit(
                self.env.now, "llm.error", call.agent.name, call.fields,
                {"error": type(exc).__name__, "message": str(exc)[:500]},
            )


async def run_worlds(worlds: Sequence[World]) -> None:
    """Run several worlds concurrently on the current asyncio loop.

    Each world's calls overlap with every other world's, so a Monte Carlo against a
    real backend waits for one round-trip per step, not one per trial.
    """
    await asyncio.gather(*(w.run_async() for w in worlds))


def _slot(call: LLMCall) -> str:
    """A turn's agent and structural fields (a re-ask's number left out: it is the same turn)."""
    fields = {k: v for k, v in call.fields.items() if k != "reask"}
    return f"{call.agent.name}|{json.dumps(fields, sort_keys=True, default=str, separators=(',', ':'))}"
