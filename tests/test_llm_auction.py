"""Tests of the LLM-auction scenario and of the auction / open-floor protocols it uses."""

from __future__ import annotations

import asyncio
import json
import os
import pickle
from functools import lru_cache
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from backends.base import LLMRequest, Message, Usage
from backends.stub import StubBackend
from scenarios.llm_auction import SCENARIO
from scenarios.llm_auction import compare_command as compare_main
from scenarios.llm_auction.analysis import (
    AGENT_SUMMARY_COLUMNS,
    BID_COLUMNS,
    COMPARED,
    ROUND_COLUMNS,
    VIGNETTE_COLUMNS,
    agent_summary,
    by_style,
    metrics,
)
from scenarios.llm_auction.behaviour import AuctionBehaviour, make_behaviour
from scenarios.llm_auction.config import MECHANISMS, STYLES, AuctionConfig, agent_names
from scenarios.llm_auction.experiment import Ballot
from scenarios.llm_auction.kinds import KINDS
from scenarios.llm_auction.vignettes import VIGNETTES
from simcore.analysis.stats import describe, holm, proportion_ci
from simcore.base.config import ConfigError
from simcore.base.rng import Streams
from simcore.cli import main as cli_main
from simcore.replies.reading import read_reply
from simcore.runs.counterfactual import compared_metrics
from simcore.runs.runner import run_trial, run_trial_async, write_run
from simcore.sim.agents import LLMAgent
from simcore.sim.kernel import World
from simcore.sim.protocols import Bid, open_floor, resolve_auction, sealed_bid_auction

pytest_plugins = ["tests.shared_runs"]  # hash_seed_pair

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = Path(__file__).with_name("golden")
SMALL = dict(n_agents=6, n_vignettes=3)


@lru_cache(maxsize=None)
def trial(mechanism: str, seed: int = 11, **changes):
    cfg = AuctionConfig(mechanism=mechanism, **{**SMALL, **changes})
    t = run_trial(SCENARIO, cfg, seed)
    assert t.status == "ok", t.error
    return t


def frames(t):
    from scenarios.llm_auction.analysis import tables

    return tables(t.world, t.config)


# -- data and config ---------------------------------------------------------
def test_vignettes_are_at_least_twelve_with_documented_consensus():
    assert len(VIGNETTES) >= 12
    for v in VIGNETTES:
        assert 3 <= len(v.options) <= 4
        assert v.consensus in v.keys and v.distractor in v.keys and v.consensus != v.distractor
        assert len(v.rationale) > 80
    # the right answer is not always in the same position
    assert len({v.consensus for v in VIGNETTES}) >= 3


@pytest.mark.parametrize(
    "field, value",
    [
        ("token_price", 0.00005), ("token_price", 0.02), ("n_agents", 4), ("n_agents", 26),
        ("budget", 0.05), ("budget", 2.5), ("mechanism", "auction_all"),
        ("styles", "assertive,bold"), ("auction_rule", "third_price"), ("n_vignettes", 0),
    ],
)
def test_config_rejects_out_of_range(field, value):
    with pytest.raises(ConfigError, match=f"^{field}: "):
        AuctionConfig(**{field: value})


def test_sweep_ranges_accept_their_ends():
    for changes in ({"token_price": 0.0001}, {"token_price": 0.01}, {"n_agents": 5}, {"n_agents": 25},
                    {"budget": 0.10}, {"budget": 2.00}):
        (field, value), = changes.items()
        assert getattr(AuctionConfig(**changes), field) == value  # raises ConfigError if rejected


