"""Price lookup: prefixes, vendors, patterns, overrides and free local models."""

from __future__ import annotations

import json

import pytest

from backends.pricing import PriceTable, cost_usd, load_prices, price_of, usage_cost
from backends.registry import BackendSpec, price_table

TABLE = {"gpt-4.1-mini": {"input": 0.4, "output": 1.6}, "my-*": {"input": 1.0, "output": 1.0},
         "my-special-*": {"input": 5.0, "output": 5.0}}


def test_lookup_strips_preset_prefix_and_vendor():
    assert price_of("gpt-4.1-mini", TABLE) == TABLE["gpt-4.1-mini"]
    assert price_of("openai:gpt-4.1-mini", TABLE) == TABLE["gpt-4.1-mini"]
    assert price_of("openrouter:openai/gpt-4.1-mini", TABLE) == TABLE["gpt-4.1-mini"]
    assert price_of("openai/gpt-4.1-mini", TABLE) == TABLE["gpt-4.1-mini"]
    assert price_of("gpt-5", TABLE) is None


def test_longest_glob_pattern_wins():
    assert price_of("my-model", TABLE)["input"] == 1.0
    assert price_of("my-special-model", TABLE)["input"] == 5.0


def test_cost_and_usage_cost_list_unpriced_models():
    assert cost_usd("gpt-4.1-mini", 1_000_000, 500_000, TABLE) == pytest.approx(0.4 + 0.8)
    out = usage_cost({"gpt-4.1-mini": {"prompt_tokens": 10**6, "completion_tokens": 0}, "x": {}}, TABLE)
    assert out["cost_usd"] == pytest.approx(0.4) and out["unpriced_models"] == ["x"]


def test_user_file_overrides_builtin_prices(tmp_path):
    f = tmp_path / "p.json"
    f.write_text(json.dumps({"gpt-4.1-mini": {"input": 9, "output": 9}, "new-model": {"input": 1, "output": 2}}))
    table = load_prices(str(f))
    assert table["gpt-4.1-mini"]["input"] == 9 and table["new-model"]["output"] == 2
    assert load_prices()["gpt-4.1-mini"]["input"] == 0.4  # built-in untouched
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"m": {"input": 1}}))
    with pytest.raises(ValueError, match="needs 'input' and 'output'"):
        load_prices(str(bad))


def test_local_presets_and_the_stub_are_free():
    local = price_table(BackendSpec("llamacpp", "gemma"))
    assert local.lookup("gemma") == {"input": 0.0, "output": 0.0}
    assert local.lookup("openai:gpt-4.1-mini")["input"] == 0.4  # routed to a paid provider
    stub = price_table(BackendSpec("stub", "stub"))
    assert stub.lookup("stub") == {"input": 0.0, "output": 0.0}
    assert stub.lookup("gpt-4.1")["output"] == 8.0  # the stub under a real name: what the model would cost
    assert stub.lookup("ollama:llama3") == {"input": 0.0, "output": 0.0}
    assert price_table(BackendSpec("openai", "gpt-4.1")).lookup("stub:x") == {"input": 0.0, "output": 0.0}
    paid = price_table(BackendSpec("openai", "gpt-4.1"))
    assert paid.lookup("gpt-4.1")["output"] == 8.0 and paid.lookup("unknown") is None
    assert isinstance(paid, PriceTable) and "gpt-4.1" in paid


def test_a_stub_run_under_a_named_model_costs_what_its_estimate_says():
    from scenarios.context_corrosion import SCENARIO
    from scenarios.context_corrosion.config import CorrosionConfig
    from simcore.runs.estimate import estimate
    from simcore.runs.runner import run_trial

    spec = BackendSpec("stub", "gpt-4.1-mini")
    cfg = CorrosionConfig(rounds=1, n_peers=2, metrics=False)
    results = run_trial(SCENARIO, cfg, 5, spec).results
    est = estimate(SCENARIO, [(cfg, 5)], spec).to_dict()
    assert results["cost_usd"] > 0 and results["unpriced_models"] == []
    assert results["cost_usd"] == pytest.approx(sum(m["cost_usd"] for m in est["by_model"].values()))
    free = run_trial(SCENARIO, cfg, 5, BackendSpec()).results
    assert free["cost_usd"] == 0.0 and free["usage"].keys() == {"stub"}


def test_cached_and_reasoning_tokens_cost_their_own_prices_where_an_entry_has_them():
    table = {"m": {"input": 1.0, "output": 4.0, "cached_input": 0.1, "reasoning": 8.0}}
    # 600k fresh + 400k cached input; 500k answer + 500k reasoning output
    assert cost_usd("m", 10**6, 10**6, table, reasoning_tokens=500_000, cached_tokens=400_000) == pytest.approx(
        0.6 + 0.04 + 2.0 + 4.0)
    assert cost_usd("gpt-4.1-mini", 10**6, 10**6, TABLE, 10**6, 10**6) == pytest.approx(0.4 + 1.6)
    out = usage_cost({"m": {"prompt_tokens": 10**6, "completion_tokens": 0, "cached_tokens": 10**6}}, table)
    assert out["cost_usd"] == pytest.approx(0.1)


@pytest.mark.parametrize("entry, field", [({"input": 1, "output": -2}, "m.output"), ({"input": 1, "output": 2,
                                          "cached": 1}, "m.cached"), ({"input": "1", "output": 2}, "m.input")])
def test_a_bad_price_is_refused_in_one_line_naming_its_field(tmp_path, entry, field):
    f = tmp_path / "p.json"
    f.write_text(json.dumps({"m": entry}))
    with pytest.raises(ValueError, match=f"prices: {field}:"):
        load_prices(str(f))


def test_a_budget_on_an_unpriced_model_shows_the_prices_line_that_would_price_it():
    from backends.base import LLMRequest, Message
    from backends.errors import UnpricedModel
    from backends.middleware import Ledger
    from backends.pricing import PriceTable

    ledger = Ledger(PriceTable({}), budget_usd=5)
    with pytest.raises(UnpricedModel) as refused:
        ledger.reserve(LLMRequest("openai:gpt-9", (Message("user", "hi"),)))
    said = str(refused.value)
    assert "has no price, so --budget-usd cannot be enforced" in said and "\n" not in said
    assert '{"gpt-9": {"input": <USD per million input tokens>, "output": <USD per million output tokens>}}' in said
    assert "--prices FILE" in said
