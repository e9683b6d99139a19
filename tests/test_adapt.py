"""Providers as they answer: refused parameters dropped once, waits and retry advice obeyed,
replies carried in errors read, failures inside 200s retried, reasoning cuts re-asked.

Every test runs against the fake server (port 0) in its providers' rules mode; waits
are recorded, never slept.
"""

from __future__ import annotations

import json

import pytest
import pytest_asyncio

from backends.base import LLMRequest, Message
from backends.errors import BadRequest, HTTPStatusError, ProviderError, overflow
from backends.fake_server import FakeConfig, FakeServer, Fault
from backends.middleware import Halt
from backends.middleware.adapt import refused_param
from backends.providers import REASONING_CUT
from backends.registry import BackendSpec, make_backend

SCHEMA = {"type": "object", "properties": {"action": {"enum": ["COOPERATE", "DEFECT"]}}, "required": ["action"],
          "additionalProperties": False}
FAST = {"backoff_base_s": 0.0, "backoff_max_s": 0.0, "timeout_s": 10.0}


@pytest.fixture(autouse=True)
def keys(monkeypatch):
    for preset in ("OPENAI", "ANTHROPIC", "GEMINI", "GROQ", "OPENROUTER", "XAI", "DEEPSEEK"):
        monkeypatch.setenv(f"{preset}_API_KEY", "test-key")


@pytest.fixture
def waits(monkeypatch):
    """The waits the middleware asked for (recorded, not slept)."""
    asked: list[float] = []

    async def record(self, seconds: float) -> None:
        asked.append(seconds)
        self.check()

    monkeypatch.setattr(Halt, "sleep", record)
    return asked


def serve(*faults: str) -> FakeServer:
    return FakeServer(FakeConfig(faults=tuple(Fault.parse(f) for f in faults)))


@pytest_asyncio.fixture
async def server():
    async with serve() as srv:
        yield srv


def request(model: str, max_tokens: int = 200, text: str = "Decide. Reply with JSON.", **kw) -> LLMRequest:
    return LLMRequest(model, (Message("user", text),), max_tokens=max_tokens, temperature=0.3, seed=1,
                      schema=SCHEMA, **kw)


async def ask(srv: FakeServer, preset: str, req: LLMRequest, **options):
    base = srv.openai_url if preset not in ("anthropic", "gemini") else srv.url
    backend = make_backend(BackendSpec(preset, req.model, base_url=base, options={**FAST, **options}))
    try:
        return await backend.complete(req), backend
    finally:
        await backend.aclose()


@pytest.mark.asyncio
async def test_an_unknown_model_drops_each_refused_parameter_once_and_the_record_says_so(server, capsys):
    # openai-compatible has no model rules: gpt-5-mini goes as any model, and is refused as OpenAI refuses it.
    res, backend = await ask(server, "openai-compatible", request("gpt-5-mini", max_tokens=3000))
    assert json.loads(res.text)["action"] in ("COOPERATE", "DEFECT")
    assert server.stats()["refused"] == {"openai.temperature": 1, "openai.max_tokens": 1}
    sent = backend.inner.sent(["gpt-5-mini"])["openai-compatible"]["gpt-5-mini"]
    assert set(sent["dropped"]) == {"temperature", "max_tokens"} and "rule" not in sent
    err = capsys.readouterr().err
    assert err.count("refused 'temperature'") == 1 and err.count("refused 'max_tokens'") == 1
    assert "manifest" in err


@pytest.mark.asyncio
async def test_a_drop_is_learned_once_per_backend(server, capsys):
    backend = make_backend(BackendSpec("openai-compatible", "o3", base_url=server.openai_url, options=FAST))
    try:
        for i in range(3):
            await backend.complete(request("o3", max_tokens=4000 + i))
    finally:
        await backend.aclose()
    assert server.stats()["refused"] == {"openai.temperature": 1, "openai.max_tokens": 1}
    assert capsys.readouterr().err.count("refused 'temperature'") == 1


def test_the_refused_parameter_is_read_from_each_providers_wording():
    body = {"temperature": 0.3, "seed": 1, "reasoning_effort": "low", "messages": []}
    assert refused_param({"error": {"message": "x", "param": "seed"}}, body) == "seed"
    assert refused_param({"error": {"message": "`temperature` is deprecated for this model."}}, body) == "temperature"
    assert refused_param({"error": {"message": "Model grok-4 does not support parameter reasoningEffort."}},
                         body) == "reasoning_effort"
    assert refused_param({"error": {"message": "Invalid JSON payload received. Unknown name \"thinkingConfig\""}},
                         {"generationConfig": {"thinkingConfig": {}}}) == "thinkingConfig"
    assert refused_param({"error": {"message": "messages: too long"}}, body) is None
    assert refused_param({"error": {"message": "x", "param": "model"}}, body) is None  # not droppable


