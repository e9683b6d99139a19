"""The original experiment's metrics on hand-built embeddings with known answers (no model needed)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as sps

from scenarios.context_corrosion.metrics import (
    COMPARED,
    best_split,
    compare_runs,
    convergence_matrix,
    corrosion_metrics,
    cosine,
    directional_convergence,
    lifecycle_entropy,
    split_entropy,
)
from simcore.analysis.stats import holm_steps

E1, E2, E3 = np.eye(3)
DIAG = (E1 + E2) / math.sqrt(2)
PEERS = ("P1", "P2", "P3")
AGENTS = ("D", *PEERS)


def vectors(rounds: int = 2) -> dict:
    """D at e1 (drifting to (e1+e3)/sqrt2 in the last round); peers move toward D."""
    v = {}
    # phase 1: P1 orthogonal to D, P2 opposite, P3 at 45 degrees
    v[("phase1", 0, "D")] = E1
    v[("phase1", 0, "P1")] = E2
    v[("phase1", 0, "P2")] = -E1
    v[("phase1", 0, "P3")] = DIAG
    for r in range(1, rounds + 1):
        v[("discussion", r, "D")] = E1 if r < rounds else (E1 + E3) / math.sqrt(2)
        v[("discussion", r, "P1")] = E1
        v[("discussion", r, "P2")] = E2
        v[("discussion", r, "P3")] = DIAG
    # final: P1 and P3 on D, P2 orthogonal
    v[("final", 0, "D")] = E1
    v[("final", 0, "P1")] = E1
    v[("final", 0, "P2")] = E2
    v[("final", 0, "P3")] = E1
    return v


def test_cosine_ignores_scale_and_handles_zero():
    assert cosine(3 * E1, 0.5 * E1) == pytest.approx(1.0)
    assert cosine(E1, E2) == 0.0
    assert cosine(E1, np.zeros(3)) == 0.0


def test_convergence_matrix_known_values():
    cm = convergence_matrix(vectors(), "D", PEERS, 2)
    assert list(cm) == ["1", "2"]
    r1 = cm["1"]
    assert r1["peer_to_dominant"] == pytest.approx({"P1": 1.0, "P2": 0.0, "P3": 1 / math.sqrt(2)})
    # pairs: P1-P2 0, P1-P3 .707, P2-P3 .707
    assert r1["peer_to_peer_avg"] == pytest.approx(2 / (3 * math.sqrt(2)))
    assert r1["dominant_drift"] == pytest.approx(1.0)
    assert cm["2"]["dominant_drift"] == pytest.approx(1 / math.sqrt(2))
    assert cm["2"]["peer_to_dominant"]["P1"] == pytest.approx(1 / math.sqrt(2))


def test_one_peer_has_no_peer_pairs():
    cm = convergence_matrix(vectors(), "D", ("P1",), 2)
    assert cm["1"]["peer_to_peer_avg"] is None


def test_directional_convergence_known_values():
    dc = directional_convergence(vectors(), "D", PEERS, 2)
    assert dc["initial_alignment"] == pytest.approx({"P1": 0.0, "P2": -1.0, "P3": 1 / math.sqrt(2)})
    assert dc["final_alignment"] == pytest.approx({"P1": 1.0, "P2": 0.0, "P3": 1.0})
    assert dc["directional_delta"] == pytest.approx({"P1": 1.0, "P2": 1.0, "P3": 1 - 1 / math.sqrt(2)})
    assert dc["avg_peer_directional_delta"] == pytest.approx((3 - 1 / math.sqrt(2)) / 3)
    assert dc["dominant_self_drift"] == pytest.approx(1 - 1 / math.sqrt(2))
    assert dc["raw_belief_shift"] == pytest.approx(
        {"D": 0.0, "P1": 1.0, "P2": 1.0, "P3": 1 - 1 / math.sqrt(2)}
    )


@pytest.mark.parametrize(
    ("points", "expected"),
    [
        ([E1] * 5, 0.0),
        ([E1] * 4 + [-E1], -(0.8 * math.log2(0.8) + 0.2 * math.log2(0.2))),
        ([E1] * 3 + [-E1] * 2, -(0.6 * math.log2(0.6) + 0.4 * math.log2(0.4))),
        ([E1, E1 * 1.0000001, -E1, -E1], 1.0),
    ],
)
def test_split_entropy_known_values(points, expected):
    assert split_entropy(np.stack(points)) == pytest.approx(expected, abs=1e-9)


def test_lifecycle_entropy_stages_and_decay():
    v = vectors()
    # Round 1: four agents on e1, one (P2) on e2 -> 4/1 split; final: 3 on e1, P2 on e2 -> 3/1
    le = lifecycle_entropy(v, AGENTS, 2)
    assert list(le) == ["phase1", "round_1", "round_2", "final"]
    assert le["final"] == pytest.approx(-(0.75 * math.log2(0.75) + 0.25 * math.log2(0.25)))
    m = corrosion_metrics(v, "D", PEERS, 2)
    s = m["metrics_summary"]
    assert s["entropy_decay_phase1_to_final"] == pytest.approx(le["phase1"] - le["final"])
    assert s["avg_peer_convergence_final_round"] == pytest.approx(
        np.mean(list(m["convergence_matrix"]["2"]["peer_to_dominant"].values()))
    )
    assert s["avg_peer_to_peer_convergence"] == m["convergence_matrix"]["2"]["peer_to_peer_avg"]
    assert set(COMPARED) <= set(s)
    assert s["directional_delta_per_peer"] == m["directional_convergence"]["directional_delta"]


def test_metrics_are_deterministic_for_a_seed():
    rng = np.random.default_rng(3)
    keys = list(vectors(3))
    v = dict(zip(keys, (rng.normal(size=16) for _ in keys)))
    a = corrosion_metrics(v, "D", PEERS, 3)
    b = corrosion_metrics(dict(reversed(list(v.items()))), "D", PEERS, 3)
    assert a == b


@settings(max_examples=30, deadline=None)
@given(st.lists(st.floats(-1, 1), min_size=24, max_size=24), st.floats(0.1, 10))
def test_directional_delta_swaps_sign_when_time_reverses(xs, scale):
    """Exchanging the phase-1 and final texts negates every directional delta,
    and scaling vectors changes nothing (cosines)."""
    arr = np.array(xs).reshape(8, 3) + 1e-3
    v = {("phase1", 0, a): arr[i] for i, a in enumerate(("D", "P1", "P2", "P3"))}
    v.update({("final", 0, a): arr[4 + i] for i, a in enumerate(("D", "P1", "P2", "P3"))})
    v.update({("discussion", 1, a): E1 for a in AGENTS})
    swapped = {("final" if k[0] == "phase1" else "phase1" if k[0] == "final" else k[0], *k[1:]): x
               for k, x in v.items()}
    scaled = {k: x * scale for k, x in v.items()}
    d = directional_convergence(v, "D", PEERS, 1)["directional_delta"]
    ds = directional_convergence(swapped, "D", PEERS, 1)["directional_delta"]
    dk = directional_convergence(scaled, "D", PEERS, 1)["directional_delta"]
    for p in PEERS:
        assert ds[p] == pytest.approx(-d[p], abs=1e-9)
        assert dk[p] == pytest.approx(d[p], abs=1e-9)


def summaries(values: dict[str, list[float]]) -> list[dict[str, float]]:
    n = len(next(iter(values.values())))
    return [{k: v[i] for k, v in values.items()} for i in range(n)]


def test_compare_runs_single_pair_gives_delta_mean():
    a = {k: 0.5 for k in COMPARED} | {"avg_peer_directional_delta": 0.124}
    b = {k: 0.25 for k in COMPARED} | {"avg_peer_directional_delta": 0.031}
    c = compare_runs(a, b)
    d = c["difference_summary"]
    assert d["statistical_mode"] == "single_trial_delta"
    assert d["avg_peer_directional_delta"] == {"delta_mean": pytest.approx(0.093)}
    assert d["entropy_decay_phase1_to_final"]["delta_mean"] == pytest.approx(0.25)
    assert c["run_A"]["avg_peer_directional_delta"] == {"mean": 0.124}
    assert d["interpretation"].startswith("+0.093 directional delta")
    assert "MOVED TOWARD" in d["interpretation"] and "suggestive" in d["interpretation"]
    assert "did NOT move" in compare_runs(b, a)["difference_summary"]["interpretation"]


def test_compare_runs_lists_use_the_paired_tests():
    rng = np.random.default_rng(0)
    a_vals = {k: list(rng.normal(0.1, 0.03, 10)) for k in COMPARED}
    b_vals = {k: list(rng.normal(0.0, 0.03, 10)) for k in COMPARED}
    # A drift is at least 0 (its declared kind, score in [0, 2]): values below it are not tested.
    a_vals["dominant_self_drift"] = list(np.abs(rng.normal(0.05, 0.03, 10)))
    b_vals["dominant_self_drift"] = list(np.abs(rng.normal(0.05, 0.03, 10)))
    c = compare_runs(summaries(a_vals), summaries(b_vals), paired=True, seed=5)
    d = c["difference_summary"]
    assert d["statistical_mode"] == "multi_trial_welch_t" and d["paired"] is True
    for k in COMPARED:
        x, y = np.array(a_vals[k]), np.array(b_vals[k])
        ref = sps.permutation_test((x, y), lambda u, v, axis: np.mean(u - v, axis=axis), vectorized=True,
                                   permutation_type="samples", n_resamples=10**6)
        pooled = math.sqrt((x.var(ddof=1) * 9 + y.var(ddof=1) * 9) / 18)
        e = d[k]
        assert e["delta_mean"] == pytest.approx(x.mean() - y.mean())
        assert e["test"] == "exact sign-flip" and e["p_value"] == pytest.approx(ref.pvalue)
        assert e["t_statistic"] is None  # the seed's field: no t for an exact test
        assert e["significant_p05"] == (e["p_value"] < 0.05)
        assert e["cohen_d"] == pytest.approx((x.mean() - y.mean()) / pooled)
        assert e["p_adjusted"] >= e["p_value"] and e["family"] == f"Holm across {len(COMPARED)} metrics"
        assert e["ci_low"] <= e["delta_mean"] <= e["ci_high"]
        step = holm_steps([d[m]["p_value"] for m in COMPARED])[COMPARED.index(k)]  # its Holm step's level
        assert e["ci_level"] == pytest.approx(1 - 0.05 / step.k)
        assert e["significant"] == (e["ci_low"] > 0 or e["ci_high"] < 0)
        assert c["run_A"][k]["n"] == 10 and c["run_A"][k]["mean"] == pytest.approx(x.mean())
    assert d["avg_peer_directional_delta"]["significant"] is True
    assert "confirmed corrosion" in d["interpretation"]
    # the Holm family is the compared metrics: the smallest p is multiplied by their number
    smallest = min(COMPARED, key=lambda k: d[k]["p_value"])
    assert d[smallest]["p_adjusted"] == pytest.approx(min(1.0, len(COMPARED) * d[smallest]["p_value"]))
    assert d["decision_rule"] == (f"paired test chosen by each metric's kind (named per row), Holm across "
                                  f"{len(COMPARED)} metrics, adjusted p < 0.05")


def test_compare_runs_same_distribution_is_not_confirmed():
    rng = np.random.default_rng(1)
    a = summaries({k: list(rng.normal(0, 1, 8)) for k in COMPARED})
    b = summaries({k: list(rng.normal(0, 1, 8)) for k in COMPARED})
    d = compare_runs(a, b, paired=False, seed=1)["difference_summary"]
    assert d["avg_peer_directional_delta"]["test"] == "Welch t-test" and "n_pairs" not in d["avg_peer_directional_delta"]
    assert d["avg_peer_directional_delta"]["t_statistic"] is not None
    assert d["avg_peer_directional_delta"]["significant"] is False
    assert "not confirmed" in d["interpretation"] or "did NOT move" in d["interpretation"]


def test_compare_runs_rejects_bad_input():
    one = {k: 0.0 for k in COMPARED}
    with pytest.raises(TypeError):
        compare_runs(one, [one, one])
    with pytest.raises(ValueError):
        compare_runs([one], [one])
    with pytest.raises(ValueError):
        compare_runs([one, one, one], [one, one], paired=True)


def test_missing_replies_are_left_out_not_fatal():
    """A perturbed or failed run may lack some texts: the metrics use what is there."""
    v = vectors()
    del v[("discussion", 2, "P1")]  # P1 silent in round 2
    del v[("final", 0, "P2")]  # P2 cast no vote
    del v[("discussion", 1, "D")]  # D silent in round 1
    m = corrosion_metrics(v, "D", PEERS, 2)
    cm, dc = m["convergence_matrix"], m["directional_convergence"]
    assert cm["1"]["peer_to_dominant"] == {} and cm["1"]["dominant_drift"] is None
    assert set(cm["2"]["peer_to_dominant"]) == {"P2", "P3"}
    assert set(dc["directional_delta"]) == {"P1", "P3"} and dc["dominant_self_drift"] is None
    assert set(dc["raw_belief_shift"]) == {"D", "P1", "P3"}
    assert m["metrics_summary"]["avg_peer_directional_delta"] == pytest.approx((1 + 1 - 1 / math.sqrt(2)) / 2)
    only_d = {k: x for k, x in v.items() if k[2] == "D"}
    le = lifecycle_entropy(only_d, AGENTS, 2)
    assert le["phase1"] is None and corrosion_metrics(only_d, "D", PEERS, 2)["metrics_summary"][
        "entropy_decay_phase1_to_final"] is None


def test_diversity_is_the_mean_pairwise_cosine_distance_per_stage():
    from scenarios.context_corrosion.metrics import lifecycle_diversity

    e1, e2 = np.array([1.0, 0.0]), np.array([0.0, 1.0])
    vec = {("phase1", 0, "D"): e1, ("phase1", 0, "P1"): e2, ("phase1", 0, "P2"): e1,
           ("discussion", 1, "D"): e1, ("final", 0, "D"): e1, ("final", 0, "P1"): e1}
    ld = lifecycle_diversity(vec, ["D", "P1", "P2"], 1)
    assert ld["phase1"] == pytest.approx((1 + 0 + 1) / 3)  # pairs D-P1, D-P2, P1-P2
    assert ld["round_1"] is None  # one agent spoke: no pairs
    assert ld["final"] == pytest.approx(0.0)  # P2 unreadable there: left out


# -- the exact k=2 split -----------------------------------------------------------------


def _sum_of_squares(points: np.ndarray, mask: np.ndarray) -> float:
    return sum(float(((c - c.mean(axis=0)) ** 2).sum()) for c in (points[mask], points[~mask]))


@settings(max_examples=60, deadline=None)
@given(n=st.integers(2, 9), dim=st.integers(1, 6), seed=st.integers(0, 2**32 - 1))
def test_best_split_is_the_least_sum_of_squares_of_all_splits(n, dim, seed):
    points = np.random.default_rng(seed).normal(size=(n, dim))
    mask = best_split(points)
    assert 0 < mask.sum() < n
    every = [np.array([(i >> j) & 1 for j in range(n)], dtype=bool) for i in range(1, 2 ** n - 1)]
    assert _sum_of_squares(points, mask) <= min(_sum_of_squares(points, m) for m in every) + 1e-9


def test_best_split_is_never_worse_than_kmeans_and_sometimes_better():
    """scikit-learn's KMeans (10 k-means++ starts) approximates the same split, and misses it at times."""
    from sklearn.cluster import KMeans
    from threadpoolctl import threadpool_limits

    rng = np.random.default_rng(3)
    better = 0
    # One OpenMP thread: on five points the pool's threads only spin (13x the CPU for the same labels).
    with threadpool_limits(limits=1, user_api="openmp"):
        for i in range(300):
            points = rng.normal(size=(5, 24)) + rng.normal(size=24) * 0.5
            ours = _sum_of_squares(points, best_split(points))
            labels = KMeans(n_clusters=2, n_init=10, random_state=i).fit_predict(points).astype(bool)
            theirs = _sum_of_squares(points, labels)
            assert ours <= theirs + 1e-9
            better += ours < theirs - 1e-9
    assert better > 0


def test_best_split_refuses_what_it_cannot_enumerate():
    with pytest.raises(ValueError, match=r"^points: an exact split needs 2 to 20 points, got 21$"):
        best_split(np.zeros((21, 3)))
