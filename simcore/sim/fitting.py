"""Requests that fit the model's context window.

A world whose :attr:`~simcore.sim.kernel.World.fit` is set fits every request before it
is sent, in the kernel's dispatch step (the one place that may wait for a backend):

1. its prompt is counted: by the server's tokenizer where the backend has one (a
   trial records the counts in its cassette), else estimated
   (:mod:`backends.context`);
2. when the prompt and ``max_tokens`` overrun the window, the completion budget is
   lowered to what remains, never below what the reply kind needs
   (:func:`min_reply_tokens`, or the budget asked if that is smaller);
3. when the prompt alone leaves less than that, the call's *trim* rebuilds it (an
   agent's trim is its memory policy: :meth:`simcore.sim.memory.FullMemory.trim` drops
   the oldest messages of the transcript) so that it leaves room for the budget
   asked, up to a quarter of the window, and the budget is set to what remains;
4. when even the prompt with nothing left to trim is too long, the call fails with
   :class:`~backends.errors.ContextOverflow`, saying what would fit.

Every changed request is traced as an ``llm.fit`` event just before its
``llm.call``: ``window``, ``prompt`` (tokens before and after trimming) and
``max_tokens`` (asked and sent). A call to a model whose window is known is traced
(``llm.call``) when it is sent, as fitted; one whose window is not known yet, when
it is asked, as without fitting. A server that refuses a request as too long and
names its window (llama-cpp-python's server says it nowhere else) teaches the world
that window: the call is fitted to it and sent once more (``"learned": true``).
Counts and refusals come back from the cassette on replay, so a replay makes the
same decisions without the server.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from backends.base import LLMRequest, Message, estimate_tokens
from backends.context import count_tokens, estimate_prompt_tokens
from backends.errors import ContextOverflow
from simcore.replies.schema import json_schema, reply_kind

if TYPE_CHECKING:
    from simcore.sim.kernel import LLMCall, World

#: A call's trim: the request's messages rebuilt with the trimmable part (the
#: transcript) within this many tokens (:func:`backends.base.estimate_tokens`).
Trim = Callable[[int], tuple[Message, ...]]

#: The least a reply without a schema needs (a few sentences).
TEXT_REPLY_TOKENS = 64
#: What one field of a JSON reply needs: a free-text value, a number, a boolean.
STRING_FIELD_TOKENS = 24
NUMBER_FIELD_TOKENS = 6
#: Rounds of trimming and counting again before a prompt is trimmed to the bone.
TRIM_ROUNDS = 4


@lru_cache(maxsize=256)
def min_reply_tokens(schema: type | None) -> int:
    """The fewest completion tokens a reply of this kind needs to be read.

    A JSON object with every field filled shortly: each key, and a short sentence
    for free text, the longest choice for a fixed answer, a few tokens for a number.
    """
    if schema is None:
        return TEXT_REPLY_TOKENS
    props = json_schema(schema).get("properties") or {}
    total = 4  # braces and the closing
    for name, prop in props.items():
        total += estimate_tokens(name) + 3  # the key, its quotes, colon and comma
        if "enum" in prop:
            total += max((estimate_tokens(str(v)) + 1 for v in prop["enum"]), default=2)
        elif prop.get("type") in ("integer", "number", "boolean"):
            total += NUMBER_FIELD_TOKENS
        else:
            total += STRING_FIELD_TOKENS
    return total


def fitter_for(options: Mapping[str, Any], backend_name: str) -> "Fitter | None":
    """The fitter a run with these backend options needs, or None (the stub without a window).

    A real backend gets one even without a known window, to learn it from a refusal.
    """
    window = options.get("context_window")
    if window is None and backend_name == "stub":
        return None
    return Fitter(None if window is None else int(window))


class Fitter:
    """A world's context windows and its fitting of requests (see the module docstring).

    Args:
        window: The window of the run's models, in tokens, or None where it is
            not known (until a server names it in a refusal).
    """

    __slots__ = ("default", "learned", "scale", "refused")

    def __init__(self, window: int | None = None) -> None:
        self.default = window
        self.learned: dict[str, int] = {}
        self.refused: list[str] = []  # why calls that could not fit failed
        # How much a server counted over our count, per model (1 unless an estimate fell short).
        self.scale: dict[str, float] = {}

    def window(self, model: str) -> int | None:
        """The window of ``model`` (learned from its server, else the run's), or None."""
        return self.learned.get(model, self.default)

    async def dispatch(self, world: "World", calls: list["LLMCall"]) -> None:
        """Fit ``calls``, send them, refit and resend those a server refused naming its window; deliver all.

        Replies are delivered in the order of ``calls`` (request creation), as the
        kernel's own dispatch does.
        """
        windows = [self.window(c.request.model) for c in calls]  # as fitted, before any refusal teaches one
        outcome, counted = await self._prepare(world, calls, learned=False)
        send = [i for i, o in enumerate(outcome) if o is None]
        for i, res in zip(send, await world._complete([calls[i] for i in send])):
            outcome[i] = res
        again = [i for i in send if self._learn(calls[i], outcome[i], windows[i], counted[i])]
        if again:
            refit, _ = await self._prepare(world, [calls[i] for i in again], learned=True)
            resend = [i for i, o in zip(again, refit) if o is None]
            for i, o in zip(again, refit):
                outcome[i] = o
            for i, res in zip(resend, await world._complete([calls[i] for i in resend])):
                outcome[i] = res
        for call, res in zip(calls, outcome):
            world._deliver(call, res)

    def _learn(self, call: "LLMCall", res: Any, window: int | None, counted: int | None) -> bool:
        """Take the window a refusal names; whether ``call`` is to be fitted to it and sent again.

        ``window`` and ``counted`` are the window the call was fitted to and its
        prompt's count (None: sent unfitted). A refusal of a request fitted to that
        window means the count fell short of the server's: the prompt tokens the
        message names raise the model's counts from then on.
        """
        if not isinstance(res, ContextOverflow) or res.window is None:
            return False
        model = call.request.model
        if window is not None and counted is not None and window <= res.window:
            if not (res.prompt_tokens and res.prompt_tokens > counted):
                return False  # nothing to learn: the error stands
            self.scale[model] = self.scale.get(model, 1.0) * res.prompt_tokens / counted
        known = self.window(model)
        self.learned[model] = res.window if known is None else min(known, res.window)
        return True

    async def _count(self, world: "World", calls: Sequence["LLMCall"],
                     requests: Sequence[LLMRequest]) -> list[int]:
        """Prompt tokens of ``requests`` (one per call), by each call's backend."""
        groups: dict[int, tuple[Any, list[int]]] = {}
        for i, call in enumerate(calls):
            backend = call.agent.backend or world.backend
            groups.setdefault(id(backend), (backend, []))[1].append(i)
        out = [0] * len(calls)
        for backend, idx in groups.values():  # in order of first use: deterministic
            for i, n in zip(idx, await count_tokens(backend, [requests[i] for i in idx])):
                out[i] = math.ceil(n * self.scale.get(requests[i].model, 1.0))
        return out

    async def _prepare(self, world: "World", calls: Sequence["LLMCall"],
                       learned: bool) -> tuple[list[Any], list[int | None]]:
        """Fit each call's request in place and trace it.

        Returns per call None (send it) or the error it fails with, and the prompt
        tokens it is sent with as counted (None: no window, not counted).
        """
        fitted = [i for i, c in enumerate(calls) if self.window(c.request.model) is not None]
        counts = await self._count(world, [calls[i] for i in fitted], [calls[i].request for i in fitted])
        counted: list[int | None] = [None] * len(calls)
        plans: dict[int, _Plan] = {}
        for i, n in zip(fitted, counts):
            counted[i] = n
            call = calls[i]
            plan = _Plan(call, self.window(call.request.model), n)  # type: ignore[arg-type]
            if plan.asked + n > plan.window or learned:
                plans[i] = plan
        trimming = [p for p in plans.values() if p.asked_need > p.window - p.prompt and p.trim is not None]
        for _ in range(TRIM_ROUNDS):
            trimming = [p for p in trimming if p.next_candidate()]
            if not trimming:
                break
            for p, n in zip(trimming, await self._count(world, [p.call for p in trimming],
                                                        [p.candidate for p in trimming])):
                p.take(n)
            trimming = [p for p in trimming if p.prompt > p.target]
        out: list[Any] = [None] * len(calls)
        for i, call in enumerate(calls):
            plan = plans.get(i)
            if plan is not None:
                out[i] = plan.apply(world, learned)
                counted[i] = plan.prompt
                if out[i] is not None:
                    self.refused.append(str(out[i]))
            if learned or counted[i] is not None:  # (a call with no window yet was traced when asked)
                world._trace_call(call)
        return out, counted


class _Plan:
    """The fitting of one call: counts, the target, the trimmed candidate."""

    __slots__ = ("call", "window", "first", "prompt", "request", "asked", "asked_need", "trim", "target",
                 "budget", "candidate", "ratio")

    def __init__(self, call: "LLMCall", window: int, prompt: int) -> None:
        self.call = call
        self.window = window
        self.first = self.prompt = prompt
        self.request = call.request
        self.asked = call.request.max_tokens
        self.asked_need = min(self.asked, min_reply_tokens(call.schema))
        self.trim = call.trim
        # Trimmed, a prompt leaves room for the budget asked, up to a quarter of the window.
        self.target = window - max(self.asked_need, min(self.asked, window // 4))
        self.budget = sum(len(m.content) for m in call.request.messages)  # above any transcript's size
        self.candidate: LLMRequest | None = None
        self.ratio = prompt / max(1, estimate_prompt_tokens(call.request))  # counted per estimated token

    def next_candidate(self) -> bool:
        """Pick the largest transcript budget whose prompt should meet the target; False when none is left."""
        if self.trim is None or self.budget <= 0:
            return False
        goal = self.target / self.ratio  # in estimated tokens
        lo, hi = 0, self.budget - 1  # strictly below the last budget: every round trims more
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if estimate_prompt_tokens(self._with(mid)) <= goal:
                lo = mid
            else:
                hi = mid - 1
        self.budget = lo
        self.candidate = self._with(lo)
        return True

    def _with(self, budget: int) -> LLMRequest:
        r = self.request
        return LLMRequest(r.model, self.trim(budget), r.max_tokens, r.temperature, r.seed, r.schema,  # type: ignore[misc]
                          r.metadata, r.reasoning_tokens)

    def take(self, count: int) -> None:
        """Adopt the counted candidate."""
        assert self.candidate is not None
        self.request, self.prompt = self.candidate, count
        self.ratio = count / max(1, estimate_prompt_tokens(self.candidate))

    def apply(self, world: "World", learned: bool) -> ContextOverflow | None:
        """Set the call's request to the fitted one and trace the fit; or the error when nothing fits."""
        call, room = self.call, self.window - self.prompt
        model = self.request.model
        if room < self.asked_need:
            what = "with its history trimmed away" if self.trim is not None else "with nothing to trim"
            phase = call.fields.get("phase")
            return ContextOverflow(
                f"context window: {model} holds {self.window} tokens, but the {f'{phase} ' if phase else ''}"
                f"prompt of {call.agent.name} takes {self.prompt} {what} and its reply needs {self.asked_need}: "
                f"it would fit a window of {self.prompt + self.asked_need} tokens or more")
        given = min(self.asked, room)
        if given != self.asked or self.request is not call.request:
            r = self.request
            call.request = LLMRequest(r.model, r.messages, given, r.temperature, r.seed, r.schema, r.metadata,
                                      r.reasoning_tokens)
            call.digest = call.request.digest()
        payload: dict[str, Any] = {"window": self.window, "prompt": [self.first, self.prompt],
                                   "max_tokens": [self.asked, given]}
        if learned:
            payload["learned"] = True
        world.trace.emit(world.env.now, "llm.fit", call.agent.name, call.fields, payload)
        if given < self.asked and call.schema is not None:
            world.parse_quality.lowered(reply_kind(call.schema))
        return None
