"""Provider presets and the three wire protocols (pure: no I/O here).

A *preset* names a provider: its protocol, base URL, the environment variable that
holds its key, and how it does JSON mode. A *protocol* turns an
:class:`~backends.base.LLMRequest` into an HTTP request body and a response body
back into an :class:`~backends.base.LLMResponse`:

- ``openai``: chat completions (OpenAI, OpenRouter, DeepSeek, Groq, xAI, vLLM,
  Ollama, the llama.cpp server, anything OpenAI-compatible);
- ``anthropic``: the Messages API (JSON mode by forcing one tool whose input schema
  is the reply schema);
- ``gemini``: ``generateContent`` (JSON mode via ``responseJsonSchema``).

Model strings may carry a preset prefix, ``"openrouter:google/gemini-2.5-flash"``,
so each agent can use its own provider; a string without a known prefix goes to
the run's default backend (Ollama's ``llama3:8b`` stays one model name).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Mapping

from backends.base import LLMRequest, LLMResponse, Usage
from backends.errors import BackendConfigError, MalformedResponse

JSON_MODES = ("auto", "json_schema", "json_object", "json_object_schema", "off")


@dataclass(frozen=True)
class Preset:
    """A named provider.

    Attributes:
        name: Preset name, also the model-string prefix.
        protocol: "openai", "anthropic", "gemini" or "stub".
        base_url: Default endpoint (None: ``--base-url`` is required).
        api_key_env: Environment variable holding the key (None: keyless).
        json_mode: How the OpenAI protocol asks for JSON (see ``JSON_MODES``).
        token_param: Name of the completion-token cap in the OpenAI body.
        local: A server on this machine; its calls cost nothing.
        max_concurrency: Default limit on requests in flight.
        server: What a local preset's server is called, for "is it running?" errors.
    """

    name: str
    protocol: str
    base_url: str | None
    api_key_env: str | None
    json_mode: str = "json_schema"
    token_param: str = "max_tokens"
    local: bool = False
    max_concurrency: int = 16
    server: str | None = None


PRESETS: dict[str, Preset] = {
    p.name: p
    for p in (
        Preset("stub", "stub", None, None, local=True),
        Preset("openai", "openai", "https://api.openai.com/v1", "OPENAI_API_KEY",
               token_param="max_completion_tokens"),
        Preset("openrouter", "openai", "https://openrouter.ai/api/v1", "OPENROUTER_API_KEY"),
        Preset("deepseek", "openai", "https://api.deepseek.com", "DEEPSEEK_API_KEY", json_mode="json_object"),
        Preset("groq", "openai", "https://api.groq.com/openai/v1", "GROQ_API_KEY", json_mode="json_object"),
        Preset("xai", "openai", "https://api.x.ai/v1", "XAI_API_KEY"),
        Preset("anthropic", "anthropic", "https://api.anthropic.com", "ANTHROPIC_API_KEY"),
        Preset("gemini", "gemini", "https://generativelanguage.googleapis.com", "GEMINI_API_KEY"),
        # llama.cpp serves one request at a time and needs the schema inside
        # response_format (json_object alone never closes the object).
        Preset("llamacpp", "openai", "http://127.0.0.1:8080/v1", None, json_mode="json_object_schema",
               local=True, max_concurrency=1, server="the llama.cpp server"),
        Preset("ollama", "openai", "http://127.0.0.1:11434/v1", None, local=True, max_concurrency=4, server="Ollama"),
        Preset("vllm", "openai", "http://127.0.0.1:8000/v1", None, local=True, max_concurrency=64, server="vLLM"),
        Preset("openai-compatible", "openai", None, None),
    )
}


def split_model(model: str, default: str) -> tuple[str, str]:
    """Split ``"preset:model"`` into (preset, model); unknown prefixes stay in the model."""
    prefix, sep, rest = model.partition(":")
    if sep and prefix in PRESETS and rest:
        return prefix, rest
    return default, model


def get_preset(name: str) -> Preset:
    """The preset called ``name``."""
    try:
        return PRESETS[name]
    except KeyError:
        raise BackendConfigError(f"backend: must be one of {', '.join(PRESETS)}; got {name!r}") from None


# -- OpenAI-compatible chat completions ---------------------------------------------


def openai_body(request: LLMRequest, model: str, json_mode: str, token_param: str = "max_tokens") -> dict[str, Any]:
    """The chat-completions body for ``request``."""
    body: dict[str, Any] = {
        "model": model,
        "messages": [{"role": m.role, "content": m.content} for m in request.messages],
        token_param: request.max_tokens,
        "temperature": request.temperature,
    }
    if request.seed is not None:
        body["seed"] = request.seed
    schema = request.schema
    if schema is not None and json_mode != "off":
        if json_mode == "json_schema":
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": _schema_name(schema), "schema": dict(schema), "strict": False},
            }
        elif json_mode == "json_object_schema":
            body["response_format"] = {"type": "json_object", "schema": dict(schema)}
        else:
            body["response_format"] = {"type": "json_object"}
    return body


def parse_openai(data: Any) -> LLMResponse:
    """An :class:`LLMResponse` from a chat-completions response body."""
    try:
        choice = data["choices"][0]
        message = choice.get("message") or {}
        text = message.get("content")
        if text is None:
            text = message.get("refusal") or ""
        finish = choice.get("finish_reason") or "stop"
    except (KeyError, IndexError, TypeError, AttributeError):
        raise MalformedResponse(f"chat completion without choices[0].message: {_snippet(data)}") from None
    raw_usage = data.get("usage") if isinstance(data, Mapping) else None
    usage = None
    if isinstance(raw_usage, Mapping) and "prompt_tokens" in raw_usage:
        usage = Usage(int(raw_usage.get("prompt_tokens") or 0), int(raw_usage.get("completion_tokens") or 0))
    return LLMResponse(
        text=str(text),
        usage=usage,
        finish_reason=str(finish),
        model=str(data.get("model") or ""),
        system_fingerprint=data.get("system_fingerprint"),
    )


# -- Anthropic Messages ---------------------------------------------------------------

ANTHROPIC_VERSION = "2023-06-01"
_TOOL = "reply"
_ANTHROPIC_STOP = {"end_turn": "stop", "stop_sequence": "stop", "tool_use": "stop", "max_tokens": "length",
                   "refusal": "content_filter"}


def anthropic_body(request: LLMRequest, model: str) -> dict[str, Any]:
    """The Messages body: system prompt apart, JSON mode as one forced tool."""
    system = "\n\n".join(m.content for m in request.messages if m.role == "system")
    body: dict[str, Any] = {
        "model": model,
        "max_tokens": request.max_tokens,
        "temperature": request.temperature,
        "messages": [{"role": m.role, "content": m.content} for m in request.messages if m.role != "system"],
    }
    if system:
        body["system"] = system
    schema = request.schema
    if schema is not None and schema.get("type") == "object":
        input_schema = {k: v for k, v in schema.items() if k != "title"}
        body["tools"] = [{"name": _TOOL, "description": "Give your reply in this structure.",
                          "input_schema": input_schema}]
        body["tool_choice"] = {"type": "tool", "name": _TOOL}
    return body


def parse_anthropic(data: Any) -> LLMResponse:
    """An :class:`LLMResponse` from a Messages response body (tool input as JSON text)."""
    try:
        blocks = data["content"]
        parts = []
        for block in blocks:
            if block.get("type") == "text":
                parts.append(block.get("text", ""))
            elif block.get("type") == "tool_use":
                parts.append(json.dumps(block.get("input", {}), ensure_ascii=False))
        stop = data.get("stop_reason") or "end_turn"
    except (KeyError, TypeError, AttributeError):
        raise MalformedResponse(f"message without content blocks: {_snippet(data)}") from None
    raw = data.get("usage") or {}
    usage = None
    if isinstance(raw, Mapping) and "input_tokens" in raw:
        prompt = sum(int(raw.get(k) or 0) for k in
                     ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"))
        usage = Usage(prompt, int(raw.get("output_tokens") or 0))
    return LLMResponse(
        text="".join(parts),
        usage=usage,
        finish_reason=_ANTHROPIC_STOP.get(stop, str(stop)),
        model=str(data.get("model") or ""),
    )


# -- Gemini generateContent -----------------------------------------------------------

_GEMINI_STOP = {"STOP": "stop", "MAX_TOKENS": "length", "SAFETY": "content_filter",
                "RECITATION": "content_filter", "PROHIBITED_CONTENT": "content_filter"}


def gemini_path(model: str) -> str:
    """The generateContent path for ``model``."""
    return f"/v1beta/models/{model}:generateContent"


def gemini_body(request: LLMRequest) -> dict[str, Any]:
    """The generateContent body."""
    system = "\n\n".join(m.content for m in request.messages if m.role == "system")
    contents = [
        {"role": "model" if m.role == "assistant" else "user", "parts": [{"text": m.content}]}
        for m in request.messages if m.role != "system"
    ]
    config: dict[str, Any] = {"temperature": request.temperature, "maxOutputTokens": request.max_tokens}
    if request.seed is not None:
        config["seed"] = request.seed
    if request.schema is not None:
        config["responseMimeType"] = "application/json"
        config["responseJsonSchema"] = dict(request.schema)
    body: dict[str, Any] = {"contents": contents, "generationConfig": config}
    if system:
        body["systemInstruction"] = {"parts": [{"text": system}]}
    return body


def parse_gemini(data: Any) -> LLMResponse:
    """An :class:`LLMResponse` from a generateContent body (thought parts skipped)."""
    if not isinstance(data, Mapping):
        raise MalformedResponse(f"generateContent body is not an object: {_snippet(data)}")
    candidates = data.get("candidates") or []
    if not candidates:
        reason = (data.get("promptFeedback") or {}).get("blockReason")
        if reason is None:
            raise MalformedResponse(f"generateContent without candidates: {_snippet(data)}")
        text, finish = "", "content_filter"
    else:
        try:
            cand = candidates[0]
            parts = (cand.get("content") or {}).get("parts") or []
            text = "".join(p.get("text", "") for p in parts if not p.get("thought"))
            raw_finish = cand.get("finishReason") or "STOP"
        except (TypeError, AttributeError):
            raise MalformedResponse(f"malformed candidate: {_snippet(data)}") from None
        finish = _GEMINI_STOP.get(raw_finish, str(raw_finish).lower())
    meta = data.get("usageMetadata") or {}
    usage = None
    if isinstance(meta, Mapping) and "promptTokenCount" in meta:
        # Thinking tokens are billed as output.
        out = int(meta.get("candidatesTokenCount") or 0) + int(meta.get("thoughtsTokenCount") or 0)
        usage = Usage(int(meta.get("promptTokenCount") or 0), out)
    return LLMResponse(text=text, usage=usage, finish_reason=finish, model=str(data.get("modelVersion") or ""))


# -- one interface over the three ----------------------------------------------------


@dataclass(frozen=True)
class WireRequest:
    """An HTTP request ready to send (headers without the key; see ``auth_headers``)."""

    url: str
    body: dict[str, Any]


def build_request(preset: Preset, base_url: str, request: LLMRequest, model: str,
                  json_mode: str = "auto") -> WireRequest:
    """The URL and body for ``request`` under ``preset``'s protocol."""
    base = base_url.rstrip("/")
    if preset.protocol == "openai":
        mode = preset.json_mode if json_mode == "auto" else json_mode
        return WireRequest(f"{base}/chat/completions", openai_body(request, model, mode, preset.token_param))
    if preset.protocol == "anthropic":
        return WireRequest(f"{base}/v1/messages", anthropic_body(request, model))
    if preset.protocol == "gemini":
        return WireRequest(base + gemini_path(model), gemini_body(request))
    raise BackendConfigError(f"backend: preset {preset.name!r} has no HTTP protocol")


