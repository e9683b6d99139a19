"""The fake server's providers' rules (backends/fake_behaviour.py), each against a request
a real provider would refuse or answer in its own way, over HTTP on port 0."""

from __future__ import annotations

import aiohttp
import pytest
import pytest_asyncio

from backends.fake_server import FakeConfig, FakeServer, Fault, parse_args

SCHEMA = {"type": "object", "properties": {"action": {"enum": ["COOPERATE", "DEFECT"]}}, "required": ["action"],
          "additionalProperties": False}
USER = [{"role": "user", "content": "Decide, in JSON."}]


@pytest_asyncio.fixture
async def server():
    async with FakeServer(FakeConfig()) as srv:
        yield srv


async def post(srv: FakeServer, path: str, body: dict) -> tuple[int, dict, dict]:
    async with aiohttp.ClientSession() as http, http.post(srv.url + path, json=body) as resp:
        return resp.status, await resp.json(), dict(resp.headers)


def chat(model: str, **kw) -> dict:
    return {"model": model, "messages": USER, **kw}


def claude(model: str, **kw) -> dict:
    return {"model": model, "max_tokens": 200, "messages": USER, **kw}


def gemini(**config) -> dict:
    return {"contents": [{"role": "user", "parts": [{"text": "Decide, in JSON."}]}],
            "generationConfig": {"maxOutputTokens": 200, **config}}


# (path, body, the rule that refuses it): one row per provider rule.
REFUSED = [
    ("/v1/chat/completions", chat("gpt-5-mini", temperature=0.7, max_completion_tokens=5000), "openai.temperature"),
    ("/v1/chat/completions", chat("o4-mini", max_tokens=200), "openai.max_tokens"),
    ("/v1/chat/completions", chat("gpt-5.5", reasoning_effort="minimal", max_completion_tokens=5000),
     "openai.reasoning_effort"),
    ("/v1/chat/completions", chat("grok-4-0709", reasoning_effort="low", max_tokens=200), "xai.reasoning_effort"),
    ("/v1/chat/completions", {"model": "deepseek-flash", "messages": [{"role": "user", "content": "Decide."}],
                              "response_format": {"type": "json_object"}}, "json_object.word"),
    ("/v1/messages", claude("claude-opus-4-7", temperature=0.3), "anthropic.temperature"),
    ("/v1/messages", claude("claude-sonnet-5", top_p=0.9, thinking={"type": "disabled"}), "anthropic.top_p"),
    ("/v1/messages", claude("claude-opus-4-7", thinking={"type": "enabled", "budget_tokens": 1024}),
     "anthropic.thinking_enabled"),
    ("/v1/messages", claude("claude-opus-5-5", thinking={"type": "disabled"}), "anthropic.thinking_disabled"),
    ("/v1/messages", claude("claude-opus-5", tools=[{"name": "reply", "input_schema": SCHEMA}],
                            tool_choice={"type": "tool", "name": "reply"}), "anthropic.forced_tool"),
    ("/v1/messages", claude("claude-opus-4-7", messages=USER + [{"role": "assistant", "content": "{"}]),
     "anthropic.prefill"),
    ("/v1/messages", claude("claude-any", messages=USER + [{"role": "assistant", "content": ""},
                                                            {"role": "user", "content": "again"}]),
     "anthropic.empty_message"),
    ("/v1beta/models/gemini-2.5-pro:generateContent", gemini(thinkingConfig={"thinkingBudget": 0}), "gemini.budget_0"),
    ("/v1beta/models/gemini-2.5-flash:generateContent", gemini(thinkingConfig={"thinkingLevel": "low"}),
     "gemini.level_on_2.5"),
    ("/v1beta/models/gemini-3-pro-preview:generateContent",
     gemini(thinkingConfig={"thinkingLevel": "low", "thinkingBudget": 128}), "gemini.budget_and_level"),
    ("/v1beta/models/gemini-3-pro-preview:generateContent", gemini(thinkingConfig={"thinkingLevel": "minimal"}),
     "gemini.level"),
]


@pytest.mark.asyncio
@pytest.mark.parametrize("path, body, rule", REFUSED, ids=[r[2] for r in REFUSED])
async def test_each_rule_refuses_what_its_provider_refuses(server, path, body, rule):
    status, data, _ = await post(server, path, body)
    assert status == 400 and server.stats()["refused"] == {rule: 1}, data
    assert data["error"]["message"]


@pytest.mark.asyncio
async def test_the_same_requests_pass_under_no_rules_and_unknown_models_are_untouched():
    async with FakeServer(FakeConfig(rules="none")) as srv:
        for path, body, _ in REFUSED[:-1]:  # (an empty message is refused by the Messages API itself)
            status, _, _ = await post(srv, path, body)
            assert status == 200
    async with FakeServer(FakeConfig()) as srv:
        status, _, _ = await post(srv, "/v1/chat/completions", chat("fake-1", temperature=0.7, max_tokens=50))
        assert status == 200


