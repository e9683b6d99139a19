"""End to end: every scenario against the fake OpenAI-compatible server answering from the reply
corpus, JSON mode on and off. Each reply the scenario received is looked up in the corpus, and what
the scenario recorded must be its expected reading, or a flag (never another value)."""

from __future__ import annotations

import asyncio
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from backends.fake_server import FakeConfig, FakeServer, ReplyPool
from backends.registry import BackendSpec
from scenarios.veil_of_ignorance.principles import KEYS
from simcore.runs.runner import run_trial_async
from simcore.runs.scenario import load_scenario

CORPUS = Path(__file__).parent / "corpus"
# Replies that name the corpus's own option texts would mean something else in a vignette.
OPTION_TEXT_WORDS = ("family", "confiden", "board", "lawyer", "warn", "keep", "consult", "ask", "threat",
                     "relative", "patient", "doctor")


def load(name: str, keep: Any = lambda e: True) -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in (CORPUS / f"{name}.jsonl").read_text().splitlines() if line.strip()]
    return [e for e in rows if keep(e)]


POOLS = {
    "decision": ("Follow the strategy below", load("decision")),
    "final": ("Cast your final position", load("final")),
    "ballot": ("Vote for the option the panel should adopt",
               load("option", lambda e: not any(w in e["reply"].lower() for w in OPTION_TEXT_WORDS))),
    "rating": ("Rate how much you agree with each principle", load("veil", lambda e: e["kind"] == "rating")),
    "turn": ("State your strategy for this round", load("veil", lambda e: e["kind"] == "turn")),
}
BY_TEXT = {e["reply"]: e for _, entries in POOLS.values() for e in entries}
RUNS = {
    "acausal_cooperation": {"n_agents": 3, "rounds": 2, "embeddings": False},
    "context_corrosion": {"rounds": 1, "n_peers": 4, "metrics": False},
    "llm_auction": {"n_agents": 5, "n_vignettes": 2, "mechanism": "free_discussion"},
    "veil_of_ignorance": {"n_agents": 4, "max_rounds": 2},
}


def fake_config() -> FakeConfig:
    # Served in turn, in an order mixing the corpus's forms (its files are grouped by form).
    mixed = {k: sorted(v, key=lambda e: hashlib.sha256(e["id"].encode()).hexdigest()) for k, (_, v) in POOLS.items()}
    pools = tuple(
        ReplyPool(match, tuple((e["reply"], e["finish_reason"], e["json_mode"]) for e in mixed[k]), cycle=True)
        for k, (match, _) in POOLS.items()
    )
    return FakeConfig(replies=pools)


def served(trial: Any, phase: str) -> list[tuple[Any, dict[str, Any]]]:
    """(trace event, corpus entry) of every reply in ``phase`` that came from the corpus."""
    out = []
    for e in trial.trace.of_kind("llm.reply"):
        entry = BY_TEXT.get(e.payload["text"])
        if e.fields.get("phase") == phase and entry is not None:
            out.append((e, entry))
    return out


def check_acausal(trial: Any) -> list[dict[str, Any]]:
    games = {(g["round"], g["game_number"]): g for r in trial.world.state["rounds"] for g in r["games"]}
    seen = served(trial, "decision")
    for e, entry in seen:
        g = games[(e.fields["round"], e.fields["game"])]
        player = int(e.agent[1:].split(".")[0])
        side = 1 if g["player1_id"] == player else 2
        if entry["expect"] == "unreadable":
            assert g[f"player{side}_parse"] == "fallback", entry["id"]
        else:
            assert (g[f"player{side}_action"], g[f"player{side}_parse"] != "fallback") == (entry["expect"], True), entry["id"]
    return [entry for _, entry in seen]


def check_corrosion(trial: Any) -> list[dict[str, Any]]:
    seen = served(trial, "final")
    for e, entry in seen:
        got = trial.results["final_positions"][e.agent]
        want = None if entry["expect"] == "unreadable" else entry["expect"]["final_answer"]
        assert got == want, entry["id"]
    return [entry for _, entry in seen]


def check_auction(trial: Any) -> list[dict[str, Any]]:
    from scenarios.llm_auction.vignettes import VIGNETTES

    keys = {v.id: v.keys for v in VIGNETTES}
    rows = {(r["vignette_id"], r["agent"]): r for r in trial.world.state["rows"]}
    seen = served(trial, "vote")
    entries = []
    for e, entry in seen:
        got = rows[(e.fields["vignette"], e.agent)]["option_choice"]
        if entry["expect"] not in keys[e.fields["vignette"]]:  # "D" where the vignette has A-C only
            entry = {**entry, "expect": "unreadable"}  # a vote for an option not offered is no vote
        assert got == (None if entry["expect"] == "unreadable" else entry["expect"]), entry["id"]
        entries.append(entry)
    return entries


def check_veil(trial: Any) -> list[dict[str, Any]]:
    ratings, log = trial.world.state["ratings"], trial.world.state["log"]
    seen = served(trial, "rating_initial") + served(trial, "rating_final")
    for e, entry in seen:
        scores = ratings["initial" if e.fields["phase"] == "rating_initial" else "final"][e.agent]
        got = [scores[k] for k in KEYS]
        # Each item on its own: an expectation with nulls keeps the items that read cleanly (issue 33).
        assert got == ([None] * 4 if entry["expect"] == "unreadable" else entry["expect"]), entry["id"]
    turns = served(trial, "deliberation")
    for e, entry in turns:
        choice = log[e.agent][f"round_{e.fields['round']}"]["choice"]
        got = None if choice is None else [choice["principle"], choice["amount"]]
        assert got == (None if entry["expect"] == "unreadable" else entry["expect"]), entry["id"]
    return [entry for _, entry in seen + turns]


CHECKS = {"acausal_cooperation": check_acausal, "context_corrosion": check_corrosion,
          "llm_auction": check_auction, "veil_of_ignorance": check_veil}


@pytest.mark.parametrize("json_mode", ["auto", "off"])
@pytest.mark.parametrize("name", sorted(RUNS))
def test_scenarios_record_each_corpus_reply_as_read_or_flagged(name, json_mode):
    scenario = load_scenario(name)
    config = scenario.config_type.from_mapping(RUNS[name])

    async def go() -> list[dict[str, Any]]:
        entries = []
        async with FakeServer(fake_config()) as server:
            for seed in (1, 2, 3):
                spec = BackendSpec("openai-compatible", "fake-1", base_url=server.openai_url,
                                   options={"json_mode": json_mode, "reask": 0, "max_retries": 0})
                trial = await run_trial_async(scenario, config, seed, spec)
                assert trial.status == "ok", trial.error
                entries += CHECKS[name](trial)
                flagged = sum(q["unreadable"] for q in trial.results["parse_quality"].values())
                assert flagged >= sum(
                    1 for e in trial.trace.of_kind("llm.reply") if BY_TEXT.get(e.payload["text"], {}).get("expect")
                    == "unreadable")
        return entries

    entries = asyncio.run(go())
    assert len(entries) >= 10, "too few corpus replies were served to test anything"
    if json_mode == "off":  # JSON mode serves only valid JSON; without it both kinds must come up
        assert any(e["expect"] == "unreadable" for e in entries) and any(e["expect"] != "unreadable" for e in entries)
