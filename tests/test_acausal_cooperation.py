"""Tests of the acausal-cooperation scenario: game rules, tournament structure,
anonymization, scripted players against Axelrod, determinism, the treatment switch,
malformed replies and the output files."""

from __future__ import annotations

import asyncio
import itertools
import json
import math
import os
import pickle
import re
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from backends.base import LLMRequest, Message
from backends.registry import BackendSpec
from backends.stub import StubBackend
from scenarios.acausal_cooperation import SCENARIO
from scenarios.acausal_cooperation.analysis import (
    COMPARED,
    convergence,
    mean_pairwise_cosine,
    superrationality_score,
)
from scenarios.acausal_cooperation.behaviour import (
    RULES,
    AcausalBehaviour,
    make_behaviour,
)
from scenarios.acausal_cooperation.config import AcausalConfig
from scenarios.acausal_cooperation.experiment import GAME_GAP_S
from scenarios.acausal_cooperation.game import (
    COOPERATE,
    DEFECT,
    POWER_MAX,
    POWER_MIN,
    payoffs,
    power_multiplier,
    powers_after,
    round_robin,
    update_power,
)
from scenarios.acausal_cooperation.prompts import (
    INSIGHT,
    decision_prompt,
    read_decision,
)
from scenarios.acausal_cooperation.scripted import parse_scripted
from simcore.base.config import ConfigError
from simcore.cli import main as cli_main
from simcore.runs.counterfactual import compared_metrics
from simcore.runs.runner import run_trial_async, write_run
from simcore.sim.kernel import Reply
from tests.commands import run_module

pytest_plugins = ["tests.shared_runs"]  # hash_seed_pair

C, D = COOPERATE, DEFECT
GOLDEN = Path(__file__).parent / "golden" / "acausal_cooperation_small.jsonl"
SCRIPTS = ("always_cooperate", "always_defect", "tit_for_tat", "grudger", "win_stay_lose_shift")


def cfg(**kw: Any) -> AcausalConfig:
    """A small, fast config (no embeddings) with overrides."""
    base = {"n_agents": 3, "rounds": 2, "embeddings": False}
    return AcausalConfig.from_mapping({**base, **kw})


def run(config: AcausalConfig, seed: int = 1, backend: Any = None) -> Any:
    return asyncio.run(run_trial_async(SCENARIO, config, seed, backend=backend))


class Recorder:
    """A stub backend that keeps every request it answers."""

    name = "stub"

    def __init__(self, inner: StubBackend) -> None:
        self.inner = inner
        self.requests: list[LLMRequest] = []

    async def complete_batch(self, requests: Sequence[LLMRequest]) -> list[Any]:
        self.requests.extend(requests)
        return await self.inner.complete_batch(requests)


def recorded(config: AcausalConfig, seed: int = 1) -> tuple[Any, list[LLMRequest]]:
    rec = Recorder(StubBackend(make_behaviour(config)))
    return run(config, seed, rec), rec.requests


def games_of(trial: Any) -> list[dict[str, Any]]:
    return [g for r in trial.world.state["rounds"] for g in r["games"]]


# -- payoffs and powers ------------------------------------------------------------


def test_classic_matrix_without_scaling() -> None:
    assert payoffs(C, C, 70, 140, scaling=False) == (3, 3)
    assert payoffs(C, D, 70, 140, scaling=False) == (0, 5)
    assert payoffs(D, C, 70, 140, scaling=False) == (5, 0)
    assert payoffs(D, D, 70, 140, scaling=False) == (1, 1)


def test_power_scaling_formula() -> None:
    assert power_multiplier(100) == 1.0
    assert power_multiplier(50) == pytest.approx(1 - math.log(2))
    assert power_multiplier(150) == pytest.approx(1 + math.log(1.5))
    assert payoffs(C, C, 100, 100) == (3.0, 3.0)
    p1, p2 = payoffs(D, C, 150, 50)
    assert p1 == pytest.approx(5 * (1 + math.log(1.5)))
    assert p2 == 0.0
    p1, p2 = payoffs(D, D, 50, 120)
    assert (p1, p2) == (pytest.approx(1 - math.log(2)), pytest.approx(1 + math.log(1.2)))


@given(st.floats(POWER_MIN, POWER_MAX), st.floats(POWER_MIN, POWER_MAX))
def test_scaled_payoffs_positive_and_monotone(lo: float, hi: float) -> None:
    lo, hi = min(lo, hi), max(lo, hi)
    assert 0 < power_multiplier(lo) <= power_multiplier(hi)
    for a, b in itertools.product((C, D), repeat=2):
        assert payoffs(a, b, lo, lo)[0] <= payoffs(a, b, hi, hi)[0]


def test_power_update_and_clamping() -> None:
    assert update_power(100, won=True) == pytest.approx(101)
    assert update_power(100, won=False) == pytest.approx(99)
    assert update_power(150, won=True) == 150
    assert update_power(50, won=False) == 50
    assert update_power(149.5, won=True) == 150
    assert update_power(50.3, won=False) == 50
    # The winner defected against a cooperator; equal moves change nothing.
    assert powers_after(C, C, 80, 120) == (80, 120)
    assert powers_after(D, D, 80, 120) == (80, 120)
    assert powers_after(C, D, 80, 120) == (pytest.approx(79.2), pytest.approx(121.2))
    assert powers_after(D, C, 80, 120) == (pytest.approx(80.8), pytest.approx(118.8))


@given(st.lists(st.tuples(st.sampled_from((C, D)), st.sampled_from((C, D))), max_size=300),
       st.floats(POWER_MIN, POWER_MAX), st.floats(POWER_MIN, POWER_MAX))
def test_powers_stay_in_range(moves: list[tuple[str, str]], p1: float, p2: float) -> None:
    for a, b in moves:
        p1, p2 = powers_after(a, b, p1, p2)
        assert POWER_MIN <= p1 <= POWER_MAX and POWER_MIN <= p2 <= POWER_MAX


# -- tournament structure ------------------------------------------------------------


def test_round_robin_pairs() -> None:
    pairs = round_robin(10)
    assert len(pairs) == 45 == len(set(pairs))
    assert all(i < j for i, j in pairs)
    assert pairs[:3] == [(0, 1), (0, 2), (0, 3)]