@pytest.mark.asyncio
async def test_reasoning_spends_the_budget_before_the_answer(server):
    # Default effort (medium) on a 200-token budget: nothing left for the answer.
    status, data, _ = await post(server, "/v1/chat/completions", chat("gpt-5-mini", max_completion_tokens=200))
    choice, usage = data["choices"][0], data["usage"]
    assert status == 200 and choice["message"]["content"] == "" and choice["finish_reason"] == "length"
    assert usage["completion_tokens_details"]["reasoning_tokens"] == usage["completion_tokens"] == 200
    # Low effort with room on top: an answer, its reasoning counted in completion_tokens.
    _, data, _ = await post(server, "/v1/chat/completions",
                            chat("gpt-5-mini", max_completion_tokens=4296, reasoning_effort="low",
                                 response_format={"type": "json_schema",
                                                  "json_schema": {"name": "r", "schema": SCHEMA}}))
    assert data["choices"][0]["message"]["content"].startswith("{")
    assert data["usage"]["completion_tokens"] > data["usage"]["completion_tokens_details"]["reasoning_tokens"] == 512
    # xAI reports reasoning apart from completion_tokens; total_tokens has it.
    _, data, _ = await post(server, "/v1/chat/completions", chat("grok-4.20-0309-reasoning", max_tokens=4000))
    u = data["usage"]
    assert u["total_tokens"] == u["prompt_tokens"] + u["completion_tokens"] + u["completion_tokens_details"][
        "reasoning_tokens"]
    # Claude Opus 5.5 thinks out of max_tokens; Gemini 3 Pro out of maxOutputTokens.
    _, data, _ = await post(server, "/v1/messages", claude("claude-opus-5-5"))
    assert data["stop_reason"] == "max_tokens" and [b["type"] for b in data["content"]] == ["thinking"]
    _, data, _ = await post(server, "/v1beta/models/gemini-3-pro-preview:generateContent", gemini())
    assert data["candidates"][0]["finishReason"] == "MAX_TOKENS" and "content" not in data["candidates"][0]
    assert data["usageMetadata"]["thoughtsTokenCount"] == 200


@pytest.mark.asyncio
async def test_faults_come_in_each_providers_shape():
    faults = ("429:first=1,retry_after=7,model=gemini*", "429:first=1,retry_after=3,model=claude*",
              "status=409:first=1,should_retry=false,model=x409", "refusal:every=2,model=claude-opus*",
              "json_invalid:first=1,model=llama*", "error200:first=1,model=or*", "window:first=1,model=claude-w")
    async with FakeServer(FakeConfig(faults=tuple(Fault.parse(f) for f in faults))) as srv:
        status, data, headers = await post(srv, "/v1beta/models/gemini-3-pro-preview:generateContent", gemini())
        assert status == 429 and "Retry-After" not in headers
        assert {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "7s"} in data["error"]["details"]
        status, _, headers = await post(srv, "/v1/messages", claude("claude-opus-4-7"))
        assert status == 429 and headers["Retry-After"] == "3"
        status, _, headers = await post(srv, "/v1/chat/completions", chat("x409"))
        assert status == 409 and headers["x-should-retry"] == "false"
        _, data, _ = await post(srv, "/v1/messages", claude("claude-opus-4-7"))
        assert data["stop_reason"] == "refusal" and data["content"] == []
        status, data, _ = await post(srv, "/v1/chat/completions", chat("llama-3.3-70b-versatile"))
        assert status == 400 and data["error"]["code"] == "json_validate_failed" and data["error"]["failed_generation"]
        status, data, _ = await post(srv, "/v1/chat/completions", chat("or-model"))
        assert status == 200 and data["choices"][0]["finish_reason"] == "error" and data["choices"][0]["error"]
        _, data, _ = await post(srv, "/v1/messages", claude("claude-w"))
        assert data["stop_reason"] == "model_context_window_exceeded"


@pytest.mark.asyncio
async def test_a_context_window_is_refused_in_each_providers_words():
    async with FakeServer(FakeConfig(context_window=100)) as srv:
        _, data, _ = await post(srv, "/v1/messages", claude("claude-x", max_tokens=500))
        assert data["error"]["message"].startswith("input length and `max_tokens` exceed context limit")
        long = [{"role": "user", "content": "word " * 400}]
        _, data, _ = await post(srv, "/v1/messages", claude("claude-x", messages=long))
        assert data["error"]["message"].startswith("prompt is too long: ")
        body = gemini()
        body["contents"][0]["parts"][0]["text"] = "word " * 400
        _, data, _ = await post(srv, "/v1beta/models/gemini-x:generateContent", body)
        assert data["error"]["message"].startswith("The input token count (")


def test_the_command_line_takes_rules_and_should_retry():
    cfg, _, port = parse_args(["--port", "0", "--rules", "none", "--fault", "status=400:first=1,should_retry=true"])
    assert (cfg.rules, port, cfg.faults[0].should_retry) == ("none", 0, True)
    with pytest.raises(SystemExit):
        parse_args(["--fault", "500:should_retry=maybe"])
