"""OpenAI's Responses API (``POST /v1/responses``), as the capture proxy speaks it.

The fields and events follow the ``openai`` SDK's types (``openai.types.responses``:
``Response``, ``ResponseStreamEvent``) and OpenAI's API reference, and the tests
parse every reply with that SDK.

A request's chat-completions view (:meth:`ResponsesApi.to_chat`): ``instructions``
becomes the first, system, message; ``input`` (a string, or items) the messages
after it: a message item (``developer`` as ``system``; text and image parts), a
``function_call`` item an assistant message's tool call, a ``function_call_output``
item a ``tool`` message; ``reasoning`` items are left out (a chat-completions
server takes none back). ``tools`` (function tools), ``tool_choice``,
``max_output_tokens`` (as ``max_tokens``), ``temperature``, ``top_p``,
``parallel_tool_calls`` and ``text.format`` (as ``response_format``) carry over;
settings of OpenAI's own service (``store``, ``include``, ``reasoning``,
``truncation``, ``metadata`` ...) are dropped. What has no equivalent (hosted
tools such as ``web_search``, file inputs, item references, a stored
``conversation`` or ``prompt``, ``background``) is named, and refused for a
chat-only upstream.

``previous_response_id`` continues a response this run gave
(:class:`Conversations`): its conversation, less its instructions (which the API
does not carry over), comes before the new input.

A reply (:meth:`ResponsesApi.from_chat`): a ``message`` output item with one
``output_text`` part when the reply has text or calls no tool, then one
``function_call`` item per tool call; ``status`` ``incomplete``
(``max_output_tokens``) when the reply was cut; ``usage`` in input and output
tokens. Streamed, it is the events ``response.created``,
``response.in_progress``, per item ``response.output_item.added``, its content or
arguments (``response.content_part.added``, ``response.output_text.delta``,
``.done``, ``response.content_part.done``; ``response.function_call_arguments.delta``,
``.done``), ``response.output_item.done``, then ``response.completed`` (or
``response.incomplete``): each with its ``sequence_number``, no ``[DONE]``.
"""

from __future__ import annotations

import copy
import itertools
import json
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from simcore.capture.wire import (
    Api,
    Reply,
    chat_content,
    content_text,
    error_body,
    last_text,
    named_event,
)

#: Parts of a message item that hold text, by the chat-completions part they become.
TEXT_PARTS = ("input_text", "output_text", "text")
#: Input items left out of the chat view: a chat-completions server takes none back.
SKIPPED_ITEMS = ("reasoning",)


def _message(item: Mapping[str, Any], where: str, problems: list[str]) -> dict[str, Any]:
    role = str(item.get("role") or "user")
    role = "system" if role == "developer" else role
    content = item.get("content")
    if not isinstance(content, list):
        return {"role": role, "content": "" if content is None else str(content)}
    parts: list[dict[str, Any]] = []
    for k, part in enumerate(content):
        kind = part.get("type") if isinstance(part, Mapping) else None
        if kind in TEXT_PARTS:
            parts.append({"type": "text", "text": str(part.get("text") or "")})
        elif kind == "refusal":
            parts.append({"type": "text", "text": str(part.get("refusal") or "")})
        elif kind == "input_image" and part.get("image_url"):
            image = {"url": part["image_url"], **({"detail": part["detail"]} if part.get("detail") else {})}
            parts.append({"type": "image_url", "image_url": image})
        else:
            problems.append(f"{where}.content[{k}]: a {kind or 'untyped'} part has no chat-completions equivalent")
            parts.append({"type": "text", "text": json.dumps(part, sort_keys=True)})
    return {"role": role, "content": chat_content(parts)}


def _instructions(body: Mapping[str, Any], problems: list[str]) -> list[dict[str, Any]]:
    instructions = body.get("instructions")
    if isinstance(instructions, str):
        return [{"role": "system", "content": instructions}] if instructions else []
    return _input(instructions, problems)


