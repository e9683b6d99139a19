"""The capture proxy: a server on 127.0.0.1 that speaks the programs' APIs, records and perturbs.

:func:`make_app` is the one application factory; :class:`Proxy` serves it on a
free port of 127.0.0.1 for one run of a program. Routes:

=============================  ==============================================================
``POST /v1/chat/completions``  OpenAI's chat completions (also without ``/v1``)
``POST /v1/responses``         OpenAI's Responses API (also without ``/v1``)
``POST /v1/messages``          Anthropic's Messages API
``GET /v1/models``             forwarded (the stub lists ``stub``); not recorded
anything else                  404, naming the endpoint and the ones above
=============================  ==============================================================

A call goes: the perturbation's request changes (``inject on=prompt``,
``budget``), the ``llm.call`` event, then the reply: from the baseline's record
when prefix reuse allows (the call was made before the perturbation point, with
a request identical to the baseline's), else from the upstream: as it is where the
upstream speaks the call's API, else translated to chat completions and its reply
back (:class:`~simcore.capture.wire.Api`); then the perturbation's reply changes
(text operators, ``delay``) or, instead of any reply, ``fail`` (HTTP 500 with the
API's error body) or ``drop`` (the connection is closed unanswered); then the
``llm.reply`` or ``llm.error`` event. A streamed request (``stream: true``) is sent
upstream unstreamed and its complete reply returned as the API's server-sent
events, so that a perturbation sees the whole text.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import json
import time
from collections.abc import Mapping
from typing import Any

from aiohttp import web

from simcore.capture.messages_api import MESSAGES
from simcore.capture.perturb import CallPerturbation, Plan
from simcore.capture.recording import Recording, Redactor
from simcore.capture.responses_api import RESPONSES, Conversations
from simcore.capture.upstream import HttpUpstream, StubUpstream
from simcore.capture.wire import (
    CHAT,
    Api,
    Reply,
    Untranslatable,
    as_request,
    tool_names,
)

#: The APIs the proxy speaks, in the order its 404 names them.
APIS: tuple[Api, ...] = (CHAT, RESPONSES, MESSAGES)

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
        replies: This run's replies by (digest, occurrence) (a baseline's, for its perturbed runs): the
            body as the program's API has it, and what was recorded of it.
        conversations: The Responses API's responses given, for ``previous_response_id``.
    """

    upstream: StubUpstream | HttpUpstream
    recording: Recording
    redactor: Redactor
    seed: int
    model: str | None = None
    perturbation: CallPerturbation | None = None
    baseline: Mapping[tuple[str, int], tuple[Any, Reply]] | None = None
    replies: dict[tuple[str, int], tuple[Any, Reply]] = dataclasses.field(default_factory=dict)
    conversations: Conversations = dataclasses.field(default_factory=Conversations)


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


def _bad(api: Api, status: int, message: str) -> web.Response:
    return web.json_response(api.error_body(status, message), status=status)


def _message_of(data: Any, text: str) -> str:
    """An upstream error's message, from its body (OpenAI's or Anthropic's shape) or its text."""
    err = data.get("error") if isinstance(data, Mapping) else None
    if isinstance(err, Mapping) and err.get("message"):
        return str(err["message"])[:500]
    return text[:500]


def _route(api: Api, upstream: StubUpstream | HttpUpstream) -> str | None:
    """The API a call goes upstream in: its own where the upstream speaks it, else chat completions."""
    if api.name in upstream.speaks:
        return api.name
    return "chat" if "chat" in upstream.speaks else None


