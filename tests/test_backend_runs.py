"""Whole trials against the fake server: recording, replay, failures, fail-fast, estimate."""

from __future__ import annotations

import asyncio
import json
import sqlite3

import pytest
import pytest_asyncio

from backends.fake_server import FakeConfig, FakeServer, Fault, Latency
from backends.registry import BackendSpec, make_backend
from scenarios.context_corrosion import SCENARIO
from scenarios.context_corrosion.config import CorrosionConfig
from simcore.base.records import read_json
from simcore.replay import replay_async
from simcore.runs.estimate import estimate
from simcore.runs.runner import run_trial_async, write_run

CFG = CorrosionConfig(rounds=1, n_peers=2, dominant_tokens=64, peer_tokens=48)
CALLS = 9  # 3 agents x (phase 1, one round, final vote)
FAST = {"backoff_base_s": 0.01, "backoff_max_s": 0.05, "timeout_s": 5.0}


@pytest_asyncio.fixture
async def server():
    async with FakeServer(FakeConfig()) as srv:
        yield srv


def spec(srv: FakeServer, model: str = "fake-1", **options) -> BackendSpec:
    return BackendSpec("openai-compatible", model, base_url=srv.openai_url, options={**FAST, **options})


def configure(srv: FakeServer, *faults: str, latency: str = "fixed:0") -> None:
    srv.reset(FakeConfig(Latency.parse(latency), faults=tuple(Fault.parse(f) for f in faults)))


@pytest.mark.asyncio
async def test_a_real_run_records_a_cassette_and_replays_offline(server, tmp_path, no_plots):
    trial = await run_trial_async(SCENARIO, CFG, 11, spec(server))
    assert trial.status == "ok", trial.error
    run_dir = write_run(trial, tmp_path)
    assert server.stats()["requests"] == CALLS
    await server.stop()  # offline from here on
    db = sqlite3.connect(run_dir / "cassette.sqlite")
    assert db.execute("SELECT COUNT(*), COUNT(DISTINCT digest) FROM entries").fetchone()[0] == CALLS
    db.close()
    result = await replay_async(run_dir)
    assert result.identical, result
    results = read_json(run_dir / "results.json")
    assert results["usage"]["fake-1"]["calls"] == CALLS
    assert results["usage"]["fake-1"]["completion_tokens"] > 0
    assert results["unpriced_models"] == ["fake-1"]
    timings = read_json(run_dir / "timings.json")
    assert timings["backend"]["live_calls"] == CALLS
    assert timings["backend"]["system_fingerprints"] == {"fake-1": ["fp_fake"]}
    assert timings["backend"]["providers"]["openai-compatible"]["max_in_flight"] == 3


@pytest.mark.asyncio
async def test_retries_and_latency_never_change_the_trace(server, tmp_path):
    clean = await run_trial_async(SCENARIO, CFG, 5, spec(server))
    configure(server, "503:rate=0.3", "drop:rate=0.1", "429:rate=0.1,retry_after=0", latency="uniform:0,0.02")
    noisy = await run_trial_async(SCENARIO, CFG, 5, spec(server, max_retries=20))
    stats = server.stats()
    assert noisy.status == "ok" and sum(stats["faults"].values()) > 0 and stats["requests"] > CALLS
    assert noisy.trace.to_jsonl() == clean.trace.to_jsonl()


@pytest.mark.asyncio
async def test_user_cassette_auto_mode_replays_without_calling(server, tmp_path):
    path = str(tmp_path / "mine.sqlite")
    first = await run_trial_async(SCENARIO, CFG, 3, spec(server, cassette=path))
    assert server.stats()["requests"] == CALLS
    configure(server)
    second = await run_trial_async(SCENARIO, CFG, 3, spec(server, cassette=path))
    assert server.stats()["requests"] == 0
    assert second.trace.to_jsonl() == first.trace.to_jsonl()
    third = await run_trial_async(SCENARIO, CFG, 3, spec(server, cassette=path, cassette_mode="record"))
    assert server.stats()["requests"] == CALLS and third.status == "ok"
    miss = await run_trial_async(SCENARIO, CFG, 4, spec(server, cassette=path, cassette_mode="replay"))
    assert miss.status == "error" and miss.error["type"] == "CassetteMiss"
    assert server.stats()["requests"] == CALLS  # replay mode never calls


