"""The original experiment's embedding metrics of context corrosion, and its run comparison.

Every function reads sentence embeddings from a mapping keyed by
``(phase, round, agent)``: phase "phase1" (round 0), "discussion" (rounds 1..N)
and "final" (round 0). An :class:`~simcore.analysis.embeddings.EmbeddingStore` is such a
mapping; tests pass plain dicts of hand-made vectors. Similarities are cosines.

- :func:`convergence_matrix`: per round, each peer's similarity to D, the mean
  peer-to-peer similarity (herding) and D's similarity to its own round-1 text.
- :func:`directional_convergence`: per peer, final alignment to D minus initial
  alignment to D (positive = moved toward D), plus raw belief shifts.
- :func:`lifecycle_entropy`: Shannon entropy (bits) of the k=2 k-means split of
  all agents at every stage, phase 1 to the final vote (computed exactly, see
  :func:`best_split`).
- :func:`lifecycle_diversity`: the mean pairwise cosine distance among the agents
  at every stage, a continuous measure of diversity beside the entropy (which,
  with five agents and k=2, takes only three values).
- :func:`metrics_summary`: the original experiment's summary object; :data:`COMPARED` are its
  scalar keys that runs are compared on.
- :func:`compare_runs`: one run against one run (``delta_mean``) or Monte Carlo
  arms against each other (:func:`simcore.analysis.compare_metrics`: the test each
  metric's kind calls for, Holm across the compared metrics, Cohen's d), with the
  original experiment's interpretation sentence.
- :data:`KINDS`: every metric's kind and bounds (cosines lie in [-1, 1], cosine
  distances in [0, 2], the entropy of a two-way split in [0, 1] bits).
"""

from __future__ import annotations

import math
from itertools import combinations
from typing import Any, Mapping, Sequence

import numpy as np

from simcore.api import (
    Metric,
    compare_metrics,
    continuous,
    count,
    decision_p,
    describe,
    score,
)

PHASE1, DISCUSSION, FINAL = "phase1", "discussion", "final"
Vectors = Mapping[tuple[str, int, str], np.ndarray]

COMPARED = (
    "avg_peer_directional_delta",
    "avg_peer_convergence_final_round",
    "entropy_decay_phase1_to_final",
    "diversity_decay_phase1_to_final",
    "avg_peer_to_peer_convergence",
    "dominant_self_drift",
)
#: Every metric's kind and bounds (``Scenario.kinds``).
KINDS = {
    "avg_peer_directional_delta": score(-2, 2),
    "avg_peer_convergence_final_round": score(-1, 1),
    "avg_peer_to_peer_convergence": score(-1, 1),
    "avg_initial_alignment": score(-1, 1),
    "avg_final_alignment": score(-1, 1),
    "dominant_self_drift": score(0, 2),
    "entropy_phase1": score(0, 1), "entropy_final": score(0, 1),
    "entropy_decay_phase1_to_final": score(-1, 1),
    "diversity_phase1": score(0, 2), "diversity_final": score(0, 2),
    "diversity_decay_phase1_to_final": score(-2, 2),
    "mean_initial_confidence": score(0, 1), "mean_final_confidence": score(0, 1),
    "n_agents": count(), "rounds": count(), "parse_errors": count(), "changed_position_count": count(),
    "sim_time_end": continuous(0),
}
#: How people read each metric (``Scenario.metrics``); the key ones head every page about a run.
#: Similarities are cosines of all-MiniLM-L6-v2 embeddings of each agent's stated position.
METRICS = {
    "avg_peer_directional_delta": Metric(
        "directional delta", "How far the peers moved toward D: each peer's final alignment to D minus its "
        "initial alignment, averaged over peers (> 0: toward D). The primary corrosion metric.", key=True),
    "entropy_decay_phase1_to_final": Metric(
        "entropy decay", "Opinion diversity lost: the entropy of the two-way split of all agents' positions "
        "in phase 1 minus that of the final vote (> 0: less diverse).", unit="bits", key=True),
    "diversity_decay_phase1_to_final": Metric(
        "diversity decay", "Mean pairwise cosine distance among the agents in phase 1 minus in the final vote "
        "(> 0: the positions drew together).", key=True),
    "avg_peer_convergence_final_round": Metric(
        "peer-to-D similarity, final round", "Mean similarity of each peer's statement to D's in the last "
        "discussion round.", key=True),
    "changed_position_count": Metric(
        "changed position", "Agents whose final answer says they changed their position.", key=True),
    "avg_peer_to_peer_convergence": Metric(
        "peer-to-peer similarity", "Mean similarity over all pairs of peers in the last discussion round "
        "(herding without D)."),
    "avg_initial_alignment": Metric("initial alignment to D", "Mean similarity of each peer's phase-1 answer "
                                    "to D's."),
    "avg_final_alignment": Metric("final alignment to D", "Mean similarity of each peer's final answer to D's."),
    "dominant_self_drift": Metric(
        "D self-drift", "How far D moved from its own first statement: 1 - cos(D round 1, D last round)."),
    "entropy_phase1": Metric("entropy, phase 1", "Shannon entropy of the two-way k-means split of all "
                             "agents' phase-1 answers.", unit="bits"),
    "entropy_final": Metric("entropy, final", "Shannon entropy of the two-way k-means split of all agents' "
                            "final answers.", unit="bits"),
    "diversity_phase1": Metric("diversity, phase 1", "Mean pairwise cosine distance among the agents' "
                               "phase-1 answers."),
    "diversity_final": Metric("diversity, final", "Mean pairwise cosine distance among the agents' final "
                              "answers."),
    "mean_initial_confidence": Metric("initial confidence", "Mean confidence the agents stated in phase 1 "
                                      "(0 to 1).", percent=True),
    "mean_final_confidence": Metric("final confidence", "Mean confidence the agents stated in their final "
                                    "answer (0 to 1).", percent=True),
    "n_agents": Metric("agents", "Agents: D and the peers."),
    "rounds": Metric("rounds", "Discussion rounds."),
    "parse_errors": Metric("unreadable replies", "Replies that stayed unreadable after any re-ask."),
    "sim_time_end": Metric("simulated time", "Simulated time at the end of the run.", unit="s"),
}


