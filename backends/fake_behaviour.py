"""How the fake server's models behave when they follow their providers' published rules.

The fake server (:mod:`backends.fake_server`) runs with ``--rules current`` by default:
a request to a model whose name matches a family below is refused where the real
provider refuses it, and a reasoning model spends tokens thinking out of the same
budget as its answer, as the real ones do. A test against the fake server therefore
fails where a real provider would refuse. Every rule names its source beside it.
Model names no rule matches ("fake-1", "m") behave as before; ``--rules none`` turns
every rule off.

This module is pure: it reads request bodies and says what the server answers.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from typing import Any, Mapping

RULES = ("current", "none")


@dataclass(frozen=True)
class Refusal:
    """An error a provider answers a request with.

    Attributes:
        rule: Which rule refused (the server counts refusals by it).
        status: The HTTP status.
        body: The provider-shaped error body.
    """

    rule: str
    status: int
    body: dict[str, Any]


def _is(model: str, *patterns: str) -> bool:
    return any(fnmatch.fnmatchcase(model, p) for p in patterns)


# -- OpenAI and OpenAI-compatible providers -------------------------------------------------

# OpenAI's reasoning families. Source: HTTP 400 bodies quoted in github.com/khoj-ai/khoj/issues/1377
# (gpt-5.6) and getquicker.net/Common/Topics/ViewTopic/35659 (gpt-5); the SDK's reasoning_effort
# values (openai 3.57.0); developers.openai.com/api/docs/models/gpt-6-luna (none..max).
_OPENAI_REASONING = ("gpt-5*", "gpt-6*", "o1*", "o3*", "o4*")
_OPENAI_CHAT = ("gpt-5-chat*", "gpt-5.*-chat*")
_EFFORT_TOKENS = {"none": 0, "minimal": 64, "low": 512, "medium": 2048, "high": 6144, "xhigh": 12288, "max": 16384}
# Providers that refuse json_object without the word "json" in the messages. Sources:
# api-docs.deepseek.com/guides/json_mode; portkey.ai/error-library/response-format-error-10006 (OpenAI);
# Groq's own wording "'messages' must contain the word 'json' in some form" (console.groq.com/docs/text-chat).
_JSON_WORD = ("gpt-*", "o1*", "o3*", "o4*", "deepseek-*", "llama-*", "openai/gpt-oss*", "qwen/*", "qwen-*",
              "moonshotai/*", "meta-llama/*")


def _efforts(model: str) -> tuple[str, ...]:
    if _is(model, "o1*", "o3*", "o4*"):
        return ("low", "medium", "high")
    if _is(model, "gpt-5", "gpt-5-mini*", "gpt-5-nano*", "gpt-5-20*"):
        return ("minimal", "low", "medium", "high")
    return ("none", "low", "medium", "high", "xhigh", "max")


def _openai_error(rule: str, message: str, param: str | None, code: str, status: int = 400) -> Refusal:
    return Refusal(rule, status, {"error": {"message": message, "type": "invalid_request_error", "param": param,
                                            "code": code}})


def refuse_openai(model: str, body: Mapping[str, Any]) -> Refusal | None:
    """What an OpenAI-protocol provider refuses in ``body``, or None."""
    if _is(model, *_OPENAI_REASONING) and not _is(model, *_OPENAI_CHAT):
        temperature = body.get("temperature")
        if temperature is not None and temperature != 1:
            return _openai_error(
                "openai.temperature", f"Unsupported value: 'temperature' does not support {temperature:g} with this "
                "model. Only the default (1) value is supported.", "temperature", "unsupported_value")
        if "max_tokens" in body:
            return _openai_error(
                "openai.max_tokens", "Unsupported parameter: 'max_tokens' is not supported with this model. Use "
                "'max_completion_tokens' instead.", "max_tokens", "unsupported_parameter")
        effort = body.get("reasoning_effort")
        if effort is not None and effort not in _efforts(model):
            return _openai_error(
                "openai.reasoning_effort", f"Unsupported value: 'reasoning_effort' does not support {effort!r} with "
                f"this model. Supported values are: {', '.join(repr(e) for e in _efforts(model))}.",
                "reasoning_effort", "unsupported_value")
    # xAI: "Grok 4 does not have a reasoning_effort parameter. If a reasoning_effort is provided,
    # the request will return an error." (docs.x.ai/models)
    if _is(model, "grok-4", "grok-4-0709", "grok-4.20*", "grok-4.3*") and "reasoning_effort" in body:
        return _openai_error("xai.reasoning_effort", f"Model {model} does not support parameter reasoningEffort.",
                             None, "invalid_argument")
    fmt = body.get("response_format") or {}
    if (_is(model, *_JSON_WORD) and fmt.get("type") == "json_object" and not fmt.get("schema")
            and not any("json" in str(m.get("content", "")).lower() for m in body.get("messages", []))):
        return _openai_error(
            "json_object.word", "'messages' must contain the word 'json' in some form, to use 'response_format' of "
            "type 'json_object'.", "messages", "invalid_request_error")
    return None


def openai_thinking(model: str, body: Mapping[str, Any]) -> int:
    """Reasoning tokens an OpenAI-protocol model spends before its answer (0: none)."""
    if _is(model, *_OPENAI_REASONING) and not _is(model, *_OPENAI_CHAT):
        # Reasoning tokens count against max_completion_tokens (openai 3.57.0 docstring); the
        # default effort is medium (developers.openai.com/api/docs/models/gpt-6-luna).
        return _EFFORT_TOKENS.get(str(body.get("reasoning_effort") or "medium"), 2048)
    if _is(model, "grok-4*", "grok-code*", "grok-build*") and not _is(model, "*non-reasoning*"):
        # xAI: reasoning cannot be turned off, and its tokens are reported apart from
        # completion_tokens (docs.x.ai consumption docs, quoted in github.com/vercel/ai/pull/12425).
        return _EFFORT_TOKENS.get(str(body.get("reasoning_effort") or "low"), 512)
    return 0


def reasoning_apart(model: str) -> bool:
    """Whether usage reports reasoning tokens apart from completion_tokens (xAI) rather than in them."""
    return _is(model, "grok-*")


# -- Anthropic Messages ---------------------------------------------------------------------

# Opus 4.7 and later refuse sampling parameters. Source: "`temperature` is deprecated for this
# model." (github.com/Comfy-Org/ComfyUI/issues/13923); platform.claude.com/docs/zh-CN/models/sonnet-5/overview;
# openrouter.ai/docs/cookbook/evaluate-and-optimize/model-migrations/claude-5-5.
_CLAUDE_5 = ("claude-opus-5", "claude-opus-5-*", "claude-sonnet-5", "claude-sonnet-5-*", "claude-haiku-5",
             "claude-haiku-5-*")
_NO_SAMPLING = ("claude-opus-4-7*", "claude-opus-4-8*", *_CLAUDE_5, "claude-fable*", "claude-mythos*")
# Thinking that cannot be turned off. Source: openrouter.ai/.../model-migrations/opus-5-5 (Opus 5.5),
# .../claude-5-5 (Sonnet 5.5); docs.aws.amazon.com/bedrock/latest/userguide/claude-messages-adaptive-thinking.md
# (Fable, Mythos; Opus 4.7: "disabled" and "enabled" return 400).
_ALWAYS_THINKING = ("claude-opus-5-5*", "claude-sonnet-5-5*", "claude-fable*", "claude-mythos*")
_ADAPTIVE_ONLY = ("claude-opus-4-7*", "claude-opus-4-8*", *_ALWAYS_THINKING)
# Thinking on unless turned off: Opus 5, Sonnet 5 (platform.claude.com sonnet-5 overview), Haiku 5.5.
_THINKING_BY_DEFAULT = ("claude-opus-5", "claude-opus-5-2*", "claude-sonnet-5", "claude-sonnet-5-2*",
                        "claude-haiku-5-5*", *_ALWAYS_THINKING)
# Default effort: Opus 5.5 and Haiku 5.5 medium, the others high (openrouter claude-5-5 guide).
_MEDIUM_DEFAULT = ("claude-opus-5-5*", "claude-haiku-5-5*")
_ANTHROPIC_EFFORT_TOKENS = {"low": 256, "medium": 1024, "high": 2048, "xhigh": 4096, "max": 8192}


def _anthropic_error(rule: str, message: str, status: int = 400) -> Refusal:
    return Refusal(rule, status, {"type": "error", "error": {"type": "invalid_request_error", "message": message}})


def _thinking_on(model: str, body: Mapping[str, Any]) -> bool:
    kind = (body.get("thinking") or {}).get("type")
    if kind in ("enabled", "adaptive"):
        return True
    return kind != "disabled" and _is(model, *_THINKING_BY_DEFAULT)


def refuse_anthropic(model: str, body: Mapping[str, Any]) -> Refusal | None:
    """What the Messages API refuses in ``body`` for ``model``, or None."""
    messages = body.get("messages") or []
    for i, m in enumerate(messages):
        content = m.get("content")
        empty = not content.strip() if isinstance(content, str) else not content
        if empty and not (i == len(messages) - 1 and m.get("role") == "assistant"):
            # Any Claude model (the Messages API's own validation).
            return _anthropic_error("anthropic.empty_message", f"messages.{i}: all messages must have non-empty "
                                    "content except for the optional final assistant message")
    if not _is(model, "claude-*"):
        return None
    if _is(model, *_NO_SAMPLING):
        for name in ("temperature", "top_p", "top_k"):
            if name in body:
                return _anthropic_error(f"anthropic.{name}", f"`{name}` is deprecated for this model.")
        if messages and messages[-1].get("role") == "assistant":
            return _anthropic_error("anthropic.prefill", "This model does not support assistant message prefill. "
                                    "The conversation must end with a user message.")
    kind = (body.get("thinking") or {}).get("type")
    if kind == "enabled" and _is(model, *_ADAPTIVE_ONLY, *_CLAUDE_5):
        return _anthropic_error("anthropic.thinking_enabled", '"thinking.type.enabled" is not supported for this '
                                'model. Use "thinking.type.adaptive" and "output_config.effort" to control thinking '
                                "behavior.")
    if kind == "disabled" and _is(model, *_ADAPTIVE_ONLY):
        return _anthropic_error("anthropic.thinking_disabled", '"thinking.type.disabled" is not supported for this '
                                "model: its thinking is always adaptive.")
    forced = (body.get("tool_choice") or {}).get("type") in ("tool", "any")
    if forced and (_thinking_on(model, body) or _is(model, "claude-opus-5-5*")):
        # platform.claude.com extended thinking docs: a forced tool is not allowed with thinking;
        # Opus 5.5 refuses forced tool use outright (openrouter.ai/.../model-migrations/opus-5-5).
        return _anthropic_error("anthropic.forced_tool", "Thinking may not be enabled when tool_choice forces "
                                "tool use.")
    return None


def anthropic_thinking(model: str, body: Mapping[str, Any]) -> int:
    """Thinking tokens a Claude model spends out of ``max_tokens`` before its answer (0: none)."""
    if not _thinking_on(model, body):
        return 0
    thinking = body.get("thinking") or {}
    if thinking.get("type") == "enabled":
        return int(thinking.get("budget_tokens") or 1024)
    default = "medium" if _is(model, *_MEDIUM_DEFAULT) else "high"
    effort = (body.get("output_config") or {}).get("effort") or default
    # Thinking tokens count toward max_tokens (anthropic 2.14.0 ThinkingConfigParam docstring).
    return _ANTHROPIC_EFFORT_TOKENS.get(str(effort), 2048)


# -- Gemini ---------------------------------------------------------------------------------

# Sources: ai.google.dev/gemini-api/docs/thinking (budgets, "cannot disable thinking" for 2.5 Pro and
# 3 Pro, thoughts counted against maxOutputTokens); hexdocs.pm/gemini_ex/0.13.0 ThinkingConfig
# (3 Pro: low, high; 3 Flash: minimal..high; thinkingLevel with thinkingBudget returns 400; 2.5
# models take no thinkingLevel).
_GEMINI_LEVEL_TOKENS = {"MINIMAL": 64, "LOW": 512, "MEDIUM": 1024, "HIGH": 4096}


def _gemini_error(rule: str, message: str, status: int = 400, state: str = "INVALID_ARGUMENT") -> Refusal:
    return Refusal(rule, status, {"error": {"code": status, "message": message, "status": state}})


def refuse_gemini(model: str, body: Mapping[str, Any]) -> Refusal | None:
    """What generateContent refuses in ``body`` for ``model``, or None."""
    cfg = (body.get("generationConfig") or {}).get("thinkingConfig") or {}
    budget, level = cfg.get("thinkingBudget"), cfg.get("thinkingLevel")
    if budget is not None and level is not None:
        return _gemini_error("gemini.budget_and_level", "You can only set only one of thinking budget and thinking "
                             "level.")
    if level is not None and _is(model, "gemini-2*"):
        return _gemini_error("gemini.level_on_2.5", "Thinking level is not supported for this model.")
    if budget == 0 and _is(model, "gemini-2.5-pro*", "gemini-3*pro*"):
        return _gemini_error("gemini.budget_0", "Budget 0 is invalid. This model only works in thinking mode.")
    if budget is not None and budget not in (-1, 0) and _is(model, "gemini-2.5-pro*") and not 128 <= budget <= 32768:
        return _gemini_error("gemini.budget_range", f"The thinking budget {budget} is invalid. Please choose a value "
                             "between 128 and 32768.")
    if level is not None and str(level).upper() not in (("LOW", "HIGH") if _is(model, "gemini-3*pro*")
                                                          else tuple(_GEMINI_LEVEL_TOKENS)):
        return _gemini_error("gemini.level", f"Thinking level {level} is not supported for this model.")
    return None


def gemini_thinking(model: str, body: Mapping[str, Any]) -> int:
    """Thinking tokens a Gemini model spends out of ``maxOutputTokens`` before its answer (0: none)."""
    if not _is(model, "gemini-2.5*", "gemini-3*"):
        return 0
    cfg = (body.get("generationConfig") or {}).get("thinkingConfig") or {}
    budget, level = cfg.get("thinkingBudget"), cfg.get("thinkingLevel")
    if level is not None:
        return _GEMINI_LEVEL_TOKENS.get(str(level).upper(), 1024)
    if budget is not None and budget >= 0:
        return int(budget)
    if _is(model, "gemini-2.5-flash-lite*"):
        return 0  # thinking is off by default on Flash-Lite
    # Dynamic thinking by default; Gemini 3's default level is high.
    return 4096 if _is(model, "gemini-3*") else 2048


def refuse(protocol: str, model: str, body: Mapping[str, Any]) -> Refusal | None:
    """What ``protocol``'s provider refuses in ``body`` for ``model``, or None."""
    if protocol == "anthropic":
        return refuse_anthropic(model, body)
    if protocol == "gemini":
        return refuse_gemini(model, body)
    return refuse_openai(model, body)