def test_default_run_structure_and_model_usage() -> None:
    """The seed's defaults: 10 agents, 10 rounds, 45 games a round, 900 + 100 calls.

    With the original experiment's model preset, each role calls its own model.
    """
    config = AcausalConfig(embeddings=False, model_preset="original")
    trial = run(config, seed=3)
    assert trial.status == "ok"
    rounds = trial.world.state["rounds"]
    assert len(rounds) == 10
    assert all(len(r["games"]) == 45 and len(r["strategies"]) == 10 for r in rounds)
    usage = trial.world.usage
    strategy, decision = config.role_models
    assert (strategy, decision) == ("google/gemini-2.5-flash", "openai/gpt-4.1-nano")
    assert usage[strategy]["calls"] == 100
    assert usage[decision]["calls"] == 900
    assert set(trial.results["cost_by_model"]) == {strategy, decision}
    for rec in rounds:
        assert [(g["player1_id"], g["player2_id"]) for g in rec["games"]] == round_robin(10)


def test_model_flag_reaches_every_agent_unless_a_role_names_its_own() -> None:
    spec = BackendSpec(model="my-model")
    trial = asyncio.run(run_trial_async(SCENARIO, cfg(n_agents=2, rounds=1), 1, spec))
    assert set(trial.world.usage) == {"my-model"}
    mixed = cfg(n_agents=2, rounds=1, model_preset="original", decision_model="mine")
    trial = asyncio.run(run_trial_async(SCENARIO, mixed, 1, spec))
    assert set(trial.world.usage) == {"google/gemini-2.5-flash", "mine"}


def test_games_are_sequential_and_decisions_parallel() -> None:
    trial = run(cfg(n_agents=4, rounds=2, scripted="tit_for_tat"))
    calls: dict[tuple[int, int], list[float]] = {}
    game_t: dict[tuple[int, int], float] = {}
    for e in trial.trace:
        if e.kind == "llm.call" and e.fields.get("phase") == "decision":
            calls.setdefault((e.fields["round"], e.fields["game"]), []).append(e.t)
        if e.kind == "game":
            game_t[(e.fields["round"], e.fields["game"])] = e.t
    assert all(len(set(ts)) == 1 for ts in calls.values())  # both players asked at once
    for rec in trial.world.state["rounds"]:
        games = rec["games"]
        assert len(games) == 10
        for prev, nxt in zip(games, games[1:]):
            assert prev["sim_time"] > prev["sim_time_start"] or "scripted" in (prev["player1_parse"], prev["player2_parse"])
            assert nxt["sim_time_start"] == pytest.approx(prev["sim_time"] + GAME_GAP_S)
        # the round's strategies come before its first game
        assert max(s["sim_time"] for s in rec["strategies"]) <= games[0]["sim_time_start"]
    assert sorted(game_t.values()) == list(game_t.values())


def test_mixed_players_call_llms_only_for_llm_moves() -> None:
    trial = run(cfg(n_agents=2, rounds=3, scripted="always_defect,grudger"))
    games = games_of(trial)
    llm_moves = sum(g[f"player{k}_id"] < 2 for g in games for k in (1, 2))
    assert trial.world.usage["stub"]["calls"] == llm_moves + 3 * 2 == 3 * 2 * 3 + 3 * 2
    for g in games:
        for k in (1, 2):
            if g[f"player{k}_id"] == 2:
                assert g[f"player{k}_action"] == D and g[f"player{k}_parse"] == "scripted"


def test_game_order_random_is_a_permutation() -> None:
    trial = run(cfg(n_agents=5, rounds=2, game_order="random"))
    orders = [[(g["player1_id"], g["player2_id"]) for g in r["games"]] for r in trial.world.state["rounds"]]
    assert all(sorted(o) == round_robin(5) for o in orders)
    assert orders[0] != round_robin(5) or orders[1] != round_robin(5)


# -- anonymization ---------------------------------------------------------------------


def test_round_results_are_anonymized() -> None:
    trial, requests = recorded(cfg(n_agents=4, rounds=3, scripted="tit_for_tat"))
    rounds = trial.world.state["rounds"]
    for rec in rounds:
        labels = rec["labels"]
        assert sorted(labels) == ["A", "B", "C", "D", "E"]
        anon = rec["anonymized_games"]
        assert len(anon) == len(rec["games"])
        assert {k for a in anon for k in a} == {
            "round", "player1_anonymous", "player2_anonymous", "action1", "action2", "payoff1", "payoff2"
        }
        seen = sorted(tuple(sorted([a["player1_anonymous"], a["player2_anonymous"]])) for a in anon)
        expect = sorted(tuple(sorted([labels[g["player1_id"]], labels[g["player2_id"]]])) for g in rec["games"])
        assert seen == expect
        outcome = sorted((a["action1"], a["payoff1"], a["action2"], a["payoff2"]) for a in anon)
        both_ways = {(g["player1_action"], g["player1_payoff"], g["player2_action"], g["player2_payoff"])
                     for g in rec["games"]} | {(g["player2_action"], g["player2_payoff"], g["player1_action"],
                                                g["player1_payoff"]) for g in rec["games"]}
        assert set(outcome) <= both_ways
    assert len({tuple(r["labels"]) for r in rounds}) > 1  # labels are redrawn
    # Prompts never name a player: only anonymous labels reach the models.
    for req in requests:
        assert not re.search(r"\bA\d", req.messages[-1].content), req.messages[-1].content


def test_decision_prompt_shows_pair_history_and_round_games() -> None:
    trial, requests = recorded(cfg(n_agents=3, rounds=2, history_window=1))
    decisions = [r for r in requests if r.metadata["phase"] == "decision"]
    first = decisions[0].messages[-1].content
    assert "(none yet)" in first
    later = [r for r in decisions if r.metadata["round"] == 2][-1].messages[-1].content
    assert "Round 1: you " in later
    block = later.split("Games so far this round (anonymized, most recent last):\n")[1].split("\n\n")[0]
    assert len(block.splitlines()) == 1  # history_window=1


# -- scripted players: classic results and Axelrod ---------------------------------------