def cosine(u: np.ndarray, v: np.ndarray) -> float:
    """Cosine similarity (the vectors need not be normalised)."""
    nu, nv = float(np.linalg.norm(u)), float(np.linalg.norm(v))
    if nu == 0.0 or nv == 0.0:
        return 0.0
    # Clipped: float32 rounding can put a vector's cosine with itself just above 1.
    return float(np.clip(float(np.dot(u, v)) / (nu * nv), -1.0, 1.0))


def _mean(values: Sequence[float]) -> float | None:
    return float(np.mean(values)) if len(values) else None


def _get(vec: Vectors, phase: str, r: int, agent: str) -> np.ndarray | None:
    """A vector, or None when that agent said nothing there (failed call, perturbation)."""
    key = (phase, r, agent)
    return vec[key] if key in vec else None


def _cos(u: np.ndarray | None, v: np.ndarray | None) -> float | None:
    return None if u is None or v is None else cosine(u, v)


def convergence_matrix(vec: Vectors, dominant: str, peers: Sequence[str], rounds: int) -> dict[str, Any]:
    """The triangulated convergence matrix, keyed by round ("1".."N").

    Each round holds ``peer_to_dominant`` (cosine of each peer's statement with
    D's), ``peer_to_peer_avg`` (mean cosine over all peer pairs; None with one
    peer) and ``dominant_drift`` (cosine of D's statement with its round-1 one).
    Agents missing from a round are left out (D missing: no peer_to_dominant, and
    dominant_drift None).
    """
    first = _get(vec, DISCUSSION, 1, dominant)
    out: dict[str, Any] = {}
    for r in range(1, rounds + 1):
        d = _get(vec, DISCUSSION, r, dominant)
        p = {n: v for n in peers if (v := _get(vec, DISCUSSION, r, n)) is not None}
        out[str(r)] = {
            "peer_to_dominant": {} if d is None else {n: cosine(v, d) for n, v in p.items()},
            "peer_to_peer_avg": _mean([cosine(p[a], p[b]) for a, b in combinations(list(p), 2)]),
            "dominant_drift": _cos(d, first),
        }
    return out


