"""Anthropic's Messages API (``POST /v1/messages``), as the capture proxy speaks it.

The fields and events follow the ``anthropic`` SDK's types (``anthropic.types``:
``Message``, ``RawMessageStreamEvent``) and Anthropic's API reference, and the
tests parse every reply with that SDK.

A request's chat-completions view (:meth:`MessagesApi.to_chat`): ``system`` (a
string or text blocks) becomes the first, system, message; each message's text
and image blocks its content, an assistant's ``tool_use`` blocks its tool calls, a
user's ``tool_result`` blocks ``tool`` messages (before the rest of that message);
``thinking`` blocks are left out (a chat-completions server takes none back).
``max_tokens``, ``stop_sequences`` (as ``stop``), ``temperature``, ``top_p``,
``tools`` (client tools: ``input_schema`` as ``parameters``), ``tool_choice``
(``any`` as ``required``; ``disable_parallel_tool_use`` as
``parallel_tool_calls: false``) and ``output_config.format`` (as
``response_format``) carry over; ``metadata``, ``thinking``, ``top_k``,
``service_tier`` and the like are dropped. What has no equivalent (server tools
such as web search, documents, server tool results) is named, and refused for a
chat-only upstream.

A reply (:meth:`MessagesApi.from_chat`): a ``text`` block when the reply has text or
calls no tool, then one ``tool_use`` block per tool call (its arguments, which must
be a JSON object, as ``input``); ``stop_reason`` ``end_turn``, ``max_tokens``,
``tool_use`` or ``refusal``; ``usage`` in input and output tokens (zeros on the
wire when the upstream reported none, which the record keeps as missing).
Streamed, it is the named events ``message_start``, per block
``content_block_start``, ``content_block_delta`` (``text_delta`` or
``input_json_delta``) and ``content_block_stop``, then ``message_delta`` (stop
reason and output tokens) and ``message_stop``.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from simcore.capture.wire import (
    Api,
    Reply,
    Untranslatable,
    chat_content,
    content_text,
    last_text,
    named_event,
)

#: Blocks left out of the chat view: a chat-completions server takes none back.
SKIPPED_BLOCKS = ("thinking", "redacted_thinking")
#: stop_reason for a chat-completions finish_reason, and back.
STOP_REASONS = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use", "content_filter": "refusal"}
FINISH_REASONS = {"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length", "tool_use": "tool_calls",
                  "refusal": "content_filter"}
#: Error types by HTTP status, as Anthropic names them.
ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
               404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error", 529: "overloaded_error"}


def _image(block: Mapping[str, Any]) -> dict[str, Any] | None:
    source = block.get("source") or {}
    if source.get("type") == "base64":
        url = f"data:{source.get('media_type')};base64,{source.get('data')}"
        return {"type": "image_url", "image_url": {"url": url}}
    if source.get("type") == "url":
        return {"type": "image_url", "image_url": {"url": source.get("url")}}
    return None


def _messages(body: Mapping[str, Any], problems: list[str]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i, message in enumerate(body.get("messages") or []):
        role = str(message.get("role") or "user")
        content = message.get("content")
        if not isinstance(content, list):
            out.append({"role": role, "content": "" if content is None else str(content)})
            continue
        parts: list[dict[str, Any]] = []
        calls: list[dict[str, Any]] = []
        results: list[dict[str, Any]] = []
        for k, block in enumerate(content):
            kind = block.get("type") if isinstance(block, Mapping) else None
            image = _image(block) if kind == "image" else None
            if kind == "text":
                parts.append({"type": "text", "text": str(block.get("text") or "")})
            elif image is not None:
                parts.append(image)
            elif kind == "tool_use":
                calls.append({"id": str(block.get("id") or ""), "type": "function",
                              "function": {"name": str(block.get("name") or ""),
                                           "arguments": json.dumps(block.get("input") or {})}})
            elif kind == "tool_result":
                inner = block.get("content")
                if isinstance(inner, list) and any(isinstance(b, Mapping) and b.get("type") != "text" for b in inner):
                    problems.append(f"messages[{i}].content[{k}].content: only text blocks have a chat-completions "
                                    "equivalent")
                results.append({"role": "tool", "tool_call_id": str(block.get("tool_use_id") or ""),
                                "content": content_text(inner)})
            elif kind in SKIPPED_BLOCKS:
                continue
            else:
                problems.append(f"messages[{i}].content[{k}]: a {kind or 'untyped'} block has no chat-completions "
                                "equivalent")
                parts.append({"type": "text", "text": json.dumps(block, sort_keys=True)})
        out += results
        if calls:
            out.append({"role": role, "content": chat_content(parts) if parts else None, "tool_calls": calls})
        elif parts or not results:
            out.append({"role": role, "content": chat_content(parts)})
    return out


def _tools(body: Mapping[str, Any], problems: list[str]) -> list[dict[str, Any]]:
    out = []
    for i, tool in enumerate(body.get("tools") or []):
        if not isinstance(tool, Mapping):
            continue
        if tool.get("type") not in (None, "custom"):
            problems.append(f"tools[{i}]: a {tool.get('type')} tool (run by Anthropic) has no chat-completions "
                            "equivalent")
        fn = {"name": str(tool.get("name") or tool.get("type")),
              "parameters": tool.get("input_schema") or {"type": "object", "properties": {}}}
        fn.update({k: tool[k] for k in ("description", "strict") if tool.get(k) is not None})
        out.append({"type": "function", "function": fn})
    return out


def _tool_choice(choice: Any, view: dict[str, Any]) -> None:
    if not isinstance(choice, Mapping):
        return
    kind = choice.get("type")
    if kind == "tool":
        view["tool_choice"] = {"type": "function", "function": {"name": str(choice.get("name") or "")}}
    elif kind in ("auto", "any", "none"):
        view["tool_choice"] = {"any": "required"}.get(kind, kind)
    if choice.get("disable_parallel_tool_use"):
        view["parallel_tool_calls"] = False


class MessagesApi(Api):
    """Anthropic's Messages API (see the module docstring)."""

    name = "messages"
    label = "Messages API"
    paths = ("/v1/messages",)

    def check(self, body: Any) -> str | None:
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list) or not body["messages"]:
            return "the request body must be a JSON object with a non-empty messages list"
        if not all(isinstance(m, Mapping) for m in body["messages"]):
            return "messages: each message must be an object"
        limit = body.get("max_tokens")
        if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
            return "max_tokens: required, a positive integer"
        return None

    def to_chat(self, body: Mapping[str, Any],
                earlier: list[dict[str, Any]] | None = None) -> tuple[dict[str, Any], list[str]]:
        problems: list[str] = []
        system = content_text(body.get("system"))
        messages = ([{"role": "system", "content": system}] if system else []) + _messages(body, problems)
        view: dict[str, Any] = {"model": body.get("model"), "messages": messages, "max_tokens": body.get("max_tokens")}
        if body.get("stop_sequences"):
            view["stop"] = list(body["stop_sequences"])
        view.update({k: body[k] for k in ("temperature", "top_p") if body.get(k) is not None})
        tools = _tools(body, problems)
        if tools:
            view["tools"] = tools
        _tool_choice(body.get("tool_choice"), view)
        fmt = (body.get("output_config") or {}).get("format")
        if isinstance(fmt, Mapping) and fmt.get("type") == "json_schema":
            view["response_format"] = {"type": "json_schema",
                                       "json_schema": {"name": "output", "schema": fmt.get("schema") or {}}}
        return view, problems

    def from_chat(self, chat: Mapping[str, Any], body: Mapping[str, Any], ident: str) -> dict[str, Any]:
        choice = chat["choices"][0]
        message = choice.get("message") or {}
        text = content_text(message.get("content"))
        calls = message.get("tool_calls") or []
        content: list[dict[str, Any]] = []
        if text or not calls:
            content.append({"type": "text", "text": text})
        for i, call in enumerate(calls):
            fn = call.get("function") or {}
            try:
                args = json.loads(fn.get("arguments") or "{}")
            except ValueError:
                args = None
            if not isinstance(args, dict):
                raise Untranslatable(f"the upstream's call of tool {fn.get('name')!r} has arguments that are no JSON "
                                     f"object ({str(fn.get('arguments'))[:200]!r}); the Messages API's tool_use "
                                     "needs one")
            content.append({"type": "tool_use", "id": str(call.get("id") or f"toolu_{ident}_{i}"),
                            "name": str(fn.get("name") or ""), "input": args})
        usage = chat.get("usage") if isinstance(chat.get("usage"), Mapping) else {}
        return {
            "id": f"msg_{ident}",
            "type": "message",
            "role": "assistant",
            "model": str(chat.get("model") or body.get("model") or ""),
            "content": content,
            "stop_reason": STOP_REASONS.get(choice.get("finish_reason") or "stop", "end_turn"),
            "stop_sequence": None,
            "usage": {"input_tokens": int(usage.get("prompt_tokens") or 0),
                      "output_tokens": int(usage.get("completion_tokens") or 0)},
        }

    def read(self, data: Any) -> Reply | None:
        if not isinstance(data, Mapping) or data.get("type") != "message" or not isinstance(data.get("content"), list):
            return None
        blocks = [b for b in data["content"] if isinstance(b, Mapping)]
        calls = tuple(str(b.get("name") or "?") for b in blocks if b.get("type") in ("tool_use", "server_tool_use"))
        stop = data.get("stop_reason")
        raw = data.get("usage")
        usage = None
        if isinstance(raw, Mapping) and isinstance(raw.get("input_tokens"), int):
            prompt = sum(int(raw.get(k) or 0) for k in ("input_tokens", "cache_creation_input_tokens",
                                                          "cache_read_input_tokens"))
            usage = (prompt, int(raw.get("output_tokens") or 0))
        return Reply(content_text(blocks), calls, FINISH_REASONS.get(str(stop), str(stop or "stop")), usage,
                     str(data.get("model") or ""))

    def with_text(self, data: Mapping[str, Any], text: str) -> dict[str, Any]:
        out = copy.deepcopy(dict(data))
        blocks, placed = [], False
        for block in out["content"]:
            if isinstance(block, dict) and block.get("type") == "text":
                if placed:
                    continue
                block, placed = {**block, "text": text}, True
            blocks.append(block)
        if not placed and text:
            blocks.insert(0, {"type": "text", "text": text})
        out["content"] = blocks
        return out

    def events(self, data: Mapping[str, Any], options: Any) -> Iterator[bytes]:
        usage = dict(data.get("usage") or {})
        start = {**data, "content": [], "stop_reason": None, "stop_sequence": None,
                 "usage": {**usage, "output_tokens": 0}}
        yield named_event({"type": "message_start", "message": start})
        for index, block in enumerate(data["content"]):
            at = {"index": index}
            if block.get("type") == "text":
                yield named_event({"type": "content_block_start", **at, "content_block": {**block, "text": ""}})
                if block["text"]:
                    yield named_event({"type": "content_block_delta", **at,
                                       "delta": {"type": "text_delta", "text": block["text"]}})
            elif block.get("type") == "tool_use":
                yield named_event({"type": "content_block_start", **at, "content_block": {**block, "input": {}}})
                yield named_event({"type": "content_block_delta", **at,
                                   "delta": {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}})
            else:  # a block of an Anthropic upstream the proxy has no deltas for: whole, at once
                yield named_event({"type": "content_block_start", **at, "content_block": block})
            yield named_event({"type": "content_block_stop", **at})
        yield named_event({"type": "message_delta",
                           "delta": {k: data.get(k) for k in ("stop_reason", "stop_sequence")},
                           "usage": {"output_tokens": int(usage.get("output_tokens") or 0)}})
        yield named_event({"type": "message_stop"})

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        kind = ERROR_TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")
        return {"type": "error", "error": {"type": kind, "message": message}}

    def inject(self, body: dict[str, Any], transform: Callable[[str], str]) -> None:
        last = dict(body["messages"][-1])
        if isinstance(last.get("content"), list):
            last["content"] = copy.deepcopy(last["content"])
            last_text(last["content"], transform, ("text",), "text")
        else:
            last["content"] = transform(str(last.get("content") or ""))
        body["messages"][-1] = last

    def budget(self, body: dict[str, Any], tokens: int) -> Any:
        before, body["max_tokens"] = body.get("max_tokens"), tokens
        return before


MESSAGES = MessagesApi()