def test_cli_bad_input_exits_2_and_writes_nothing(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        cli_main(SCENARIO, ["--token-price", "0.5", "--out", str(tmp_path)])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: token_price:") and "\n" not in err
    assert not any(tmp_path.iterdir())


def read_option(value: str, keys: tuple[str, ...]) -> str | None:
    """A ballot reply whose option is ``value``, read as the vote reads it."""
    r = read_reply(json.dumps({"option": value}), Ballot, allowed={"option": keys})
    return r.value.option if r.readable else None


def test_read_option():
    keys = ("A", "B", "C")
    assert read_option("B", keys) == "B"
    assert read_option(" b) because", keys) == "B"
    assert read_option("B - because it protects the patient", keys) == "B"
    assert read_option("Option: B", keys) == "B"
    assert read_option("Option C", keys) == "C"
    assert read_option("I pick option (a)", keys) == "A"
    assert read_option("D", keys) is None
    assert read_option("A lottery is fair", keys) is None
    assert read_option("none of them", keys) is None
    texts = {"A": "Keep it confidential.", "B": "Warn the family.", "C": "Ask the board."}
    assert read_reply('{"option": "B Warn the family"}', Ballot, allowed={"option": texts}).value.option == "B"
    assert read_reply('{"option": "Warn the family."}', Ballot, allowed={"option": texts}).value.option == "B"
    assert not read_reply('{"option": "A or B, hard to say"}', Ballot, allowed={"option": texts}).readable


# -- protocols: resolve_auction and sealed_bid_auction ----------------------------
def test_first_and_second_price():
    bids = [Bid("A", 0.5, 1.0), Bid("B", 0.8, 2.0), Bid("C", 0.3, 0.5)]
    rng = np.random.default_rng(0)
    assert resolve_auction(bids, "first_price", rng) == ("B", 0.8, ("B",))
    assert resolve_auction(bids, "second_price", rng) == ("B", 0.5, ("B",))
    assert resolve_auction([Bid("A", 0.4, 0.0)], "second_price", rng) == ("A", 0.0, ("A",))
    assert resolve_auction([], "first_price", rng) == (None, 0.0, ())
    with pytest.raises(ConfigError, match="^auction_rule: "):
        resolve_auction(bids, "dutch", rng)


def test_tie_break_is_seeded_and_ignores_arrival_order():
    bids = [Bid("C", 0.7, 1.0), Bid("A", 0.7, 2.0), Bid("B", 0.2, 0.0), Bid("D", 0.7, 3.0)]
    winners = set()
    for seed in range(40):
        w1 = resolve_auction(bids, "first_price", np.random.default_rng(seed))
        w2 = resolve_auction(bids[::-1], "first_price", np.random.default_rng(seed))
        assert w1 == w2  # same draw, whatever the arrival order
        assert w1[2] == ("A", "C", "D") and w1[1] == 0.7
        winners.add(w1[0])
    assert winners == {"A", "C", "D"}
    # second price with a tie at the top: the winner pays the tied amount
    assert resolve_auction(bids, "second_price", np.random.default_rng(1))[1] == 0.7


def _deadline_world(arrivals: dict[str, float], window: float, rule: str = "first_price"):
    world = World(3, StubBackend())
    out = {}
    # Readiness events exist before the auction opens (as the assessment calls do in
    # the scenario), so a bid due exactly at the deadline is processed before the
    # close: only the "strictly before" rule keeps it out.
    ready = {name: world.timeout(t) for name, t in arrivals.items()}

    def submit(name):
        yield ready[name]
        return {"A": 0.9, "B": 0.5, "C": 0.2}[name]

    def proc():
        out["result"] = yield from sealed_bid_auction(world, list(arrivals), submit, window=window, rule=rule)
        out["closed_at"] = world.now
        out["late"] = yield world.all_of(out["result"].submissions.values())

    world.process(proc())
    world.run()
    return world, out


def test_bid_deadline_excludes_late_bids():
    # A's high bid comes exactly at the deadline: late (a bid must arrive before it).
    world, out = _deadline_world({"A": 10.0, "B": 4.0, "C": 9.99}, window=10.0)
    r = out["result"]
    assert out["closed_at"] == 10.0 and r.deadline == 10.0
    assert [b.bidder for b in r.bids] == ["B", "C"]
    assert r.winner == "B" and r.price == 0.5
    bids = world.trace.of_kind("bid")
    assert {e.agent: e.fields["on_time"] for e in bids} == {"A": False, "B": True, "C": True}
    close = world.trace.of_kind("auction.close")[0]
    assert close.t == 10.0 and close.agent == "B"
    # the late bid is still delivered to whoever waits for it
    assert [b.bidder for b in out["late"]] == ["A", "B", "C"]
    # a longer window lets it in
    _, out = _deadline_world({"A": 10.0, "B": 4.0, "C": 9.99}, window=10.5)
    assert out["result"].winner == "A"


def test_open_floor_posts_in_order_of_generation_time():
    lengths = {"P1": 400, "P2": 40, "P3": 200, "P4": 40, "P5": 120}

    def behaviour(request, rng):
        return "x" * lengths[request.metadata["agent"]]

    world = World(5, StubBackend(behaviour))
    agents = [LLMAgent(world, n, speaking_rate=2.0) for n in lengths]
    out = {}

    def proc():
        out["replies"] = yield from open_floor(world, agents, "speak", phase="free", max_tokens=500)

    world.process(proc())
    world.run()
    posted = [(m.speaker, m.t) for m in world.board.messages]
    assert [s for s, _ in posted][2:] == ["P5", "P3", "P1"]
    assert {s for s, _ in posted[:2]} == {"P2", "P4"}  # tie: order from the seeded shuffle
    # each message is posted when its generation ends: tokens / rate
    for speaker, t in posted:
        assert t == pytest.approx(lengths[speaker] / 4 / 2.0)
    assert [r.agent for r in out["replies"]] == [s for s, _ in posted]


# -- scenario: auction --------------------------------------------------------
def test_bid_formula_and_seeded_noise():
    t = trial("auction")
    cfg = t.config
    bids = frames(t)["bid_data"]
    assert len(bids) == cfg.n_agents * cfg.n_vignettes
    noise = Streams(t.seed).numpy("auction.noise")
    reserve = cfg.proposal_tokens * cfg.token_price
    for _, group in bids.groupby("vignette_index", sort=True):
        expected_noise = noise.normal(0.0, cfg.bid_noise_sd, size=cfg.n_agents)
        group = group.set_index("agent").loc[agent_names(cfg.n_agents)]
        assert np.allclose(group["noise"].to_numpy(), expected_noise)
        for name, row in group.iterrows():
            style = cfg.style_of(agent_names(cfg.n_agents).index(name))
            assert row["style_multiplier"] == cfg.multiplier(style)
            if row["bid"] is None or pd.isna(row["bid"]):
                continue
            raw = row["confidence"] * row["style_multiplier"] * row["budget_before"] + row["noise"]
            assert row["raw_bid"] == pytest.approx(raw)
            cap = row["budget_before"] - reserve
            assert row["bid"] == pytest.approx(min(max(raw, 0.0), cap), abs=1e-6)


def test_style_multipliers_are_parameters():
    cfg = AuctionConfig(assertive_multiplier=2.0, timid_multiplier=0.25)
    assert cfg.multiplier("assertive") == 2.0 and cfg.multiplier("timid") == 0.25
    assert [cfg.style_of(i) for i in range(5)] == ["assertive", "timid", "calibrated", "neutral", "assertive"]


def test_winner_has_the_highest_on_time_bid_and_pays_by_rule():
    for rule in ("first_price", "second_price"):
        t = trial("auction", auction_rule=rule, bid_window=30.0)
        bids = frames(t)["bid_data"]
        for _, g in bids.groupby("vignette_index"):
            on_time = g[g["on_time"] == True]  # noqa: E712 - object column
            winner = g[g["won"] == True]  # noqa: E712
            if on_time.empty:
                assert winner.empty
                continue
            assert len(winner) == 1
            w = winner.iloc[0]
            assert w["on_time"] and w["bid"] == on_time["bid"].max()
            others = on_time[on_time["agent"] != w["agent"]]["bid"]
            expected = w["bid"] if rule == "first_price" else (others.max() if len(others) else 0.0)
            assert w["price_paid"] == pytest.approx(expected)


def test_short_bid_window_excludes_late_bids_in_the_scenario():
    t = trial("auction", bid_window=27.0)
    bids = frames(t)["bid_data"]
    submitted = bids[bids["bid"].notna()]
    assert (submitted["on_time"] == (submitted["submitted_at"] < submitted["deadline"])).all()
    late = submitted[submitted["on_time"] == False]  # noqa: E712
    assert len(late) > 0, "expected some assessments to finish after a 27 s deadline"
    assert not late["won"].any()
    # the auction closes at the deadline, whatever the bids
    closes = t.world.trace.of_kind("auction.close")
    starts = [e.t for e in t.world.trace.of_kind("vignette")]
    assert [c.t for c in closes] == pytest.approx([s + 27.0 for s in starts])


def test_costs_are_tokens_times_price_and_budgets_balance():
    t = trial("auction", budget_scope="run")
    cfg = t.config
    rounds = frames(t)["agent_round_results"]
    # completion tokens of each agent's paid messages, read from the trace
    paid: dict[tuple[str, str], int] = {}
    posted = {(e.agent, e.fields["vignette"], e.fields["phase"]) for e in t.world.trace.of_kind("message")}
    for e in t.world.trace.of_kind("llm.reply"):
        phase, v = e.fields["phase"], e.fields["vignette"]
        if phase == "proposal" or (phase == "critique" and (e.agent, v, phase) in posted):
            paid[(e.agent, v)] = paid.get((e.agent, v), 0) + e.payload["tokens"][1]
    for _, r in rounds.iterrows():
        tokens = paid.get((r["agent"], r["vignette_id"]), 0)
        assert r["message_tokens"] == tokens
        assert r["token_cost"] == pytest.approx(tokens * cfg.token_price)
        assert r["total_cost"] == pytest.approx(r["bid_paid"] + r["token_cost"])
    spent = rounds.groupby("agent")["total_cost"].sum()
    final = rounds[rounds["vignette_index"] == cfg.n_vignettes - 1].set_index("agent")["budget_after"]
    assert np.allclose(final.loc[spent.index], cfg.budget - spent)
    assert (final >= -1e-9).all()
    assert rounds["won_auction"].sum() >= 1 and (rounds["bid_paid"] > 0).any()


def test_payoff_is_reward_if_correct_minus_costs():
    for mech, extra in (("auction", {}), ("turn_taking", {}), ("free_discussion", {"charge_baselines": True})):
        t = trial(mech, **extra)
        rounds = frames(t)["agent_round_results"]
        reward = 0.5 * rounds["group_correct"].astype(float) - rounds["total_cost"]
        assert np.allclose(rounds["reward"], reward)
    plain = frames(trial("turn_taking"))["agent_round_results"]
    assert (plain["total_cost"] == 0).all() and (plain["token_cost"] > 0).any()
    charged = frames(trial("free_discussion", charge_baselines=True))["agent_round_results"]
    assert np.allclose(charged["total_cost"], charged["token_cost"])


def test_decision_is_majority_then_plurality():
    for mech in MECHANISMS:
        t = trial(mech)
        v = frames(t)["vignette_results"]
        rounds = frames(t)["agent_round_results"]
        for _, row in v.iterrows():
            ballots = rounds[rounds["vignette_index"] == row["vignette_index"]]["option_choice"].dropna()
            counts = ballots.value_counts()
            if row["decided_by"] == "majority":
                assert counts[row["decision"]] * 2 > row["n_agents"]
            elif row["decided_by"] == "plurality":
                assert counts[row["decision"]] == counts.max()
            assert row["correct"] == (row["decision"] == row["consensus"])


# -- scenario: baselines --------------------------------------------------------
def _proposals(t):
    """Per vignette (by the time it started), the proposal messages as (speaker, time)."""
    starts = [(e.t, e.fields["vignette"]) for e in t.world.trace.of_kind("vignette")]
    out: dict[str, list[tuple[str, float]]] = {vid: [] for _, vid in starts}
    for m in t.world.board.messages:
        if m.fields.get("phase") == "proposal":
            vid = [v for start, v in starts if start <= m.t][-1]
            out[vid].append((m.speaker, m.t))
    return out


def test_free_discussion_messages_arrive_in_order_of_generation_time():
    t = trial("free_discussion")
    rate = t.config.speaking_rate
    start = {e.fields["vignette"]: e.t for e in t.world.trace.of_kind("vignette")}
    tokens = {
        (e.agent, e.fields["vignette"]): e.payload["tokens"][1]
        for e in t.world.trace.of_kind("llm.reply") if e.fields["phase"] == "proposal"
    }
    assessed = {
        e.fields["vignette"]: e.t for e in t.world.trace.of_kind("llm.reply")
        if e.fields["phase"] == "assessment"
    }
    for vid, posts in _proposals(t).items():
        assert len(posts) == t.config.n_agents
        times = [time for _, time in posts]
        assert times == sorted(times)
        asked = assessed[vid]  # proposals are requested when the last assessment is in
        assert asked >= start[vid]
        for speaker, time in posts:
            assert time == pytest.approx(asked + tokens[(speaker, vid)] / rate)
        lens = [tokens[(s, vid)] for s, _ in posts]
        assert lens == sorted(lens)  # shorter speakers get the floor first


def test_turn_taking_order_is_seeded_and_sequential():
    def orders(seed):
        return [[s for s, _ in posts] for posts in _proposals(trial("turn_taking", seed=seed)).values()]

    a, b, c = orders(11), orders(11), orders(12)
    assert a == b
    assert a != c
    names = agent_names(SMALL["n_agents"])
    for order in a + c:
        assert sorted(order) == names
    assert len({tuple(o) for o in a + c}) > 1  # a fresh order per vignette
    t = trial("turn_taking")
    for posts in _proposals(t).values():
        times = [time for _, time in posts]
        assert all(x < y for x, y in zip(times, times[1:]))  # one after another


def test_agents_hear_only_the_current_vignette():
    seen = []

    class Recording(StubBackend):
        def respond(self, request):
            seen.append(request)
            return super().respond(request)

    cfg = AuctionConfig(mechanism="turn_taking", n_agents=5, n_vignettes=2)
    backend = Recording(make_behaviour(cfg))
    t = asyncio.run(run_trial_async(SCENARIO, cfg, 5, backend=backend))
    assert t.status == "ok"
    second = VIGNETTES[1].id
    start = [e.t for e in t.world.trace.of_kind("vignette")][1]
    earlier = [m.text for m in t.world.board.messages if m.t < start]
    later = [m.text for m in t.world.board.messages if m.t >= start]
    assert earlier and later
    for r in seen:
        if r.metadata["vignette"] == second and r.metadata["phase"] in ("vote", "discussion"):
            prompt = r.messages[-1].content
            assert not any(text in prompt for text in earlier)
            assert any(text in prompt for text in later)


# -- outputs ------------------------------------------------------------------
@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_run_directory_has_the_seed_csvs(tmp_path, mechanism):
    t = trial(mechanism)
    run_dir = write_run(t, tmp_path, run_id=f"test-{mechanism}")
    expected = {
        "vignette_results": VIGNETTE_COLUMNS, "agent_round_results": ROUND_COLUMNS,
        "bid_data": BID_COLUMNS, "agent_summary": AGENT_SUMMARY_COLUMNS,
    }
    cfg = t.config
    for name, cols in expected.items():
        df = pd.read_csv(run_dir / f"{name}.csv")
        assert tuple(df.columns) == cols, name
    assert len(pd.read_csv(run_dir / "vignette_results.csv")) == cfg.n_vignettes
    assert len(pd.read_csv(run_dir / "agent_round_results.csv")) == cfg.n_vignettes * cfg.n_agents
    assert len(pd.read_csv(run_dir / "agent_summary.csv")) == cfg.n_agents
    bids = pd.read_csv(run_dir / "bid_data.csv")
    assert len(bids) == (cfg.n_agents * cfg.n_vignettes if mechanism == "auction" else 0)
    summary = pd.read_csv(run_dir / "simulation_summary.csv")
    assert len(summary) == 1 and summary["mechanism"][0] == mechanism
    results = json.loads((run_dir / "results.json").read_text())
    assert (run_dir / "plots" / "participation_by_style.png").stat().st_size > 1000
    assert "artifact_error" not in results
    m = results["metrics"]
    assert all(v is None or isinstance(v, (int, float)) for v in m.values())
    assert summary["correctness"][0] == pytest.approx(m["correctness"])


def test_records_match_the_declared_columns():
    t = trial("auction")
    assert tuple(t.world.state["rows"][0]) == ROUND_COLUMNS
    assert tuple(t.world.state["vignettes"][0]) == VIGNETTE_COLUMNS
    assert tuple(t.world.state["bids"][0]) == BID_COLUMNS


def test_metrics_have_cis_and_per_style_figures():
    r = trial("auction").results
    m = r["metrics"]
    assert 0 <= m["correctness_ci_low"] <= m["correctness"] <= m["correctness_ci_high"] <= 1
    for style in ("assertive", "timid", "calibrated", "neutral"):
        assert f"participation_{style}" in m and f"vote_accuracy_{style}" in m
        s = r["by_style"][style]
        assert s["participation"]["ci_low"] <= s["participation"]["rate"] <= s["participation"]["ci_high"]
    assert SCENARIO.summarize(r).startswith("llm_auction: mechanism auction")


def _pandas_figures(rounds: pd.DataFrame, vignettes: pd.DataFrame) -> tuple[dict, dict, pd.DataFrame]:
    """The per-style figures and the agent summary as pandas computes them, a Series per figure
    (what the analysis computed before it read numpy arrays split once)."""
    def mean(s):
        s = pd.Series(s, dtype=object).dropna().astype(float)
        return float(s.mean()) if len(s) else None

    def rate(s):
        s = pd.Series(s, dtype=object).dropna().astype(bool)
        k, n = int(s.sum()), len(s)
        lo, hi = proportion_ci(k, n)
        return {"rate": k / n if n else None, "k": k, "n": n, "ci_low": lo, "ci_high": hi}

    per_style, styles = {}, {}
    for style in STYLES:
        mine = rounds[rounds["communication_style"] == style]
        per_style |= {
            f"participation_{style}": mean(mine["participated"]), f"vote_accuracy_{style}": mean(mine["vote_correct"]),
            f"mean_reward_{style}": mean(mine["reward"]), f"proposer_share_{style}": mean(vignettes["proposer_style"] == style),
        }
        if len(mine):
            styles[style] = {
                "agent_vignettes": len(mine), "private_accuracy": rate(mine["private_correct"]),
                "vote_accuracy": rate(mine["vote_correct"]), "participation": rate(mine["participated"]),
                "proposer": rate(vignettes["proposer_style"] == style),
                "cost": describe(mine["total_cost"].tolist(), kind=KINDS["total_cost"]).to_dict(),
                "reward": describe(mine["reward"].tolist(), kind=KINDS["mean_reward"]).to_dict()}
    g = rounds.groupby(["mechanism", "seed", "agent"], sort=True)
    summary = pd.DataFrame({
        "communication_style": g["communication_style"].first(), "n_vignettes": g.size(),
        "n_proposals": g["proposed"].sum(), "n_critiques": g["critiqued"].sum(),
        "participation_rate": g["participated"].mean(), "n_bids": g["bid"].count(),
        "n_auction_wins": g["won_auction"].sum(), "message_tokens": g["message_tokens"].sum(),
        "total_cost": g["total_cost"].sum(), "total_reward": g["reward"].sum(),
        "private_accuracy": g["private_correct"].apply(mean), "vote_accuracy": g["vote_correct"].apply(mean),
        "final_budget": g["budget_after"].last(),
    }).reset_index()[list(AGENT_SUMMARY_COLUMNS)]
    return per_style, styles, summary


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_figures_by_style_and_agent_are_pandas_own_to_the_last_bit(seed):
    """Unreadable replies (None) and styles without agents included: the same floats, not nearly the same."""
    rng = np.random.default_rng(seed)
    n = 60

    def answer():  # right, wrong or unreadable
        return rng.choice(np.array([True, False, None], dtype=object), size=n)

    rounds = pd.DataFrame({c: [0] * n for c in ROUND_COLUMNS}).assign(
        mechanism="auction", seed=seed, agent=rng.choice(["A01", "A02", "A03", "A04", "A05"], size=n),
        communication_style=rng.choice(list(STYLES[: 1 + seed]), size=n), participated=rng.random(n) < 0.4,
        proposed=rng.random(n) < 0.2, critiqued=rng.random(n) < 0.3, won_auction=rng.random(n) < 0.2,
        bid=np.where(rng.random(n) < 0.8, rng.random(n), np.nan), message_tokens=rng.integers(0, 90, n),
        private_correct=answer(), vote_correct=answer(), total_cost=rng.random(n) * 0.3,
        # Magnitudes far apart, where the order and manner of adding shows in the last bits.
        reward=rng.normal(size=n) * 10.0 ** rng.integers(-6, 7, n), budget_after=rng.random(n))
    vignettes = pd.DataFrame({"mechanism": ["auction"] * 6, "proposer_style": [STYLES[i % 3] for i in range(5)] + [None]})
    per_style, styles, summary = _pandas_figures(rounds, vignettes)
    m = metrics(vignettes.assign(**{c: 0 for c in VIGNETTE_COLUMNS if c not in vignettes}), rounds,
                pd.DataFrame(columns=list(BID_COLUMNS)))
    assert {k: m[k] for k in per_style} == per_style
    assert by_style(rounds, vignettes) == styles
    assert agent_summary(rounds).to_csv(index=False) == summary.to_csv(index=False)
    # Each agent's rows together: pandas sums them another way (numpy's reduceat), and so does the summary.
    together = rounds.sort_values("agent", kind="stable", ignore_index=True)
    assert agent_summary(together).to_csv(index=False) == _pandas_figures(together, vignettes)[2].to_csv(index=False)


# -- determinism -------------------------------------------------------------------
GOLDEN_CFG = dict(n_agents=5, n_vignettes=1)


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_golden_trace(mechanism):
    cfg = AuctionConfig(mechanism=mechanism, **GOLDEN_CFG)
    text = run_trial(SCENARIO, cfg, 2024).trace.to_jsonl()
    path = GOLDEN / f"llm_auction_{mechanism}.jsonl"
    if os.environ.get("SIMCORE_UPDATE_GOLDEN"):
        path.write_text(text)
    assert text == path.read_text(), f"trace differs from {path.name} (SIMCORE_UPDATE_GOLDEN=1 to accept)"


def test_same_seed_same_trace_across_processes(hash_seed_pair):
    """The same trace here and in an interpreter with another hash seed (tests/shared_runs.py)."""
    in_process = run_trial(
        SCENARIO, AuctionConfig(mechanism="free_discussion", n_agents=5, n_vignettes=2), 9
    ).trace.sha256()
    here, there = hash_seed_pair("llm_auction")
    assert there == here == in_process
    other = run_trial(SCENARIO, AuctionConfig(mechanism="free_discussion", n_agents=5, n_vignettes=2), 10)
    assert other.trace.sha256() != in_process


def test_mechanisms_share_private_views_for_a_seed():
    views = [
        frames(trial(m))["agent_round_results"][["agent", "vignette_index", "private_option", "private_confidence"]]
        for m in MECHANISMS
    ]
    for v in views[1:]:
        pd.testing.assert_frame_equal(v, views[0])


# -- robustness -------------------------------------------------------------------
@pytest.mark.parametrize("mechanism", MECHANISMS)
@pytest.mark.parametrize("rate", [0.3, 1.0])
def test_malformed_output_does_not_crash(mechanism, rate, tmp_path):
    cfg = AuctionConfig(mechanism=mechanism, n_agents=5, n_vignettes=2)
    backend = StubBackend(make_behaviour(cfg), malformed_rate=rate)
    t = asyncio.run(run_trial_async(SCENARIO, cfg, 3, backend=backend))
    assert t.status == "ok", t.error
    m = t.results["metrics"]
    assert m["parse_errors"] > 0
    assert any(e.payload.get("parse_error") for e in t.world.trace.of_kind("llm.reply"))
    if rate == 1.0:
        assert m["n_correct"] == 0 and m["participation"] == 0
        assert m["no_decision_rate"] == 1.0
    run_dir = write_run(t, tmp_path, run_id="malformed")
    assert "artifact_error" not in json.loads((run_dir / "results.json").read_text())
    assert len(pd.read_csv(run_dir / "agent_round_results.csv")) == 10


# -- stub behaviour ------------------------------------------------------------------
def _views(signal: float, n_seeds: int = 20):
    cfg = AuctionConfig(confidence_signal=signal)
    b = make_behaviour(cfg)
    out = []
    for seed in range(n_seeds):
        for v in VIGNETTES:
            for name, style in b.styles.items():
                out.append(b.view(seed, v, name, style))
    return out


def test_stub_confidence_tracks_correctness_through_the_signal():
    strong, none = _views(1.0), _views(0.0)
    gap = lambda vs: (  # noqa: E731
        np.mean([x.confidence for x in vs if x.correct]) - np.mean([x.confidence for x in vs if not x.correct])
    )
    assert gap(strong) > 0.4
    assert abs(gap(none)) < 0.03
    acc = np.mean([x.correct for x in strong])
    assert acc == pytest.approx(AuctionConfig().stub_accuracy, abs=0.03)


def test_stub_replies_fit_their_token_budget():
    cfg = AuctionConfig()
    b = make_behaviour(cfg)
    v = VIGNETTES[0]
    for max_tokens in (16, 40, 160):
        req = LLMRequest(
            "stub", (Message("user", "x"),), max_tokens=max_tokens, seed=1,
            metadata={"agent": "A02", "phase": "assessment", "vignette": v.id},
        )
        resp = StubBackend(b).respond(req)
        assert resp.finish_reason == "stop" or max_tokens == 16
        assert resp.usage == Usage(1, resp.usage.completion_tokens)
        assert resp.usage.completion_tokens <= max_tokens


def test_stub_vote_follows_persuasive_messages():
    v = VIGNETTES[0]
    b = AuctionBehaviour({"A01": "neutral", "A02": "neutral"}, 0.5, 0.6, 1.0, 0.0)
    transcript = "Discussion so far:\nA02: PROPOSAL option D (confidence 0.95): argue\n\nVote."
    req = LLMRequest("stub", (Message("user", transcript),), seed=1,
                     metadata={"agent": "A01", "phase": "vote", "vignette": v.id})
    assert b(req, np.random.default_rng(0)) == {"option": "D"}  # persuasion 1: follow what was heard


# -- compare subcommand ---------------------------------------------------------------
def test_compare_writes_the_comparison(tmp_path, capsys):
    rc = compare_main([
        "--trials", "2", "--n-agents", "5", "--n-vignettes", "2", "--out", str(tmp_path), "--json",
    ])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    d = Path(out["run_dir"])
    for name in ("manifest.json", "comparison.json", "trials.csv", "vignette_results.csv",
                 "agent_round_results.csv", "bid_data.csv", "agent_summary.csv", "simulation_summary.csv",
                 "plots/correctness_by_mechanism.png", "plots/cost_vs_correctness.png",
                 "plots/participation_by_style.png"):
        assert (d / name).is_file(), name
    trials = pd.read_csv(d / "trials.csv")
    assert len(trials) == 6 and set(trials["mechanism"]) == set(MECHANISMS)
    # common random numbers: every mechanism ran on the same trial seeds
    seeds = trials.groupby("mechanism")["seed"].apply(list)
    assert seeds["auction"] == seeds["free_discussion"] == seeds["turn_taking"]
    stats = out["mechanisms"]
    assert set(stats) == set(MECHANISMS)
    assert stats["auction"]["correctness_pooled"]["n"] == 4
    assert len(out["pairs"]) == 3
    assert {"delta_mean", "ci_low", "ci_high", "test", "p_value", "p_adjusted"} <= set(out["pairs"][0]["correctness"])
    # One family decides every row: Holm across every metric of every pair of mechanisms.
    entries = [pair[m] for pair in out["pairs"] for m in COMPARED]
    tested = [e for e in entries if e["p_value"] is not None]
    adjusted = holm([e["p_value"] for e in tested])
    for entry, adj in zip(tested, adjusted):
        assert entry["family"] == f"Holm across {len(tested)} comparisons (5 metrics x 3 mechanism pairs)"
        assert entry["p_adjusted"] == pytest.approx(adj) and entry["significant"] == (adj < 0.05)
        assert not any("holm" in key for key in entry)
    for pair in out["pairs"]:
        # Only the pair the scenario calibrated (its counterfactual) carries the installed calibration.
        calibrated = {pair["a"], pair["b"]} == {"auction", "free_discussion"}
        assert ("calibration" in pair["correctness"]) == calibrated
    rounds = pd.read_csv(d / "agent_round_results.csv")
    assert len(rounds) == 3 * 2 * 2 * 5


@pytest.mark.parametrize("argv, field", [
    (["--mechanisms", "auction,bazaar"], "mechanisms"),
    (["--mechanism", "auction"], "mechanism"),
    (["--trials", "0"], "trials"),
    (["--budget", "9"], "budget"),
])
def test_compare_rejects_bad_input(tmp_path, capsys, argv, field):
    with pytest.raises(SystemExit) as exc:
        compare_main([*argv, "--out", str(tmp_path)])
    assert exc.value.code == 2
    assert capsys.readouterr().err.startswith(f"error: {field}:")
    assert not any(tmp_path.iterdir())


def test_scenario_compare_hook_pairs_trials():
    a = [trial("auction", seed=s).results for s in (1, 2)]
    b = [trial("turn_taking", seed=s).results for s in (1, 2)]
    out = SCENARIO.compare(a, b)
    diff = out["difference_summary"]
    assert compared_metrics(out) == list(COMPARED)
    assert all("delta_mean" in diff[key] for key in COMPARED)
    assert diff["correctness"]["delta_mean"] == pytest.approx(
        np.mean([x["metrics"]["correctness"] - y["metrics"]["correctness"] for x, y in zip(a, b)])
    )
    assert diff["paired"] is True and diff["correctness"]["family"] == "Holm across 5 metrics"
    assert SCENARIO.counterfactual == ("mechanism", "auction", "free_discussion")
    assert pickle.loads(pickle.dumps(SCENARIO)).compare(a, b) == out  # the batch runner pickles it


def test_cli_trials_prints_and_plots_the_compared_metrics(tmp_path, capsys):
    argv = ["--trials", "2", "--n-agents", "5", "--n-vignettes", "2", "--out", str(tmp_path)]
    assert cli_main(SCENARIO, argv) == 0
    out = capsys.readouterr().out
    rows = {line.split()[0] for line in out.splitlines() if line.startswith("  ")}
    assert set(COMPARED) <= rows
    group = Path(out.rsplit("summary directory: ", 1)[1].strip())
    summary = json.loads((group / "summary.json").read_text())
    assert sorted(compared_metrics(summary["statistical_comparison"])) == sorted(COMPARED)
    assert (group / "plots" / "comparison.png").is_file()
    # the arms' aggregates give every bounded metric an interval inside its bounds
    for arm in ("run_A_aggregate", "run_B_aggregate"):
        for name, d in summary[arm].items():
            kind = SCENARIO.kind_of(name)
            assert kind is not None and d["kind"] == kind.name, name
            if d["ci_low"] is not None and kind.bounded:
                assert kind.low <= d["ci_low"] <= d["mean"] <= d["ci_high"] <= kind.high, (arm, name, d)
    assert summary["run_A_aggregate"]["correctness"]["ci_low"] is not None


def test_compare_estimate_writes_nothing(tmp_path, capsys):
    rc = compare_main(["--trials", "2", "--mechanisms", "auction,turn_taking", "--n-agents", "5",
                       "--n-vignettes", "2", "--estimate", "--out", str(tmp_path)])
    assert rc == 0
    out = capsys.readouterr().out
    assert "estimate for 4 trial(s)" in out  # 2 mechanisms x 2 trial seeds
    assert not any(tmp_path.iterdir())


def test_compare_without_api_key_fails_in_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(SystemExit) as exc:
        compare_main(["--backend", "openai", "--trials", "1", "--n-agents", "5", "--n-vignettes", "2",
                      "--out", str(tmp_path)])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: backend:") and "OPENAI_API_KEY" in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert not tmp_path.exists() or not any(tmp_path.iterdir())


def test_compare_with_one_trial_reports_the_difference_and_tests_nothing(tmp_path, capsys):
    rc = compare_main(["--trials", "1", "--mechanisms", "auction,turn_taking", "--n-agents", "5",
                       "--n-vignettes", "2", "--plots", "none", "--out", str(tmp_path)])
    assert rc == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.split()[:2] == ["correctness", "auction"])
    assert "auction - turn_taking (1)" in row and row.endswith("not tested (1 pair with both values)")
    assert "decided by: paired test chosen by each metric's kind" in out
    assert "comparison directory:" in out


