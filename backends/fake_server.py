"""A fake LLM server for tests, benchmarks and dry runs: ``python -m backends.fake_server``.

It speaks OpenAI chat completions (``POST /v1/chat/completions``), and for testing
the other clients also Anthropic Messages (``POST /v1/messages``) and Gemini
(``POST /v1beta/models/{model}:generateContent``). Replies are schema-valid JSON
when the request asks for JSON mode (drawn by the stub's schema sampler) and filler
prose otherwise, a pure function of the request body and ``--seed``, so a run
against the server is reproducible.

- **Latency**: ``--latency fixed:0.1 | uniform:A,B | exp:MEAN | lognormal:MEDIAN,SIGMA |
  normal:MEAN,SD`` seconds per request, plus ``--token-latency S`` per completion token.
- **Providers' rules** (``--rules current``, the default): requests to models named
  as providers name them (``gpt-5-mini``, ``claude-opus-4-7``, ``gemini-3-pro-preview``,
  ...) are refused where the provider refuses them, reasoning models think out of
  their answer's budget, and errors come in each provider's shape
  (:mod:`backends.fake_behaviour`, every rule with its source). Other model names
  behave as before; ``--rules none`` turns the rules off.
- **Faults**: ``--fault KIND[:rate=P,first=N,every=K,after=N,model=GLOB,retry_after=S,hang=S,should_retry=B]``
  (repeatable), KIND one of 429, 500, 503, status=NNN (any code), timeout (hang
  before answering), drop (close the connection), malformed (a truncated JSON
  body), length (half the reply, ``finish_reason: length``), nonjson (prose where
  JSON was asked), refusal (the model declines: Anthropic ``stop_reason: refusal``
  with no content, OpenAI ``message.refusal``, Gemini ``SAFETY``), json_invalid
  (Groq's HTTP 400 ``json_validate_failed`` carrying the reply in
  ``failed_generation``), error200 (OpenRouter's HTTP 200 with ``finish_reason:
  "error"``), window (Anthropic's ``stop_reason: model_context_window_exceeded``).
  A 429 carries its wait as the provider does: Gemini in the body
  (``RetryInfo.retryDelay``), the others in Retry-After; ``should_retry=true|false``
  adds the ``x-should-retry`` header. ``first=N``: the first N matching requests;
  ``every=K``: every K-th; ``after=N``: every one after the first N (``drop:after=N``
  is a server that dies once it has answered N); ``rate=P``: at random with
  probability P. The first rule that fires wins.
- **Canned replies**: ``--replies FILE`` (JSON: a list of ``{"match": TEXT, "replies":
  [{"reply": TEXT, "finish_reason": "stop"|"length", "json_mode": BOOL}, ...]}``). A
  request whose prompt (or reply schema title) contains a pool's ``match`` is
  answered from that pool: from its ``json_mode`` replies when the request asks for
  JSON, else from all of them; by a draw keyed on the request, or with ``"cycle":
  true`` the next reply in turn (every reply served, in arrival order). A reply
  corpus served this way tests the readers end to end.
- **Counters**: ``GET /stats`` gives requests, responses by status ("cancelled":
  the client hung up first), faults injected, requests in flight and the highest
  concurrency seen, tokens, and request
  arrival times; ``POST /reset`` zeroes them; ``POST /config`` replaces the
  latency and faults (same JSON as the stats' ``config``); ``GET /health``.
- **Keys**: ``--require-key-env VAR`` answers 401 unless the request carries the
  key in ``$VAR``. The server never stores or prints a key.
- **A context window**: ``--context-window N`` refuses a chat completion whose prompt
  tokens and ``max_tokens`` pass N with HTTP 400, in the words llama-cpp-python and
  vLLM use ("This model's maximum context length is N tokens. However, you requested
  ..."). ``--window-in props|models|none`` says where else it tells N: ``GET /props``
  as the llama.cpp server does, ``max_model_len`` in ``GET /v1/models`` as vLLM
  does, or nowhere, as llama-cpp-python's server. ``--tokenizer`` serves ``POST
  /extras/tokenize/count`` (llama-cpp-python's) with the server's own count, one
  token per four characters, which is also what ``usage.prompt_tokens`` reports.

It binds to 127.0.0.1 and prints ``fake server listening on http://127.0.0.1:PORT``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import fnmatch
import hashlib
import json
import os
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

import numpy as np
from aiohttp import web

from backends import fake_behaviour
from backends.base import canonical_json, estimate_tokens
from backends.stub import prose, sample_schema

FAULT_KINDS = ("429", "500", "503", "status", "timeout", "drop", "malformed", "length", "nonjson", "refusal",
               "json_invalid", "error200", "window")
LATENCY_KINDS = ("fixed", "uniform", "exp", "lognormal", "normal")
WINDOW_IN = ("props", "models", "none")


@dataclass(frozen=True)
class Fault:
    """One fault-injection rule (see the module docstring)."""

    kind: str
    rate: float = 0.0
    first: int = 0
    every: int = 0
    model: str = "*"
    status: int = 0
    retry_after: float | None = None
    hang: float = 60.0
    should_retry: bool | None = None
    after: int | None = None

    def __post_init__(self) -> None:
        if self.kind not in FAULT_KINDS:
            raise ValueError(f"fault: kind must be one of {', '.join(FAULT_KINDS)}; got {self.kind!r}")
        if not 0.0 <= self.rate <= 1.0:
            raise ValueError(f"fault: rate must be in [0, 1], got {self.rate}")
        if self.kind == "status" and not 100 <= self.status <= 599:
            raise ValueError(f"fault: status=NNN needs a code from 100 to 599, got {self.status}")

    @property
    def http_status(self) -> int | None:
        """The HTTP status this fault answers with, if it is a status fault."""
        if self.kind in ("429", "500", "503"):
            return int(self.kind)
        return self.status if self.kind == "status" else None

    @classmethod
    def parse(cls, text: str) -> "Fault":
        """Parse ``KIND[:key=value,...]`` (``status=NNN`` also works as the kind)."""
        kind, _, rest = text.partition(":")
        kw: dict[str, Any] = {}
        if kind.startswith("status="):
            kw["status"] = int(kind.split("=", 1)[1])
            kind = "status"
        types = {"rate": float, "first": int, "every": int, "after": int, "model": str, "status": int,
                 "retry_after": float, "hang": float, "should_retry": _boolean}
        for part in filter(None, rest.split(",")):
            key, sep, value = part.partition("=")
            if not sep or key not in types:
                raise ValueError(f"fault: expected key=value with key in {', '.join(types)}; got {part!r}")
            try:
                kw[key] = types[key](value)
            except ValueError:
                raise ValueError(f"fault: {key} must be {types[key].__name__}, got {value!r}") from None
        return cls(kind, **kw)


def _boolean(text: str) -> bool:
    if text not in ("true", "false"):
        raise ValueError
    return text == "true"


_boolean.__name__ = "true or false"


@dataclass(frozen=True)
class Latency:
    """A latency distribution in seconds."""

    kind: str = "fixed"
    a: float = 0.0
    b: float = 0.0

    def __post_init__(self) -> None:
        if self.kind not in LATENCY_KINDS:
            raise ValueError(f"latency: must be one of {', '.join(LATENCY_KINDS)}; got {self.kind!r}")
        if self.a < 0 or self.b < 0:
            raise ValueError("latency: parameters must be >= 0")

    @classmethod
    def parse(cls, text: str) -> "Latency":
        """Parse ``KIND:A[,B]``."""
        kind, _, rest = text.partition(":")
        try:
            nums = [float(x) for x in rest.split(",") if x] or [0.0]
        except ValueError:
            raise ValueError(f"latency: numbers expected after '{kind}:', got {rest!r}") from None
        return cls(kind, nums[0], nums[1] if len(nums) > 1 else 0.0)

    def sample(self, rng: np.random.Generator) -> float:
        """One draw."""
        if self.kind == "fixed":
            return self.a
        if self.kind == "uniform":
            return float(rng.uniform(self.a, max(self.a, self.b)))
        if self.kind == "exp":
            return float(rng.exponential(self.a)) if self.a > 0 else 0.0
        if self.kind == "lognormal":
            return float(self.a * np.exp(rng.normal(0.0, self.b)))
        return max(0.0, float(rng.normal(self.a, self.b)))


@dataclass(frozen=True)
class ReplyPool:
    """Canned replies for requests whose prompt contains ``match`` (see the module docstring)."""

    match: str
    replies: tuple[tuple[str, str, bool], ...]  # (text, finish_reason, json_mode)
    cycle: bool = False

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "ReplyPool":
        replies = tuple(
            (str(r["reply"]), str(r.get("finish_reason", "stop")), bool(r.get("json_mode", False)))
            for r in d.get("replies", ())
        )
        if not d.get("match") or not replies:
            raise ValueError("replies: every pool needs a match text and at least one reply")
        return cls(str(d["match"]), replies, bool(d.get("cycle", False)))

    def to_dict(self) -> dict[str, Any]:
        return {"match": self.match, "cycle": self.cycle,
                "replies": [{"reply": t, "finish_reason": f, "json_mode": j} for t, f, j in self.replies]}


@dataclass(frozen=True)
class FakeConfig:
    """What the server does.

    Attributes:
        latency: Per-request latency distribution.
        token_latency: Extra seconds per completion token.
        faults: Fault rules, tried in order.
        seed: Seeds replies, latency draws and random faults.
        require_key_env: Environment variable whose value requests must carry.
        replies: Canned reply pools, tried in order.
        context_window: Refuse requests whose prompt and max_tokens pass this many tokens.
        window_in: Where the window is told: "props", "models" or "none" (only in refusals).
        tokenizer: Serve ``POST /extras/tokenize/count``.
        rules: "current" (the providers' published rules, :mod:`backends.fake_behaviour`)
            or "none".
    """

    latency: Latency = field(default_factory=Latency)
    token_latency: float = 0.0
    faults: tuple[Fault, ...] = ()
    seed: int = 0
    require_key_env: str | None = None
    replies: tuple[ReplyPool, ...] = ()
    context_window: int | None = None
    window_in: str = "props"
    tokenizer: bool = False
    rules: str = "current"

    def __post_init__(self) -> None:
        if self.window_in not in WINDOW_IN:
            raise ValueError(f"window_in: must be one of {', '.join(WINDOW_IN)}; got {self.window_in!r}")
        if self.rules not in fake_behaviour.RULES:
            raise ValueError(f"rules: must be one of {', '.join(fake_behaviour.RULES)}; got {self.rules!r}")

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["faults"] = [asdict(f) for f in self.faults]
        d["replies"] = [p.to_dict() for p in self.replies]
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "FakeConfig":
        lat = d.get("latency", {})
        latency = Latency.parse(lat) if isinstance(lat, str) else Latency(**lat)
        faults = tuple(Fault.parse(f) if isinstance(f, str) else Fault(**f) for f in d.get("faults", ()))
        pools = tuple(ReplyPool.from_dict(p) for p in d.get("replies", ()))
        window = d.get("context_window")
        return cls(latency, float(d.get("token_latency", 0.0)), faults, int(d.get("seed", 0)),
                   d.get("require_key_env"), pools, None if window is None else int(window),
                   str(d.get("window_in", "props")), bool(d.get("tokenizer", False)), str(d.get("rules", "current")))


class _Counters:
    def __init__(self) -> None:
        self.t0 = time.monotonic()
        self.requests = 0
        self.in_flight = 0
        self.max_concurrency = 0
        self.by_status: dict[str, int] = {}
        self.faults: dict[str, int] = {}
        self.by_model: dict[str, int] = {}
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.arrivals: list[float] = []
        self.rule_hits: list[int] = []
        self.token_counts = 0
        self.too_long = 0
        self.refused: dict[str, int] = {}

    def to_dict(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "in_flight": self.in_flight,
            "max_concurrency": self.max_concurrency,
            "by_status": dict(sorted(self.by_status.items())),
            "faults": dict(sorted(self.faults.items())),
            "by_model": dict(sorted(self.by_model.items())),
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "arrivals": list(self.arrivals[-10000:]),
            "token_counts": self.token_counts,
            "too_long": self.too_long,
            "refused": dict(sorted(self.refused.items())),
        }


class FakeServer:
    """The server; use ``async with FakeServer(cfg) as srv`` or :meth:`in_thread`.

    Attributes:
        url: ``http://127.0.0.1:PORT`` once started (Anthropic and Gemini base URL).
        openai_url: ``url + "/v1"`` (the OpenAI-compatible base URL).
    """

    def __init__(self, config: FakeConfig | None = None, host: str = "127.0.0.1", port: int = 0) -> None:
        self.config = config or FakeConfig()
        self.host, self.port = host, port
        self._rng = np.random.default_rng(self.config.seed)
        self._turns: dict[tuple[int, bool], int] = {}  # cycling pools: replies served so far
        self.counters = _Counters()
        self._runner: web.AppRunner | None = None
        self.url = ""
        self.app = web.Application(client_max_size=64 * 1024 * 1024)
        self.app.router.add_post("/v1/chat/completions", self._openai)
        self.app.router.add_post("/chat/completions", self._openai)
        self.app.router.add_post("/v1/messages", self._anthropic)
        self.app.router.add_post("/v1beta/models/{model}:generateContent", self._gemini)
        self.app.router.add_get("/stats", self._stats)
        self.app.router.add_post("/reset", self._reset)
        self.app.router.add_post("/config", self._config)
        self.app.router.add_get("/health", self._health)
        self.app.router.add_get("/props", self._props)
        self.app.router.add_get("/v1/models", self._models)
        self.app.router.add_post("/extras/tokenize/count", self._tokenize_count)

    @property
    def openai_url(self) -> str:
        return self.url + "/v1"

    # -- lifecycle -----------------------------------------------------------
    async def start(self) -> str:
        """Start listening; return the base URL."""
        # handler_cancellation: a request whose client hung up stops counting as in
        # flight, so /stats's high-water mark is what clients really had open.
        self._runner = web.AppRunner(self.app, handle_signals=False, access_log=None, shutdown_timeout=0.5,
                                     handler_cancellation=True)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, backlog=1024)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"http://{self.host}:{self.port}"
        return self.url

    async def stop(self) -> None:
        """Stop listening and drop open connections."""
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> "FakeServer":
        await self.start()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.stop()

    @contextlib.contextmanager
    def in_thread(self) -> Iterator["FakeServer"]:
        """Run the server on its own loop in a background thread (for synchronous callers)."""
        loop = asyncio.new_event_loop()
        ready = threading.Event()

        def serve() -> None:
            asyncio.set_event_loop(loop)
            loop.run_until_complete(self.start())
            ready.set()
            loop.run_forever()
            loop.run_until_complete(self.stop())
            loop.close()

        thread = threading.Thread(target=serve, name="fake-llm-server", daemon=True)
        thread.start()
        ready.wait(10)
        try:
            yield self
        finally:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(10)

    # -- control -------------------------------------------------------------
    def stats(self) -> dict[str, Any]:
        """The counters (what ``GET /stats`` returns)."""
        return {**self.counters.to_dict(), "config": self.config.to_dict()}

    def reset(self, config: FakeConfig | None = None) -> None:
        """Zero the counters, optionally replacing the config."""
        if config is not None:
            self.config = config
            self._rng = np.random.default_rng(config.seed)
        self.counters = _Counters()
        self._turns = {}

    async def _stats(self, request: web.Request) -> web.Response:
        return web.json_response(self.stats())

    async def _reset(self, request: web.Request) -> web.Response:
        self.reset()
        return web.json_response({"ok": True})

    async def _config(self, request: web.Request) -> web.Response:
        try:
            cfg = FakeConfig.from_dict(await request.json())
        except (ValueError, TypeError) as exc:
            return web.json_response({"error": {"message": str(exc)}}, status=400)
        self.reset(cfg)
        return web.json_response(self.stats())

    async def _health(self, request: web.Request) -> web.Response:
        return web.json_response({"ok": True})

    # -- what a local server says about its model ------------------------------------
    async def _props(self, request: web.Request) -> web.Response:
        window = self.config.context_window
        if window is None or self.config.window_in != "props":
            return _error(404, "Not Found")
        return web.json_response({"default_generation_settings": {"n_ctx": window}})

    async def _models(self, request: web.Request) -> web.Response:
        row: dict[str, Any] = {"id": "fake", "object": "model", "owned_by": "fake"}
        if self.config.context_window is not None and self.config.window_in == "models":
            row["max_model_len"] = self.config.context_window
        return web.json_response({"object": "list", "data": [row]})

    async def _tokenize_count(self, request: web.Request) -> web.Response:
        if not self.config.tokenizer:
            return _error(404, "Not Found")
        try:
            body = await request.json()
            text = str(body["input"])
        except (ValueError, KeyError, TypeError):
            return _error(422, "input: required")
        self.counters.token_counts += 1
        return web.json_response({"count": estimate_tokens(text)})

    # -- the three protocols ------------------------------------------------------
    async def _openai(self, request: web.Request) -> web.StreamResponse:
        return await self._serve(request, "openai")

    async def _anthropic(self, request: web.Request) -> web.StreamResponse:
        return await self._serve(request, "anthropic")

    async def _gemini(self, request: web.Request) -> web.StreamResponse:
        return await self._serve(request, "gemini")

    def _authorised(self, request: web.Request) -> bool:
        env = self.config.require_key_env
        if not env:
            return True
        key = os.environ.get(env, "")
        given = (request.headers.get("authorization", "").removeprefix("Bearer ")
                 or request.headers.get("x-api-key", "") or request.headers.get("x-goog-api-key", ""))
        return bool(key) and given == key

    def _pick_fault(self, model: str) -> Fault | None:
        c = self.counters
        if len(c.rule_hits) != len(self.config.faults):
            c.rule_hits = [0] * len(self.config.faults)
        chosen = None
        for i, rule in enumerate(self.config.faults):
            if not fnmatch.fnmatchcase(model, rule.model):
                continue
            c.rule_hits[i] += 1
            n = c.rule_hits[i]
            fires = n <= rule.first or (rule.every and n % rule.every == 0) or (
                rule.after is not None and n > rule.after) or (
                rule.rate and self._rng.random() < rule.rate)
            if fires and chosen is None:
                chosen = rule
        return chosen

    async def _serve(self, request: web.Request, protocol: str) -> web.StreamResponse:
        c = self.counters
        c.requests += 1
        c.in_flight += 1
        c.max_concurrency = max(c.max_concurrency, c.in_flight)
        c.arrivals.append(round(time.monotonic() - c.t0, 6))
        status: int | str = 200
        try:
            raw = await request.read()
            if not self._authorised(request):
                status = 401
                return _error(401, "invalid or missing API key")
            try:
                body = json.loads(raw)
                if not isinstance(body, dict):
                    raise ValueError
            except ValueError:
                status = 400
                return _error(400, "request body is not a JSON object")
            model = str(request.match_info.get("model") or body.get("model") or "")
            c.by_model[model] = c.by_model.get(model, 0) + 1
            fault = self._pick_fault(model)
            if fault is not None:
                c.faults[fault.kind] = c.faults.get(fault.kind, 0) + 1
            delay = self.config.latency.sample(self._rng)
            if fault is not None and fault.kind == "timeout":
                delay += fault.hang
            await asyncio.sleep(delay)
            current = self.config.rules == "current"
            if fault is not None and fault.http_status is not None:
                status = fault.http_status
                headers = {}
                if fault.should_retry is not None:
                    headers["x-should-retry"] = "true" if fault.should_retry else "false"
                if status == 429 and current:
                    wait = fault.retry_after if fault.retry_after is not None else 1.0
                    error, more = fake_behaviour.rate_limited(protocol, wait)
                    return web.json_response(error, status=429, headers={**headers, **more})
                if fault.retry_after is not None or status == 429:
                    headers["Retry-After"] = f"{fault.retry_after if fault.retry_after is not None else 1:g}"
                return _error(status, f"injected fault: HTTP {status}", headers)
            if fault is not None and fault.kind == "drop":
                status = 0
                assert request.transport is not None
                request.transport.abort()
                raise asyncio.CancelledError
            if fault is not None and fault.kind == "malformed":
                return web.Response(text='{"id": "fake-broken", "choices": [{"message": {"content": "{\\"ans',
                                    content_type="application/json")
            refusal = fake_behaviour.refuse(protocol, model, body) if current else None
            if refusal is not None:
                status = refusal.status
                c.refused[refusal.rule] = c.refused.get(refusal.rule, 0) + 1
                return web.json_response(refusal.body, status=refusal.status)
            window = self.config.context_window
            if window is not None and (protocol == "openai" or current):
                _, _, asked, texts = _read_request(protocol, body)
                too_long = fake_behaviour.overflow(protocol, window, sum(estimate_tokens(t) for t in texts), asked)
                if too_long is not None:
                    status = 400
                    c.too_long += 1
                    return web.json_response(too_long.body, status=400)
            thinking = fake_behaviour.thinking_tokens(protocol, model, body) if current else 0
            text, finish, prompt_tokens, thought = self._generate(protocol, body, fault, thinking)
            if fault is not None and fault.kind == "json_invalid":
                # Groq's answer to a reply that fails JSON validation (github.com/thepersonalaicompany/
                # amurex-backend/issues/38 quotes the body).
                status = 400
                return web.json_response({"error": {
                    "message": "Failed to generate JSON. Please adjust your prompt. See 'failed_generation' for more "
                               "details.", "type": "invalid_request_error", "code": "json_validate_failed",
                    "failed_generation": text}}, status=400)
            completion_tokens = estimate_tokens(text) + thought
            c.prompt_tokens += prompt_tokens
            c.completion_tokens += completion_tokens
            if self.config.token_latency:
                await asyncio.sleep(self.config.token_latency * completion_tokens)
            if fault is not None and fault.kind == "error200":
                # OpenRouter: a failure after generation started comes as HTTP 200 with
                # finish_reason "error" and an error object (openrouter.ai/docs/api/errors).
                return web.json_response({"id": "gen-fake", "object": "chat.completion", "model": model, "choices": [
                    {"index": 0, "message": {"role": "assistant", "content": ""}, "finish_reason": "error",
                     "error": {"code": 502, "message": "Provider returned error"}}]})
            payload = _wire_response(protocol, model, body, text, finish, prompt_tokens, completion_tokens, thought)
            return web.json_response(payload)
        except asyncio.CancelledError:
            if status == 200:
                status = "cancelled"  # the client gave up (e.g. its timeout) before the reply
            raise
        finally:
            c.in_flight -= 1
            key = str(status)
            c.by_status[key] = c.by_status.get(key, 0) + 1

    def _generate(self, protocol: str, body: Mapping[str, Any], fault: Fault | None,
                  thinking: int = 0) -> tuple[str, str, int, int]:
        """Reply text, finish reason, prompt tokens and thinking tokens spent for a request body.

        ``thinking`` tokens come out of the output budget first: a budget they use up
        leaves no answer (finish reason "length", no text), as real reasoning models do.
        """
        digest = hashlib.sha256(f"{self.config.seed}:{canonical_json(body)}".encode()).digest()
        rng = np.random.default_rng(int.from_bytes(digest[:16], "little"))
        schema, wants_json, max_tokens, texts = _read_request(protocol, body)
        prompt_tokens = sum(estimate_tokens(t) for t in texts)
        thought = min(thinking, max_tokens)
        room = max_tokens - thought
        if room <= 0:
            return "", "length", prompt_tokens, thought
        if fault is not None and fault.kind == "refusal":
            return "", "refusal", prompt_tokens, thought
        canned = self._canned(schema, wants_json, texts, rng)
        if canned is not None:
            text, finish = canned
            return text, finish, prompt_tokens, thought
        if schema is not None:
            text = json.dumps(sample_schema(schema, rng), ensure_ascii=False)
        elif wants_json:
            text = json.dumps({"reply": prose(rng, 12)})
        else:
            text = prose(rng, max(1, min(room // 2, 60)))
        finish = "stop"
        if fault is not None and fault.kind in ("nonjson", "json_invalid"):
            text = "Sure! Here is what I think: " + prose(rng, 10)
        if fault is not None and fault.kind in ("length", "window"):
            text, finish = text[: max(1, len(text) // 2)], fault.kind
        if len(text) > room * 4:
            text, finish = text[: room * 4], "length"
        return text, finish, prompt_tokens, thought

    def _canned(self, schema: Any, wants_json: bool, texts: list[str],
                rng: np.random.Generator) -> tuple[str, str] | None:
        """A reply from the first pool that matches the request, or None."""
        where = "\n".join(texts) + "\n" + str((schema or {}).get("title", ""))
        for k, pool in enumerate(self.config.replies):
            if pool.match in where:
                choices = [r for r in pool.replies if r[2]] if wants_json else list(pool.replies)
                if choices:
                    if pool.cycle:
                        turn = self._turns[(k, wants_json)] = self._turns.get((k, wants_json), -1) + 1
                        text, finish, _ = choices[turn % len(choices)]
                    else:
                        text, finish, _ = choices[int(rng.integers(len(choices)))]
                    return text, finish
        return None


def _error(status: int, message: str, headers: Mapping[str, str] | None = None) -> web.Response:
    return web.json_response({"error": {"message": message, "type": "fake_error", "code": status}},
                             status=status, headers=dict(headers or {}))


def _read_request(protocol: str, body: Mapping[str, Any]) -> tuple[Any, bool, int, list[str]]:
    """(schema, wants JSON, max tokens, prompt texts) of a request body."""
    if protocol == "anthropic":
        texts = [str(body.get("system", ""))] + [str(m.get("content", "")) for m in body.get("messages", [])]
        tools = body.get("tools") or []
        schema = tools[0].get("input_schema") if tools and body.get("tool_choice") else None
        fmt = (body.get("output_config") or {}).get("format") or {}
        if fmt.get("type") == "json_schema":
            schema = fmt.get("schema")
        return schema, schema is not None, int(body.get("max_tokens") or 256), texts
    if protocol == "gemini":
        texts = [p.get("text", "") for c in body.get("contents", []) for p in c.get("parts", [])]
        texts += [p.get("text", "") for p in (body.get("systemInstruction") or {}).get("parts", [])]
        cfg = body.get("generationConfig") or {}
        schema = cfg.get("responseJsonSchema") or cfg.get("responseSchema")
        wants = cfg.get("responseMimeType") == "application/json"
        return schema, wants, int(cfg.get("maxOutputTokens") or 256), texts
    texts = [str(m.get("content", "")) for m in body.get("messages", [])]
    fmt = body.get("response_format") or {}
    schema = None
    if fmt.get("type") == "json_schema":
        schema = (fmt.get("json_schema") or {}).get("schema")
    elif fmt.get("type") == "json_object":
        schema = fmt.get("schema")
    max_tokens = body.get("max_completion_tokens") or body.get("max_tokens") or 256
    return schema, bool(fmt), int(max_tokens), texts


def _wire_response(protocol: str, model: str, body: Mapping[str, Any], text: str, finish: str,
                   prompt_tokens: int, completion_tokens: int, thought: int = 0) -> dict[str, Any]:
    """The response body in the protocol's shape (``thought``: thinking tokens among the completion's)."""
    if protocol == "anthropic":
        tools = body.get("tools") or []
        blocks: list[dict[str, Any]] = []
        if thought:  # thinking shown "omitted" by default on current models: a signature, no text
            blocks.append({"type": "thinking", "thinking": "", "signature": "fake-signature"})
        if finish == "refusal":
            pass  # Claude may refuse with no content at all
        elif tools and body.get("tool_choice") and finish == "stop":
            try:
                blocks.append({"type": "tool_use", "id": "toolu_fake", "name": tools[0]["name"],
                               "input": json.loads(text)})
            except ValueError:
                blocks.append({"type": "text", "text": text})
        elif text:
            blocks.append({"type": "text", "text": text})
        tool = any(b["type"] == "tool_use" for b in blocks)
        stop = {"stop": "tool_use" if tool else "end_turn", "length": "max_tokens", "refusal": "refusal",
                "window": "model_context_window_exceeded"}[finish]
        usage: dict[str, Any] = {"input_tokens": prompt_tokens, "output_tokens": completion_tokens}
        if thought:
            usage["output_tokens_details"] = {"thinking_tokens": thought}
        return {"id": "msg_fake", "type": "message", "role": "assistant", "model": model, "content": blocks,
                "stop_reason": stop, "stop_sequence": None, "usage": usage}
    if protocol == "gemini":
        meta = {"promptTokenCount": prompt_tokens, "candidatesTokenCount": completion_tokens - thought,
                "totalTokenCount": prompt_tokens + completion_tokens}
        if thought:
            meta["thoughtsTokenCount"] = thought
        reason = {"stop": "STOP", "refusal": "SAFETY"}.get(finish, "MAX_TOKENS")
        candidate: dict[str, Any] = {"finishReason": reason, "index": 0}
        if text:
            candidate["content"] = {"role": "model", "parts": [{"text": text}]}
        return {"candidates": [candidate], "usageMetadata": meta, "modelVersion": model}
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if finish == "refusal":
        message = {"role": "assistant", "content": None, "refusal": "I'm sorry, I can't help with that."}
    answer = completion_tokens - thought
    usage = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
             "total_tokens": prompt_tokens + completion_tokens}
    if thought:
        usage["completion_tokens_details"] = {"reasoning_tokens": thought}
        if fake_behaviour.reasoning_apart(model):  # xAI: completion_tokens without the reasoning
            usage["completion_tokens"] = answer
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "system_fingerprint": "fp_fake",
        "choices": [{"index": 0, "message": message,
                     "finish_reason": {"refusal": "stop", "window": "length"}.get(finish, finish)}],
        "usage": usage,
    }


def parse_args(argv: Sequence[str] | None = None) -> tuple[FakeConfig, str, int]:
    """Parse the command line into (config, host, port); exits 2 on bad input."""
    parser = argparse.ArgumentParser(
        prog="python -m backends.fake_server",
        description="A fake OpenAI-compatible (and Anthropic/Gemini) LLM server with latency and fault injection.",
    )
    parser.add_argument("--host", default="127.0.0.1", help="interface (default: 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8089, help="port; 0 picks a free one (default: 8089)")
    parser.add_argument("--latency", default="fixed:0", help="fixed:S | uniform:A,B | exp:MEAN | "
                        "lognormal:MEDIAN,SIGMA | normal:MEAN,SD (default: fixed:0)")
    parser.add_argument("--token-latency", type=float, default=0.0, help="extra seconds per completion token")
    parser.add_argument("--fault", action="append", default=[], metavar="SPEC",
                        help="KIND[:rate=P,first=N,every=K,model=GLOB,retry_after=S,hang=S,should_retry=true|false]; "
                             "repeatable")
    parser.add_argument("--seed", type=int, default=0, help="seed of replies, latencies and random faults")
    parser.add_argument("--require-key-env", metavar="VAR", default=None,
                        help="answer 401 unless requests carry the key held in $VAR")
    parser.add_argument("--replies", metavar="FILE", default=None,
                        help="JSON list of canned reply pools ({match, replies}; see the module docstring)")
    parser.add_argument("--context-window", type=int, default=None, metavar="N",
                        help="refuse chat completions whose prompt and max_tokens pass N tokens, as llama.cpp does")
    parser.add_argument("--window-in", default="props", choices=WINDOW_IN,
                        help="where the window is told: GET /props, GET /v1/models, or only in refusals")
    parser.add_argument("--tokenizer", action="store_true", help="serve POST /extras/tokenize/count")
    parser.add_argument("--rules", default="current", choices=fake_behaviour.RULES,
                        help="current: models named as providers name them follow the providers' published rules "
                             "(refusals, reasoning budgets, error shapes; backends/fake_behaviour.py); none: no "
                             "rules (default: current)")
    args = parser.parse_args(argv)
    try:
        pools: tuple[ReplyPool, ...] = ()
        if args.replies:
            try:
                data = json.loads(Path(args.replies).read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
                raise ValueError(f"replies: cannot read {args.replies}: {exc}") from None
            if not isinstance(data, list):
                raise ValueError(f"replies: {args.replies} must hold a JSON list of pools")
            pools = tuple(ReplyPool.from_dict(p) for p in data)
        cfg = FakeConfig(Latency.parse(args.latency), args.token_latency,
                         tuple(Fault.parse(f) for f in args.fault), args.seed, args.require_key_env, pools,
                         args.context_window, args.window_in, args.tokenizer, args.rules)
    except (ValueError, KeyError, TypeError) as exc:
        parser.exit(2, f"{parser.prog}: error: {exc}\n")
    return cfg, args.host, args.port


async def _main(cfg: FakeConfig, host: str, port: int) -> None:
    server = FakeServer(cfg, host, port)
    await server.start()
    print(f"fake server listening on {server.url} (OpenAI base URL {server.openai_url})", flush=True)
    try:
        await asyncio.Event().wait()
    finally:
        await server.stop()


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point; serves until interrupted."""
    cfg, host, port = parse_args(argv)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_main(cfg, host, port))
    return 0


__all__ = ["FakeConfig", "FakeServer", "Fault", "Latency", "ReplyPool", "main"]

if __name__ == "__main__":
    sys.exit(main())