def scripted_scores(specs: Sequence[str], rounds: int, seed: int = 5) -> tuple[list[float], Any]:
    trial = run(AcausalConfig.from_mapping(
        {"n_agents": 0, "scripted": ",".join(specs), "rounds": rounds, "power_scaling": False, "embeddings": False}
    ), seed)
    assert trial.status == "ok"
    scores = trial.results["final_agent_scores"]
    return [scores[str(i)] for i in range(len(specs))], trial


@pytest.mark.parametrize(
    "a,b,rounds,expected",
    [
        ("tit_for_tat", "always_defect", 10, (9, 14)),
        ("grudger", "always_defect", 10, (9, 14)),
        ("always_cooperate", "always_defect", 10, (0, 50)),
        ("tit_for_tat", "always_cooperate", 10, (30, 30)),
        ("win_stay_lose_shift", "always_defect", 10, (5, 30)),  # C, D, C, D, ... against D
        ("win_stay_lose_shift", "tit_for_tat", 7, (21, 21)),
        ("always_defect", "always_defect", 4, (4, 4)),
    ],
)
def test_scripted_classic_results(a: str, b: str, rounds: int, expected: tuple[int, int]) -> None:
    scores, _ = scripted_scores([a, b], rounds)
    assert tuple(scores) == expected


AXL_NAMES = {
    "always_cooperate": "Cooperator", "always_defect": "Defector", "tit_for_tat": "TitForTat",
    "grudger": "Grudger", "win_stay_lose_shift": "WinStayLoseShift",
}
AXELROD_REFERENCE = Path(__file__).parent / "golden" / "axelrod_reference.json"
PAIR_TURNS = (1, 6, 10)
TOURNAMENT_TURNS = 10
RANDOM_SPECS = ("random:0.3", *SCRIPTS)
RANDOM_TURNS = 12


def pair_scores(trial: Any, i: int, j: int) -> list[float]:
    """Total payoffs of players i and j in their games against each other."""
    games = [g for g in games_of(trial) if (g["player1_id"], g["player2_id"]) == (i, j)]
    return [sum(g["player1_payoff"] for g in games), sum(g["player2_payoff"] for g in games)]


def random_moves(trial: Any, opponent: int) -> str:
    """Player 0's moves against ``opponent``, one letter per round."""
    return "".join(g["player1_action"][0] for g in games_of(trial) if (g["player1_id"], g["player2_id"]) == (0, opponent))


def axelrod_reference() -> dict[str, Any]:
    """Axelrod's scores for the settings the tests use (imports axelrod: slow).

    - every pair (with repeats) of the deterministic scripted strategies, for
      several numbers of turns;
    - Axelrod's own round-robin ``Tournament`` of all of them (self-play excluded
      from its scores, as in ours);
    - for ``random:0.3``, which is stochastic, its realised moves in our engine
      replayed with Axelrod's ``MockPlayer`` against each strategy.
    """
    import axelrod as axl

    def player(name: str) -> Any:
        return getattr(axl, AXL_NAMES[name])()

    def score(p1: Any, p2: Any, turns: int) -> list[float]:
        match = axl.Match((p1, p2), turns=turns)
        match.play()
        return [float(x) for x in match.final_score()]

    pairs = [
        {"a": a, "b": b, "turns": t, "scores": score(player(a), player(b), t)}
        for t in PAIR_TURNS for a, b in itertools.combinations_with_replacement(SCRIPTS, 2)
    ]
    result = axl.Tournament([player(s) for s in SCRIPTS], turns=TOURNAMENT_TURNS, repetitions=1).play(
        progress_bar=False
    )
    _, trial = scripted_scores(RANDOM_SPECS, RANDOM_TURNS)
    randoms = []
    for j, s in enumerate(SCRIPTS, start=1):
        moves = random_moves(trial, j)
        mock = axl.MockPlayer(actions=[getattr(axl.Action, m) for m in moves])
        randoms.append({"opponent": s, "moves": moves, "scores": score(mock, player(s), RANDOM_TURNS)})
    return {
        "pairs": pairs,
        "tournament": {"turns": TOURNAMENT_TURNS, "players": list(SCRIPTS),
                       "scores": [float(x[0]) for x in result.scores]},
        "random": {"spec": RANDOM_SPECS[0], "turns": RANDOM_TURNS, "games": randoms},
    }


def test_scripted_players_match_axelrod_reference() -> None:
    """Our scripted tournaments against Axelrod's results (stored; see the slow test below)."""
    ref = json.loads(AXELROD_REFERENCE.read_text())
    assert len(ref["pairs"]) == len(PAIR_TURNS) * 15
    for p in ref["pairs"]:
        ours, _ = scripted_scores([p["a"], p["b"]], p["turns"])
        assert ours == p["scores"], p
    ours, _ = scripted_scores(ref["tournament"]["players"], ref["tournament"]["turns"])
    assert ours == ref["tournament"]["scores"]
    specs = [ref["random"]["spec"], *(g["opponent"] for g in ref["random"]["games"])]
    ours, trial = scripted_scores(specs, ref["random"]["turns"])
    for j, g in enumerate(ref["random"]["games"], start=1):
        assert random_moves(trial, j) == g["moves"]
        assert pair_scores(trial, 0, j) == g["scores"], g["opponent"]
    assert ours[0] == sum(g["scores"][0] for g in ref["random"]["games"])


@pytest.mark.slow
def test_axelrod_reference_is_current() -> None:
    """Recompute the reference with the Axelrod library itself.

    Its import alone takes 15+ s, hence ``slow``. Rewrite the stored file with
    ``SIMCORE_UPDATE_GOLDEN=1 python -m pytest -m slow -k axelrod_reference``.
    """
    pytest.importorskip("axelrod")
    ref = axelrod_reference()
    if os.environ.get("SIMCORE_UPDATE_GOLDEN"):
        AXELROD_REFERENCE.write_text(json.dumps(ref, indent=1) + "\n")
    assert json.loads(AXELROD_REFERENCE.read_text()) == ref


def test_random_player_rate() -> None:
    _, trial = scripted_scores(["random:0.3", "always_cooperate", "always_defect"], 200)
    moves = [g["player1_action"] for g in games_of(trial) if g["player1_id"] == 0]
    assert 0.24 < moves.count(C) / len(moves) < 0.36