def _input(raw: Any, problems: list[str]) -> list[dict[str, Any]]:
    if raw is None:
        return []
    if isinstance(raw, str):
        return [{"role": "user", "content": raw}]
    out: list[dict[str, Any]] = []
    for i, item in enumerate(raw):
        where = f"input[{i}]"
        kind = item.get("type", "message") if isinstance(item, Mapping) else None
        if kind == "message":
            out.append(_message(item, where, problems))
        elif kind == "function_call":
            call = {"id": str(item.get("call_id") or item.get("id") or f"call_{i}"), "type": "function",
                    "function": {"name": str(item.get("name") or ""), "arguments": str(item.get("arguments") or "")}}
            # The calls of one turn follow its message as items of their own; chat keeps them on that message.
            if out and out[-1]["role"] == "assistant" and isinstance(out[-1].get("content") or "", str):
                out[-1] = {**out[-1], "tool_calls": [*out[-1].get("tool_calls", []), call]}
            else:
                out.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif kind == "function_call_output":
            output = item.get("output")
            text = output if isinstance(output, str) else content_text(output, TEXT_PARTS)
            if isinstance(output, list) and any(isinstance(p, Mapping) and p.get("type") not in TEXT_PARTS
                                                 for p in output):
                problems.append(f"{where}.output: only text parts have a chat-completions equivalent")
            out.append({"role": "tool", "tool_call_id": str(item.get("call_id") or ""), "content": text})
        elif kind in SKIPPED_ITEMS:
            continue
        else:
            problems.append(f"{where}: a {kind or 'malformed'} item has no chat-completions equivalent")
            out.append({"role": "user", "content": json.dumps(item, sort_keys=True)})
    return out


def _tools(body: Mapping[str, Any], problems: list[str]) -> list[dict[str, Any]]:
    out = []
    for i, tool in enumerate(body.get("tools") or []):
        kind = tool.get("type") if isinstance(tool, Mapping) else None
        if kind == "function":
            fn = {"name": str(tool.get("name") or ""),
                  "parameters": tool.get("parameters") or {"type": "object", "properties": {}}}
            fn.update({k: tool[k] for k in ("description", "strict") if tool.get(k) is not None})
            out.append({"type": "function", "function": fn})
        else:
            problems.append(f"tools[{i}]: a {kind or 'untyped'} tool (hosted by OpenAI) has no chat-completions "
                            "equivalent")
            out.append({"type": "function", "function": {"name": str(kind), "parameters": {"type": "object"}}})
    return out


def _tool_choice(choice: Any, problems: list[str]) -> Any:
    if choice is None or isinstance(choice, str):
        return choice
    if isinstance(choice, Mapping) and choice.get("type") == "function":
        return {"type": "function", "function": {"name": str(choice.get("name") or "")}}
    problems.append(f"tool_choice: {json.dumps(choice, sort_keys=True)} has no chat-completions equivalent")
    return "auto"


def _format(text: Any, problems: list[str]) -> dict[str, Any] | None:
    fmt = text.get("format") if isinstance(text, Mapping) else None
    if not isinstance(fmt, Mapping) or fmt.get("type") in (None, "text"):
        return None
    if fmt.get("type") == "json_object":
        return {"type": "json_object"}
    if fmt.get("type") == "json_schema":
        inner = {"name": str(fmt.get("name") or "output"), "schema": fmt.get("schema") or {}}
        inner.update({k: fmt[k] for k in ("description", "strict") if fmt.get(k) is not None})
        return {"type": "json_schema", "json_schema": inner}
    problems.append(f"text.format: a {fmt.get('type')} format has no chat-completions equivalent")
    return None


def _usage(chat: Mapping[str, Any]) -> dict[str, Any] | None:
    raw = chat.get("usage")
    if not isinstance(raw, Mapping) or not isinstance(raw.get("prompt_tokens"), int):
        return None
    prompt, completion = int(raw["prompt_tokens"]), int(raw.get("completion_tokens") or 0)
    cached = (raw.get("prompt_tokens_details") or {}).get("cached_tokens") or 0
    reasoning = (raw.get("completion_tokens_details") or {}).get("reasoning_tokens") or 0
    return {"input_tokens": prompt, "input_tokens_details": {"cached_tokens": cached, "cache_write_tokens": 0},
            "output_tokens": completion, "output_tokens_details": {"reasoning_tokens": reasoning},
            "total_tokens": prompt + completion}


