"""The capture proxy: an OpenAI-compatible chat server on 127.0.0.1 that records and perturbs.

:func:`make_app` is the one application factory; :class:`Proxy` serves it on a
free port of 127.0.0.1 for one run of a program. Routes:

=============================  ==============================================================
``POST /v1/chat/completions``  forwarded to the upstream, recorded, perturbed (also without ``/v1``)
``GET /v1/models``             forwarded (the stub lists ``stub``); not recorded
=============================  ==============================================================

A call goes: the perturbation's request changes (``inject on=prompt``,
``budget``), the ``llm.call`` event, then the reply: from the baseline's record
when prefix reuse allows (the call was made before the perturbation point, with
a request identical to the baseline's), else from the upstream; then the
perturbation's reply changes (text operators, ``delay``) or, instead of any
reply, ``fail`` (HTTP 500) or ``drop`` (the connection is closed unanswered);
then the ``llm.reply`` or ``llm.error`` event. A streamed request (``stream:
true``) is sent upstream unstreamed and its complete reply returned as
server-sent events, so that a perturbation sees the whole text.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
from typing import Any, Mapping

from aiohttp import web

from simcore.capture.perturb import CallPerturbation, Plan
from simcore.capture.recording import Recording, Redactor
from simcore.capture.upstream import HttpUpstream, StubUpstream
from simcore.capture.wire import (
    as_request,
    error_body,
    read_reply,
    sse_events,
    tool_names,
    with_text,
)

SESSION_KEY = web.AppKey("capture_session", "Session")
AGENT_HEADER = "X-Simcore-Agent"
PHASE_HEADER = "X-Simcore-Phase"
DEFAULT_AGENT = "program"
#: Headers that carry keys: remembered as secrets, never recorded.
KEY_HEADERS = ("Authorization", "api-key", "x-api-key")
MAX_BODY = 64 * 1024 * 1024


@dataclasses.dataclass
class Session:
    """What the proxy needs for one run.

    Attributes:
        upstream: Where calls go.
        recording: Where they are recorded.
        redactor: Secrets seen (shared with the recording).
        seed: The run's seed (the stub's, for requests that name none).
        model: Sent instead of the model the program asks for (None: as asked).
        perturbation: The run's perturbation, or None for a clean run.
        baseline: The baseline's replies by (digest, occurrence), for prefix reuse; None: no reuse.
        replies: This run's replies by (digest, occurrence) (a baseline's, for its perturbed runs).
    """

    upstream: StubUpstream | HttpUpstream
    recording: Recording
    redactor: Redactor
    seed: int
    model: str | None = None
    perturbation: CallPerturbation | None = None
    baseline: Mapping[tuple[str, int], Any] | None = None
    replies: dict[tuple[str, int], Any] = dataclasses.field(default_factory=dict)


def call_fields(body: Mapping[str, Any], headers: Mapping[str, str]) -> dict[str, Any]:
    """A call's structural fields (see :mod:`simcore.capture.recording`)."""
    messages = body.get("messages") or []
    last = messages[-1].get("role") if messages and isinstance(messages[-1], Mapping) else None
    fields: dict[str, Any] = {"model": str(body.get("model") or ""), "messages": len(messages),
                              "role": str(last or "")}
    tools = tool_names(body)
    if tools:
        fields["tools"] = ",".join(sorted(tools))
    fmt = body.get("response_format")
    if isinstance(fmt, Mapping) and fmt.get("type"):
        fields["format"] = str(fmt["type"])
    if headers.get(PHASE_HEADER):
        fields["phase"] = headers[PHASE_HEADER][:64]
    return fields


def _label(value: str | None) -> str:
    value = (value or "").strip()
    return value[:64] if value and value.isprintable() else DEFAULT_AGENT


def _bad(status: int, message: str) -> web.Response:
    return web.json_response(error_body(status, message, "invalid_request_error"), status=status)


