"""Request bodies and responses against the official SDKs' types: the providers' contract.

Every body simcore builds, for all 11 presets and every reply schema the five
scenarios ask for, must

1. validate against the provider SDK's request type, closed: a key the SDK does not
   list fails (OpenAI's ``CompletionCreateParamsNonStreaming`` and Anthropic's
   ``MessageCreateParamsNonStreaming`` TypedDicts, walked key by key; Gemini's
   ``GenerationConfig`` and ``Content`` pydantic models, which forbid extra keys);
2. pass the provider's published rules for the model (:mod:`backends.fake_behaviour`,
   each rule with its source): nothing the provider refuses; and
3. leave the answer its budget: the output cap as sent, less what the model spends
   reasoning, is at least the reply's ``max_tokens``.

And responses built from the SDKs' response types parse into what they say.

The SDKs' types are imported when the first test that needs them runs, not at collection:
every xdist worker collects this file, and the imports cost it about 3 s of CPU.
"""

from __future__ import annotations

import ast
import functools
import importlib
import json
import pkgutil
import typing
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import typing_extensions

import scenarios
from backends import fake_behaviour
from backends.base import LLMRequest, Message
from backends.models import rule_for
from backends.providers import (
    PRESETS,
    REASONING_CUT,
    build_request,
    parse_anthropic,
    parse_gemini,
    parse_openai,
)
from simcore.replies.schema import json_schema

#: Models per preset: one of each family the rules table knows, and one it does not.
MODELS = {
    "openai": ["gpt-5-mini", "gpt-5.5", "gpt-5.6-luna", "gpt-6-luna", "o4-mini", "gpt-5-chat-latest",
               "gpt-4.1-mini", "some-new-model"],
    "anthropic": ["claude-opus-4-7", "claude-opus-4-8", "claude-opus-5", "claude-sonnet-5", "claude-opus-5-5",
                  "claude-sonnet-5-5", "claude-haiku-5-5", "claude-fable-5-1", "claude-opus-4-6",
                  "claude-sonnet-4-5", "claude-haiku-4-5", "claude-3-5-haiku-latest", "claude-next-model"],
    "gemini": ["gemini-2.5-pro", "gemini-2.5-flash", "gemini-2.5-flash-lite", "gemini-3-pro-preview",
               "gemini-3.1-pro-preview", "gemini-3-flash-preview", "gemini-3.5-flash", "gemini-next"],
    "xai": ["grok-4-0709", "grok-4.20-0309-reasoning", "grok-4.20-0309-non-reasoning", "grok-4.5", "grok-4.7"],
    "deepseek": ["deepseek-flash", "deepseek-v4-pro", "deepseek-chat"],
    "groq": ["openai/gpt-oss-120b", "llama-3.3-70b-versatile", "qwen/qwen3-32b"],
    "openrouter": ["openai/gpt-5-mini", "anthropic/claude-opus-4.7", "google/gemini-3-pro-preview"],
    "llamacpp": ["gemma-3-270m"],
    "ollama": ["llama3:8b"],
    "vllm": ["Qwen/Qwen2.5-7B-Instruct"],
    "openai-compatible": ["some-model"],
}
BASE = "http://127.0.0.1:1"
# llama.cpp's server takes the schema inside a json_object response_format, an extension the
# OpenAI SDK does not list (llama.cpp tools/server README, "response_format").
EXTENSIONS = {"llamacpp": {("response_format", "schema")}}


@functools.cache
def _load_sdks() -> SimpleNamespace:
    for name in ("openai", "anthropic", "google.genai"):
        pytest.importorskip(name)
    from anthropic.types import Message as AnthropicMessage
    from anthropic.types.message_create_params import MessageCreateParamsNonStreaming
    from google.genai import types as genai
    from openai.types.chat import ChatCompletion
    from openai.types.chat.completion_create_params import (
        CompletionCreateParamsNonStreaming,
    )
    from pydantic import TypeAdapter

    return SimpleNamespace(
        AnthropicMessage=AnthropicMessage, MessageCreateParamsNonStreaming=MessageCreateParamsNonStreaming,
        genai=genai, ChatCompletion=ChatCompletion,
        CompletionCreateParamsNonStreaming=CompletionCreateParamsNonStreaming,
        OPENAI_TYPE=TypeAdapter(CompletionCreateParamsNonStreaming),
        ANTHROPIC_TYPE=TypeAdapter(MessageCreateParamsNonStreaming))


