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

What a model family takes (sampling parameters, the token parameter, reasoning
settings, how structured output is asked for) comes from its
:class:`~backends.models.ModelRule`; a body for a model without one is built as for
any model of its protocol. Parameters a provider refused for a model (``drops``, see
:mod:`backends.middleware.adapt`) are left out.

A reply cut by the model's own reasoning (the budget spent thinking, no answer
begun) gets the finish reason ``"reasoning"`` (:data:`REASONING_CUT`), so that it is
re-asked with room to reason and counted apart from unreadable replies.

Model strings may carry a preset prefix, ``"openrouter:google/gemini-2.5-flash"``,
so each agent can use its own provider; a string without a known prefix goes to
the run's default backend (Ollama's ``llama3:8b`` stays one model name).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping

from backends.base import LLMRequest, LLMResponse, Message, Usage
from backends.errors import BackendConfigError, MalformedResponse, ProviderError

if TYPE_CHECKING:  # (backends.models reads the presets from here)
    from backends.models import ModelRule

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


#: The finish reason of a reply cut by its own reasoning before any answer.
REASONING_CUT = "reasoning"
_SCHEMA_MODES = ("json_object",)  # modes that carry no schema, so a prompt without "json" is refused


def reasoning_allowance(request: LLMRequest, rule: ModelRule | None) -> int:
    """Tokens added to ``request``'s budget for reasoning: its own, else its rule's."""
    if request.reasoning_tokens is not None:
        return int(request.reasoning_tokens)
    return rule.allowance if rule is not None and rule.reasoning else 0


def _takes(rule: ModelRule | None, param: str, drops: frozenset[str], unknown: bool = True) -> bool:
    """Whether ``param`` is sent: the rule takes it, or (no rule) ``unknown`` says so; never once refused."""
    return param not in drops and (unknown if rule is None else param in rule.sampling)


def _merge(into: dict[str, Any], extra: Mapping[str, Any]) -> None:
    """Merge ``extra`` into ``into``, objects key by key (a rule's settings beside the body's)."""
    for key, value in extra.items():
        if isinstance(value, Mapping) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        else:
            into[key] = json.loads(json.dumps(value))  # a copy: the rule's data is shared


def schema_statement(schema: Mapping[str, Any]) -> str:
    """The sentence that states a reply schema in the prompt, where the request format cannot carry it."""
    return ("Reply with a JSON object that follows this JSON schema: "
            + json.dumps(dict(schema), ensure_ascii=False, separators=(",", ":")))


def states_schema(request: LLMRequest, json_mode: str) -> bool:
    """Whether the body states ``request``'s schema in its prompt: JSON mode without a schema
    (``json_object``), which DeepSeek, Groq and OpenAI refuse unless a message says "json",
    and no message says it."""
    return (request.schema is not None and json_mode in _SCHEMA_MODES
            and not any("json" in m.content.lower() for m in request.messages))