async def chat(request: web.Request) -> web.StreamResponse:
    s = request.app[SESSION_KEY]
    for name in KEY_HEADERS:
        s.redactor.add(request.headers.get(name))
    try:
        body = json.loads(await request.text())
    except (ValueError, UnicodeDecodeError):
        return _bad(400, "the request body is not JSON")
    if not isinstance(body, dict) or not isinstance(body.get("messages"), list) or not body["messages"]:
        return _bad(400, "the request body must be a JSON object with a non-empty messages list")
    agent = _label(request.headers.get(AGENT_HEADER))
    fields = call_fields(body, request.headers)
    rec, pert = s.recording, s.perturbation
    plan = pert.plan(agent, fields, rec.clock) if pert is not None else Plan()
    reusable = s.baseline is not None and pert is not None and pert.point is None and not plan.changes_request
    stream, options = body.pop("stream", False), body.pop("stream_options", None)
    _change_request(body, plan, pert, agent, fields, rec)
    if s.model:
        body["model"] = s.model
    llm = as_request(body, agent, s.seed)
    key = rec.call(agent, fields, llm)
    model = llm.model or s.upstream.spec.model
    if pert is not None and plan.withholds_reply:
        op = plan.fail or plan.drop
        pert.log(op, agent, fields, t=rec.clock, event=len(rec.trace), calls=rec.counts["calls"] - 1)
        message = f"call failed by the perturbation ({op.spec()})" if plan.fail else "reply dropped by the perturbation"
        rec.error(agent, fields, llm, key[1], model=model, kind="PerturbationError" if plan.fail else "dropped",
                  message=message, status=500 if plan.fail else None, live=False)
        if plan.fail:
            return web.json_response(error_body(500, message, "server_error"), status=500)
        raise _Dropped
    cached = s.baseline.get(key) if reusable else None  # type: ignore[union-attr]
    start = time.perf_counter()
    if cached is not None:
        status, data, text = 200, cached, ""
    else:
        answer = await s.upstream.chat(body, llm, request.headers.get("Authorization"))
        status, data, text = answer.status, answer.data, answer.text
    latency = time.perf_counter() - start
    reply = read_reply(data) if status == 200 else None
    if reply is None:
        if status == 200:  # an answer that is no chat completion: the program gets a gateway error
            status, data, text = 502, None, f"the upstream's reply is not a chat completion: {text[:300]}"
        rec.error(agent, fields, llm, key[1], model=model, kind=f"HTTP {status}", message=text[:500],
                  status=status, live=True)
        return web.json_response(data if isinstance(data, dict) else error_body(status, text[:500]), status=status)
    s.replies[key] = data
    changed = None
    if plan.reply and pert is not None:
        new = reply.text
        for op in plan.reply:
            before, new = new, op.transform(new)
            pert.log(op, agent, fields, t=rec.clock, event=len(rec.trace), calls=rec.counts["calls"] - 1,
                     target="reply", chars=[len(before), len(new)])
        changed = {"chars": [len(reply.text), len(new)]}
        data, reply = with_text(data, new), dataclasses.replace(reply, text=new)
    for op in plan.delay:
        pert.log(op, agent, fields, t=rec.clock, event=len(rec.trace), calls=rec.counts["calls"] - 1,  # type: ignore[union-attr]
                 delay_s=op.options["by"])
        await asyncio.sleep(op.options["by"])
    rec.reply(agent, fields, llm, key[1], reply, model=reply.model or model, latency_s=latency,
              reused=cached is not None, changed=changed)
    if not stream:
        return web.json_response(data)
    out = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
    await out.prepare(request)
    include_usage = isinstance(options, Mapping) and bool(options.get("include_usage"))
    for chunk in sse_events(data, include_usage):
        await out.write(chunk)
    await out.write_eof()
    return out


def _change_request(body: dict[str, Any], plan: Plan, pert: CallPerturbation | None, agent: str,
                    fields: Mapping[str, Any], rec: Recording) -> None:
    """Apply the request-side operators to ``body`` in place (``inject on=prompt``, ``budget``)."""
    if pert is None:
        return
    where = {"t": rec.clock, "event": len(rec.trace), "calls": rec.counts["calls"]}
    for op in plan.prompt:
        last = body["messages"][-1]
        if isinstance(last, dict):
            body["messages"][-1] = {**last, "content": op.transform(str(last.get("content") or ""))}
        pert.log(op, agent, fields, target="prompt", **where)
    if plan.budget is not None:
        tokens = plan.budget.options["tokens"]
        before = body.get("max_completion_tokens", body.get("max_tokens"))
        for name in ("max_completion_tokens", "max_tokens"):
            if name in body or (name == "max_tokens" and "max_completion_tokens" not in body):
                body[name] = tokens
        pert.log(plan.budget, agent, fields, max_tokens=[before, tokens], **where)


class _Dropped(Exception):
    """A reply the perturbation drops: the connection closes without an answer."""


@web.middleware
async def drops(request: web.Request, handler: Any) -> web.StreamResponse:
    """Close the connection of a dropped reply without answering."""
    try:
        return await handler(request)
    except _Dropped:
        if request.transport is not None:
            request.transport.close()
        raise asyncio.CancelledError from None


async def models(request: web.Request) -> web.Response:
    s = request.app[SESSION_KEY]
    for name in KEY_HEADERS:
        s.redactor.add(request.headers.get(name))
    answer = await s.upstream.models(request.headers.get("Authorization"))
    return web.json_response(answer.data if isinstance(answer.data, dict) else error_body(answer.status, answer.text),
                             status=answer.status)


def make_app(session: Session) -> web.Application:
    """The proxy's application for one run."""
    app = web.Application(client_max_size=MAX_BODY, middlewares=[drops])
    app[SESSION_KEY] = session
    app.add_routes([
        web.post("/v1/chat/completions", chat),
        web.post("/chat/completions", chat),
        web.get("/v1/models", models),
        web.get("/models", models),
    ])
    return app


class Proxy:
    """:func:`make_app` served on 127.0.0.1 (a free port); ``async with Proxy(session) as url:``.

    ``url`` ends in ``/v1``: what ``OPENAI_BASE_URL`` takes.
    """

    def __init__(self, session: Session) -> None:
        self.session = session
        self._runner: web.AppRunner | None = None
        self.url = ""

    async def __aenter__(self) -> str:
        self._runner = web.AppRunner(make_app(self.session), handle_signals=False, access_log=None,
                                     shutdown_timeout=0.5)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"http://127.0.0.1:{port}/v1"
        return self.url

    async def __aexit__(self, *exc: Any) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