@pytest.fixture
def sdk() -> SimpleNamespace:
    """The three SDKs' types (the tests that use it skip where an SDK is not installed)."""
    return _load_sdks()


def test_the_models_cover_every_preset_but_the_stub():
    assert set(MODELS) == set(PRESETS) - {"stub"} and len(MODELS) == 11


# -- the reply schemas of the five scenarios ------------------------------------------------


def _reply_schemas() -> dict[str, type]:
    """Every class a scenario passes as ``schema=`` to an agent's call, by qualified name."""
    found: dict[str, type] = {}
    for info in pkgutil.walk_packages(scenarios.__path__, "scenarios."):
        if info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        tree = ast.parse(Path(module.__file__).read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.keyword) and node.arg == "schema" and isinstance(node.value, ast.Name):
                obj = getattr(module, node.value.id, None)
                if isinstance(obj, type):
                    found[f"{obj.__module__}.{obj.__name__}"] = obj
    return found


REPLY_SCHEMAS = _reply_schemas()


def test_the_scenarios_reply_schemas_are_all_found():
    names = {n.rsplit(".", 1)[1] for n in REPLY_SCHEMAS}
    assert {"DecisionReply", "StrategyReply", "Initial", "Discussion", "FinalVote", "Assessment", "Ballot",
            "Critique", "Proposal", "Ratings", "Turn", "Interview"} <= names


def _requests() -> list[LLMRequest]:
    out = []
    for name, cls in sorted(REPLY_SCHEMAS.items()):
        for prompt in ("Decide. Reply with JSON.", "Decide."):  # the second says no "json"
            out.append(LLMRequest("m", (Message("system", "You are an agent."), Message("user", prompt)),
                                  max_tokens=200, temperature=0.3, seed=3, schema=json_schema(cls),
                                  metadata={"schema": name}))
    out.append(LLMRequest("m", (Message("user", "Say something."),), max_tokens=800, temperature=0.7, seed=3))
    # A re-ask of an empty reply: no assistant turn, two user turns in a row.
    out.append(LLMRequest("m", (Message("system", "s"), Message("user", "Decide."), Message("user", "Again, JSON.")),
                          max_tokens=200, temperature=0.3, seed=3, schema=json_schema(REPLY_SCHEMAS[
                              "scenarios.acausal_cooperation.prompts.DecisionReply"])))
    return out


REQUESTS = _requests()


# -- a closed TypedDict check ---------------------------------------------------------------


