"""The wire formats the capture proxy speaks, and the chat-completions one it records in.

Every API the proxy speaks is an :class:`Api`: OpenAI's chat completions
(:data:`CHAT`, here), OpenAI's Responses API (:mod:`.responses_api`) and
Anthropic's Messages API (:mod:`.messages_api`). A call in any of them is
recorded through its chat-completions view (:meth:`Api.to_chat`), which is also
what a chat-only upstream is sent; a chat-completions reply is turned back into
the program's API by :meth:`Api.from_chat`.

The chat-completions format itself:

- :func:`as_request`: a request body as an :class:`~backends.base.LLMRequest`
  (what the stub answers, what the cassette keeps and what its digest keys);
- :func:`read_reply`: the parts of a reply body the proxy records and perturbs;
- :func:`reply_body`: a reply body from a simcore :class:`~backends.base.LLMResponse`;
- :func:`sse_events`: a complete reply as the server-sent events of a streamed one.
"""

from __future__ import annotations

import abc
import copy
import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from backends.base import LLMRequest, LLMResponse, Message

#: What a request that names no token limit gets (the stub's cut-off, the cassette's record).
DEFAULT_MAX_TOKENS = 1024
#: The APIs the proxy speaks, by the names ``--upstream-api`` takes.
API_NAMES = ("chat", "responses", "messages")


def message_text(message: Mapping[str, Any]) -> str:
    """A chat message's text: its content (text parts joined), then any tool calls it makes."""
    content = message.get("content")
    if isinstance(content, list):
        text = "\n".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping) and p.get("type") == "text")
    else:
        text = "" if content is None else str(content)
    for call in message.get("tool_calls") or []:
        fn = (call.get("function") or {}) if isinstance(call, Mapping) else {}
        text += f"\n[tool call {fn.get('name', '?')}({fn.get('arguments', '')})]"
    return text


def content_text(content: Any, kinds: tuple[str, ...] = ("text",)) -> str:
    """A message's content as text: a string as it is, a list of parts as its text parts (of the types
    ``kinds``) joined, anything else as ""."""
    if isinstance(content, list):
        return "".join(str(p.get("text") or "") for p in content if isinstance(p, Mapping) and p.get("type") in kinds)
    return content if isinstance(content, str) else ""


def chat_content(parts: list[dict[str, Any]]) -> Any:
    """Chat-completions content from parts: one string where they are all text, else the parts."""
    if all(p["type"] == "text" for p in parts):
        return "\n".join(p["text"] for p in parts)
    return parts


def named_event(event: Mapping[str, Any]) -> bytes:
    """A server-sent event named by its ``type`` (as the Responses and Messages APIs stream them)."""
    return f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode()


def tool_names(body: Mapping[str, Any]) -> list[str]:
    """The names of the tools a request offers."""
    out = []
    for tool in body.get("tools") or []:
        fn = tool.get("function") if isinstance(tool, Mapping) else None
        if isinstance(fn, Mapping) and fn.get("name"):
            out.append(str(fn["name"]))
    return out


def _schema(body: Mapping[str, Any]) -> Mapping[str, Any] | None:
    fmt = body.get("response_format")
    if not isinstance(fmt, Mapping):
        return None
    if fmt.get("type") == "json_schema":
        inner = fmt.get("json_schema") or {}
        return inner.get("schema") if isinstance(inner, Mapping) else None
    if fmt.get("type") == "json_object":
        return fmt.get("schema") if isinstance(fmt.get("schema"), Mapping) else {"type": "object"}
    return None


def _number(value: Any, default: float) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else default


def as_request(body: Mapping[str, Any], agent: str, seed: int, api: str = "chat") -> LLMRequest:
    """The program's request (its chat-completions view) as simcore sees it.

    ``agent`` (the caller's label) goes into the metadata, as an agent's name does
    in a simulation; ``seed`` stands in when the body names none; ``api``, when not
    chat, too, so that one request asked in two APIs keeps two replies.
    """
    messages = body.get("messages")
    messages = messages if isinstance(messages, list) else []
    limit = body.get("max_completion_tokens") or body.get("max_tokens")
    seed_given = body.get("seed")
    return LLMRequest(
        model=str(body.get("model") or ""),
        messages=tuple(Message(str(m.get("role", "user")), message_text(m)) for m in messages
                       if isinstance(m, Mapping)),
        max_tokens=int(limit) if isinstance(limit, int) and not isinstance(limit, bool) and limit > 0
        else DEFAULT_MAX_TOKENS,
        temperature=_number(body.get("temperature"), 1.0),
        seed=seed_given if isinstance(seed_given, int) and not isinstance(seed_given, bool) else seed,
        schema=_schema(body),
        metadata={"agent": agent, **({"tools": tool_names(body)} if body.get("tools") else {}),
                  **({"api": api} if api != "chat" else {})},
    )