@pytest.mark.slow
def test_auction_advantage_grows_with_the_confidence_signal():
    """Over 10 shared seeds, the auction's edge over turn-taking is larger when confidence is informative."""
    def edge(signal):
        diffs = []
        for seed in range(10):
            a = run_trial(SCENARIO, AuctionConfig(mechanism="auction", confidence_signal=signal), seed)
            b = run_trial(SCENARIO, AuctionConfig(mechanism="turn_taking", confidence_signal=signal), seed)
            diffs.append(a.results["metrics"]["correctness"] - b.results["metrics"]["correctness"])
        return float(np.mean(diffs))

    assert edge(1.0) > edge(0.0) + 0.03


def test_failed_backend_gives_an_error_trial_not_a_crash():
    class Broken(StubBackend):
        def respond(self, request):
            if request.metadata.get("phase") == "vote":
                raise ConnectionError("backend down")
            return super().respond(request)

    cfg = AuctionConfig(mechanism="auction", n_agents=5, n_vignettes=2)
    t = asyncio.run(run_trial_async(SCENARIO, cfg, 3, backend=Broken(make_behaviour(cfg))))
    assert t.status == "error" and "backend down" in t.error["message"]
    assert t.results["metrics"]["n_vignettes"] == 0
    assert "status error" in SCENARIO.summarize(t.results)