def openai_body(request: LLMRequest, model: str, json_mode: str, token_param: str = "max_tokens",
                rule: ModelRule | None = None, drops: frozenset[str] = frozenset()) -> dict[str, Any]:
    """The chat-completions body for ``request`` (see the module docstring for ``rule`` and ``drops``)."""
    messages = [{"role": m.role, "content": m.content} for m in request.messages]
    schema = request.schema
    if schema is not None and states_schema(request, json_mode):
        # Once, in the system message (a new one where there is none).
        statement = schema_statement(schema)
        if messages and messages[0]["role"] == "system":
            messages[0] = {"role": "system", "content": f"{messages[0]['content']}\n\n{statement}"}
        else:
            messages.insert(0, {"role": "system", "content": statement})
    body: dict[str, Any] = {"model": model, "messages": messages}
    if rule is not None and rule.token_param:
        token_param = rule.token_param
    if token_param == "max_tokens" and "max_tokens" in drops:  # refused: "use max_completion_tokens instead"
        token_param = "max_completion_tokens"
    body[token_param] = request.max_tokens + reasoning_allowance(request, rule)
    if _takes(rule, "temperature", drops):
        body["temperature"] = request.temperature
    if request.seed is not None and _takes(rule, "seed", drops):
        body["seed"] = request.seed
    if rule is not None and rule.reasoning:
        _merge(body, {k: v for k, v in rule.send.items() if k not in drops})
    if schema is not None and json_mode != "off" and "response_format" not in drops:
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
    """An :class:`LLMResponse` from a chat-completions response body.

    Reasoning tokens (``completion_tokens_details.reasoning_tokens``) are part of
    ``completion_tokens`` at OpenAI; xAI reports them apart (its ``total_tokens`` is
    prompt + completion + reasoning), and they are added then. A reply with no text,
    cut at the token limit after reasoning, is cut by its reasoning.

    Raises:
        MalformedResponse: no ``choices[0].message``.
        ProviderError: a failure reported inside a 2xx body (OpenRouter:
            ``finish_reason: "error"`` or an ``error`` object), retried like a 5xx.
    """
    if isinstance(data, Mapping) and isinstance(data.get("error"), Mapping):
        raise ProviderError(f"the provider failed after it started: {error_text(data)}")
    try:
        choice = data["choices"][0]
        failed = choice.get("finish_reason") == "error" or isinstance(choice.get("error"), Mapping)
        message = choice.get("message") or {}
        text = message.get("content")
        if text is None:
            text = message.get("refusal") or ""
        finish = choice.get("finish_reason") or "stop"
    except (KeyError, IndexError, TypeError, AttributeError):
        raise MalformedResponse(f"chat completion without choices[0].message: {_snippet(data)}") from None
    if failed:
        why = error_text(choice) if isinstance(choice.get("error"), Mapping) else 'finish_reason "error"'
        raise ProviderError(f"the provider failed mid-generation: {why}")
    raw_usage = data.get("usage") if isinstance(data, Mapping) else None
    usage = None
    if isinstance(raw_usage, Mapping) and "prompt_tokens" in raw_usage:
        prompt, completion = _int(raw_usage.get("prompt_tokens")), _int(raw_usage.get("completion_tokens"))
        reasoning = _int(_detail(raw_usage, "completion_tokens_details", "reasoning_tokens"))
        cached = _int(_detail(raw_usage, "prompt_tokens_details", "cached_tokens"))
        if reasoning and _int(raw_usage.get("total_tokens")) == prompt + completion + reasoning:
            completion += reasoning  # reported apart (xAI): billed as output all the same
        usage = Usage(prompt, completion, reasoning, cached)
    if finish == "length" and not str(text).strip() and usage is not None and usage.reasoning_tokens:
        finish = REASONING_CUT
    return LLMResponse(
        text=str(text),
        usage=usage,
        finish_reason=str(finish),
        model=str(data.get("model") or ""),
        system_fingerprint=data.get("system_fingerprint"),
    )


def _int(value: Any) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


def _detail(usage: Mapping[str, Any], group: str, name: str) -> Any:
    details = usage.get(group)
    return details.get(name) if isinstance(details, Mapping) else None


# -- Anthropic Messages ---------------------------------------------------------------

ANTHROPIC_VERSION = "2023-06-01"
_TOOL = "reply"
# "refusal": declined for safety, possibly with no content; "model_context_window_exceeded":
# generation stopped at the context window, a cut reply like max_tokens.
_ANTHROPIC_STOP = {"end_turn": "stop", "stop_sequence": "stop", "tool_use": "stop", "max_tokens": "length",
                   "model_context_window_exceeded": "length", "refusal": "content_filter"}
# JSON-schema keywords Anthropic's structured outputs enforce; others are stated in the
# description instead (as the anthropic SDK's transform_schema does).
_ANTHROPIC_KEEP = {"type", "enum", "const", "anyOf", "allOf", "description", "title", "properties",
                   "required", "items", "$ref", "$defs", "additionalProperties"}
_ANTHROPIC_FORMATS = {"date-time", "time", "date", "duration", "email", "hostname", "uri", "ipv4", "ipv6", "uuid"}


def anthropic_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """``schema`` as Anthropic's structured outputs take it: closed objects, and the
    constraints they do not enforce (bounds, lengths, patterns) moved into the description."""
    out: dict[str, Any] = {}
    rest: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "properties" and isinstance(value, Mapping):
            out[key] = {k: anthropic_schema(v) for k, v in value.items()}
        elif key in ("anyOf", "allOf", "oneOf") and isinstance(value, list):
            out["allOf" if key == "allOf" else "anyOf"] = [anthropic_schema(v) for v in value]
        elif key == "items" and isinstance(value, Mapping):
            out[key] = anthropic_schema(value)
        elif key == "$defs" and isinstance(value, Mapping):
            out[key] = {k: anthropic_schema(v) for k, v in value.items()}
        elif (key in _ANTHROPIC_KEEP and key != "additionalProperties" or key == "minItems" and value in (0, 1)
              or key == "format" and value in _ANTHROPIC_FORMATS):
            out[key] = value
        elif key != "additionalProperties":
            rest[key] = value
    if out.get("type") == "object" or "properties" in out:
        out["additionalProperties"] = False
    if rest:
        said = "{" + ", ".join(f"{k}: {v}" for k, v in rest.items()) + "}"
        out["description"] = f"{out['description']}\n\n{said}" if out.get("description") else said
    return out


