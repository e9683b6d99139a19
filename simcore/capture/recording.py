"""What the capture proxy records of one run of a program: a simcore trace, usage, a cassette.

Events (``kind|agent|fields``; the signature is structure, never content):

- ``llm.call``: the program asks. Agent: its label (the ``X-Simcore-Agent``
  header, else ``program``); fields: ``model`` (as the program asked),
  ``messages`` (how many the request holds), ``role`` (of its last message:
  ``user``, ``tool`` ...), and, when given, ``tools`` (the tools offered,
  comma-separated), ``format`` (the ``response_format`` type) and ``phase`` (the
  ``X-Simcore-Phase`` header), all read from the call's chat-completions view
  (:meth:`~simcore.capture.wire.Api.to_chat`), so a call means the same in every
  API. Payload: ``api`` (``chat``, ``responses`` or ``messages``), ``max_tokens``,
  ``request`` (the key of the request in the run's cassette) and, for a streamed
  call, ``stream``. The message count places a call in its
  conversation, so that the alignment tells a program's third call from its
  first, which would otherwise have the same signature; a conversation that grows
  by an extra exchange makes every later call differ, as its context does.
- ``llm.reply`` / ``llm.error``: its answer, with the call's agent and fields, so
  that the replies of concurrent calls compare as a set
  (:func:`simcore.analysis.divergence.comparable_signatures`). Payload: ``text``,
  ``finish_reason``, ``tokens`` ([prompt, completion], absent without usage),
  ``tool_calls``; an error's ``error``, ``message`` and ``status``.
- ``tool.call``: one per tool the reply calls (field ``tool``), right after it.
- ``program.exit``: the program ended (field ``exit_code``).

Time is logical: the number of replies the program had received when the event
happened, so calls made before any of them was answered share an instant (they
ran concurrently), and no wall clock enters the trace.

:class:`Redactor` keeps secrets out: every key the program sent and the
upstream's are replaced by ``[REDACTED]`` in everything recorded.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from backends.base import LLMRequest, LLMResponse, Message, Usage
from backends.cassette import Cassette, Entry, error_entry, response_entry
from simcore.capture.wire import Reply
from simcore.sim.trace import Trace

REDACTED = "[REDACTED]"
#: Shorter strings are not scrubbed (a one-letter "key" would blank every such letter).
MIN_SECRET = 8


class Redactor:
    """The secrets seen so far, and their removal from anything recorded."""

    def __init__(self) -> None:
        self.secrets: set[str] = set()

    def add(self, value: str | None) -> None:
        """Remember a secret: a key, or an Authorization header (its scheme is not secret)."""
        if not value:
            return
        for part in {value.strip(), value.strip().partition(" ")[2].strip()}:
            if len(part) >= MIN_SECRET:
                self.secrets.add(part)

    def scrub(self, value: Any) -> Any:
        """``value`` with every secret replaced, through dicts, lists and tuples."""
        if not self.secrets:
            return value
        if isinstance(value, str):
            for secret in sorted(self.secrets, key=len, reverse=True):
                value = value.replace(secret, REDACTED)
            return value
        if isinstance(value, Mapping):
            return {self.scrub(k): self.scrub(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return type(value)(self.scrub(v) for v in value)
        return value

    def request(self, request: LLMRequest) -> LLMRequest:
        """A request with its texts scrubbed (what the cassette keeps)."""
        from dataclasses import replace

        if not self.secrets:
            return request
        messages = tuple(Message(m.role, self.scrub(m.content)) for m in request.messages)
        return replace(request, messages=messages, metadata=self.scrub(dict(request.metadata)))


class Recording:
    """One run's record, filled in by the proxy as the program calls.

    Args:
        scope: The run's cassette scope.
        redactor: The secrets to keep out (shared with the proxy, which adds the keys it sees).

    Attributes:
        trace: The events (see the module docstring).
        usage: Per model: calls, errors, prompt_tokens, completion_tokens, missing_usage
            (the kernel's ledger).
        latency_s: Wall-clock seconds the upstream took, per model (timings only).
        counts: calls, reused_calls (answered from the baseline), live_calls.
        reused: Per model, the calls and tokens answered from the baseline.
        endpoints: How often the program called each endpoint (``POST /v1/responses`` ...) the
            proxy speaks; ``unknown_endpoints``: each it does not (answered 404).
    """

    def __init__(self, scope: str, redactor: Redactor) -> None:
        self.scope = scope
        self.redactor = redactor
        self.trace = Trace()
        self.usage: dict[str, dict[str, int]] = {}
        self.latency_s: dict[str, float] = {}
        self.counts = {"calls": 0, "reused_calls": 0, "live_calls": 0}
        self.reused: dict[str, dict[str, int]] = {}
        self.endpoints: dict[str, int] = {}
        self.unknown_endpoints: dict[str, int] = {}
        self.clock = 0
        self._occurrence: dict[str, int] = {}
        self._entries: list[Entry] = []

    def _ledger(self, model: str) -> dict[str, int]:
        led = self.usage.get(model)
        if led is None:
            led = self.usage[model] = dict.fromkeys(
                ("calls", "errors", "prompt_tokens", "completion_tokens", "missing_usage"), 0)
        return led

    def endpoint(self, endpoint: str, spoken: bool = True) -> None:
        """Count a request the program sent to ``endpoint`` (``METHOD /path``)."""
        counts = self.endpoints if spoken else self.unknown_endpoints
        counts[endpoint] = counts.get(endpoint, 0) + 1

    def call(self, agent: str, fields: Mapping[str, Any], request: LLMRequest, api: str = "chat",
             stream: bool = False) -> tuple[str, int]:
        """Record a call in ``api`` (``stream``: its reply asked for as server-sent events); returns its key:
        the (scrubbed) request's digest and its occurrence (identical requests counted in order), as a
        cassette keys it."""
        digest = self.redactor.request(request).digest()
        occurrence = self._occurrence.get(digest, 0)
        self._occurrence[digest] = occurrence + 1
        self.counts["calls"] += 1
        self.trace.emit(self.clock, "llm.call", agent, dict(fields),
                        {"api": api, "max_tokens": request.max_tokens, "request": digest[:16],
                         **({"stream": True} if stream else {})})
        return digest, occurrence

    def reply(self, agent: str, fields: Mapping[str, Any], request: LLMRequest, occurrence: int, reply: Reply,
              *, model: str, latency_s: float, reused: bool, changed: Mapping[str, Any] | None = None) -> None:
        """Record the reply the program received (``changed``: what a perturbation did to it)."""
        self.clock += 1
        led = self._ledger(model)
        led["calls"] += 1
        if reply.usage is None:
            led["missing_usage"] += 1
        else:
            led["prompt_tokens"] += reply.usage[0]
            led["completion_tokens"] += reply.usage[1]
        if reused:
            mine = self.reused.setdefault(model, {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0})
            mine["calls"] += 1
            mine["prompt_tokens"] += reply.usage[0] if reply.usage else 0
            mine["completion_tokens"] += reply.usage[1] if reply.usage else 0
            self.counts["reused_calls"] += 1
        else:
            self.counts["live_calls"] += 1
            self.latency_s[model] = self.latency_s.get(model, 0.0) + latency_s
        payload: dict[str, Any] = {"text": reply.text, "finish_reason": reply.finish_reason}
        if reply.usage is not None:
            payload["tokens"] = list(reply.usage)
        if reply.tool_calls:
            payload["tool_calls"] = list(reply.tool_calls)
        if reused:
            payload["reused"] = True
        if changed:
            payload["perturbed"] = dict(changed)
        self.trace.emit(self.clock, "llm.reply", agent, dict(fields), self.redactor.scrub(payload))
        for name in reply.tool_calls:
            self.trace.emit(self.clock, "tool.call", agent, {"tool": name})
        usage = None if reply.usage is None else Usage(*reply.usage)
        response = LLMResponse(self.redactor.scrub(reply.text), usage, reply.finish_reason, model, None, latency_s)
        self._entries.append(response_entry(self.scope, occurrence, self.redactor.request(request), response))

    def error(self, agent: str, fields: Mapping[str, Any], request: LLMRequest, occurrence: int, *, model: str,
              kind: str, message: str, status: int | None, live: bool) -> None:
        """Record a call that ended without a reply (an upstream error, a failed or dropped reply)."""
        self.clock += 1
        led = self._ledger(model)
        led["calls"] += 1
        led["errors"] += 1
        self.counts["live_calls"] += live
        payload = self.redactor.scrub({"error": kind, "message": message, "status": status})
        self.trace.emit(self.clock, "llm.error", agent, dict(fields), payload)
        self._entries.append(error_entry(self.scope, occurrence, self.redactor.request(request),
                                         RuntimeError(payload["message"])))

    def exit(self, code: int) -> None:
        """Record the program's end."""
        self.trace.emit(self.clock, "program.exit", None, {"exit_code": code})

    def save_cassette(self, path: str | Path) -> None:
        """Write every recorded request and its outcome (what the run browser shows as prompts)."""
        cassette = Cassette(path)
        try:
            cassette.put_many(self._entries)
        finally:
            cassette.close()

    def stats(self) -> dict[str, Any]:
        """Counters for timings.json."""
        return dict(self.counts)