def closed(value: Any, tp: Any, path: str = "body", allowed: frozenset = frozenset()) -> list[str]:
    """Problems of ``value`` against the (TypedDict-based) type ``tp``: keys the type does not
    list, required keys missing, literals not allowed; empty when it fits."""
    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        return closed(value, typing.get_args(tp)[0], path, allowed)
    if origin is typing.Union:
        tries = [closed(value, arg, path, allowed) for arg in typing.get_args(tp)]
        return [] if any(not t for t in tries) else min(tries, key=len)
    if origin is typing.Literal:
        return [] if value in typing.get_args(tp) else [f"{path}: {value!r} not in {typing.get_args(tp)}"]
    if tp is type(None):
        return [] if value is None else [f"{path}: not null"]
    if typing_extensions.is_typeddict(tp):
        if not isinstance(value, dict):
            return [f"{path}: not an object"]
        hints = typing.get_type_hints(tp, include_extras=True)
        problems = [f"{path}.{k}: not a field of {tp.__name__}" for k in value
                    if k not in hints and (path.split(".")[-1], k) not in allowed]
        problems += [f"{path}.{k}: required" for k in tp.__required_keys__ if k not in value]
        for k, v in value.items():
            if k in hints:
                problems += closed(v, hints[k], f"{path}.{k}", allowed)
        return problems
    if origin in (list, typing.get_origin(typing.Iterable[int]), typing.get_origin(typing.Sequence[int])) or (
            origin is not None and getattr(origin, "__name__", "") in ("Iterable", "Sequence", "SequenceNotStr")):
        if isinstance(value, str) or not isinstance(value, (list, tuple)):
            return [] if isinstance(value, str) and str in typing.get_args(tp) else [f"{path}: not a list"]
        (item,) = typing.get_args(tp) or (Any,)
        return [p for i, v in enumerate(value) for p in closed(v, item, f"{path}[{i}]", allowed)]
    if origin in (dict, typing.get_origin(typing.Mapping[str, int])):
        return [] if isinstance(value, dict) else [f"{path}: not an object"]
    if tp in (int, float):
        return [] if isinstance(value, (int, float)) and not isinstance(value, bool) else [f"{path}: not a number"]
    if tp is str:
        return [] if isinstance(value, str) else [f"{path}: not a string"]
    if tp is bool:
        return [] if isinstance(value, bool) else [f"{path}: not a boolean"]
    return []


def sdk_problems(sdk: SimpleNamespace, preset: str, body: dict[str, Any], rule: Any = None) -> list[str]:
    """Problems of ``body`` against the preset's SDK request type (closed).

    Anthropic's SDK no longer lists temperature: it may be sent only where the model's
    rule, with its source, says the model still takes it.
    """
    protocol = PRESETS[preset].protocol
    if protocol == "anthropic":
        sdk.ANTHROPIC_TYPE.validate_python(body)  # types and values, as the SDK checks them
        still = rule is not None and "temperature" in rule.sampling
        return closed(body, sdk.MessageCreateParamsNonStreaming,
                      allowed=frozenset({("body", "temperature")} if still else ()))
    if protocol == "gemini":
        problems = [f"body.{k}: not a generateContent field" for k in body
                    if k not in ("contents", "generationConfig", "systemInstruction")]
        sdk.genai.GenerationConfig.model_validate(body["generationConfig"])  # extra keys forbidden by the SDK
        for content in body["contents"] + ([body["systemInstruction"]] if "systemInstruction" in body else []):
            sdk.genai.Content.model_validate(content)
        return problems
    sdk.OPENAI_TYPE.validate_python(body)
    return closed(body, sdk.CompletionCreateParamsNonStreaming, allowed=frozenset(EXTENSIONS.get(preset, ())))


def answer_room(protocol: str, model: str, body: dict[str, Any]) -> int:
    """The output cap as sent, less what the model spends reasoning (per its provider's rules)."""
    if protocol == "gemini":
        cap = body["generationConfig"]["maxOutputTokens"]
    else:
        cap = body.get("max_completion_tokens") or body.get("max_tokens")
    return cap - fake_behaviour.thinking_tokens(protocol, model, body)


@pytest.mark.parametrize("preset", sorted(MODELS))
def test_every_body_fits_the_sdk_and_the_providers_rules(sdk, preset):
    protocol = PRESETS[preset].protocol
    checked = 0
    for model in MODELS[preset]:
        for request in REQUESTS:
            rule = rule_for(preset, model)
            body = build_request(PRESETS[preset], BASE, request, model, rule=rule).body
            where = f"{preset}:{model} {request.metadata.get('schema', 'text')}"
            assert sdk_problems(sdk, preset, body, rule) == [], where
            refusal = fake_behaviour.refuse(protocol, model, body)
            assert refusal is None, f"{where}: {refusal}"
            assert answer_room(protocol, model, body) >= request.max_tokens, where
            checked += 1
    assert checked == len(MODELS[preset]) * len(REQUESTS)