def _joined_turns(messages: tuple[Message, ...]) -> list[dict[str, str]]:
    """The non-system messages, none empty, consecutive ones of a role joined.

    The Messages API refuses a message with empty content and joins consecutive turns
    of one role anyway; Gemini's contents are sent the same way.
    """
    out: list[dict[str, str]] = []
    for m in messages:
        if m.role == "system" or not m.content.strip():
            continue
        if out and out[-1]["role"] == m.role:
            out[-1] = {"role": m.role, "content": f"{out[-1]['content']}\n\n{m.content}"}
        else:
            out.append({"role": m.role, "content": m.content})
    return out


def anthropic_body(request: LLMRequest, model: str, rule: ModelRule | None = None,
                   drops: frozenset[str] = frozenset()) -> dict[str, Any]:
    """The Messages body: system prompt apart; JSON mode by structured outputs
    (``output_config.format``) where the rule says the model has them, else one forced tool."""
    system = "\n\n".join(m.content for m in request.messages if m.role == "system")
    body: dict[str, Any] = {
        "model": model,
        "max_tokens": request.max_tokens + reasoning_allowance(request, rule),
        "messages": _joined_turns(request.messages),
    }
    # The Messages API no longer lists temperature (anthropic 2.14.0), and the models since Opus 4.7
    # refuse it: it goes only to models whose rule, with its source, says they take it.
    if _takes(rule, "temperature", drops, unknown=False):
        body["temperature"] = request.temperature
    if system:
        body["system"] = system
    if rule is not None and rule.reasoning:
        _merge(body, {k: v for k, v in rule.send.items() if k not in drops})
    schema = request.schema
    if schema is not None and schema.get("type") == "object":
        input_schema = {k: v for k, v in schema.items() if k != "title"}
        if rule is not None and rule.structured == "output_format":
            _merge(body, {"output_config": {"format": {"type": "json_schema",
                                                       "schema": anthropic_schema(input_schema)}}})
        else:
            body["tools"] = [{"name": _TOOL, "description": "Give your reply in this structure.",
                              "input_schema": input_schema}]
            body["tool_choice"] = {"type": "tool", "name": _TOOL}
    return body


def parse_anthropic(data: Any) -> LLMResponse:
    """An :class:`LLMResponse` from a Messages response body (tool input as JSON text).

    A reply stopped at ``max_tokens`` with thinking and no text or tool input was cut
    by its reasoning.
    """
    try:
        blocks = data["content"]
        parts = []
        thought = False
        for block in blocks:
            kind = block.get("type")
            if kind == "text":
                parts.append(block.get("text", ""))
            elif kind == "tool_use":
                parts.append(json.dumps(block.get("input", {}), ensure_ascii=False))
            elif kind in ("thinking", "redacted_thinking"):
                thought = True
        stop = data.get("stop_reason") or "end_turn"
    except (KeyError, TypeError, AttributeError):
        raise MalformedResponse(f"message without content blocks: {_snippet(data)}") from None
    raw = data.get("usage") or {}
    usage = None
    if isinstance(raw, Mapping) and "input_tokens" in raw:
        cached = _int(raw.get("cache_read_input_tokens"))
        prompt = sum(_int(raw.get(k)) for k in ("input_tokens", "cache_creation_input_tokens")) + cached
        thinking = _int(_detail(raw, "output_tokens_details", "thinking_tokens"))
        usage = Usage(prompt, _int(raw.get("output_tokens")), thinking, cached)
        thought = thought or thinking > 0
    finish = _ANTHROPIC_STOP.get(stop, str(stop))
    text = "".join(parts)
    if stop == "max_tokens" and thought and not text.strip():
        finish = REASONING_CUT
    return LLMResponse(text=text, usage=usage, finish_reason=finish, model=str(data.get("model") or ""))


# -- Gemini generateContent -----------------------------------------------------------

