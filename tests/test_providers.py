"""Wire protocols, presets and model routing (pure functions, no network)."""

from __future__ import annotations

import json

import pytest

from backends.base import LLMRequest, Message
from backends.errors import BackendConfigError, MalformedResponse
from backends.providers import (
    PRESETS,
    anthropic_body,
    auth_headers,
    build_request,
    gemini_body,
    get_preset,
    openai_body,
    parse_anthropic,
    parse_gemini,
    parse_openai,
    split_model,
)

SCHEMA = {
    "title": "Vote",
    "type": "object",
    "properties": {"choice": {"type": "string"}, "confidence": {"type": "number", "minimum": 0, "maximum": 1}},
    "required": ["choice", "confidence"],
    "additionalProperties": False,
}


def request(schema=None, seed=7) -> LLMRequest:
    return LLMRequest(
        model="m",
        messages=(Message("system", "Be brief."), Message("user", "Vote.")),
        max_tokens=64,
        temperature=0.3,
        seed=seed,
        schema=schema,
        metadata={"agent": "A"},
    )


def test_openai_body_passes_seed_temperature_tokens_and_no_metadata():
    body = openai_body(request(), "gpt-x", "json_schema")
    assert body == {
        "model": "gpt-x",
        "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Vote."}],
        "max_tokens": 64,
        "temperature": 0.3,
        "seed": 7,
    }
    assert "seed" not in openai_body(request(seed=None), "gpt-x", "json_schema")


@pytest.mark.parametrize(
    "mode, expected",
    [
        ("json_schema", {"type": "json_schema", "json_schema": {"name": "Vote", "schema": SCHEMA, "strict": False}}),
        ("json_object_schema", {"type": "json_object", "schema": SCHEMA}),
        ("json_object", {"type": "json_object"}),
        ("off", None),
    ],
)
def test_openai_json_modes(mode, expected):
    body = openai_body(request(SCHEMA), "m", mode)
    assert body.get("response_format") == expected


def test_presets_pick_their_json_mode_and_token_parameter():
    llama = build_request(get_preset("llamacpp"), "http://127.0.0.1:1/v1/", request(SCHEMA), "g")
    assert llama.url == "http://127.0.0.1:1/v1/chat/completions"
    assert llama.body["response_format"] == {"type": "json_object", "schema": SCHEMA}
    openai = build_request(get_preset("openai"), "https://x/v1", request(SCHEMA), "gpt-4.1")
    assert openai.body["max_completion_tokens"] == 64 and "max_tokens" not in openai.body
    assert openai.body["response_format"]["type"] == "json_schema"
    deepseek = build_request(get_preset("deepseek"), "https://x", request(SCHEMA), "deepseek-chat")
    assert deepseek.body["response_format"] == {"type": "json_object"}
    forced = build_request(get_preset("llamacpp"), "http://h/v1", request(SCHEMA), "g", json_mode="off")
    assert "response_format" not in forced.body


def test_anthropic_body_separates_system_and_forces_a_tool_for_json():
    body = anthropic_body(request(SCHEMA), "claude-x")
    assert body["system"] == "Be brief."
    assert body["messages"] == [{"role": "user", "content": "Vote."}]
    # No temperature for a model without a rule: anthropic 2.14.0 no longer lists it (Opus 4.7 and later
    # refuse it); a rule with its source says which models still take it.
    assert body["max_tokens"] == 64 and "temperature" not in body and "seed" not in body
    from backends.models import rule_for

    assert anthropic_body(request(SCHEMA), "claude-sonnet-4-5", rule_for("anthropic", "claude-sonnet-4-5"))[
        "temperature"] == 0.3
    assert body["tool_choice"] == {"type": "tool", "name": "reply"}
    assert body["tools"][0]["input_schema"]["properties"] == SCHEMA["properties"]
    assert "title" not in body["tools"][0]["input_schema"]
    assert "tools" not in anthropic_body(request(), "claude-x")


def test_gemini_body_uses_system_instruction_seed_and_json_schema():
    body = gemini_body(request(SCHEMA))
    assert body["systemInstruction"] == {"parts": [{"text": "Be brief."}]}
    assert body["contents"] == [{"role": "user", "parts": [{"text": "Vote."}]}]
    cfg = body["generationConfig"]
    assert cfg == {"temperature": 0.3, "maxOutputTokens": 64, "seed": 7,
                   "responseMimeType": "application/json", "responseJsonSchema": SCHEMA}
    url = build_request(get_preset("gemini"), "https://g", request(), "gemini-2.5-flash").url
    assert url == "https://g/v1beta/models/gemini-2.5-flash:generateContent"