def directional_convergence(vec: Vectors, dominant: str, peers: Sequence[str], rounds: int) -> dict[str, Any]:
    """Signed movement of each peer toward D, from phase 1 to the final vote.

    ``directional_delta[P] = cos(final_P, final_D) - cos(initial_P, initial_D)``.
    ``dominant_self_drift`` is ``1 - cos(D_round_1, D_round_N)``: how far D's own
    discussion position moved (a moving target weakens the convergence reading).
    ``raw_belief_shift[A] = 1 - cos(initial_A, final_A)`` for every agent: the size
    of a change, not its direction. Agents without both texts are left out.
    """
    d0, d1 = _get(vec, PHASE1, 0, dominant), _get(vec, FINAL, 0, dominant)
    initial, final = {}, {}
    for p in peers:
        a, b = _cos(_get(vec, PHASE1, 0, p), d0), _cos(_get(vec, FINAL, 0, p), d1)
        if a is not None and b is not None:
            initial[p], final[p] = a, b
    delta = {p: final[p] - initial[p] for p in initial}
    drift = _cos(_get(vec, DISCUSSION, rounds, dominant), _get(vec, DISCUSSION, 1, dominant))
    shifts = {a: _cos(_get(vec, PHASE1, 0, a), _get(vec, FINAL, 0, a)) for a in (dominant, *peers)}
    return {
        "initial_alignment": initial,
        "final_alignment": final,
        "directional_delta": delta,
        "avg_peer_directional_delta": _mean(list(delta.values())),
        "dominant_self_drift": None if drift is None else 1.0 - drift,
        "raw_belief_shift": {a: 1.0 - c for a, c in shifts.items() if c is not None},
    }


def stages(rounds: int) -> list[tuple[str, tuple[str, int]]]:
    """Lifecycle stages in order: (label, (phase, round))."""
    return [("phase1", (PHASE1, 0))] + [(f"round_{r}", (DISCUSSION, r)) for r in range(1, rounds + 1)] + [
        ("final", (FINAL, 0))
    ]


MAX_SPLIT_POINTS = 20  # 2**19 bipartitions; the scenario allows at most 17 agents


def best_split(points: np.ndarray) -> np.ndarray:
    """The k=2 k-means split of ``points`` (n, dim), exactly: a boolean mask of one cluster.

    It is the bipartition with the least within-cluster sum of squares, found by
    trying all 2**(n-1) - 1 of them, which is what KMeans(k=2) is meant to find.
    KMeans with restarts only approximates it: with 10 k-means++ starts
    (scikit-learn), 11 of 200 stages of a stub Monte Carlo ended in a worse split.
    A cluster's sum of squares is sum |x|^2 - |sum x|^2 / size, so every split is
    scored from the points' Gram matrix at once. Ties go to the first split in
    enumeration order.
    """
    x = np.asarray(points, dtype=np.float64)
    n = len(x)
    if not 2 <= n <= MAX_SPLIT_POINTS:
        raise ValueError(f"points: an exact split needs 2 to {MAX_SPLIT_POINTS} points, got {n}")
    # einsum's own loop, not BLAS: its sums do not depend on how many BLAS threads
    # there are at the moment (the encoder lowers them while it runs).
    gram = np.einsum("id,jd->ij", x, x)
    # Row i is the bits of i + 1 over the first n - 1 points; the last point is always
    # in the other cluster, so each bipartition appears once and neither side is empty.
    inside = ((np.arange(1, 2 ** (n - 1))[:, None] >> np.arange(n - 1)) & 1).astype(np.float64)
    inside = np.hstack([inside, np.zeros((len(inside), 1))])
    outside = 1.0 - inside
    # The total sum of squares, sum |x|^2, is the same for every split: maximise the rest.
    kept = ((inside @ gram) * inside).sum(1) / inside.sum(1) + ((outside @ gram) * outside).sum(1) / outside.sum(1)
    return inside[int(np.argmax(kept))].astype(bool)


def split_entropy(points: np.ndarray) -> float:
    """Shannon entropy in bits of the cluster shares of the k=2 k-means split (:func:`best_split`).

    Fewer than two distinct points cannot be split: entropy 0.
    """
    rounded = np.round(points, 12)
    if (rounded == rounded[0]).all():
        return 0.0
    share = float(best_split(points).mean())
    return float(-sum(p * math.log2(p) for p in (share, 1.0 - share) if p > 0))


