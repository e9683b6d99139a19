"""The model rules table (backends/models.json) and a user's override file."""

from __future__ import annotations

import json
import re

import pytest

from backends.errors import BackendConfigError
from backends.models import DEFAULT_RULES, load_rules, parse_rules, rule_for
from backends.pricing import load_prices, price_of
from backends.providers import PRESETS
from backends.registry import BackendSpec, check_spec


def test_every_built_in_rule_names_its_source_and_the_day_it_was_checked():
    _, builtin = load_rules()
    assert len(builtin) >= 15
    for rule in builtin:
        assert rule.source and re.fullmatch(r"\d{4}-\d{2}-\d{2}", rule.checked), rule.family
        assert rule.provider in PRESETS and rule.origin == "built-in"
        if rule.reasoning:
            assert rule.allowance >= 0


@pytest.mark.parametrize("provider, model, family", [
    ("openai", "gpt-5-mini", "OpenAI GPT-5 and GPT-6 (reasoning)"),
    ("openai", "gpt-5-chat-latest", "OpenAI GPT-5 chat (no reasoning)"),
    ("openai", "o3", "OpenAI o-series (reasoning)"),
    ("anthropic", "claude-opus-4-7", "Claude Opus 4.7 and 4.8"),
    ("anthropic", "claude-opus-5", "Claude Opus 5, Sonnet 5, Haiku 5.5 (thinking on by default, can be turned off)"),
    ("anthropic", "claude-opus-5-5", "Claude Opus 5.5, Sonnet 5.5, Fable, Mythos (thinking always on)"),
    ("anthropic", "claude-sonnet-4-5-20250929", "Claude 4.5"),
    ("gemini", "gemini-2.5-pro", "Gemini 2.5 Pro (thinking cannot be turned off)"),
    ("gemini", "gemini-3-pro-preview", "Gemini 3 and later (thinking level; cannot be turned off on Pro)"),
    ("xai", "grok-4.20-0309-non-reasoning", "Grok 4 non-reasoning variants"),
])
def test_the_longest_matching_pattern_picks_the_family(provider, model, family):
    assert rule_for(provider, model).family == family


def test_a_model_of_another_provider_or_no_family_has_no_rule():
    assert rule_for("openrouter", "openai/gpt-5-mini") is None
    assert rule_for("openai", "my-finetune") is None
    assert rule_for("anthropic", "gpt-5-mini") is None


def test_a_users_rule_comes_before_the_built_in_ones(tmp_path, monkeypatch):
    mine = tmp_path / "rules.json"
    mine.write_text(json.dumps({"rules": [{"provider": "openai", "match": "gpt-5-mini", "sampling": ["temperature"],
                                           "reasoning": {"send": {"reasoning_effort": "high"}, "allowance": 9000},
                                           "source": "my own test on 2026-11-28"}]}))
    rule = rule_for("openai", "gpt-5-mini", str(mine))
    assert (rule.allowance, rule.sampling, rule.origin) == (9000, ("temperature",), str(mine))
    assert rule_for("openai", "gpt-5.5", str(mine)).origin == "built-in"
    monkeypatch.setenv("SIMCORE_MODEL_RULES", str(mine))
    load_rules.cache_clear()
    try:
        assert rule_for("openai", "gpt-5-mini").allowance == 9000
    finally:
        monkeypatch.delenv("SIMCORE_MODEL_RULES")
        load_rules.cache_clear()


@pytest.mark.parametrize("row, field", [
    ({"match": "x", "source": "s"}, "provider"),
    ({"provider": "nope", "match": "x", "source": "s"}, "provider"),
    ({"provider": "openai", "source": "s"}, "match"),
    ({"provider": "openai", "match": "x", "source": "s", "sampling": ["top_p"]}, "sampling"),
    ({"provider": "openai", "match": "x", "source": "s", "token_param": "max_output"}, "token_param"),
    ({"provider": "openai", "match": "x", "source": "s", "reasoning": {"allowance": -1}}, "reasoning.allowance"),
    ({"provider": "openai", "match": "x", "source": "s", "reasoning": {"send": 3}}, "reasoning.send"),
    ({"provider": "anthropic", "match": "x", "source": "s", "structured": "json_schema"}, "structured"),
    ({"provider": "openai", "match": "x"}, "source"),
    ({"provider": "openai", "match": "x", "source": "s", "colour": "red"}, "colour"),
])
def test_a_bad_rule_is_refused_in_one_line_naming_its_field(row, field):
    with pytest.raises(BackendConfigError) as bad:
        parse_rules({"rules": [row]}, "mine.json")
    message = str(bad.value)
    assert f"rules[0].{field}:" in message and "\n" not in message


def test_the_model_rules_option_is_checked_before_any_work(tmp_path):
    broken = tmp_path / "rules.json"
    broken.write_text(json.dumps([{"provider": "openai", "match": "x"}]))
    with pytest.raises(BackendConfigError, match=r"rules\[0\]\.source"):
        check_spec(BackendSpec("openai", "gpt-5-mini", options={"model_rules": str(broken)}))
    with pytest.raises(BackendConfigError, match="model_rules: file"):
        check_spec(BackendSpec("openai", "gpt-5-mini", options={"model_rules": str(tmp_path / "none.json")}))


def test_every_presets_current_models_have_a_dated_price_with_a_source():
    raw = json.loads(DEFAULT_RULES.with_name("prices.json").read_text())
    for name, entry in raw.items():
        if not name.startswith("_") and name != "stub":
            assert entry.get("source") and entry.get("checked") == "2026-11-28", name
    prices = load_prices()
    for model in ("gpt-5-mini", "gpt-5.5", "gpt-6-luna", "claude-opus-4-7", "claude-opus-5-5", "claude-sonnet-5-5",
                  "claude-haiku-4-5", "gemini-2.5-pro", "gemini-2.5-flash", "gemini-3-pro-preview",
                  "gemini-3.5-flash", "grok-4.20-0309-reasoning", "grok-4.7", "deepseek-flash",
                  "openai/gpt-oss-120b"):
        assert price_of(model, prices) is not None, model
