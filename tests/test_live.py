"""One small real call per provider whose key is in the environment (mark ``live``).

Never run by default or in CI: each call costs a fraction of a cent. Run them with::

    OPENAI_API_KEY=... ANTHROPIC_API_KEY=... python -m pytest -m live tests/test_live.py

A provider without its key skips, saying which variable is missing. The model of each
provider can be changed with ``SIMCORE_LIVE_<PRESET>_MODEL`` (e.g.
``SIMCORE_LIVE_OPENAI_MODEL=gpt-5.5``). Each call goes through the whole backend (model
rules, retries, budget) and must come back read: a JSON object with the reply field.
"""

from __future__ import annotations

import json
import os

import pytest

from backends.base import LLMRequest, Message
from backends.providers import PRESETS
from backends.registry import BackendSpec, make_backend

pytestmark = pytest.mark.live

#: The model each provider is asked, by default: a current, cheap one.
MODELS = {
    "openai": "gpt-5-mini",
    "anthropic": "claude-haiku-4-5",
    "gemini": "gemini-2.5-flash",
    "xai": "grok-4.20-0309-non-reasoning",
    "deepseek": "deepseek-flash",
    "groq": "openai/gpt-oss-120b",
    "openrouter": "openai/gpt-5-mini",
}
SCHEMA = {"title": "Answer", "type": "object", "properties": {"answer": {"type": "string"}},
          "required": ["answer"], "additionalProperties": False}


@pytest.mark.asyncio
@pytest.mark.parametrize("preset", sorted(MODELS))
async def test_one_small_call(preset):
    env = PRESETS[preset].api_key_env
    if not os.environ.get(env):
        pytest.skip(f"{env} is not set: no live call to {preset}")
    model = os.environ.get(f"SIMCORE_LIVE_{preset.upper()}_MODEL", MODELS[preset])
    backend = make_backend(BackendSpec(preset, model, options={"budget_usd": 0.05, "max_retries": 2}))
    request = LLMRequest(model, (Message("system", "Answer in one word."),
                                 Message("user", "What colour is the sky on a clear day? Reply in JSON.")),
                         max_tokens=64, temperature=0.3, seed=1, schema=SCHEMA)
    try:
        res = await backend.complete(request)
    finally:
        await backend.aclose()
    assert res.finish_reason == "stop", res
    assert isinstance(json.loads(res.text)["answer"], str)
    assert res.usage is not None and res.usage.prompt_tokens > 0