@pytest.mark.asyncio
async def test_a_call_that_fails_for_good_fails_its_trial_cleanly(server, tmp_path):
    # Requests 1-3 are phase 1; request 4 (D's first turn) fails and is not retried.
    configure(server, "503:every=4")
    trial = await run_trial_async(SCENARIO, CFG, 8, spec(server, max_retries=0))
    assert trial.status == "error"
    assert trial.error["type"] == "ServerError" and "HTTP 503" in trial.error["message"]
    run_dir = write_run(trial, tmp_path)
    results = read_json(run_dir / "results.json")
    assert results["status"] == "error" and results["error"]["type"] == "ServerError"
    kinds = [json.loads(line)["kind"] for line in (run_dir / "trace.jsonl").read_text().splitlines()]
    assert kinds.count("llm.reply") == 3 and kinds[-1] == "llm.error"
    assert read_json(run_dir / "manifest.json")["status"] == "error"
    await server.stop()
    assert (await replay_async(run_dir)).identical


@pytest.mark.asyncio
async def test_fail_fast_halts_every_trial_and_keeps_their_records(server, tmp_path):
    configure(server, "503:rate=1,model=bad", latency="fixed:0.01")
    shared = make_backend(spec(server, max_retries=0, fail_fast=True))
    try:
        bad, good = await asyncio.gather(
            run_trial_async(SCENARIO, CFG, 1, spec(server, "bad"), shared),
            run_trial_async(SCENARIO, CFG, 1, spec(server, "good"), shared),
        )
    finally:
        await shared.aclose()
    assert bad.error["type"] == "ServerError"
    assert good.status == "error" and good.error["type"] == "RunHalted"
    assert server.stats()["by_model"]["good"] < CALLS
    for trial in (bad, good):
        assert (write_run(trial, tmp_path) / "cassette.sqlite").is_file()


@pytest.mark.asyncio
async def test_without_fail_fast_other_trials_finish(server):
    configure(server, "503:rate=1,model=bad")
    shared = make_backend(spec(server, max_retries=0))
    try:
        bad, good = await asyncio.gather(
            run_trial_async(SCENARIO, CFG, 1, spec(server, "bad"), shared),
            run_trial_async(SCENARIO, CFG, 1, spec(server, "good"), shared),
        )
    finally:
        await shared.aclose()
    assert bad.status == "error" and good.status == "ok"


@pytest.mark.asyncio
async def test_malformed_output_is_flagged_not_fatal(server):
    # Replies cut in half: a discussion statement cut inside its only field is unreadable;
    # a phase-1 answer or final vote cut after its required field is salvaged.
    configure(server, "length:every=2")
    trial = await run_trial_async(SCENARIO, CFG, 2, spec(server, reask=0))
    assert trial.status == "ok"
    replies = trial.trace.of_kind("llm.reply")
    flagged = [e for e in replies if e.payload.get("parse_error")]
    assert flagged and all(e.payload["text"] for e in flagged)
    assert any(e.payload["finish_reason"] == "length" for e in replies)
    assert trial.results["metrics"]["parse_errors"] == len(flagged)
    quality = trial.results["parse_quality"]
    assert sum(q["unreadable"] for q in quality.values()) == len(flagged)
    assert sum(q["truncated"] for q in quality.values()) == sum(
        e.payload["finish_reason"] == "length" for e in replies)
    assert sum(q["salvaged"] for q in quality.values()) > 0


@pytest.mark.asyncio
async def test_reasks_recover_unreadable_replies_and_replay_offline(server, tmp_path, no_plots):
    configure(server, "length:every=2")
    trial = await run_trial_async(SCENARIO, CFG, 2, spec(server, reask=2))
    assert trial.status == "ok"
    quality = trial.results["parse_quality"]
    assert sum(q["reasked"] for q in quality.values()) > 0
    reasks = [e for e in trial.trace.of_kind("llm.call") if e.fields.get("reask")]
    assert len(reasks) == server.stats()["requests"] - CALLS
    run_dir = write_run(trial, tmp_path)
    result = await replay_async(run_dir)
    assert result.identical, result


@pytest.mark.asyncio
async def test_budget_stops_a_trial_before_spending_past_it(server, tmp_path):
    prices = tmp_path / "p.json"
    prices.write_text(json.dumps({"fake-1": {"input": 100.0, "output": 100.0}}))
    trial = await run_trial_async(SCENARIO, CFG, 1, spec(server, budget_usd=0.05, prices=str(prices)))
    assert trial.status == "error" and trial.error["type"] == "BudgetExceeded"
    sent = server.stats()["requests"]
    assert 0 < sent < CALLS
    assert trial.results["usage"]["fake-1"]["calls"] - trial.results["usage"]["fake-1"]["errors"] == sent
    assert 0 < trial.results["cost_usd"] <= 0.05