def auth_headers(preset: Preset, key: str | None) -> dict[str, str]:
    """Headers carrying the key (never stored or logged)."""
    headers = {"content-type": "application/json"}
    if preset.protocol == "anthropic":
        headers["anthropic-version"] = ANTHROPIC_VERSION
        if key:
            headers["x-api-key"] = key
    elif preset.protocol == "gemini":
        # A header, not ?key=: URLs end up in error messages and proxy logs.
        if key:
            headers["x-goog-api-key"] = key
    elif key:
        headers["authorization"] = f"Bearer {key}"
    return headers


def parse_response(preset: Preset, data: Any) -> LLMResponse:
    """Parse a 2xx JSON body under ``preset``'s protocol."""
    if preset.protocol == "anthropic":
        return parse_anthropic(data)
    if preset.protocol == "gemini":
        return parse_gemini(data)
    return parse_openai(data)


def error_text(data: Any) -> str:
    """The human part of a provider's error body, whatever its shape."""
    if isinstance(data, Mapping):
        err = data.get("error", data)
        if isinstance(err, Mapping):
            return str(err.get("message") or err.get("type") or err)[:300]
        return str(err)[:300]
    return str(data)[:300]


def _schema_name(schema: Mapping[str, Any]) -> str:
    title = str(schema.get("title") or "reply")
    return "".join(c if c.isalnum() or c in "_-" else "_" for c in title)[:64] or "reply"


def _snippet(data: Any) -> str:
    return json.dumps(data, ensure_ascii=False, default=str)[:200]