@dataclass(frozen=True)
class Reply:
    """What the proxy keeps of a reply body.

    Attributes:
        text: The first choice's message content ("" when it has none).
        tool_calls: The names of the tools it calls, in order.
        finish_reason: As the upstream gave it.
        usage: (prompt, completion) tokens, or None when the upstream reported none.
        model: The model that answered.
    """

    text: str
    tool_calls: tuple[str, ...]
    finish_reason: str
    usage: tuple[int, int] | None
    model: str


def read_reply(data: Any) -> Reply | None:
    """The parts of a chat-completions reply body, or None when it is not one."""
    try:
        choice = data["choices"][0]
        message = choice.get("message") or {}
    except (KeyError, IndexError, TypeError, AttributeError):
        return None
    if not isinstance(message, Mapping):
        return None
    calls = []
    for call in message.get("tool_calls") or []:
        fn = call.get("function") if isinstance(call, Mapping) else None
        calls.append(str(fn.get("name", "?")) if isinstance(fn, Mapping) else "?")
    raw = data.get("usage")
    usage = None
    if isinstance(raw, Mapping) and isinstance(raw.get("prompt_tokens"), int):
        usage = (int(raw["prompt_tokens"]), int(raw.get("completion_tokens") or 0))
    content = message.get("content")
    return Reply("" if content is None else str(content), tuple(calls), str(choice.get("finish_reason") or "stop"),
                 usage, str(data.get("model") or ""))


def with_text(data: Mapping[str, Any], text: str) -> dict[str, Any]:
    """A copy of a reply body whose first choice says ``text``."""
    out = json.loads(json.dumps(data))
    out["choices"][0].setdefault("message", {})["content"] = text
    return out


def reply_body(response: LLMResponse, key: str) -> dict[str, Any]:
    """A chat-completions reply body for a simcore response (``key``: a stable id for it)."""
    usage = response.usage
    body: dict[str, Any] = {
        "id": f"chatcmpl-simcore-{key}",
        "object": "chat.completion",
        "created": 0,
        "model": response.model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": response.text},
                     "finish_reason": response.finish_reason}],
    }
    if usage is not None:
        body["usage"] = {"prompt_tokens": usage.prompt_tokens, "completion_tokens": usage.completion_tokens,
                         "total_tokens": usage.prompt_tokens + usage.completion_tokens}
    return body


def error_body(status: int, message: str, kind: str = "capture_error") -> dict[str, Any]:
    """An error body in the shape OpenAI's SDKs read (``error.message``, ``error.type``)."""
    return {"error": {"message": message, "type": kind, "param": None, "code": status}}