def _intervals(stats):
    """Every (centre, low, high) of a comparison.json that has an interval."""
    for m, s in stats["mechanisms"].items():
        for key, d in s.items():
            if isinstance(d, dict) and d.get("ci_low") is not None:
                yield f"{m}.{key}", d.get("rate", d.get("mean")), d["ci_low"], d["ci_high"]


def _check_proportion_intervals(stats):
    for name, mid, lo, hi in _intervals(stats):
        if "cost" in name or "spend" in name or "reward" in name:
            assert lo <= mid <= hi, name
        else:
            assert 0.0 <= lo <= mid <= hi <= 1.0, (name, lo, mid, hi)


# Trial counts at which, with this config, a Wilson bound of 1 - 2e-16 (or 5e-17 at
# k = 0) gave a negative error bar and the plots crashed after every trial had run.
@pytest.mark.parametrize("trials", ["3", "5", "7"])
def test_compare_survives_degenerate_intervals(tmp_path, capsys, trials):
    rc = compare_main(["--trials", trials, "--n-agents", "5", "--n-vignettes", "2", "--out", str(tmp_path), "--json"])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    assert (Path(out["run_dir"]) / "plots" / "cost_vs_correctness.png").is_file()
    _check_proportion_intervals(out)


@pytest.mark.slow
@pytest.mark.parametrize("trials", ["4", "15", "17", "32"])
def test_compare_survives_the_reported_trial_counts(tmp_path, capsys, trials):
    """The trial counts of the report, on the default config (about 90 s in all)."""
    rc = compare_main(["--trials", trials, "--out", str(tmp_path), "--json"])
    assert rc == 0
    _check_proportion_intervals(json.loads(capsys.readouterr().out))