def test_parse_openai_captures_usage_finish_fingerprint_and_model():
    res = parse_openai({
        "model": "gpt-x-2025", "system_fingerprint": "fp_1",
        "choices": [{"message": {"content": '{"a": 1}'}, "finish_reason": "length"}],
        "usage": {"prompt_tokens": 11, "completion_tokens": 5, "total_tokens": 16},
    })
    assert (res.text, res.finish_reason, res.model, res.system_fingerprint) == ('{"a": 1}', "length", "gpt-x-2025", "fp_1")
    assert (res.usage.prompt_tokens, res.usage.completion_tokens) == (11, 5)
    no_usage = parse_openai({"choices": [{"message": {"content": None, "refusal": "no"}}]})
    assert no_usage.usage is None and no_usage.text == "no" and no_usage.finish_reason == "stop"
    for bad in ({}, {"choices": []}, [1, 2], {"choices": [None]}):
        with pytest.raises(MalformedResponse):
            parse_openai(bad)


def test_parse_anthropic_turns_tool_input_into_json_text():
    res = parse_anthropic({
        "model": "claude-x", "stop_reason": "tool_use",
        "content": [{"type": "tool_use", "name": "reply", "input": {"choice": "B", "confidence": 0.5}}],
        "usage": {"input_tokens": 20, "output_tokens": 9, "cache_read_input_tokens": 3},
    })
    assert json.loads(res.text) == {"choice": "B", "confidence": 0.5}
    assert res.finish_reason == "stop" and (res.usage.prompt_tokens, res.usage.completion_tokens) == (23, 9)
    cut = parse_anthropic({"content": [{"type": "text", "text": "abc"}], "stop_reason": "max_tokens"})
    assert cut.finish_reason == "length" and cut.usage is None
    with pytest.raises(MalformedResponse):
        parse_anthropic({"type": "message"})


def test_parse_gemini_skips_thoughts_and_bills_them_as_output():
    res = parse_gemini({
        "candidates": [{"content": {"parts": [{"text": "hmm", "thought": True}, {"text": "{}"}]},
                        "finishReason": "MAX_TOKENS"}],
        "usageMetadata": {"promptTokenCount": 8, "candidatesTokenCount": 2, "thoughtsTokenCount": 30},
        "modelVersion": "gemini-2.5-flash-001",
    })
    assert res.text == "{}" and res.finish_reason == "length" and res.model == "gemini-2.5-flash-001"
    assert (res.usage.prompt_tokens, res.usage.completion_tokens) == (8, 32)
    blocked = parse_gemini({"promptFeedback": {"blockReason": "SAFETY"}})
    assert blocked.text == "" and blocked.finish_reason == "content_filter"
    with pytest.raises(MalformedResponse):
        parse_gemini({"nothing": True})


def test_auth_headers_put_the_key_where_each_protocol_wants_it():
    assert auth_headers(get_preset("openai"), "k")["authorization"] == "Bearer k"
    a = auth_headers(get_preset("anthropic"), "k")
    assert a["x-api-key"] == "k" and a["anthropic-version"]
    assert auth_headers(get_preset("gemini"), "k")["x-goog-api-key"] == "k"
    assert "authorization" not in auth_headers(get_preset("llamacpp"), None)


def test_split_model_routes_known_prefixes_only():
    assert split_model("openrouter:google/gemini-2.5-flash", "openai") == ("openrouter", "google/gemini-2.5-flash")
    assert split_model("gpt-4.1-nano", "openai") == ("openai", "gpt-4.1-nano")
    assert split_model("llama3:8b", "ollama") == ("ollama", "llama3:8b")
    assert split_model("ollama:llama3:8b", "openai") == ("ollama", "llama3:8b")
    assert split_model("stub:x", "openai") == ("stub", "x")


def test_presets_cover_the_documented_providers():
    for name, env in [("openai", "OPENAI_API_KEY"), ("openrouter", "OPENROUTER_API_KEY"),
                      ("anthropic", "ANTHROPIC_API_KEY"), ("gemini", "GEMINI_API_KEY"),
                      ("deepseek", "DEEPSEEK_API_KEY"), ("groq", "GROQ_API_KEY"), ("xai", "XAI_API_KEY")]:
        assert PRESETS[name].api_key_env == env
    for local in ("llamacpp", "ollama", "vllm"):
        assert PRESETS[local].api_key_env is None and PRESETS[local].local
    with pytest.raises(BackendConfigError, match="backend: must be one of"):
        get_preset("nope")