def test_parse_scripted() -> None:
    assert [s.label for s in parse_scripted("tit_for_tat, random:0.25,random")] == [
        "tit_for_tat", "random:0.25", "random:0.5"
    ]
    for bad in ("titfortat", "random:2", "grudger:0.5", "random:x"):
        with pytest.raises(ConfigError, match="^scripted: "):
            parse_scripted(bad)


# -- determinism and the golden trace -----------------------------------------------------


@settings(max_examples=4, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_same_seed_same_trace(seed: int) -> None:
    config = cfg(n_agents=3, rounds=2, scripted="random:0.5")
    assert run(config, seed).trace.to_jsonl() == run(config, seed).trace.to_jsonl()


def test_trace_independent_of_hash_seed(hash_seed_pair) -> None:
    """The same trace here and in an interpreter with another hash seed (tests/shared_runs.py)."""
    here, there = hash_seed_pair("acausal_cooperation")
    assert there == here
    assert here == run(cfg(n_agents=3, rounds=2, scripted="random:0.4,grudger"), 11).trace.sha256()


def test_golden_trace() -> None:
    """Regenerate with ``SIMCORE_UPDATE_GOLDEN=1 python -m pytest tests/test_acausal_cooperation.py -k golden``."""
    trace = run(cfg(n_agents=2, rounds=2, scripted="tit_for_tat"), seed=7).trace.to_jsonl()
    if os.environ.get("SIMCORE_UPDATE_GOLDEN"):
        GOLDEN.write_text(trace)
    assert trace == GOLDEN.read_text()


# -- treatment and control ------------------------------------------------------------------


def test_counterfactual_hook() -> None:
    assert SCENARIO.counterfactual == ("identity_insight", True, False)
    assert SCENARIO.compare is not None


def test_treatment_switch_changes_only_the_strategy_prompt() -> None:
    _, treat = recorded(cfg(identity_insight=True))
    _, ctrl = recorded(cfg(identity_insight=False))
    ts = [r for r in treat if r.metadata["phase"] == "strategy"]
    cs = [r for r in ctrl if r.metadata["phase"] == "strategy"]
    assert ts and len(ts) == len(cs)
    assert all(INSIGHT in r.messages[-1].content for r in ts)
    assert not any(INSIGHT in r.messages[-1].content or "identical" in r.messages[-1].content for r in cs)
    # Round 1: the prompts differ by the insight paragraph and nothing else.
    for t, c in zip(ts[:3], cs[:3]):
        assert t.messages[-1].content == INSIGHT + "\n\n" + c.messages[-1].content
        assert t.messages[0] == c.messages[0]
    assert not any(INSIGHT in r.messages[-1].content for r in treat if r.metadata["phase"] == "decision")


def test_stub_treatment_raises_cooperation_and_identity_reasoning() -> None:
    # One small tournament is noisy (its dynamics feed back), so average four seeds.
    base = {"n_agents": 6, "rounds": 4, "embeddings": False}
    diffs = []
    for seed in (1, 2, 3, 4):
        treat = run(AcausalConfig.from_mapping({**base, "identity_insight": True}), seed).results["metrics"]
        ctrl = run(AcausalConfig.from_mapping({**base, "identity_insight": False}), seed).results["metrics"]
        assert ctrl["identity_reasoning_frequency"] == 0.0
        assert treat["identity_reasoning_frequency"] > 0.5
        diffs.append(treat["cooperation_rate"] - ctrl["cooperation_rate"])
    assert np.mean(diffs) > 0.15


def _strategy_request(prompt: str, agent: str = "A0") -> LLMRequest:
    return LLMRequest(model="m", messages=(Message("user", prompt),), seed=1,
                      metadata={"agent": agent, "phase": "strategy"})


def test_stub_strategy_depends_on_history() -> None:
    b = AcausalBehaviour(insight_uptake=0.0, reciprocity=1.0)
    rng = np.random.default_rng(0)
    rule_index = {s: i for i, (_, s) in enumerate(RULES)}
    low = b.strategy(_strategy_request("- Round 1: 0% of moves were COOPERATE"), rng)
    high = b.strategy(_strategy_request("- Round 1: 100% of moves were COOPERATE"), rng)
    assert rule_index[low["strategy"]] < rule_index[high["strategy"]]
    treat = AcausalBehaviour(insight_uptake=1.0).strategy(_strategy_request(INSIGHT), rng)
    assert "identical" in treat["reasoning"] or "same model" in treat["reasoning"]


def test_stub_decision_follows_strategy_and_history() -> None:
    b = AcausalBehaviour(asymmetry_defection=0.0, decision_noise=0.0)
    rng = np.random.default_rng(0)
    tft = dict(RULES)["tit_for_tat"]

    def prompt(strategy: str, history: list[tuple[int, str, str]], powers: Any = None) -> str:
        return decision_prompt(me="A", opponent="B", strategy=strategy, powers=powers,
                               pair_history=history, round_games=[])

    assert b.decision(prompt(tft, []), rng) == C
    assert b.decision(prompt(tft, [(1, C, D)]), rng) == D
    assert b.decision(prompt(tft, [(1, C, D), (2, D, C)]), rng) == C
    assert b.decision(prompt(dict(RULES)["always_defect"], [(1, C, C)]), rng) == D
    scared = AcausalBehaviour(asymmetry_defection=1.0, decision_noise=0.0)
    assert scared.decision(prompt(tft, [], powers=(60.0, 140.0)), rng) == D
    assert scared.decision(prompt(tft, [], powers=(100.0, 120.0)), rng) == C


# -- malformed replies ----------------------------------------------------------------------


def _reply(text: str) -> Reply:
    from scenarios.acausal_cooperation.prompts import DecisionReply
    from simcore.replies.reading import read_reply

    r = read_reply(text, DecisionReply)
    return Reply("A0.sub", text, r.value, not r.readable, None, "stop", 0.0, 0.0, "", r)


def test_read_decision() -> None:
    assert read_decision(_reply('{"action": "DEFECT"}'), C) == (D, "json")
    assert read_decision(_reply("Decision: **cooperate**"), D) == (C, "label")
    assert read_decision(_reply("I will cooperate this time."), D) == (C, "prose")
    assert read_decision(_reply("The opponent did not defect last time, so I COOPERATE."), D) == (C, "prose")
    assert read_decision(_reply("I won't defect this time. I cooperate."), D) == (C, "prose")
    # Hedged, questioned or unrelated replies are never read as a move: the fallback is played, flagged.
    assert read_decision(_reply("DEFECT, then maybe COOPERATE"), C) == (D, "prose")  # "maybe" is about later
    assert read_decision(_reply("DEFECT or COOPERATE, hard to say"), C) == (C, "fallback")
    assert read_decision(_reply("Should I cooperate or defect? It is hard to say."), D) == (D, "fallback")
    assert read_decision(_reply("cooperation is nice"), D) == (D, "fallback")
    assert read_decision(_reply(""), C) == (C, "fallback")


def test_malformed_replies_do_not_crash() -> None:
    config = cfg(n_agents=4, rounds=3)
    trial = run(config, 4, StubBackend(make_behaviour(config), malformed_rate=0.3))
    assert trial.status == "ok"
    games = games_of(trial)
    assert len(games) == 3 * 6
    m = trial.results["metrics"]
    assert m["decision_parse_errors"] > 0 and m["strategy_parse_errors"] > 0
    fallback = [g[f"player{k}_action"] for g in games for k in (1, 2) if g[f"player{k}_parse"] == "fallback"]
    assert fallback and set(fallback) == {D}
    raw = [s for r in trial.world.state["rounds"] for s in r["strategies"] if s["parse_error"]]
    assert all(s["strategy_text"] == s["full_reasoning"].strip() for s in raw)
    coop = cfg(n_agents=4, rounds=3, on_unparsed="cooperate")
    trial = run(coop, 4, StubBackend(make_behaviour(coop), malformed_rate=1.0))
    acts = {g[f"player{k}_action"] for g in games_of(trial) for k in (1, 2)}
    assert acts == {C} and trial.results["metrics"]["decision_parse_errors"] == 4 * 3 * 3


# -- analysis ---------------------------------------------------------------------------------


def test_convergence_and_score_follow_the_seed() -> None:
    assert convergence([0.2, 0.5, 0.7, 0.72, 0.75]) == (True, 3)
    assert convergence([0.2, 0.5, 0.7, 0.9, 0.75]) == (False, 5)
    assert convergence([0.7, 0.7, 0.7]) == (False, 3)  # the seed needs more than 3 rounds
    assert superrationality_score(0.5, 0.5, True, 8, 10) == pytest.approx(0.4 * 0.5 + 0.4 * 0.5 + 0.2 * 0.2)
    assert superrationality_score(1.0, 1.0, True, 1, 10) == pytest.approx(0.98)
    assert superrationality_score(0.5, 0.25, False, 10, 10) == pytest.approx(0.3)


def test_mean_pairwise_cosine() -> None:
    v = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    assert mean_pairwise_cosine(v) == pytest.approx((0 + 2 ** -0.5 + 2 ** -0.5) / 3)
    assert mean_pairwise_cosine(v[:1]) is None


def test_defection_triggers_detect_previous_defection() -> None:
    res = run(cfg(n_agents=0, scripted="tit_for_tat,always_defect,always_cooperate", rounds=5,
                  power_scaling=False)).results
    table = {t["trigger"]: t for t in res["pattern_analysis"]["defection_trigger_table"]}
    assert table["Previous defection"]["defection_rate_when_present"] > table["Previous defection"]["defection_rate_when_absent"]
    assert "Previous defection" in res["pattern_analysis"]["defection_triggers"]


def test_a_run_without_llm_players_is_not_labelled_treatment() -> None:
    from scenarios.acausal_cooperation.analysis import report, summarize

    res = run(cfg(n_agents=0, scripted="tit_for_tat,always_defect", rounds=2)).results
    assert res["identity_insight"] is True  # the default: the insight is on, but no one reads it
    for text in (summarize(res), report(res)):
        assert "no LLM players" in text and "treatment" not in text


def test_compare_reports_treatment_minus_control() -> None:
    a = [{"seed": s, "metrics": {"cooperation_rate": x}} for s, x in zip((1, 2, 3), (0.8, 0.7, 0.9))]
    b = [{"seed": s, "metrics": {"cooperation_rate": x}} for s, x in zip((1, 2, 3), (0.4, 0.35, 0.45))]
    out = SCENARIO.compare(a, b)
    diff = out["difference_summary"]
    assert compared_metrics(out) == list(COMPARED)  # every named metric, even one the trials lack
    assert diff["cooperation_rate"]["delta_mean"] == pytest.approx(0.4)
    assert diff["paired"] is True and diff["cooperation_rate"]["test"] == "exact sign-flip"
    # three pairs: the smallest p any valid test gives is 2^(1-3)
    assert diff["cooperation_rate"]["p_value"] == pytest.approx(0.25) and diff["cooperation_rate"]["significant"] is False
    assert diff["superrationality_score"]["delta_mean"] is None
    assert pickle.loads(pickle.dumps(SCENARIO)).compare(a, b) == out  # the batch runner pickles it


def test_cli_trials_prints_the_compared_metrics(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--trials", "2", "--n-agents", "3", "--rounds", "2", "--no-embeddings", "--out", str(tmp_path)]
    assert cli_main(SCENARIO, argv) == 0
    out = capsys.readouterr().out
    rows = {line.split()[0] for line in out.splitlines() if line.startswith("  ")}
    assert set(COMPARED) <= rows
    group = Path(out.rsplit("summary directory: ", 1)[1].strip())
    summary = json.loads((group / "summary.json").read_text())
    assert sorted(compared_metrics(summary["statistical_comparison"])) == sorted(COMPARED)
    assert summary["statistical_comparison"]["difference_summary"]["cooperation_rate"]["delta_mean"] > 0
    assert (group / "plots" / "comparison.png").is_file()


class FailAfter:
    """A stub that fails for good after ``n`` calls (a transport failure)."""

    name = "stub"

    def __init__(self, inner: StubBackend, n: int) -> None:
        self.inner, self.left = inner, n

    async def complete(self, request: LLMRequest) -> Any:
        self.left -= 1
        if self.left < 0:
            raise ConnectionError("backend down")
        return self.inner.respond(request)


def test_failed_trial_keeps_partial_results() -> None:
    config = cfg(n_agents=3, rounds=3)
    trial = run(config, 1, FailAfter(StubBackend(make_behaviour(config)), 20))
    assert trial.status == "error" and "backend down" in trial.error["message"]
    assert 0 < trial.results["metrics"]["games"] < 9
    assert "analysis_error" not in trial.results


# -- output files --------------------------------------------------------------------------


def test_output_files_have_the_seed_structure(tmp_path: Path) -> None:
    trial = run(cfg(n_agents=3, rounds=2, scripted="grudger"))
    run_dir = write_run(trial, tmp_path, "r1")
    for r in (1, 2):
        s = json.loads((run_dir / "rounds" / f"strategies_r{r}.json").read_text())
        assert s["round"] == r and len(s["strategies"]) == 3
        assert {"strategy_id", "agent_id", "round", "strategy_text", "full_reasoning", "prompt_tokens",
                "completion_tokens", "model"} <= set(s["strategies"][0])
        g = json.loads((run_dir / "rounds" / f"games_r{r}.json").read_text())
        assert len(g["games"]) == 6
        assert {"game_id", "round", "game_number", "player1_id", "player2_id", "player1_action", "player2_action",
                "player1_payoff", "player2_payoff", "player1_power_before", "player2_power_before",
                "player1_power_after", "player2_power_after"} <= set(g["games"][0])
        assert set(g["power_evolution"]) == {"initial", "final"} and len(g["power_evolution"]["final"]) == 4
        rs = json.loads((run_dir / "rounds" / f"round_summary_r{r}.json").read_text())
        assert {"round", "cooperation_rate", "average_score", "score_variance", "power_distribution",
                "anonymized_games", "strategy_similarity"} <= set(rs)
        assert set(rs["power_distribution"]) == {"mean", "std", "min", "max"}
    summary = json.loads((run_dir / "experiment_summary.json").read_text())
    assert summary["experiment_id"] == "r1" and summary["total_games"] == 12 and summary["total_rounds"] == 2
    assert summary["total_api_calls"] == 2 * 3 + 2 * (2 * 6 - 3)  # strategies + LLM moves (not grudger's)
    assert set(summary["model_usage"]) == {"stub"}
    assert set(summary["final_agent_scores"]) == {"0", "1", "2", "3"}
    analysis = json.loads((run_dir / "acausal_analysis.json").read_text())
    assert {"identity_reasoning_frequency", "cooperation_despite_asymmetry", "surprise_at_defection",
            "strategy_convergence"} <= set(analysis["acausal_indicators"])
    assert {"rounds_to_convergence", "dominant_strategy", "defection_triggers",
            "cooperation_clusters"} <= set(analysis["pattern_analysis"])
    assert "transcript_insights" in analysis
    report = (run_dir / "analysis_report.txt").read_text()
    assert "Superrationality Score" in report and "Round 2:" in report
    for name in ("cooperation_per_round.png", "power_evolution.png", "payoff_heatmap.png"):
        assert (run_dir / "plots" / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    results = json.loads((run_dir / "results.json").read_text())
    assert "artifact_error" not in results
    assert all(v is None or isinstance(v, (int, float, bool)) for v in results["metrics"].values())
    assert (run_dir / "trace.jsonl").read_text() == trial.trace.to_jsonl()


# -- config and CLI ---------------------------------------------------------------------------


def test_config_errors() -> None:
    with pytest.raises(ConfigError, match="^n_agents: "):
        AcausalConfig(n_agents=1)
    AcausalConfig(n_agents=1, scripted="tit_for_tat")
    with pytest.raises(ConfigError, match="^rounds: "):
        AcausalConfig(rounds=0)
    with pytest.raises(ConfigError, match="^scripted: "):
        AcausalConfig(scripted="nice_guy")


def test_cli_bad_input_writes_nothing(tmp_path: Path) -> None:
    res = run_module("scenarios.acausal_cooperation", "--scripted", "nice_guy", "--out", str(tmp_path))
    assert res.returncode == 2
    assert res.stderr.strip().splitlines()[-1].startswith("error: scripted: must be")
    assert not any(tmp_path.iterdir())
    res = run_module("scenarios.acausal_cooperation", "--model-preset", "gpt5", "--out", str(tmp_path))
    assert res.returncode == 2 and not any(tmp_path.iterdir())
    assert res.stderr.strip() == "error: model_preset: must be one of '' (empty), original; got 'gpt5'"
    res = run_module("scenarios.acausal_cooperation", "--help")
    assert res.returncode == 0 and "--identity-insight" in res.stdout and "30%" in res.stdout


@pytest.mark.slow
def test_strategy_similarity_with_embeddings() -> None:
    trial = run(cfg(n_agents=4, rounds=2, embeddings=True))
    sims = [r["strategy_similarity"] for r in trial.results["round_stats"]]
    assert all(s is not None and -1.0 <= s <= 1.0 + 1e-6 for s in sims)


# -- the original experiment's configs, prompt, log and comparison -------------------------------

SEED_KEYS = {"experiment_name", "num_agents", "num_rounds", "strategy_model", "decision_model", "temperature"}


@pytest.mark.parametrize("name, label, temperature", [
    ("baseline", "baseline", 0.7), ("high_temp", "high_temperature", 1.0), ("low_temp", "low_temperature", 0.3),
])
def test_the_original_configs_ship_in_its_layout_and_load_by_name(name: str, label: str, temperature: float) -> None:
    from simcore.cli import config_file, load_config_file

    raw = load_config_file(config_file(AcausalConfig, name))
    assert set(raw) == SEED_KEYS  # the original's keys, nothing of ours
    assert (raw["num_agents"], raw["num_rounds"]) == (10, 10)
    config = AcausalConfig.from_mapping(raw)
    assert config.experiment_name == label and config.n_agents == 10 and config.rounds == 10
    assert config.strategy_temperature == temperature and config.decision_temperature == 0.3
    assert config.role_models == ("google/gemini-2.0-flash-exp:free", "openai/gpt-4o-mini")
    assert config.decision_prompt == "structured"


def test_own_field_names_win_over_the_original_spelling_and_unknown_keys_fail() -> None:
    config = AcausalConfig.from_mapping({"num_agents": 4, "n_agents": 3, "temperature": 1.0})
    assert config.n_agents == 3 and config.strategy_temperature == 1.0
    with pytest.raises(ConfigError, match="^experiment_nam: unknown field"):
        AcausalConfig.from_mapping({"experiment_nam": "x"})
    with pytest.raises(ConfigError, match="^decision_prompt: must be one of structured, original"):
        AcausalConfig.from_mapping({"decision_prompt": "seed"})


def test_config_baseline_runs_the_original_config(tmp_path: Path, capsys) -> None:
    code = cli_main(SCENARIO, ["--config", "baseline", "--no-embeddings", "--plots", "none", "--out", str(tmp_path),
                               "--json"])
    assert code == 0
    results = json.loads(capsys.readouterr().out)
    assert results["experiment_name"] == "baseline" and results["decision_prompt"] == "structured"
    assert results["metrics"]["n_llm"] == 10 and results["metrics"]["rounds"] == 10
    assert set(results["usage"]) == {"google/gemini-2.0-flash-exp:free", "openai/gpt-4o-mini"}
    run_dir = Path(results["run_dir"])
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["config"]["strategy_temperature"] == 0.7
    assert json.loads((run_dir / "experiment_summary.json").read_text())["experiment_name"] == "baseline"
    assert (run_dir / "analysis_report.txt").read_text().startswith("# Acausal Cooperation Analysis: baseline")


def test_the_original_decision_prompt_is_the_originals_plain_text() -> None:
    from scenarios.acausal_cooperation.prompts import original_decision_prompt

    text = original_decision_prompt(opponent="B", strategy="Cooperate first.",
                                    pair_history=[(1, C, D)], round_games=[("A", "C", D, D)])
    assert text == (
        "You are playing prisoner's dilemma. Your strategy:\nCooperate first.\n\n"
        "Game history so far:\nRound 1: you COOPERATE, they DEFECT\nAgent A vs Agent C: DEFECT, DEFECT\n\n"
        "Current opponent: Agent B\n\nDecision (COOPERATE/DEFECT):"
    )
    assert "(none yet)" in original_decision_prompt(opponent="B", strategy="s", pair_history=[], round_games=[])


def test_decision_prompt_switch_changes_only_the_decision_prompts() -> None:
    structured, s_reqs = recorded(cfg(rounds=3))
    original, o_reqs = recorded(cfg(rounds=3, decision_prompt="original"))
    first = [r for r in o_reqs if r.metadata["phase"] == "strategy" and r.metadata["round"] == 1]
    assert first == [r for r in s_reqs if r.metadata["phase"] == "strategy" and r.metadata["round"] == 1]
    asks = [r for r in o_reqs if r.metadata["phase"] == "decision"]
    assert len(asks) == 2 * 3 * 3
    for r in asks:
        prompt = r.messages[-1].content
        assert [m.role for m in r.messages] == ["user"]  # the original's decision request has no system message
        assert prompt.startswith("You are playing prisoner's dilemma. Your strategy:\n")
        assert prompt.endswith("\n\nDecision (COOPERATE/DEFECT):") and "Game history so far:\n" in prompt
        assert "Payoffs" not in prompt and "power" not in prompt and "JSON" not in prompt
    assert all("Reply with JSON" in r.messages[-1].content for r in s_reqs if r.metadata["phase"] == "decision")
    # The stub answers the plain-text prompt with the bare word, which the one reader reads.
    games = games_of(original)
    assert {g[f"player{k}_parse"] for g in games for k in (1, 2)} == {"prose"}
    assert {g[f"player{k}_raw"] for g in games for k in (1, 2)} <= {C, D}
    assert original.results["metrics"]["decision_parse_errors"] == 0
    assert original.results["decision_prompt"] == "original"
    assert {g[f"player{k}_parse"] for g in games_of(structured) for k in (1, 2)} == {"json"}


@pytest.mark.parametrize("reply, move", [
    ("COOPERATE", C), ("DEFECT.", D), ("Decision: DEFECT", D), ("Decision (COOPERATE/DEFECT): COOPERATE", C),
    ("I will cooperate with Agent B.", C), ('{"action": "DEFECT"}', D),
    ("Decision (COOPERATE/DEFECT):", None), ("COOPERATE/DEFECT", None), ("Should I cooperate or defect?", None),
])
def test_plain_completions_of_the_original_prompt_are_read_or_flagged(reply: str, move: str | None) -> None:
    from scenarios.acausal_cooperation.prompts import (
        DecisionReply,
        original_decision_prompt,
    )
    from simcore.replies.reading import read_reply

    prompt = original_decision_prompt(opponent="B", strategy="Cooperate first, then copy the opponent.",
                                      pair_history=[(1, C, D)], round_games=[("A", "B", C, D)])
    # As the kernel reads it: the instruction, and the prompt as what the model was given.
    reading = read_reply(reply, DecisionReply, instruction=prompt, given=(Message("user", prompt),))
    assert (reading.value.action if reading.readable else None) == move


def test_experiment_log_tells_the_run_and_is_reproducible(tmp_path: Path) -> None:
    class Mumbles(AcausalBehaviour):
        def __call__(self, request: LLMRequest, rng: np.random.Generator) -> Any:
            if request.metadata.get("phase") == "decision" and request.metadata.get("agent") == "A1.sub":
                return "Hmm."
            return super().__call__(request, rng)

    logs = []  # (with their plots: the suite's one drawing of the cooperation figure's note on fallback moves)
    for k in range(2):
        trial = run(cfg(rounds=2), seed=5, backend=StubBackend(Mumbles()))
        logs.append((write_run(trial, tmp_path / str(k), "r1") / "experiment.log").read_text())
    assert logs[0] == logs[1]
    lines = logs[0].splitlines()
    assert all(re.match(r"^t=\s*\d+\.\d{3} (INFO|WARNING) ", line) for line in lines)
    assert sum(" game " in line and " vs " in line for line in lines) == 6
    assert sum("strategy of" in line for line in lines) == 6
    fallbacks = [line for line in lines if "played by fallback" in line]
    assert len(fallbacks) == 4 and all("WARNING" in line and "A1" in line for line in fallbacks)
    assert re.match(r"^t=\s*[\d.]+ INFO\s+experiment finished: 6 games;", lines[-1])


def compare_main(argv: list[str]) -> int:
    from scenarios.acausal_cooperation import compare_command

    return compare_command(argv)


def test_compare_writes_the_original_comparison_with_intervals(tmp_path: Path, capsys) -> None:
    import pandas as pd

    # (no test here reads a run's plots: --plots none)
    code = compare_main(["--trials", "2", "--n-agents", "3", "--rounds", "4", "--no-embeddings", "--seed", "9",
                         "--plots", "none", "--out", str(tmp_path)])
    assert code == 0
    out = capsys.readouterr().out
    (cdir,) = (tmp_path / "acausal_cooperation").iterdir()
    assert f"comparison directory: {cdir}" in out
    table = pd.read_csv(cdir / "experiment_comparison.csv")
    assert list(table["name"]) == ["baseline", "high_temperature", "low_temperature"]
    seed_columns = ["name", "cooperation_rate", "superrationality_score", "identity_reasoning", "convergence_round"]
    assert set(seed_columns) <= set(table.columns)
    trials = pd.read_csv(cdir / "trials.csv")
    assert len(trials) == 6 and set(trials["status"]) == {"ok"}
    assert list(trials[trials["config"] == "baseline"]["seed"]) == list(trials[trials["config"] == "low_temp"]["seed"])
    for _, row in table.iterrows():
        mine = trials[trials["config"] == row["config"]]
        for column, metric in (("cooperation_rate", "final_cooperation_rate"),
                               ("superrationality_score", "superrationality_score"),
                               ("identity_reasoning", "identity_reasoning_frequency"),
                               ("convergence_round", "convergence_round")):
            assert row[column] == pytest.approx(mine[metric].mean())
            if row[f"{column}_ci_low"] == row[f"{column}_ci_low"]:  # not NaN
                assert row[f"{column}_ci_low"] <= row[column] <= row[f"{column}_ci_high"]
        assert row["trials"] == 2 and row["interval"] == "95%, over 2 trials"
        for run_dir in mine["run_dir"]:
            assert (cdir / run_dir / "experiment.log").is_file() and (cdir / run_dir / "manifest.json").is_file()
    assert (cdir / "experiment_comparison.md").read_text().strip() in out
    # Trial 0 runs on --seed itself: the plain run of that config reproduces it.
    plain = run(AcausalConfig.from_mapping({"experiment_name": "baseline", "num_agents": 3, "num_rounds": 4,
                                           "strategy_model": "google/gemini-2.0-flash-exp:free",
                                           "decision_model": "openai/gpt-4o-mini", "temperature": 0.7,
                                           "embeddings": False}), seed=9)
    first = trials[(trials["config"] == "baseline") & (trials["trial"] == 0)].iloc[0]
    assert first["seed"] == 9 and first["cooperation_rate"] == pytest.approx(plain.results["metrics"]["cooperation_rate"])
    manifest = json.loads((cdir / first["run_dir"] / "manifest.json").read_text())
    assert manifest["trace_sha256"] == plain.results["trace_sha256"]


def test_compare_with_one_trial_gives_wilson_intervals_of_the_runs_own_counts(tmp_path: Path, capsys) -> None:
    import pandas as pd

    from simcore.analysis.stats import proportion_ci

    assert compare_main(["--configs", "baseline", "--n-agents", "3", "--rounds", "4", "--no-embeddings",
                         "--plots", "none", "--out", str(tmp_path)]) == 0
    (cdir,) = (tmp_path / "acausal_cooperation").iterdir()
    row = pd.read_csv(cdir / "experiment_comparison.csv").iloc[0]
    results = json.loads((cdir / "runs" / "acausal_cooperation" / "baseline-t0" / "results.json").read_text())
    games = results["basis"]["final_cooperation_rate"]["n"]
    k = round(results["metrics"]["final_cooperation_rate"] * games)
    assert (row["cooperation_rate_ci_low"], row["cooperation_rate_ci_high"]) == pytest.approx(proportion_ci(k, games))
    assert row["superrationality_score_ci_low"] != row["superrationality_score_ci_low"]  # NaN: one trial, no interval
    assert row["interval"].startswith("95% Wilson")


@pytest.mark.parametrize("argv, message", [
    (["--config", "baseline"], "error: config: compare runs several configs; name them with --configs"),
    (["--configs", "nosuch"], "error: config: no file 'nosuch' and no shipped config of that name; "
                              "shipped: baseline, high_temp, low_temp"),
    (["--configs", "baseline,baseline"], "error: configs: 'baseline' is given twice (as 'baseline')"),
    (["--experiment-name", "x"], "error: experiment_name: each config names itself; drop --experiment-name"),
    (["--trials", "0"], "error: trials: must be an integer from 1 to"),
    (["--n-agents", "1"], "error: configs: baseline: n_agents: LLM plus scripted players must be at least 2"),
])
def test_compare_bad_input_is_one_line_and_writes_nothing(tmp_path: Path, capsys, argv: list[str],
                                                          message: str) -> None:
    with pytest.raises(SystemExit) as exc:
        compare_main([*argv, "--out", str(tmp_path)])
    assert exc.value.code == 2
    assert capsys.readouterr().err.strip().startswith(message)
    assert not any(tmp_path.iterdir())


@pytest.mark.slow
def test_the_pages_stub_comparison_is_what_the_command_writes(tmp_path: Path, capsys) -> None:
    """The stub table on docs/scenarios/acausal_cooperation.md is the command's own output."""
    page = (Path(__file__).resolve().parent.parent / "docs" / "scenarios" / "acausal_cooperation.md").read_text()
    start = page.index("| name | trials |")
    table = page[start:page.index("\n\n", start)]
    assert compare_main(["--trials", "3", "--no-embeddings", "--out", str(tmp_path)]) == 0
    (cdir,) = (tmp_path / "acausal_cooperation").iterdir()
    assert (cdir / "experiment_comparison.md").read_text().strip() == table