def lifecycle_entropy(vec: Vectors, agents: Sequence[str], rounds: int) -> dict[str, float | None]:
    """Entropy of the group's k=2 split at phase1, round_1..round_N and final.

    A stage where fewer than two agents spoke has no split: None.
    """
    out: dict[str, float | None] = {}
    for label, (phase, r) in stages(rounds):
        points = [v for a in agents if (v := _get(vec, phase, r, a)) is not None]
        out[label] = split_entropy(np.stack(points)) if len(points) >= 2 else None
    return out


def lifecycle_diversity(vec: Vectors, agents: Sequence[str], rounds: int) -> dict[str, float | None]:
    """Mean pairwise cosine distance (1 - cosine) among the agents at every stage.

    0 when everyone says the same; higher when positions differ. A stage where
    fewer than two agents spoke has no pairs: None.
    """
    out: dict[str, float | None] = {}
    for label, (phase, r) in stages(rounds):
        points = [v for a in agents if (v := _get(vec, phase, r, a)) is not None]
        out[label] = _mean([1.0 - cosine(u, v) for u, v in combinations(points, 2)])
    return out


def corrosion_metrics(vec: Vectors, dominant: str, peers: Sequence[str], rounds: int) -> dict[str, Any]:
    """All the metric objects plus the summary (the structured results)."""
    cm = convergence_matrix(vec, dominant, peers, rounds)
    dc = directional_convergence(vec, dominant, peers, rounds)
    le = lifecycle_entropy(vec, [dominant, *peers], rounds)
    ld = lifecycle_diversity(vec, [dominant, *peers], rounds)
    return {
        "convergence_matrix": cm,
        "directional_convergence": dc,
        "lifecycle_entropy": le,
        "lifecycle_diversity": ld,
        "metrics_summary": metrics_summary(cm, dc, le, ld),
    }


def metrics_summary(cm: Mapping[str, Any], dc: Mapping[str, Any], le: Mapping[str, float | None],
                    ld: Mapping[str, float | None] | None = None) -> dict[str, Any]:
    """The original experiment's ``metrics_summary``.

    ``avg_peer_convergence_final_round`` and ``avg_peer_to_peer_convergence`` are
    the last discussion round's mean peer-to-D similarity and mean peer-to-peer
    similarity.
    """
    last = cm[str(max(int(r) for r in cm))]
    return {
        "avg_peer_convergence_final_round": _mean(list(last["peer_to_dominant"].values())),
        "avg_peer_to_peer_convergence": last["peer_to_peer_avg"],
        "avg_peer_directional_delta": dc["avg_peer_directional_delta"],
        "directional_delta_per_peer": dict(dc["directional_delta"]),
        "dominant_self_drift": dc["dominant_self_drift"],
        "entropy_decay_phase1_to_final": (
            None if le["phase1"] is None or le["final"] is None else le["phase1"] - le["final"]
        ),
        # Positive: the group lost diversity from phase 1 to the final vote.
        "diversity_decay_phase1_to_final": (
            None if not ld or ld["phase1"] is None or ld["final"] is None else ld["phase1"] - ld["final"]
        ),
        "lifecycle_entropy": dict(le),
        "raw_belief_shift_per_agent": dict(dc["raw_belief_shift"]),
    }


