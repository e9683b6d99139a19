"""Request and response types shared by every backend, and the Backend protocol.

A backend turns one :class:`LLMRequest` into one :class:`LLMResponse`. Everything the
kernel needs to stay deterministic lives here: a request has a canonical JSON form
whose sha256 keys the stub's output and the cassette, and a response carries its
wall-clock latency in a field that never reaches the trace.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import json.encoder as json_encoder
from dataclasses import dataclass, field
from typing import (
    Any,
    Awaitable,
    Callable,
    Mapping,
    NamedTuple,
    Protocol,
    Sequence,
    runtime_checkable,
)


class Message(NamedTuple):
    """One chat message: ``role`` is "system", "user" or "assistant".

    Messages and usage records are named tuples: immutable like the dataclasses
    around them, and several times cheaper to build, which counts at one or more
    per LLM call.
    """

    role: str
    content: str


@dataclass(frozen=True, slots=True)
class LLMRequest:
    """Everything a backend needs to produce one completion.

    Attributes:
        model: Provider model name.
        messages: The chat, system message first.
        max_tokens: Cap on completion tokens.
        temperature: Sampling temperature.
        seed: Seed passed to providers that accept one; the stub keys on it too.
        schema: Optional JSON schema the reply must follow (JSON mode).
        metadata: Agent, scenario, phase and such. Real backends never send it, but
            it is part of the canonical form, so two agents asking the same thing get
            distinct stub replies and distinct cassette entries.
        reasoning_tokens: Tokens a reasoning model may spend thinking on top of
            ``max_tokens`` (None: the allowance its model rule gives, see
            :mod:`backends.models`). A re-ask of a reply its reasoning cut short sets it.

    Slotted: a million calls of one instant each hold a request until answered,
    and a slot costs a fraction of a per-instance dict.
    """

    model: str
    messages: tuple[Message, ...]
    max_tokens: int = 256
    temperature: float = 0.7
    seed: int | None = None
    schema: Mapping[str, Any] | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)
    reasoning_tokens: int | None = None
    # Memos of canonical() and digest(): not fields of the request (a replaced request starts without).
    _canonical: str | None = field(default=None, init=False, repr=False, compare=False)
    _digest: str | None = field(default=None, init=False, repr=False, compare=False)

    def canonical(self) -> str:
        """Return the request as canonical JSON (sorted keys, no whitespace); memoised."""
        cached = self._canonical
        if cached is not None:
            return cached
        text = canonical_json({**self._head(), "messages": [[m.role, m.content] for m in self.messages]})
        object.__setattr__(self, "_canonical", text)  # a memo, not a change of the frozen fields
        return text

    def digest(self) -> str:
        """Return the request's sha256 hex digest; memoised.

        It covers everything :meth:`canonical` does, but hashes the scalar fields
        and message contents as length-prefixed text instead of JSON-escaping them,
        which is several times faster on long transcripts.
        """
        cached = self._digest
        if cached is None:
            schema = self.schema
            if schema is not None:
                # Schemas from simcore.replies.schema.json_schema carry their canonical JSON.
                schema = getattr(schema, "canonical", None) or canonical_json(schema)
            head = (
                f"{self.model!r}|{self.max_tokens}|{self.temperature!r}|{self.seed}|"
                f"{canonical_json(self.metadata)}|{schema}"
            )
            if self.reasoning_tokens is not None:  # (absent from older requests' digests, which stay as they were)
                head += f"|reasoning={self.reasoning_tokens}"
            parts = [head.encode()]
            for m in self.messages:
                body = m.content.encode()
                parts.append(f"\n{m.role}:{len(body)}:".encode())
                parts.append(body)
            cached = hashlib.sha256(b"".join(parts)).hexdigest()  # one pass: the same bytes as updates
            object.__setattr__(self, "_digest", cached)
        return cached

    def _head(self) -> dict[str, Any]:
        head = {
            "model": self.model,
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
            "seed": self.seed,
            "schema": self.schema,
            "metadata": self.metadata,
        }
        if self.reasoning_tokens is not None:
            head["reasoning_tokens"] = self.reasoning_tokens
        return head


class Usage(NamedTuple):
    """Token counts reported by the provider (or estimated by the stub).

    ``completion_tokens`` counts every output token billed, reasoning included
    (providers that report reasoning apart, as xAI and Gemini do, have it added);
    ``reasoning_tokens`` is the part of it spent reasoning, and ``cached_tokens`` the
    part of ``prompt_tokens`` read from the provider's prompt cache, for the
    providers that price them apart (:mod:`backends.pricing`).
    """

    prompt_tokens: int = 0
    completion_tokens: int = 0
    reasoning_tokens: int = 0
    cached_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True, slots=True)
class LLMResponse:
    """One completion.

    Attributes:
        text: The completion text, unparsed.
        usage: Token usage, or None when the provider did not report it.
        finish_reason: "stop", "length", ... as the provider says.
        model: The model that answered.
        system_fingerprint: Provider build fingerprint, when given.
        latency_s: Wall-clock seconds; kept out of the trace.
    """

    text: str
    usage: Usage | None = None
    finish_reason: str = "stop"
    model: str = ""
    system_fingerprint: str | None = None
    latency_s: float = 0.0


@runtime_checkable
class Backend(Protocol):
    """Anything that completes requests asynchronously.

    A backend may also define ``async complete_batch(requests)`` returning a list of
    responses or exceptions, in request order; the kernel prefers it when present.
    """

    name: str

    async def complete(self, request: LLMRequest) -> LLMResponse:  # pragma: no cover
        ...


async def complete_all(
    backend: Backend, requests: Sequence[LLMRequest]
) -> list[LLMResponse | BaseException]:
    """Complete ``requests`` concurrently; failures come back as exception values.

    Args:
        backend: The backend to use.
        requests: Requests, in creation order.

    Returns:
        One response or exception per request, in the same order.
    """
    batch = getattr(backend, "complete_batch", None)
    if batch is not None:
        return list(await batch(requests))
    return await gather_settled([backend.complete(r) for r in requests])


async def gather_settled(calls: Sequence[Awaitable[LLMResponse]]) -> list[LLMResponse | BaseException]:
    """Await ``calls`` concurrently; each failure comes back as its exception, in order."""
    if len(calls) == 1:  # the common case: no gather machinery for one call
        try:
            return [await calls[0]]
        except Exception as exc:  # noqa: BLE001 - the kernel fails the one call
            return [exc]
    return list(await asyncio.gather(*calls, return_exceptions=True))


def json_writer(*, separators: tuple[str, str], sort_keys: bool = False,
                default: Callable[[Any], Any] | None = None) -> Callable[[Any], str]:
    """A function that writes a value as ``json.JSONEncoder(ensure_ascii=False, ...).encode`` does.

    It goes through one C encoder built here, where ``JSONEncoder`` builds one for
    every value it encodes; it checks for no cycles (what is written here holds none).
    ``default`` turns values JSON has no form for into ones it has (None: refuse them).
    """
    default = default or _refuse
    if json_encoder.c_make_encoder is None:
        return json.JSONEncoder(ensure_ascii=False, separators=separators, sort_keys=sort_keys, default=default).encode
    item, key = separators
    encode = json_encoder.c_make_encoder(None, default, json_encoder.encode_basestring, None, key, item,
                                         sort_keys, False, True)
    return lambda value: "".join(encode(value, 0))


def _refuse(value: Any) -> Any:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def canonical_json(value: Any) -> str:
    """Serialise ``value`` deterministically: sorted keys, compact, UTF-8 kept.

    Equal to ``json.dumps(value, sort_keys=True, separators=(",", ":"),
    ensure_ascii=False)``, but through one encoder built once (:func:`json_writer`):
    traces and request digests call this several times per LLM call.
    """
    return _CANONICAL(value)


def _json_default(value: Any) -> Any:
    # numpy scalars and arrays reach payloads from metric code; make them plain.
    if hasattr(value, "item") and getattr(value, "ndim", 1) == 0:
        return value.item()
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, (set, frozenset)):
        return sorted(value)
    if hasattr(value, "__dataclass_fields__"):
        from dataclasses import asdict

        return asdict(value)
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


_CANONICAL = json_writer(separators=(",", ":"), sort_keys=True, default=_json_default)


def estimate_tokens(text: str) -> int:
    """Estimate tokens as one per four characters (the usual English rule of thumb)."""
    return (len(text) + 3) // 4  # ceil(len / 4): at least 1 for any text, 0 for none


class BackendError(Exception):
    """A call that failed for good (after any retries).

    ``retryable`` says whether the middleware may try again (see ``backends.errors``).
    """

    retryable: bool = False