def test_estimate_counts_the_calls_a_run_makes_without_sending_anything():
    no_reask = {"reask": 0}  # the stub's replies at these budgets are cut; re-asks would add calls
    est = estimate(SCENARIO, [(CFG, 1), (CFG, 2)], BackendSpec("openai", "gpt-4.1-mini", options=no_reask))
    row = est.by_model["gpt-4.1-mini"]
    assert est.trials == 2 and row["calls"] == 2 * CALLS
    assert row["max_completion_tokens"] == 2 * (64 + 2 * 48) * 3
    assert 0 < row["cost_usd"] < row["max_cost_usd"]
    assert est.to_dict()["total"]["calls"] == 2 * CALLS and "gpt-4.1-mini" in est.table()
    unpriced = estimate(SCENARIO, [(CFG, 1)], BackendSpec("openai-compatible", "mystery", "http://x"))
    assert unpriced.unpriced_models == ["mystery"] and unpriced.by_model["mystery"]["cost_usd"] is None


SMALL = {
    "context_corrosion": {"rounds": 1, "n_peers": 2},
    "llm_auction": {"n_agents": 5, "n_vignettes": 2},
    "acausal_cooperation": {"n_agents": 3, "rounds": 2, "embeddings": False},
}


@pytest.mark.asyncio
@pytest.mark.parametrize("name", ["context_corrosion", "veil_of_ignorance", "llm_auction", "acausal_cooperation"])
async def test_every_scenario_runs_on_an_http_backend_and_replays_offline(name, tmp_path, no_plots):
    from simcore.runs.scenario import load_scenario

    scenario = load_scenario(name)
    fields = {f for f in scenario.config_type.__dataclass_fields__}
    config = scenario.config_type(**{k: v for k, v in SMALL.get(name, {}).items() if k in fields})
    async with FakeServer(FakeConfig(faults=(Fault.parse("503:every=7"),))) as srv:
        trial = await run_trial_async(scenario, config, 4, spec(srv))
        assert trial.status == "ok", trial.error
        run_dir = write_run(trial, tmp_path)
        assert srv.stats()["requests"] > sum(v["calls"] for v in trial.world.usage.values()) > 0  # with retries
    result = await replay_async(run_dir)
    assert result.identical, result


@pytest.mark.asyncio
@pytest.mark.parametrize("preset, model", [("openai", "gpt-5-mini"), ("anthropic", "claude-opus-4-7"),
                                           ("gemini", "gemini-3-pro-preview")])
async def test_todays_flagships_play_the_tournament_under_their_providers_rules(preset, model, tmp_path,
                                                                                 monkeypatch, no_plots):
    """The issue's three runs, small: the fake server refuses what each provider refuses,
    thinks out of the reply's budget, rate-limits (Gemini: the wait in the body) and
    refuses to answer now and then; every decision is read, within a budget."""
    from backends.middleware import Halt
    from scenarios.acausal_cooperation import SCENARIO as PD
    from scenarios.acausal_cooperation.config import AcausalConfig
    from simcore.base.files import read_manifest

    waits: list[float] = []

    async def record(self, seconds):
        waits.append(seconds)

    monkeypatch.setattr(Halt, "sleep", record)
    monkeypatch.setenv(f"{preset.upper()}_API_KEY", "test-key")
    faults = ("429:first=2,retry_after=5", "refusal:every=3")
    async with FakeServer(FakeConfig(faults=tuple(Fault.parse(f) for f in faults))) as srv:
        base = srv.openai_url if preset == "openai" else srv.url
        trial = await run_trial_async(PD, AcausalConfig(n_agents=2, rounds=1), 3, BackendSpec(
            preset, model, base_url=base, options={**FAST, "budget_usd": 5}))
        stats = srv.stats()
    assert trial.status == "ok", trial.error
    decisions = trial.results["parse_quality"]["decision"]
    assert decisions["replies"] == decisions["json"] == 2 and stats["refused"] == {}
    assert stats["faults"]["refusal"] >= 1 and decisions["reasked"] + trial.results["parse_quality"][
        "strategy"]["reasked"] >= 1
    assert len(waits) == 2 and all(5 <= w <= 5.5 for w in waits)  # the server's wait, header or body
    assert 0 < trial.results["cost_usd"] < 5
    manifest = read_manifest(write_run(trial, tmp_path))
    rule = manifest["sent"][preset][model]["rule"]
    assert rule["source"] and rule["checked"] == "2026-11-28"