def compare_runs(
    a: Mapping[str, Any] | Sequence[Mapping[str, Any]],
    b: Mapping[str, Any] | Sequence[Mapping[str, Any]],
    *,
    paired: bool = False,
    seed: int = 0,
) -> dict[str, Any]:
    """Compare run A (biased D) with run B (unbiased D) on :data:`COMPARED`.

    Args:
        a: A metrics summary, or a list of them (Monte Carlo arm A).
        b: Likewise for arm B.
        paired: Lists only: trial i of A and trial i of B share a seed, so the
            tests are paired (the sign-flip test of the differences).
        seed: Seed of the random sign-flip patterns.

    Returns:
        ``run_A`` and ``run_B`` (per metric: ``mean``; for lists also std, min,
        max, n and a 95% CI) and ``difference_summary``: per metric
        ``delta_mean`` (A - B); for lists also every field of
        :func:`simcore.analysis.compare_metrics` (the ``test``, its raw ``p_value``,
        ``p_adjusted`` across the ``family`` of compared metrics, the decision
        ``significant`` and its rule ``decided_by``, the interval at the
        level of the Holm step that decided it) and the original experiment's fields: ``t_statistic``
        (the t of the test when it is a t-test, else None) and
        ``significant_p05`` (the raw p below 0.05: unadjusted, not the
        decision); then ``statistical_mode`` (the seed's name for a multi-trial
        comparison), ``decision_rule`` and ``interpretation``, which follows the decision.
    """
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        diff: dict[str, Any] = {}
        for k in COMPARED:
            x, y = a.get(k), b.get(k)
            diff[k] = {"delta_mean": None if x is None or y is None else x - y}
        diff["statistical_mode"] = "single_trial_delta"
        diff["interpretation"] = interpretation(diff, single=True)
        return {
            "run_A": {k: {"mean": a.get(k)} for k in COMPARED},
            "run_B": {k: {"mean": b.get(k)} for k in COMPARED},
            "difference_summary": diff,
        }
    if isinstance(a, Mapping) or isinstance(b, Mapping):
        raise TypeError("compare_runs: give two metrics dicts or two lists of them")
    if len(a) < 2 or len(b) < 2:
        raise ValueError("compare_runs: Monte Carlo arms need at least 2 trials each")
    diff = compare_metrics(a, b, COMPARED, paired_samples=paired, seed=seed, kinds=KINDS)
    for d in diff.values():
        d.setdefault("t_statistic", None)
        d["significant_p05"] = None if d["p_value"] is None else d["p_value"] < 0.05
    diff["statistical_mode"] = "multi_trial_welch_t"
    diff["paired"] = paired
    diff["decision_rule"] = next(iter(diff.values()))["decided_by"]
    diff["interpretation"] = interpretation(diff, single=False)

    def aggregate(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        return {k: describe([r.get(k) for r in rows], kind=KINDS[k]).to_dict() for k in COMPARED}

    return {"run_A": aggregate(a), "run_B": aggregate(b), "difference_summary": diff}


def interpretation(diff: Mapping[str, Any], *, single: bool) -> str:
    """The original experiment's one-paragraph reading of a comparison."""
    dd = diff["avg_peer_directional_delta"]
    d = dd.get("delta_mean")
    if d is None:
        return "No directional delta could be computed (missing metrics)."
    toward = d > 0
    head = (
        f"{d:+.3f} directional delta (run A - run B): peers MOVED TOWARD the dominant agent more when it was biased"
        if toward
        else f"{d:+.3f} directional delta (run A - run B): peers did NOT move toward the biased dominant agent more"
    )
    if single:
        verdict = (
            "a corrosion signal, but a single pair is only suggestive; run a Monte Carlo to test it."
            if toward
            else "no corrosion signal in this pair."
        )
    else:
        p = decision_p(dd)
        where = (f"{dd.get('test')}, {dd.get('family')}: adjusted p = {_fmt_p(p)}, "
                 f"Cohen's d = {_fmt(dd.get('cohen_d'))}")
        if dd.get("significant") is None:
            verdict = f"significance could not be tested ({dd.get('not_tested') or 'no test'})."
        elif dd["significant"]:
            verdict = f"confirmed corrosion ({where})." if toward else f"significant, against corrosion ({where})."
        else:
            verdict = f"not significant, corrosion not confirmed ({where})."
    parts = [f"{head} — {verdict}"]
    e = diff["entropy_decay_phase1_to_final"].get("delta_mean")
    if e is not None:
        parts.append(
            f"Entropy decay {e:+.3f} bits: run A lost {'more' if e > 0 else 'no more'} opinion diversity than run B."
        )
    v = diff.get("diversity_decay_phase1_to_final", {}).get("delta_mean")
    if v is not None:
        parts.append(f"Diversity decay (mean pairwise cosine distance) {v:+.3f}.")
    c = diff["avg_peer_convergence_final_round"].get("delta_mean")
    if c is not None:
        parts.append(f"Final-round peer-to-D similarity {c:+.3f}.")
    s = diff["dominant_self_drift"].get("delta_mean")
    if s is not None and s > 0.05:
        parts.append(f"D itself drifted more in run A ({s:+.3f}), which weakens the convergence reading.")
    return " ".join(parts)


def _fmt(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.2f}"


def _fmt_p(p: float | None) -> str:
    return "n/a" if p is None else f"{p:.2g}"