_GEMINI_STOP = {"STOP": "stop", "MAX_TOKENS": "length", "SAFETY": "content_filter",
                "RECITATION": "content_filter", "PROHIBITED_CONTENT": "content_filter"}


def gemini_path(model: str) -> str:
    """The generateContent path for ``model``."""
    return f"/v1beta/models/{model}:generateContent"


def gemini_body(request: LLMRequest, rule: ModelRule | None = None,
                drops: frozenset[str] = frozenset()) -> dict[str, Any]:
    """The generateContent body (thinking settings, where the rule has them, in ``generationConfig``)."""
    system = "\n\n".join(m.content for m in request.messages if m.role == "system")
    contents = [{"role": "model" if m["role"] == "assistant" else "user", "parts": [{"text": m["content"]}]}
                for m in _joined_turns(request.messages)]
    config: dict[str, Any] = {"maxOutputTokens": request.max_tokens + reasoning_allowance(request, rule)}
    if _takes(rule, "temperature", drops):
        config["temperature"] = request.temperature
    if request.seed is not None and _takes(rule, "seed", drops):
        config["seed"] = request.seed
    if rule is not None and rule.reasoning:
        _merge(config, {k: v for k, v in rule.send.items() if k not in drops})
    if request.schema is not None:
        config["responseMimeType"] = "application/json"
        config["responseJsonSchema"] = dict(request.schema)
    body: dict[str, Any] = {"contents": contents, "generationConfig": config}
    if system:
        body["systemInstruction"] = {"parts": [{"text": system}]}
    return body


def parse_gemini(data: Any) -> LLMResponse:
    """An :class:`LLMResponse` from a generateContent body (thought parts skipped).

    Thinking tokens (``thoughtsTokenCount``) are billed as output and counted apart
    from ``candidatesTokenCount``; a candidate stopped at MAX_TOKENS with no answer
    text after thinking was cut by its reasoning.
    """
    if not isinstance(data, Mapping):
        raise MalformedResponse(f"generateContent body is not an object: {_snippet(data)}")
    candidates = data.get("candidates") or []
    if not candidates:
        reason = (data.get("promptFeedback") or {}).get("blockReason")
        if reason is None:
            raise MalformedResponse(f"generateContent without candidates: {_snippet(data)}")
        text, finish, raw_finish = "", "content_filter", ""
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
        thoughts = _int(meta.get("thoughtsTokenCount"))
        usage = Usage(_int(meta.get("promptTokenCount")), _int(meta.get("candidatesTokenCount")) + thoughts,
                      thoughts, _int(meta.get("cachedContentTokenCount")))
    if raw_finish == "MAX_TOKENS" and not text.strip() and usage is not None and usage.reasoning_tokens:
        finish = REASONING_CUT
    return LLMResponse(text=text, usage=usage, finish_reason=finish, model=str(data.get("modelVersion") or ""))


# -- one interface over the three ----------------------------------------------------


@dataclass(frozen=True)
class WireRequest:
    """An HTTP request ready to send (headers without the key; see ``auth_headers``).

    Attributes:
        url: Where to send it.
        body: The JSON body.
        schema_in_prompt: The reply schema was stated in the prompt (json_object without "json").
    """

    url: str
    body: dict[str, Any]
    schema_in_prompt: bool = False


def build_request(preset: Preset, base_url: str, request: LLMRequest, model: str,
                  json_mode: str = "auto", rule: ModelRule | None = None,
                  drops: frozenset[str] = frozenset()) -> WireRequest:
    """The URL and body for ``request`` under ``preset``'s protocol.

    ``json_mode`` "auto" takes the rule's structured-output mode, else the preset's.
    A base URL that already ends in the protocol's version segment (``.../v1`` for
    Anthropic, ``.../v1beta`` for Gemini) is not given it twice.
    """
    base = base_url.rstrip("/")
    if preset.protocol == "openai":
        mode = json_mode if json_mode != "auto" else (rule.structured if rule and rule.structured else preset.json_mode)
        return WireRequest(f"{base}/chat/completions", openai_body(request, model, mode, preset.token_param, rule,
                                                                   drops), states_schema(request, mode))
    if preset.protocol == "anthropic":
        return WireRequest(f"{base.removesuffix('/v1')}/v1/messages", anthropic_body(request, model, rule, drops))
    if preset.protocol == "gemini":
        return WireRequest(base.removesuffix("/v1beta") + gemini_path(model), gemini_body(request, rule, drops))
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