def test_temperature_goes_only_where_the_table_says_the_model_takes_it():
    request = REQUESTS[0]
    for preset, models in MODELS.items():
        for model in models:
            body = build_request(PRESETS[preset], BASE, request, model, rule=rule_for(preset, model)).body
            sent = "temperature" in body or "temperature" in body.get("generationConfig", {})
            rule = rule_for(preset, model)
            if rule is not None:
                assert sent == ("temperature" in rule.sampling), (preset, model)
            else:  # no rule: as any model of the protocol, where the SDK still lists it
                assert sent == (PRESETS[preset].protocol != "anthropic"), (preset, model)


# -- responses built from the SDKs' types ----------------------------------------------------


def test_openai_responses_from_the_sdk_parse(sdk):
    done = sdk.ChatCompletion.model_validate({
        "id": "c", "object": "chat.completion", "created": 0, "model": "gpt-5-mini",
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": '{"a": 1}'}}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 40, "total_tokens": 50,
                  "completion_tokens_details": {"reasoning_tokens": 30}, "prompt_tokens_details": {"cached_tokens": 4}},
    })
    res = parse_openai(json.loads(done.model_dump_json(exclude_none=True)))
    assert (res.text, res.finish_reason, tuple(res.usage)) == ('{"a": 1}', "stop", (10, 40, 30, 4))
    cut = done.model_copy(update={"choices": [done.choices[0].model_copy(update={
        "finish_reason": "length", "message": done.choices[0].message.model_copy(update={"content": ""})})]})
    assert parse_openai(json.loads(cut.model_dump_json(exclude_none=True))).finish_reason == REASONING_CUT


def test_anthropic_responses_from_the_sdk_parse(sdk):
    msg = sdk.AnthropicMessage.model_validate({
        "id": "m", "type": "message", "role": "assistant", "model": "claude-opus-5-5", "stop_sequence": None,
        "content": [{"type": "thinking", "thinking": "", "signature": "s"}, {"type": "text", "text": '{"a": 1}'}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 5, "output_tokens": 70, "cache_read_input_tokens": 3,
                  "output_tokens_details": {"thinking_tokens": 60}},
    })
    res = parse_anthropic(json.loads(msg.model_dump_json(exclude_none=True)))
    assert (res.text, res.finish_reason, tuple(res.usage)) == ('{"a": 1}', "stop", (8, 70, 60, 3))
    for stop, finish in (("refusal", "content_filter"), ("model_context_window_exceeded", "length")):
        cut = msg.model_copy(update={"stop_reason": stop, "content": []})
        assert parse_anthropic(json.loads(cut.model_dump_json(exclude_none=True))).finish_reason == finish
    thought = msg.model_copy(update={"stop_reason": "max_tokens", "content": msg.content[:1]})
    assert parse_anthropic(json.loads(thought.model_dump_json(exclude_none=True))).finish_reason == REASONING_CUT


def test_gemini_responses_from_the_sdk_parse(sdk):
    resp = sdk.genai.GenerateContentResponse.model_validate({
        "candidates": [{"content": {"role": "model", "parts": [{"text": "hmm", "thought": True}, {"text": "{}"}]},
                        "finishReason": "STOP"}],
        "usageMetadata": {"promptTokenCount": 8, "candidatesTokenCount": 2, "thoughtsTokenCount": 30,
                          "cachedContentTokenCount": 5},
        "modelVersion": "gemini-3-pro-preview",
    })
    res = parse_gemini(json.loads(resp.model_dump_json(by_alias=True, exclude_none=True)))
    assert (res.text, res.finish_reason, tuple(res.usage)) == ("{}", "stop", (8, 32, 30, 5))
    cut = sdk.genai.GenerateContentResponse.model_validate({
        "candidates": [{"finishReason": "MAX_TOKENS"}],
        "usageMetadata": {"promptTokenCount": 8, "thoughtsTokenCount": 200}})
    cut_body = json.loads(cut.model_dump_json(by_alias=True, exclude_none=True))
    assert parse_gemini(cut_body).finish_reason == REASONING_CUT