def test_plots_draw_degenerate_shares(tmp_path):
    from scenarios.llm_auction.plots import (
        correctness_by_mechanism,
        cost_vs_correctness,
        participation_by_style,
    )

    for n in (10, 13, 16, 25, 40):  # n where the closed form misses 0 or 1 by a rounding residue
        vign = pd.DataFrame({"mechanism": ["auction"] * n + ["turn_taking"] * n,
                             "correct": [True] * n + [False] * n})
        correctness_by_mechanism(vign, tmp_path / f"c{n}.png")
        rounds = pd.DataFrame({"mechanism": ["auction"] * n, "communication_style": ["timid"] * n,
                               "participated": [n % 2 == 0] * n})
        participation_by_style(rounds, tmp_path / f"p{n}.png")
        trials = pd.DataFrame({"mechanism": ["auction"] * n, "spend_per_vignette": [0.5] * n,
                               "correctness": [1.0] * n})
        cost_vs_correctness(trials, tmp_path / f"t{n}.png")
    assert len(list(tmp_path.glob("*.png"))) == 15


def test_the_correctness_plot_says_how_many_ballots_were_readable():
    from scenarios.llm_auction.plots import correctness_labels

    vign = pd.DataFrame({"mechanism": ["auction", "auction", "turn_taking"], "correct": [True, False, True]})
    rounds = pd.DataFrame({"mechanism": ["auction"] * 5 + ["turn_taking"] * 2,
                           "vote_correct": [1.0, None, 0.0, None, 1.0, 1.0, 1.0]})
    assert correctness_labels(vign, rounds) == ["auction\nn=2 vignettes\n3 of 5 ballots readable",
                                                "turn taking\nn=1 vignettes\n2 of 2 ballots readable"]
    assert correctness_labels(vign) == ["auction\nn=2 vignettes", "turn taking\nn=1 vignettes"]


def test_round_table_offers_the_original_column_name(tmp_path, no_plots):
    cfg = AuctionConfig(mechanism="turn_taking", n_agents=5, n_vignettes=2)
    run_dir = write_run(run_trial(SCENARIO, cfg, 11), tmp_path)
    df = pd.read_csv(run_dir / "agent_round_results.csv")
    assert (df["expected_reasoning"] == df["expected_option"]).all() and df["expected_option"].notna().all()
    # the original experiment's own analysis line runs on our table
    correct = (df["option_choice"] == df["expected_reasoning"]).mean()
    assert correct == pytest.approx((df["option_choice"] == df["expected_option"]).mean())
