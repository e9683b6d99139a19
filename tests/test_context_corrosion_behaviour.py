"""The stub behaviour model: its stance banks embed the stance, and its ground truth.

Ground truth: with conformity 0 nobody moves, so a Monte Carlo should find no
significant directional delta except at the rate alpha; with conformity well above
0 it should find it in most repetitions. The quick tests check one Monte Carlo of
each kind; the slow ones measure the rates.
"""

from __future__ import annotations

import asyncio
import itertools
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scenarios.context_corrosion import SCENARIO
from scenarios.context_corrosion.analysis import compare
from scenarios.context_corrosion.behaviour import (
    _decode,
    level,
    make_behaviour,
    messages_heard,
    transcript,
)
from scenarios.context_corrosion.tasks import TASKS
from simcore.analysis.stats import proportion_ci
from simcore.runs.counterfactual import trial_seeds
from simcore.runs.runner import run_trial, run_trial_async
from simcore.sim.agents import HISTORY_HEADER


def test_no_bank_text_contains_another():
    """The stub decodes stances by finding bank texts in a message: no overlaps."""
    for t in TASKS:
        texts = [*t.pro, *t.con, *t.answers]
        assert len(set(texts)) == len(texts)
        for a, b in itertools.permutations(texts, 2):
            assert a not in b


def test_banks_carry_the_stance_in_embedding_space():
    """MiniLM separates the two sides: each side's sentences are closer to each other
    than to the other side's, and the verdicts lean from con (0) to pro (4)."""
    from simcore.analysis.embeddings import encode

    for t in TASKS:
        pro, con, ans = encode(list(t.pro)), encode(list(t.con)), encode(list(t.answers))
        off = ~np.eye(len(pro), dtype=bool)
        within = ((pro @ pro.T)[off].mean() + (con @ con.T)[off].mean()) / 2
        across = (pro @ con.T).mean()
        assert within - across > 0.15, (t.id, within, across)
        lean = ans @ pro.mean(0) - ans @ con.mean(0)
        assert lean[4] > lean[2] > min(lean[0], lean[1]), (t.id, lean)
        assert lean[4] > 0 > max(lean[0], lean[1]), (t.id, lean)


def stances(biased: bool, conformity: float, seeds: list[int]) -> np.ndarray:
    """Decoded stances (phase 1, final) of D and the mean peer, per seed."""
    cfg = SCENARIO.config_type(metrics=False, biased=biased, conformity=conformity)
    beh = make_behaviour(cfg)
    out = []
    for s in seeds:
        texts = run_trial(SCENARIO, cfg, s).world.state["texts"]
        peers = [f"P{i}" for i in range(1, 5)]
        out.append([
            beh.decode(texts[("phase1", 0, "D")]), beh.decode(texts[("final", 0, "D")]),
            np.mean([beh.decode(texts[("phase1", 0, p)]) for p in peers]),
            np.mean([beh.decode(texts[("final", 0, p)]) for p in peers]),
        ])
    return np.array(out)


def test_stance_ground_truth_without_embeddings():
    seeds = trial_seeds(0, 12)
    a = stances(True, 0.5, seeds)
    b = stances(False, 0.5, seeds)
    null = stances(True, 0.0, seeds)
    # the framed D starts high and is anchored; the peers move toward it
    assert a[:, 0].mean() > 0.4 and abs(a[:, 1].mean() - a[:, 0].mean()) < 0.15
    assert a[:, 3].mean() - a[:, 2].mean() > 0.25
    # unbiased: D is one of the group; peers barely move on average
    assert abs(b[:, 3].mean() - b[:, 2].mean()) < 0.15
    # conformity 0: nobody moves beyond the sampling noise
    assert abs(null[:, 3].mean() - null[:, 2].mean()) < 0.12


def test_level_maps_the_stance_axis_onto_five_verdicts():
    assert [level(s) for s in (-1, -0.6, 0, 0.3, 1)] == [0, 1, 2, 3, 4]


async def _monte_carlo(conformity: float, n: int, seed: int, rounds: int) -> dict:
    cfg = SCENARIO.config_type(conformity=conformity, rounds=rounds)
    seeds = trial_seeds(seed, n)
    arms = []
    for biased in (True, False):
        trials = await asyncio.gather(*(run_trial_async(SCENARIO, cfg.replace(biased=biased), s) for s in seeds))
        arms.append([t.results for t in trials])
    return compare(*arms)["difference_summary"]["avg_peer_directional_delta"]


def test_quick_monte_carlo_finds_strong_corrosion():
    d = asyncio.run(_monte_carlo(0.8, 10, seed=1, rounds=3))
    assert d["delta_mean"] > 0.03 and d["significant_p05"] is True and d["significant"] is True, d


def test_quick_monte_carlo_finds_nothing_without_conformity():
    d = asyncio.run(_monte_carlo(0.0, 10, seed=1, rounds=3))
    assert abs(d["delta_mean"]) < 0.03 and d["significant"] is False, d


def rates(conformity: float, reps: int, n: int) -> dict:
    """Share of Monte Carlos (n trials per arm) that call the directional delta significant."""
    raw = adjusted = 0
    for r in range(reps):
        d = asyncio.run(_monte_carlo(conformity, n, seed=10_000 + r, rounds=3))
        raw += bool(d["p_value"] < 0.05)
        adjusted += bool(d["significant"])
    out = {"conformity": conformity, "reps": reps, "n_per_arm": n,
           "raw_p05_rate": raw / reps, "raw_ci95": proportion_ci(raw, reps),
           "decision_rate": adjusted / reps, "decision_ci95": proportion_ci(adjusted, reps)}
    print(json.dumps(out))
    return out


@pytest.mark.slow
def test_false_positive_rate_near_alpha_without_conformity():
    out = rates(0.0, reps=100, n=10)
    # alpha = 0.05: over 100 repetitions a valid test stays below ~0.10
    assert max(out["raw_p05_rate"], out["decision_rate"]) <= 0.1


@pytest.mark.slow
@pytest.mark.parametrize(("conformity", "least"), [(0.8, 0.8), (SCENARIO.config_type().conformity, 0.6)])
def test_power_with_conformity_well_above_zero(conformity, least):
    out = rates(conformity, reps=100, n=10)
    assert out["raw_p05_rate"] >= least and out["decision_rate"] >= least


_TASK = TASKS[0]
_LINE = st.one_of(
    st.tuples(st.sampled_from(["D", "P1", "P2"]),
              st.sampled_from([*_TASK.pro[:2], *_TASK.con[:2], _TASK.answers[1], "no view"])).map(": ".join),
    st.sampled_from(["and one more thing", "Moderator said: hi", "P1:tight", ""]),  # lines that continue a message
)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.lists(_LINE, max_size=3), st.sampled_from([t.id for t in TASKS[:2]]),
                          st.sampled_from(["\n\nYour turn.", "\n\nYour turn.\n\nThen vote.", "", "\n", "\n\n"])),
                max_size=8))
def test_messages_heard_is_the_decoded_transcript(steps):
    # Prompts whose transcripts grow by a message or a continued line (as in a speaking round),
    # repeat, start over, belong to another task, or end in other ways: the remembered
    # transcript never changes an answer.
    lines: list[str] = []
    for restart, more, task_id, ending in steps:
        lines = (more if restart else lines + more)
        prompt = HISTORY_HEADER + "\n".join(lines) + ending
        expected = tuple((who, len(text), _decode(task_id, text)) for who, text in transcript(prompt))
        assert messages_heard(task_id, prompt) == expected