async def call(request: web.Request, api: Api) -> web.StreamResponse:
    """One call of the program, in ``api``."""
    s = request.app[SESSION_KEY]
    for name in KEY_HEADERS:
        s.redactor.add(request.headers.get(name))
    s.recording.endpoint(f"POST {request.path}")
    try:
        body = json.loads(await request.text())
    except (ValueError, UnicodeDecodeError):
        return _bad(api, 400, "the request body is not JSON")
    problem = api.check(body)
    if problem is not None:
        return _bad(api, 400, problem)
    route = _route(api, s.upstream)
    if route is None:
        return _bad(api, 400, f"the upstream speaks only {', '.join(s.upstream.speaks)}; the proxy translates a "
                              f"{api.label} call to chat completions, which it does not speak (--upstream-api)")
    stream, options = bool(body.pop("stream", False)), body.pop("stream_options", None)
    earlier = s.conversations.earlier(body) if api is RESPONSES else None
    view, problems = api.to_chat(body, earlier)
    if problems and route != api.name:
        return _bad(api, 400, f"{problems[0]}, and the upstream speaks only {', '.join(s.upstream.speaks)} "
                              "(--upstream-api)")
    agent = _label(request.headers.get(AGENT_HEADER))
    fields = call_fields(view, request.headers)
    rec, pert = s.recording, s.perturbation
    plan = pert.plan(agent, fields, rec.clock) if pert is not None else Plan()
    reusable = s.baseline is not None and pert is not None and pert.point is None and not plan.changes_request
    if plan.changes_request or s.model:
        _change_request(api, body, plan, pert, agent, fields, rec)
        if s.model:
            body["model"] = s.model
        view = api.to_chat(body, earlier)[0]
    llm = as_request(view, agent, s.seed, api.name)
    key = rec.call(agent, fields, llm, api.name, stream)
    model = llm.model or s.upstream.spec.model
    if pert is not None and plan.withholds_reply:
        op = plan.fail or plan.drop
        pert.log(op, agent, fields, t=rec.clock, event=len(rec.trace), calls=rec.counts["calls"] - 1)
        message = f"call failed by the perturbation ({op.spec()})" if plan.fail else "reply dropped by the perturbation"
        rec.error(agent, fields, llm, key[1], model=model, kind="PerturbationError" if plan.fail else "dropped",
                  message=message, status=500 if plan.fail else None, live=False)
        if plan.fail:
            return _bad(api, 500, message)
        raise _Dropped
    cached = s.baseline.get(key) if reusable else None  # type: ignore[union-attr]
    start = time.perf_counter()
    if cached is not None:
        data, reply = cached
    else:
        answer = await s.upstream.send(route, body if route == api.name else view, llm, request.headers)
        data, reply, failure = _answer(api, route, answer, body, key)
        if reply is None:
            status = answer.status if answer.status != 200 else 502
            rec.error(agent, fields, llm, key[1], model=model, kind=f"HTTP {status}", message=failure,
                      status=status, live=True)
            if route == api.name and answer.status != 200 and isinstance(answer.data, dict):
                return web.json_response(answer.data, status=status)
            return _bad(api, status, failure)
    latency = time.perf_counter() - start
    s.replies[key] = (data, reply)
    changed = None
    if plan.reply and pert is not None:
        new = reply.text
        for op in plan.reply:
            before, new = new, op.transform(new)
            pert.log(op, agent, fields, t=rec.clock, event=len(rec.trace), calls=rec.counts["calls"] - 1,
                     target="reply", chars=[len(before), len(new)])
        changed = {"chars": [len(reply.text), len(new)]}
        data, reply = api.with_text(data, new), dataclasses.replace(reply, text=new)
    for op in plan.delay:
        pert.log(op, agent, fields, t=rec.clock, event=len(rec.trace), calls=rec.counts["calls"] - 1,  # type: ignore[union-attr]
                 delay_s=op.options["by"])
        await asyncio.sleep(op.options["by"])
    rec.reply(agent, fields, llm, key[1], reply, model=reply.model or model, latency_s=latency,
              reused=cached is not None, changed=changed)
    if api is RESPONSES:
        s.conversations.keep(body, view, data)
    if not stream:
        return web.json_response(data)
    out = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
    await out.prepare(request)
    for chunk in api.events(data, options):
        await out.write(chunk)
    await out.write_eof()
    return out


def _answer(api: Api, route: str, answer: Any, body: Mapping[str, Any],
            key: tuple[str, int]) -> tuple[Any, Reply | None, str]:
    """An upstream's answer as the program's API has it, what is recorded of it, and, when it is no
    reply, why (one line)."""
    if answer.status != 200:
        return None, None, _message_of(answer.data, answer.text)
    if route == api.name:
        reply = api.read(answer.data)
        return answer.data, reply, "" if reply else f"the upstream's reply is no {api.label} reply: {answer.text[:300]}"
    reply = CHAT.read(answer.data)
    if reply is None:
        return None, None, f"the upstream's reply is no chat completion: {answer.text[:300]}"
    try:
        # The record keeps the chat reply's usage: a translated reply may have to say 0 where none was given.
        return api.from_chat(answer.data, body, f"{key[0][:24]}{key[1]}"), reply, ""
    except Untranslatable as exc:
        return None, None, str(exc)


def _change_request(api: Api, body: dict[str, Any], plan: Plan, pert: CallPerturbation | None, agent: str,
                    fields: Mapping[str, Any], rec: Recording) -> None:
    """Apply the request-side operators to ``body`` in place (``inject on=prompt``, ``budget``)."""
    if pert is None:
        return
    where = {"t": rec.clock, "event": len(rec.trace), "calls": rec.counts["calls"]}
    for op in plan.prompt:
        api.inject(body, op.transform)
        pert.log(op, agent, fields, target="prompt", **where)
    if plan.budget is not None:
        tokens = plan.budget.options["tokens"]
        before = api.budget(body, tokens)
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
    s.recording.endpoint(f"GET {request.path}")
    answer = await s.upstream.models(request.headers.get("Authorization"))
    data = answer.data if isinstance(answer.data, dict) else CHAT.error_body(answer.status, answer.text)
    return web.json_response(data, status=answer.status)


def spoken() -> str:
    """The endpoints the proxy speaks, as its 404 names them."""
    return ", ".join([*(f"POST {a.paths[0]} ({a.label})" for a in APIS), "GET /v1/models"])


async def unknown(request: web.Request) -> web.Response:
    """Any other endpoint: a 404 whose body names it and the ones the proxy speaks, in a shape both
    OpenAI's SDKs (``error.message``) and Anthropic's (``type: error``) read."""
    s = request.app[SESSION_KEY]
    endpoint = f"{request.method} {request.path}"
    s.recording.endpoint(endpoint, spoken=False)
    message = f"the capture proxy does not speak {endpoint}; it speaks {spoken()}"
    return web.json_response({"type": "error", "error": {"type": "not_found_error", "message": message,
                                                         "code": 404}}, status=404)


def make_app(session: Session) -> web.Application:
    """The proxy's application for one run."""
    app = web.Application(client_max_size=MAX_BODY, middlewares=[drops])
    app[SESSION_KEY] = session
    for api in APIS:
        app.add_routes([web.post(path, functools.partial(call, api=api)) for path in api.paths])
    app.add_routes([web.get("/v1/models", models), web.get("/models", models), web.route("*", "/{tail:.*}", unknown)])
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

    async def __aexit__(self, *exc: object) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
