"""LLM agents: Mesa agents whose ``ask`` returns a SimPy event.

Every structural difference between agents (token budget, role, speaking rate,
persona) is a constructor parameter and lives nowhere else.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Mapping

import mesa

from backends.base import LLMRequest
from backends.base import Message as ChatMessage
from simcore.replies.reading import reask_prompt
from simcore.replies.schema import allowed_keys, json_schema
from simcore.sim.memory import FullMemory, Memory, render
from simcore.sim.messages import Message

HISTORY_HEADER = "Discussion so far:\n"
_FULL_MEMORY = FullMemory()
#: Reasoning tokens a re-ask of a reply cut by its reasoning gets when the provider
#: reported none, and the most any re-ask gets (each re-ask doubles what was spent).
REASONING_FLOOR = 4096
REASONING_MAX = 32768

if TYPE_CHECKING:
    import simpy

    from backends.base import Backend
    from simcore.sim.fitting import Trim
    from simcore.sim.kernel import LLMCall, Reply, World


class LLMAgent(mesa.Agent):
    """An agent that talks through an LLM.

    Args:
        world: The world the agent lives in.
        name: Unique, human-readable id ("D", "P1", ...); the topology's node name.
        role: Free-form role ("dominant", "peer", ...); protocols may select on it.
        persona: System prompt.
        model_name: LLM model name, or None for the world's default
            (``model`` is Mesa's reference to the world).
        temperature: Sampling temperature.
        max_output_tokens: Completion budget per call.
        memory: Which visible messages enter prompts.
        backend: Own backend, or None for the world's.
        speaking_rate: Tokens per simulated second, for the default duration model.
        params: Anything else a scenario needs (style, budget, ...).
    """

    def __init__(
        self,
        world: "World",
        name: str,
        *,
        role: str = "agent",
        persona: str = "",
        model_name: str | None = None,
        temperature: float = 0.7,
        max_output_tokens: int = 256,
        memory: Memory | None = None,
        backend: "Backend | None" = None,
        speaking_rate: float = 4.0,
        params: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(world)
        if name in world.by_name:
            raise ValueError(f"agent name {name!r} is already taken")
        self.world = world
        self.name = name
        self.role = role
        self.persona = persona
        self.model_name = model_name or world.model_name
        self.temperature = temperature
        self.max_output_tokens = max_output_tokens
        self.memory: Memory = memory or _FULL_MEMORY  # frozen: one serves every agent
        self.backend = backend
        self.speaking_rate = speaking_rate
        self._params = dict(params) if params else None
        world.by_name[name] = self

    def __repr__(self) -> str:
        return f"LLMAgent({self.name!r}, role={self.role!r})"

    @property
    def params(self) -> dict[str, Any]:
        """The agent's own parameters (a dict; made on first use, as most agents have none)."""
        if self._params is None:
            self._params = {}
        return self._params

    @params.setter
    def params(self, value: Mapping[str, Any]) -> None:
        self._params = dict(value)

    def visible(self) -> list[Message]:
        """Messages this agent can see, oldest first."""
        return self.world.board.visible(self.name)

    def context(self) -> str:
        """The transcript that enters this agent's prompts, per its memory strategy."""
        return render(self.memory.select(self.visible()))

    def ask(
        self,
        prompt: str,
        *,
        schema: type | None = None,
        phase: str = "",
        history: bool = True,
        max_tokens: int | None = None,
        persona: str | None = None,
        allowed: Mapping[str, Any] | None = None,
        instruction: str | None = None,
        trim: Callable[[int], str] | None = None,
        **fields: Any,
    ) -> "LLMCall | simpy.Process":
        """Ask the LLM; returns an event that succeeds with a :class:`~simcore.sim.kernel.Reply`.

        With a schema, the reply is read into it (:func:`simcore.replies.reading.read_reply`).
        When the world allows re-asks (``world.reask``, a backend option) and the
        reply is unreadable, the agent asks again in the same turn, up to that many
        times: a follow-up message quotes its reply and what was wrong and asks for
        the JSON only (a cut reply also gets a larger token budget, up to
        ``world.reask_max_tokens``; a reply the model's own reasoning cut before any answer
        gets twice the reasoning tokens it spent, up to :data:`REASONING_MAX`). A reply
        with no text is not quoted: no provider takes an empty message, and there is
        nothing in it to quote. Each re-ask is an ordinary call, traced with the
        field ``reask=k`` and recorded like any other; the event then succeeds with
        the last reply, whose ``attempts`` hold the earlier ones.

        Args:
            prompt: The user instruction.
            schema: Reply dataclass (see :mod:`simcore.replies.schema`).
            phase: Phase name; a structural field of the trace events.
            history: Prepend the visible transcript (per memory strategy).
            max_tokens: Override of ``max_output_tokens`` for this call.
            persona: Override of the system prompt for this call.
            allowed: Per-call choices of the schema's fields (e.g. a vignette's options).
            instruction: What a reply must not merely repeat (default: the system prompt
                and ``prompt``). A scenario that writes a transcript into ``prompt``
                itself passes the prompt without it: quoting another agent is no echo.
            trim: For a ``prompt`` that holds a transcript of its own: the prompt
                rebuilt with that transcript within N tokens
                (:func:`backends.base.estimate_tokens`), its oldest parts dropped
                first (e.g. with :meth:`simcore.sim.memory.FullMemory.trim`). Used only
                when the prompt would not fit the model's context window
                (:mod:`simcore.sim.fitting`); with ``history``, the agent trims the
                history it prepends by its memory strategy itself.
            **fields: More structural fields (round, game, ...).
        """
        world = self.world
        system = self.persona if persona is None else persona
        user = prompt
        if history:
            transcript = self.context()
            if transcript:
                user = f"{HISTORY_HEADER}{transcript}\n\n{prompt}"
                if world.fit is not None and trim is None:
                    trim = self._history_trim(prompt)
        messages = _chat(system, user)
        meta = {"agent": self.name, "scenario": world.scenario, "phase": phase, **fields}
        fields = world.shared_fields({"phase": phase, **fields} if phase else fields)
        request = LLMRequest(
            model=self.model_name,
            messages=messages,
            max_tokens=max_tokens or self.max_output_tokens,
            temperature=self.temperature,
            seed=world.seed,
            schema=None if schema is None else json_schema(schema, allowed_keys(allowed)),
            metadata=meta,
        )
        # ``fields`` is made above for this call (or shared by equal ones), so no copy is needed.
        call = world._request(
            self, request, schema, fields, allowed, None,
            f"{system}\n{prompt if instruction is None else instruction}" if schema is not None else "",
        )
        if trim is not None and world.fit is not None:
            call.trim = lambda budget: _chat(system, trim(budget))
        if schema is None or world.reask <= 0:
            return call
        return world.process(self._reasking(call))

    def _reasking(self, call: "LLMCall") -> Any:
        """The turn of ``call``: its reply, re-asked while it cannot be read."""
        first = call.request  # the kernel releases it once the call is answered
        reasoning = first.reasoning_tokens
        reply: Reply = yield call
        for k in range(1, self.world.reask + 1):
            reading = reply.reading
            if reading is None or reading.readable:
                break
            budget = first.max_tokens
            if reading.truncated:  # a cut reply: double the budget each time, up to the cap
                budget = max(budget, min(self.world.reask_max_tokens, budget * 2**k))
            if reading.reasoning_cut:  # room to reason: twice what the cut reply spent
                spent = reply.usage.reasoning_tokens if reply.usage is not None else 0
                reasoning = min(REASONING_MAX, 2 * max(spent, reasoning or 0, REASONING_FLOOR // 2))
            quoted = (ChatMessage("assistant", reply.text),) if reply.text.strip() else ()
            request = LLMRequest(
                model=first.model,
                messages=(
                    *first.messages,
                    *quoted,
                    ChatMessage("user", reask_prompt(reading, call.schema)),
                ),
                max_tokens=budget,
                temperature=first.temperature,
                seed=first.seed,
                schema=first.schema,
                metadata={**first.metadata, "reask": k},
                reasoning_tokens=reasoning,
            )
            asked = self.world.request(
                self, request, call.schema, {**call.fields, "reask": k}, call.allowed, reask_of=reply,
                instruction=f"{call.instruction}\n{request.messages[-1].content}",
            )
            if call.trim is not None:  # the first prompt trimmed, the reply and the re-ask kept
                asked.trim = _tail_trim(call.trim, request.messages[len(first.messages):])
            again: Reply = yield asked
            reply = again._replace(attempts=(*reply.attempts, reply._replace(attempts=())))
        return reply

    def _history_trim(self, prompt: str) -> Callable[[int], str]:
        """The prompt with the history this agent's memory keeps within a token budget."""
        visible, memory = self.visible(), self.memory
        seen = len(visible)  # the board only grows: what this prompt saw stays its first ``seen`` messages

        def trimmed(budget: int) -> str:
            transcript = render(memory.trim(visible[:seen], budget))
            return f"{HISTORY_HEADER}{transcript}\n\n{prompt}" if transcript else prompt

        return trimmed

    def say(self, text: str, **fields: Any) -> Message:
        """Post a public message, visible to this agent's successors, and trace it."""
        world = self.world
        if world.intervention is not None:
            text = world.intervention.message(self, text, fields)
        fields = world.shared_fields(fields)
        msg = world.board._post(world.now, self.name, text, fields)
        world.trace.emit(world.now, "message", self.name, fields, {"text": text})
        return msg


def _chat(system: str, user: str) -> tuple[ChatMessage, ...]:
    """The messages of a call: the system prompt (if any) and the user's."""
    return (ChatMessage("system", system), ChatMessage("user", user)) if system else (ChatMessage("user", user),)


def _tail_trim(trim: "Trim", tail: tuple[ChatMessage, ...]) -> "Trim":
    """A re-ask's trim: the first call's messages trimmed, then ``tail`` (the reply and the re-ask)."""
    return lambda budget: (*trim(budget), *tail)