def _message_item(ident: str, text: str) -> dict[str, Any]:
    return {"id": ident, "type": "message", "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}]}


class ResponsesApi(Api):
    """OpenAI's Responses API (see the module docstring)."""

    name = "responses"
    label = "Responses API"
    paths = ("/v1/responses", "/responses")

    def check(self, body: Any) -> str | None:
        if not isinstance(body, dict):
            return "the request body must be a JSON object"
        raw = body.get("input")
        if raw is not None and not (isinstance(raw, str) or (isinstance(raw, list)
                                                               and all(isinstance(i, Mapping) for i in raw))):
            return "input: must be a string or a list of items"
        if not raw and not any(body.get(k) for k in ("previous_response_id", "prompt", "conversation")):
            return "input: must not be empty (or continue a response: previous_response_id)"
        return None

    def to_chat(self, body: Mapping[str, Any],
                earlier: list[dict[str, Any]] | None = None) -> tuple[dict[str, Any], list[str]]:
        problems: list[str] = []
        messages = _instructions(body, problems)
        if body.get("previous_response_id") and earlier is None:
            problems.append(f"previous_response_id: {body['previous_response_id']} is no response of this run")
        messages += copy.deepcopy(earlier or []) + _input(body.get("input"), problems)
        view: dict[str, Any] = {"model": body.get("model"), "messages": messages}
        tools = _tools(body, problems)
        if tools:
            view["tools"] = tools
        choice = _tool_choice(body.get("tool_choice"), problems)
        if choice is not None:
            view["tool_choice"] = choice
        fmt = _format(body.get("text"), problems)
        if fmt is not None:
            view["response_format"] = fmt
        if body.get("max_output_tokens") is not None:
            view["max_tokens"] = body["max_output_tokens"]
        view.update({k: body[k] for k in ("temperature", "top_p", "parallel_tool_calls") if body.get(k) is not None})
        for name in ("conversation", "prompt", "background"):
            if body.get(name):
                problems.append(f"{name}: kept by OpenAI's service; it has no chat-completions equivalent")
        return view, problems

    def from_chat(self, chat: Mapping[str, Any], body: Mapping[str, Any], ident: str) -> dict[str, Any]:
        choice = chat["choices"][0]
        message = choice.get("message") or {}
        text = content_text(message.get("content"))
        calls = message.get("tool_calls") or []
        output: list[dict[str, Any]] = []
        if text or not calls:
            output.append(_message_item(f"msg_{ident}", text))
        for i, call in enumerate(calls):
            fn = call.get("function") or {}
            output.append({"id": f"fc_{ident}_{i}", "type": "function_call", "status": "completed",
                           "call_id": str(call.get("id") or f"call_{ident}_{i}"), "name": str(fn.get("name") or ""),
                           "arguments": str(fn.get("arguments") or "")})
        finish = choice.get("finish_reason")
        cut = {"length": "max_output_tokens", "content_filter": "content_filter"}.get(finish)
        return {
            "id": f"resp_{ident}",
            "object": "response",
            "created_at": chat.get("created") or 0,
            "status": "incomplete" if cut else "completed",
            "error": None,
            "incomplete_details": {"reason": cut} if cut else None,
            "instructions": body.get("instructions"),
            "max_output_tokens": body.get("max_output_tokens"),
            "model": str(chat.get("model") or body.get("model") or ""),
            "output": output,
            "parallel_tool_calls": body.get("parallel_tool_calls", True),
            "previous_response_id": body.get("previous_response_id"),
            "temperature": body.get("temperature"),
            "text": body.get("text") or {"format": {"type": "text"}},
            "tool_choice": body.get("tool_choice") or "auto",
            "tools": body.get("tools") or [],
            "top_p": body.get("top_p"),
            "usage": _usage(chat),
        }

    def read(self, data: Any) -> Reply | None:
        output = data.get("output") if isinstance(data, Mapping) and data.get("object") == "response" else None
        if not isinstance(output, list):
            return None
        texts, calls = [], []
        for item in output:
            kind = item.get("type") if isinstance(item, Mapping) else None
            if kind == "message":
                texts += [str(p.get("text") or "") for p in item.get("content") or []
                          if isinstance(p, Mapping) and p.get("type") == "output_text"]
            elif kind in ("function_call", "custom_tool_call"):
                calls.append(str(item.get("name") or "?"))
        status = str(data.get("status") or "completed")
        reason = (data.get("incomplete_details") or {}).get("reason")
        if status == "incomplete":
            finish = "length" if reason == "max_output_tokens" else str(reason or "incomplete")
        elif status == "completed":
            finish = "tool_calls" if calls else "stop"
        else:
            finish = status
        raw = data.get("usage")
        usage = None
        if isinstance(raw, Mapping) and isinstance(raw.get("input_tokens"), int):
            usage = (int(raw["input_tokens"]), int(raw.get("output_tokens") or 0))
        return Reply("".join(texts), tuple(calls), finish, usage, str(data.get("model") or ""))

    def with_text(self, data: Mapping[str, Any], text: str) -> dict[str, Any]:
        out = copy.deepcopy(dict(data))
        placed = False
        for item in out["output"]:
            if isinstance(item, dict) and item.get("type") == "message":
                kept = []
                for part in item.get("content") or []:
                    if isinstance(part, dict) and part.get("type") == "output_text":
                        if placed:
                            continue
                        part, placed = {**part, "text": text}, True
                    kept.append(part)
                item["content"] = kept
        if not placed and text:
            out["output"].insert(0, _message_item(f"msg_{out.get('id', 'capture')}", text))
        return out

    def events(self, data: Mapping[str, Any], options: Any) -> Iterator[bytes]:
        seq = itertools.count()
        start = {**data, "status": "in_progress", "output": [], "usage": None, "incomplete_details": None}
        for kind in ("response.created", "response.in_progress"):
            yield named_event({"type": kind, "sequence_number": next(seq), "response": start})
        for index, item in enumerate(data["output"]):
            where = {"output_index": index}
            if item.get("type") == "message":
                yield named_event({"type": "response.output_item.added", "sequence_number": next(seq), **where,
                            "item": {**item, "status": "in_progress", "content": []}})
                for k, part in enumerate(item.get("content") or []):
                    at = {"item_id": item["id"], **where, "content_index": k}
                    empty = {**part, "text": ""} if part.get("type") == "output_text" else part
                    yield named_event({"type": "response.content_part.added", "sequence_number": next(seq), **at,
                                "part": empty})
                    if part.get("type") == "output_text":
                        if part["text"]:
                            yield named_event({"type": "response.output_text.delta", "sequence_number": next(seq), **at,
                                        "delta": part["text"], "logprobs": []})
                        yield named_event({"type": "response.output_text.done", "sequence_number": next(seq), **at,
                                    "text": part["text"], "logprobs": []})
                    yield named_event({"type": "response.content_part.done", "sequence_number": next(seq), **at,
                                "part": part})
            elif item.get("type") == "function_call":
                yield named_event({"type": "response.output_item.added", "sequence_number": next(seq), **where,
                            "item": {**item, "status": "in_progress", "arguments": ""}})
                at = {"item_id": item["id"], **where}
                if item["arguments"]:
                    yield named_event({"type": "response.function_call_arguments.delta", "sequence_number": next(seq),
                                **at, "delta": item["arguments"]})
                yield named_event({"type": "response.function_call_arguments.done", "sequence_number": next(seq), **at,
                            "name": item["name"], "arguments": item["arguments"]})
            else:  # an item of a Responses-capable upstream the proxy has no events for: whole, at once
                yield named_event({"type": "response.output_item.added", "sequence_number": next(seq), **where,
                            "item": item})
            yield named_event({"type": "response.output_item.done", "sequence_number": next(seq), **where,
                               "item": item})
        end = "response.incomplete" if data.get("status") == "incomplete" else "response.completed"
        yield named_event({"type": end, "sequence_number": next(seq), "response": data})

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        return error_body(status, message, "invalid_request_error" if status < 500 else "server_error")

    def inject(self, body: dict[str, Any], transform: Callable[[str], str]) -> None:
        raw = body.get("input")
        if isinstance(raw, str) or raw is None:
            body["input"] = transform(raw or "")
            return
        items = copy.deepcopy(raw)
        for item in reversed(items):
            if item.get("type", "message") == "message":
                if isinstance(item.get("content"), list):
                    last_text(item["content"], transform, TEXT_PARTS, "input_text")
                else:
                    item["content"] = transform(str(item.get("content") or ""))
                break
        else:
            items.append({"role": "user", "content": transform("")})
        body["input"] = items

    def budget(self, body: dict[str, Any], tokens: int) -> Any:
        before, body["max_output_tokens"] = body.get("max_output_tokens"), tokens
        return before


RESPONSES = ResponsesApi()


def output_as_chat(data: Mapping[str, Any]) -> dict[str, Any]:
    """A Response's output as the assistant message of a chat conversation."""
    text, calls = "", []
    for item in data.get("output") or []:
        if item.get("type") == "message":
            text += content_text(item.get("content"), TEXT_PARTS)
        elif item.get("type") == "function_call":
            calls.append({"id": item.get("call_id"), "type": "function",
                          "function": {"name": item.get("name"), "arguments": item.get("arguments")}})
    return {"role": "assistant", "content": text or None, **({"tool_calls": calls} if calls else {})}


class Conversations:
    """The responses one run gave, for requests that continue them (``previous_response_id``)."""

    def __init__(self) -> None:
        self._by_id: dict[str, list[dict[str, Any]]] = {}

    def earlier(self, body: Mapping[str, Any]) -> list[dict[str, Any]] | None:
        """The conversation ``body`` continues, or None (it continues none, or one not of this run)."""
        previous = body.get("previous_response_id")
        return self._by_id.get(previous) if isinstance(previous, str) else None

    def keep(self, body: Mapping[str, Any], view: Mapping[str, Any], data: Mapping[str, Any]) -> None:
        """Remember a response given (unless the request said ``store: false``), with the conversation it ends,
        less the request's instructions."""
        if body.get("store") is False or not isinstance(data.get("id"), str):
            return
        messages = list(view["messages"])[len(_instructions(body, [])):]
        self._by_id[data["id"]] = [*messages, output_as_chat(data)]