def thinking_tokens(protocol: str, model: str, body: Mapping[str, Any]) -> int:
    """Tokens ``model`` spends thinking out of its output budget before it answers."""
    if protocol == "anthropic":
        return anthropic_thinking(model, body)
    if protocol == "gemini":
        return gemini_thinking(model, body)
    return openai_thinking(model, body)


def rate_limited(protocol: str, wait_s: float) -> tuple[dict[str, Any], dict[str, str]]:
    """A 429 body and headers as ``protocol``'s provider sends them.

    Gemini puts the wait in the body (``google.rpc.RetryInfo``, ``"retryDelay": "37s"``)
    and sends no Retry-After header (github.com/google-gemini/gemini-cli issues quoting
    RESOURCE_EXHAUSTED bodies; google.rpc error model); the others send Retry-After.
    """
    if protocol == "gemini":
        return ({"error": {"code": 429, "message": "You exceeded your current quota, please check your plan and "
                           "billing details.", "status": "RESOURCE_EXHAUSTED", "details": [
                               {"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": []},
                               {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": f"{wait_s:g}s"}]}},
                {})
    if protocol == "anthropic":
        return ({"type": "error", "error": {"type": "rate_limit_error", "message": "Number of request tokens has "
                                            "exceeded your per-minute rate limit"}}, {"Retry-After": f"{wait_s:g}"})
    return ({"error": {"message": "Rate limit reached for requests", "type": "requests", "param": None,
                       "code": "rate_limit_exceeded"}}, {"Retry-After": f"{wait_s:g}"})


def overflow(protocol: str, window: int, prompt: int, asked: int) -> Refusal | None:
    """The refusal of a prompt of ``prompt`` tokens and a cap of ``asked`` in a window of
    ``window``, in its provider's words and shape (None: the provider takes it; Gemini
    refuses only a prompt too long by itself). Sources: errors quoted in
    github.com/anthropics/claude-code/issues/59696 (Anthropic),
    github.com/google-gemini/gemini-cli/issues/6678 (Gemini); llama-cpp-python and vLLM
    for the OpenAI wording (docs/backends.md, context windows)."""
    if prompt + asked <= window:
        return None
    if protocol == "anthropic":
        said = (f"prompt is too long: {prompt} tokens > {window} maximum" if prompt > window else
                f"input length and `max_tokens` exceed context limit: {prompt} + {asked} > {window}, decrease input "
                "length or `max_tokens` and try again")
        return _anthropic_error("context_window", said)
    if protocol == "gemini":
        if prompt <= window:
            return None
        return _gemini_error("context_window", f"The input token count ({prompt}) exceeds the maximum number of "
                             f"tokens allowed ({window}).")
    return _openai_error(
        "context_window", f"This model's maximum context length is {window} tokens. However, you requested "
        f"{prompt + asked} tokens ({prompt} in the messages, {asked} in the completion). Please reduce the length "
        "of the messages or completion.", "messages", "context_length_exceeded")
