"""Every scenario: a figure never rests on an unreadable reply, and says how many it rests on."""

from __future__ import annotations

import asyncio

import pytest

from backends.stub import StubBackend
from simcore.runs.runner import run_trial_async
from simcore.runs.scenario import load_scenario
from tests.helpers import GarblingBackend


def run(name: str, fields: dict, garble, seed: int = 3):
    scenario = load_scenario(name)
    config = scenario.config_type.from_mapping(fields)
    backend = GarblingBackend(StubBackend(scenario.behaviour(config)), garble)
    trial = asyncio.run(run_trial_async(scenario, config, seed, backend=backend))
    assert trial.status == "ok", trial.error
    return trial, scenario


def test_context_corrosion_leaves_an_unreadable_final_vote_out_of_every_figure():
    fields = {"rounds": 1, "n_peers": 3}
    clean, _ = run("context_corrosion", fields, lambda m: False)
    trial, scenario = run("context_corrosion", fields, lambda m: m["agent"] == "P2" and m["phase"] == "final")
    m, b = trial.results["metrics"], trial.results["basis"]
    assert trial.results["final_positions"]["P2"] is None
    assert b["avg_peer_directional_delta"] == {"n": 2, "of": 3, "unit": "peers",
                                               "reason": "1 of 3 peers unreadable or missing"}
    deltas = clean.results["directional_convergence"]["directional_delta"]
    assert "P2" not in trial.results["directional_convergence"]["directional_delta"]
    assert m["avg_peer_directional_delta"] == pytest.approx((deltas["P1"] + deltas["P3"]) / 2)
    assert b["mean_final_confidence"]["n"] == 3 and b["entropy_final"]["n"] == 3
    assert "(2 of 3 peers readable)" in scenario.summarize(trial.results)
    assert trial.results["parse_quality"]["final_vote"]["unreadable"] == 1


def test_context_corrosion_with_no_readable_final_vote_of_d_says_n_a_and_why():
    trial, scenario = run("context_corrosion", {"rounds": 1, "n_peers": 2},
                          lambda m: m["agent"] == "D" and m["phase"] == "final")
    assert trial.results["metrics"]["avg_peer_directional_delta"] is None
    assert "n/a (D's phase-1 answer or final vote unreadable)" in scenario.summarize(trial.results)


def test_acausal_counts_chosen_moves_only_with_fallbacks_beside():
    fields = {"n_agents": 3, "rounds": 2, "embeddings": False}
    trial, scenario = run("acausal_cooperation", fields, lambda m: m["agent"] == "A0.sub")
    m, b = trial.results["metrics"], trial.results["basis"]
    games = [g for r in trial.world.state["rounds"] for g in r["games"]]
    chosen = [g[f"player{k}_action"] for g in games for k in (1, 2) if g[f"player{k}_parse"] != "fallback"]
    assert m["fallback_moves"] == 2 * 2 and len(chosen) == 2 * len(games) - 4
    assert m["cooperation_rate"] == pytest.approx(chosen.count("COOPERATE") / len(chosen))
    assert b["cooperation_rate"]["n"] == len(chosen) and b["cooperation_rate"]["of"] == 2 * len(games)
    full = [g for g in games if "fallback" not in (g["player1_parse"], g["player2_parse"])]
    assert b["mutual_cooperation_rate"]["n"] == len(full)
    assert "of chosen moves (4 fallback moves beside)" in scenario.summarize(trial.results)


def test_auction_vote_accuracy_rests_on_readable_ballots():
    fields = {"n_agents": 5, "n_vignettes": 2, "mechanism": "free_discussion"}
    trial, scenario = run("llm_auction", fields, lambda m: m["agent"] == "A01" and m["phase"] == "vote")
    m, b = trial.results["metrics"], trial.results["basis"]
    assert b["vote_accuracy"] == {"n": 8, "of": 10, "unit": "ballots", "reason": "2 of 10 ballots unreadable or missing"}
    rows = [r for r in trial.world.state["rows"] if r["agent"] != "A01"]
    assert m["vote_accuracy"] == pytest.approx(sum(r["vote_correct"] for r in rows) / len(rows))
    flagged = trial.world.state["flagged"]
    assert [(f["agent"], f["phase"], f["handling"]) for f in flagged] == [("A01", "vote", "counted as an abstention")] * 2
    assert "8 of 10 ballots readable" in scenario.summarize(trial.results)


def test_veil_with_no_readable_rating_says_the_shift_is_undefined_and_why():
    fields = {"n_agents": 3, "max_rounds": 1}
    trial, scenario = run("veil_of_ignorance", fields, lambda m: m["phase"] in ("rating_initial", "rating_final"))
    m, b = trial.results["metrics"], trial.results["basis"]
    assert m["likert_shift_mean"] is None and b["likert_shift_mean"]["n"] == 0
    text = scenario.summarize(trial.results)
    # Each rating item counts on its own (issue 33): 3 agents x 4 principles.
    assert "mean Likert shift: n/a (12 ratings without a readable initial and final rating" in text
    assert "; ;" not in text


def test_auction_keeps_the_option_of_an_assessment_whose_confidence_is_unreadable():
    """Issue 33: a multi-field reply keeps the fields it gave cleanly; the bid, which needs both, abstains."""
    fields = {"n_agents": 5, "n_vignettes": 1, "mechanism": "free_discussion"}
    scenario = load_scenario("llm_auction")
    config = scenario.config_type.from_mapping(fields)
    text = '{"reasoning": "Autonomy first.", "principles": ["autonomy"], "option": "A", "confidence": "high"}'
    backend = GarblingBackend(StubBackend(scenario.behaviour(config)),
                              lambda m: m["agent"] == "A01" and m["phase"] == "assessment", text)
    trial = asyncio.run(run_trial_async(scenario, config, 3, backend=backend))
    assert trial.status == "ok", trial.error
    row = next(r for r in trial.world.state["rows"] if r["agent"] == "A01")
    assert (row["private_option"], row["private_confidence"]) == ("A", None)
    assert row["private_correct"] == ("A" == trial.world.state["vignettes"][0]["consensus"])
    assert [f["phase"] for f in trial.world.state["flagged"] if f["agent"] == "A01"] == ["assessment"]
    assert trial.results["basis"]["private_accuracy"]["n"] == 5
    assert trial.results["parse_quality"]["assessment"]["partial"] == 1
