"""The deterministic stub backend: offline, free and replayable.

A reply is a pure function of the canonical request (which carries the run seed
and the agent in its metadata): the request's sha256 seeds a numpy Generator and a
*behaviour model* turns (request, generator) into text. Scenarios plug in their
own behaviour models so that default runs show the phenomenon under study with a
known ground truth; without one, the stub writes schema-valid JSON with random
values, or filler prose.

Replies go through the same lenient parsing path as real model output. Usage is
estimated at four characters per token, and text longer than ``max_tokens`` is cut
off with ``finish_reason="length"``, as a real provider would.
"""

from __future__ import annotations

import hashlib
import threading
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from backends.base import LLMRequest, LLMResponse, Usage, estimate_tokens, json_writer

Behaviour = Callable[[LLMRequest, np.random.Generator], "str | Mapping[str, Any]"]

_WORDS = (
    "the group should weigh evidence carefully before acting because costs and benefits "
    "fall on different people over time and trust matters as much as outcomes"
).split()


_STUB_JSON = json_writer(separators=(", ", ": "))  # json.JSONEncoder(ensure_ascii=False)'s defaults


def to_json(value: Any) -> str:
    """``value`` as the stub sends it: ``json.JSONEncoder(ensure_ascii=False).encode(value)``."""
    return _STUB_JSON(value)


class KeyedGenerator:
    """One numpy Generator, re-keyed in place from a sha256 hex digest.

    Setting a PCG64 state from the digest's 256 bits is several times cheaper than
    building a Generator (and its SeedSequence) per key, which matters for the
    stub's per-request draws. The generator is shared: use it at once and do not
    keep it, and give each thread its own :class:`KeyedGenerator`.
    """

    def __init__(self) -> None:
        self._bits = np.random.PCG64(0)
        self._rng = np.random.Generator(self._bits)

    def rekey(self, hexdigest: str) -> np.random.Generator:
        """The generator, keyed by a 64-hex-digit sha256 digest."""
        self._bits.state = {
            "bit_generator": "PCG64",
            "state": {"state": int(hexdigest[:32], 16), "inc": int(hexdigest[32:64], 16) | 1},
            "has_uint32": 0,
            "uinteger": 0,
        }
        return self._rng

    def for_key(self, *parts: object) -> np.random.Generator:
        """The generator keyed by the sha256 of ``parts`` joined with ``|``."""
        return self.rekey(hashlib.sha256("|".join(map(str, parts)).encode()).hexdigest())


_THREAD = threading.local()


def keyed_generator(owner: str = "stub") -> KeyedGenerator:
    """This thread's :class:`KeyedGenerator` for ``owner`` (made once per thread and owner).

    The stub's own is in use while a behaviour model runs, so a model that keys
    draws of its own asks for it under another owner.
    """
    generators = getattr(_THREAD, "generators", None)
    if generators is None:
        generators = _THREAD.generators = {}
    keyed = generators.get(owner)
    if keyed is None:
        keyed = generators[owner] = KeyedGenerator()
    return keyed


class StubBackend:
    """Deterministic backend; see the module docstring.

    Args:
        behaviour: Scenario behaviour model, ``behaviour(request, rng) -> str | dict``
            (a dict is sent as JSON); None for the generic one.
        malformed_rate: Share of replies replaced by non-JSON text, to exercise
            the lenient parser (0 by default).
        model: Model name reported in responses.
    """

    name = "stub"

    def __init__(
        self, behaviour: Behaviour | None = None, *, malformed_rate: float = 0.0, model: str = "stub"
    ) -> None:
        if not 0.0 <= malformed_rate <= 1.0:
            raise ValueError(f"malformed_rate: must be in [0, 1], got {malformed_rate}")
        self.behaviour = behaviour or generic_behaviour
        self.malformed_rate = malformed_rate
        self.model = model

    def rng_for(self, request: LLMRequest) -> np.random.Generator:
        """The generator for ``request``: PCG64 keyed by the request's sha256.

        The same object (one per thread) is re-keyed on every call, so a behaviour
        model must not keep it beyond the call.
        """
        return keyed_generator().rekey(request.digest())

    def respond(self, request: LLMRequest) -> LLMResponse:
        """Produce the reply to ``request`` synchronously."""
        rng = self.rng_for(request)
        if self.malformed_rate and rng.random() < self.malformed_rate:
            text = "I am not sure how to answer in that format, sorry."
        else:
            out = self.behaviour(request, rng)
            text = out if isinstance(out, str) else to_json(out)
        limit = request.max_tokens * 4
        finish = "stop"
        if len(text) > limit:
            text, finish = text[:limit], "length"
        prompt_tokens = sum([estimate_tokens(m.content) for m in request.messages])
        return LLMResponse(
            text=text,
            usage=Usage(prompt_tokens, estimate_tokens(text)),
            finish_reason=finish,
            model=request.model or self.model,
        )

    async def complete(self, request: LLMRequest) -> LLMResponse:
        """Async form of :meth:`respond`."""
        return self.respond(request)

    async def complete_batch(self, requests: Sequence[LLMRequest]) -> list[LLMResponse]:
        """Answer a batch in one go (no task per request)."""
        return [self.respond(r) for r in requests]


def generic_behaviour(request: LLMRequest, rng: np.random.Generator) -> str | dict[str, Any]:
    """Schema-valid random JSON when a schema is given, else filler prose."""
    if request.schema is not None:
        return sample_schema(request.schema, rng)
    return prose(rng, min(request.max_tokens // 2, 60))


def prose(rng: np.random.Generator, n_words: int) -> str:
    """``n_words`` words of filler text."""
    # (u * k) truncated in numpy is int(u * k) in Python, element by element: the same words.
    picks = (rng.random(max(1, n_words)) * len(_WORDS)).astype(np.intp).tolist()
    return " ".join([_WORDS[i] for i in picks]).capitalize() + "."


def sample_schema(schema: Mapping[str, Any], rng: np.random.Generator) -> Any:
    """Draw a value that satisfies a (simple) JSON schema."""
    if "enum" in schema:
        options = schema["enum"]
        return options[int(rng.integers(len(options)))]
    kind = schema.get("type")
    if kind == "object":
        return {k: sample_schema(v, rng) for k, v in schema.get("properties", {}).items()}
    if kind == "array":
        return [sample_schema(schema.get("items", {}), rng) for _ in range(int(rng.integers(1, 4)))]
    if kind == "number":
        lo, hi = schema.get("minimum", 0.0), schema.get("maximum", 1.0)
        return round(float(rng.uniform(lo, hi)), 3)
    if kind == "integer":
        lo, hi = schema.get("minimum", 0), schema.get("maximum", 10)
        return int(rng.integers(lo, hi + 1))
    if kind == "boolean":
        return bool(rng.random() < 0.5)
    return prose(rng, int(rng.integers(4, 12)))
