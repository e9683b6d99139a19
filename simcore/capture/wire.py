"""The OpenAI-compatible chat-completions wire format, as the capture proxy reads and writes it.

- :func:`as_request`: a program's request body as an :class:`~backends.base.LLMRequest`
  (what the stub answers, what the cassette keeps and what its digest keys);
- :func:`read_reply`: the parts of a reply body the proxy records and perturbs;
- :func:`reply_body`: a reply body from a simcore :class:`~backends.base.LLMResponse`;
- :func:`sse_events`: a complete reply as the server-sent events of a streamed one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Iterator, Mapping

from backends.base import LLMRequest, LLMResponse, Message

#: What a request that names no token limit gets (the stub's cut-off, the cassette's record).
DEFAULT_MAX_TOKENS = 1024


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


def as_request(body: Mapping[str, Any], agent: str, seed: int) -> LLMRequest:
    """The program's request as simcore sees it.

    ``agent`` (the caller's label) goes into the metadata, as an agent's name does
    in a simulation; ``seed`` stands in when the body names none.
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
        metadata={"agent": agent, **({"tools": tool_names(body)} if body.get("tools") else {})},
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
    """An error body in the shape OpenAI-compatible clients read."""
    return {"error": {"message": message, "type": kind, "code": status}}


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