def sse_events(data: Mapping[str, Any], include_usage: bool) -> Iterator[bytes]:
    """A complete reply body as the events of a streamed reply (``stream: true``)."""
    choice = (data.get("choices") or [{}])[0]
    message = choice.get("message") or {}
    head = {k: data.get(k) for k in ("id", "created", "model")}
    head["object"] = "chat.completion.chunk"
    delta: dict[str, Any] = {"role": "assistant", "content": message.get("content") or ""}
    if message.get("tool_calls"):
        delta["tool_calls"] = [{"index": i, **c} for i, c in enumerate(message["tool_calls"])]
    chunks = [
        {**head, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
        {**head, "choices": [{"index": 0, "delta": {}, "finish_reason": choice.get("finish_reason") or "stop"}]},
    ]
    if include_usage and data.get("usage") is not None:
        chunks.append({**head, "choices": [], "usage": data["usage"]})
    for chunk in chunks:
        yield f"data: {json.dumps(chunk)}\n\n".encode()
    yield b"data: [DONE]\n\n"


class Untranslatable(ValueError):
    """A reply that one API cannot say in another (its message: one line, why)."""


class Api(abc.ABC):
    """A wire format the proxy speaks: how its calls are read, recorded, perturbed and answered.

    Attributes:
        name: As ``--upstream-api`` names it (one of :data:`API_NAMES`).
        label: As messages name it.
        paths: The routes it answers (``POST``).
    """

    name = ""
    label = ""
    paths: tuple[str, ...] = ()

    @abc.abstractmethod
    def check(self, body: Any) -> str | None:
        """Why ``body`` is no request of this API, in one line; None when it is one."""

    @abc.abstractmethod
    def to_chat(self, body: Mapping[str, Any],
                earlier: list[dict[str, Any]] | None = None) -> tuple[dict[str, Any], list[str]]:
        """The request's chat-completions view, and what of it has no chat-completions equivalent
        (one line each; the view then stands in for it, for the record).

        ``earlier``: the conversation a request continues (the Responses API's
        ``previous_response_id``), where the API has such a thing.
        """

    @abc.abstractmethod
    def from_chat(self, chat: Mapping[str, Any], body: Mapping[str, Any], ident: str) -> dict[str, Any]:
        """A chat-completions reply to ``body`` as this API's reply (``ident``: a stable id for it).

        Raises:
            Untranslatable: the reply cannot be said in this API.
        """

    @abc.abstractmethod
    def read(self, data: Any) -> Reply | None:
        """What the proxy keeps of a reply body, or None when it is no reply of this API."""

    @abc.abstractmethod
    def with_text(self, data: Mapping[str, Any], text: str) -> dict[str, Any]:
        """A copy of a reply body whose text (what :meth:`read` reads as ``text``) is ``text``."""

    @abc.abstractmethod
    def events(self, data: Mapping[str, Any], options: Any) -> Iterator[bytes]:
        """A complete reply as the server-sent events of a streamed one (``options``: the request's
        ``stream_options``)."""

    @abc.abstractmethod
    def error_body(self, status: int, message: str) -> dict[str, Any]:
        """An error body in the shape this API's SDK reads."""

    @abc.abstractmethod
    def inject(self, body: dict[str, Any], transform: Callable[[str], str]) -> None:
        """Change the text of the request's last message in place (``inject on=prompt``)."""

    @abc.abstractmethod
    def budget(self, body: dict[str, Any], tokens: int) -> Any:
        """Set the request's token limit in place; returns the limit it had (None: none)."""


def last_text(parts: list[Any], transform: Callable[[str], str], kinds: tuple[str, ...], new: str) -> None:
    """Apply ``transform`` to the last text part of a content list (of types ``kinds``), in place;
    without one, add a ``new``-typed part with ``transform("")``."""
    for part in reversed(parts):
        if isinstance(part, dict) and part.get("type") in kinds:
            part["text"] = transform(str(part.get("text") or ""))
            return
    parts.append({"type": new, "text": transform("")})


class ChatApi(Api):
    """OpenAI's chat completions (and every server that copies them)."""

    name = "chat"
    label = "chat completions"
    paths = ("/v1/chat/completions", "/chat/completions")

    def check(self, body: Any) -> str | None:
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list) or not body["messages"]:
            return "the request body must be a JSON object with a non-empty messages list"
        return None

    def to_chat(self, body: Mapping[str, Any],
                earlier: list[dict[str, Any]] | None = None) -> tuple[dict[str, Any], list[str]]:
        return dict(body), []

    def from_chat(self, chat: Mapping[str, Any], body: Mapping[str, Any], ident: str) -> dict[str, Any]:
        return dict(chat)

    def read(self, data: Any) -> Reply | None:
        return read_reply(data)

    def with_text(self, data: Mapping[str, Any], text: str) -> dict[str, Any]:
        return with_text(data, text)

    def events(self, data: Mapping[str, Any], options: Any) -> Iterator[bytes]:
        return sse_events(data, isinstance(options, Mapping) and bool(options.get("include_usage")))

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        return error_body(status, message, "invalid_request_error" if status < 500 else "server_error")

    def inject(self, body: dict[str, Any], transform: Callable[[str], str]) -> None:
        last = body["messages"][-1]
        if not isinstance(last, dict):
            return
        content = last.get("content")
        if isinstance(content, list):
            parts = copy.deepcopy(content)
            last_text(parts, transform, ("text",), "text")
            body["messages"][-1] = {**last, "content": parts}
        else:
            body["messages"][-1] = {**last, "content": transform("" if content is None else str(content))}

    def budget(self, body: dict[str, Any], tokens: int) -> Any:
        before = body.get("max_completion_tokens", body.get("max_tokens"))
        for name in ("max_completion_tokens", "max_tokens"):
            if name in body or (name == "max_tokens" and "max_completion_tokens" not in body):
                body[name] = tokens
        return before


CHAT = ChatApi()