@pytest.mark.asyncio
async def test_a_gemini_429_waits_what_its_body_says(waits):
    async with serve("429:first=2,retry_after=7") as srv:
        res, _ = await ask(srv, "gemini", request("gemini-2.5-flash"))
    assert res.finish_reason == "stop" and len(waits) == 2
    assert all(7.0 <= w <= 7.7 for w in waits)  # RetryInfo.retryDelay "7s", plus up to 10% jitter


@pytest.mark.asyncio
async def test_x_should_retry_overrides_the_status(waits):
    async with serve("status=409:first=1,should_retry=false", "status=400:first=2,should_retry=true") as srv:
        with pytest.raises(HTTPStatusError) as refused:
            await ask(srv, "openai-compatible", request("m"))
        assert refused.value.status == 409 and srv.stats()["requests"] == 1 and waits == []
        res, _ = await ask(srv, "openai-compatible", request("m"))  # the 400 said "retry": retried
        assert res.finish_reason == "stop" and srv.stats()["requests"] == 3 and len(waits) == 1


@pytest.mark.asyncio
async def test_groqs_failed_generation_is_read_as_the_reply(waits):
    async with serve("json_invalid:first=1") as srv:
        res, _ = await ask(srv, "groq", request("llama-3.3-70b-versatile"))
    assert res.finish_reason == "json_validate_failed" and res.text.startswith("Sure!") and waits == []


@pytest.mark.asyncio
async def test_a_failure_inside_a_200_is_retried_as_a_provider_error(waits):
    async with serve("error200:first=1") as srv:
        res, _ = await ask(srv, "openrouter", request("openai/gpt-5-mini"))
        assert res.finish_reason == "stop" and srv.stats()["requests"] == 2 and len(waits) == 1
    async with serve("error200:first=9") as srv:
        with pytest.raises(ProviderError, match="failed mid-generation"):
            await ask(srv, "openrouter", request("m"), max_retries=1)


@pytest.mark.asyncio
@pytest.mark.parametrize("preset, model", [("openai", "gpt-5-mini"), ("anthropic", "claude-opus-5-5"),
                                           ("gemini", "gemini-3-pro-preview")])
async def test_a_reply_cut_by_its_reasoning_says_so(server, preset, model):
    # The rule's allowance replaced by a tiny one: the model reasons it all away.
    res, _ = await ask(server, preset, request(model, reasoning_tokens=1))
    assert res.finish_reason == REASONING_CUT and res.text == "" and res.usage.reasoning_tokens > 0


@pytest.mark.asyncio
async def test_the_reasoning_allowance_leaves_the_answer_its_budget(server):
    for preset, model in (("openai", "gpt-5-mini"), ("anthropic", "claude-opus-5-5"),
                          ("gemini", "gemini-2.5-pro"), ("xai", "grok-4.5"), ("deepseek", "deepseek-flash")):
        res, _ = await ask(server, preset, request(model))
        # (json_object, DeepSeek's mode, carries no schema: the fake answers some JSON object)
        assert res.finish_reason == "stop" and isinstance(json.loads(res.text), dict), (preset, model)
    assert server.stats()["refused"] == {}


def test_context_overflow_is_read_in_every_providers_wording():
    said = {
        "This model's maximum context length is 4096 tokens. However, you requested 5760 tokens (4160 in the "
        "messages, 1600 in the completion).": (4096, 4160),
        "This model's maximum context length is 8192 tokens. However, your messages resulted in 8205 tokens.":
            (8192, 8205),
        "This model's maximum context length is 1536 tokens. However, your request has 4176 input tokens.":
            (1536, 4176),
        "prompt is too long: 208310 tokens > 200000 maximum": (200000, 208310),
        "input length and `max_tokens` exceed context limit: 199000 + 8192 > 200000, decrease input length":
            (200000, 199000),
        "request (4476 tokens) exceeds the available context size (4096 tokens)": (4096, 4476),
        "The input token count (1200293) exceeds the maximum number of tokens allowed (1048576).":
            (1048576, 1200293),
        "This model's maximum prompt length is 131072 but the request contains 136973 tokens.": (131072, 136973),
    }
    for message, expected in said.items():
        assert overflow(message) == expected, message
    assert overflow("max_tokens must be positive") is None


@pytest.mark.asyncio
@pytest.mark.parametrize("preset, model", [("anthropic", "claude-x"), ("gemini", "gemini-x")])
async def test_a_context_overflow_names_the_window_on_every_protocol(preset, model):
    from backends.errors import ContextOverflow

    async with FakeServer(FakeConfig(context_window=50)) as srv:
        with pytest.raises(ContextOverflow) as cut:
            await ask(srv, preset, request(model, text="word " * 300))
    assert cut.value.window == 50 and cut.value.prompt_tokens > 50


@pytest.mark.asyncio
async def test_bad_requests_that_name_no_droppable_parameter_stay_final(server):
    async with serve("status=400:first=1") as srv:
        with pytest.raises(BadRequest):
            await ask(srv, "openai-compatible", request("m"))
        assert srv.stats()["requests"] == 1
