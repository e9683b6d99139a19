"""Analysis of an acausal-cooperation run: the seed's indicators, plots and files.

Indicators (all computed from ``world.state["rounds"]``):

- **identity_reasoning_frequency**: share of strategy replies whose full text
  contains an identity keyword (:data:`IDENTITY_KEYWORDS`, the seed's list).
- **surprise_at_defection**: share of strategy replies from round 2 on that
  contain a surprise keyword (:data:`SURPRISE_KEYWORDS`).
- **cooperation per round**: ``cooperation_rate`` (share of COOPERATE moves),
  ``mutual_cooperation_rate`` (share of games CC) and ``any_cooperation_rate``
  (share of games with at least one C).

Every cooperation figure counts *chosen* moves only: a move played by fallback
(its decision reply was unreadable, see ``on_unparsed``) is no choice of the
agent's, so it is left out and counted beside the figure (``fallback_moves``);
game-level rates use the games whose two moves were both chosen. The strategy
figures (identity reasoning, surprise, similarity) use readable strategy replies
only. ``basis`` in the results says what each metric rests on (see
:mod:`simcore.analysis.basis`).
- **convergence** (the seed's rule, on the mutual-cooperation trend): with more
  than 3 rounds, converged when the last 3 rounds span less than 0.1; then
  ``convergence_round`` = the first of those 3, else the number of rounds.
- **superrationality_score** = 0.4 * identity frequency + 0.4 * final-round
  mutual cooperation + 0.2 * (R - convergence_round) / R if converged, capped at
  1 (the seed's weights; the seed's constant 10 is the number of rounds R).
- **strategy similarity**: mean pairwise cosine of the MiniLM embeddings of one
  round's strategy texts (None with ``--no-embeddings`` or fewer than 2 LLM
  players); ``strategy_convergence`` is the final round's value.
- **cooperation despite power asymmetry**: share of COOPERATE among moves made in
  games whose powers differed by more than 30% (max/min > 1.3);
  ``cooperation_symmetric`` is the same share in the other games. With power
  scaling off, players never see powers, so the pair serves as a placebo.
- **defection triggers**: for every defection, whether the opponent defected in
  the pair's previous game ("Previous defection"), whether powers differed by
  more than 30% ("Power asymmetry > 30%"), or whether it was the pair's first game
  ("First game against opponent"); with the defection rate when each is present
  and absent (their difference is the ``lift``). Triggers with a lift of at
  least 0.1 are listed.
- **cooperation clusters**: connected groups of players whose games together
  were mutual cooperation at least half of the time.
"""

from __future__ import annotations

import io
import re
from collections import Counter
from pathlib import Path
from typing import Any, Sequence

import networkx as nx
import numpy as np

from scenarios.acausal_cooperation.config import AcausalConfig
from scenarios.acausal_cooperation.experiment import round_scores
from scenarios.acausal_cooperation.game import COOPERATE, DEFECT
from simcore.api import (
    Metric,
    World,
    atomic_write,
    basis,
    encode,
    generic_compare,
    run_plots_wanted,
    shown,
    write_json,
)
from simcore.api import continuous as continuous_kind
from simcore.api import count as count_kind
from simcore.api import proportion as proportion_kind
from simcore.api import score as score_kind

IDENTITY_KEYWORDS = (
    "identical", "same agent", "same model", "logical correlation", "acausal", "superrational",
)
SURPRISE_KEYWORDS = ("surpris", "unexpected", "betray")
ASYMMETRY = 1.3
TRIGGERS = ("Previous defection", "Power asymmetry > 30%", "First game against opponent")


def has_keyword(text: str, keywords: Sequence[str]) -> bool:
    """Whether ``text`` contains any of ``keywords`` (case-insensitive)."""
    low = text.lower()
    return any(k in low for k in keywords)


def convergence(trend: Sequence[float]) -> tuple[bool, int]:
    """The seed's rule: (converged, convergence_round) for a per-round trend."""
    if len(trend) > 3 and max(trend[-3:]) - min(trend[-3:]) < 0.1:
        return True, len(trend) - 2
    return False, len(trend)


def superrationality_score(identity: float, final_coop: float, converged: bool, conv_round: int, rounds: int) -> float:
    """0.4 identity + 0.4 final mutual cooperation + 0.2 early convergence, capped at 1."""
    score = 0.4 * identity + 0.4 * final_coop
    if converged:
        score += 0.2 * (rounds - conv_round) / rounds
    return min(score, 1.0)


def mean_pairwise_cosine(vectors: np.ndarray) -> float | None:
    """Mean cosine over all pairs of rows (None for fewer than 2 rows)."""
    if len(vectors) < 2:
        return None
    v = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    # Clipped: float32 rounding puts the cosine of identical texts just above 1.
    sims = np.clip(v @ v.T, -1.0, 1.0)
    iu = np.triu_indices(len(v), k=1)
    return float(sims[iu].mean())


def strategy_similarity(rounds: Sequence[dict[str, Any]]) -> list[float | None]:
    """Per round, the mean pairwise cosine of the readable strategy texts' embeddings."""
    readable = [[s for s in rec["strategies"] if not s["parse_error"]] for rec in rounds]
    texts = [s["strategy_text"] for rs in readable for s in rs]
    vecs = encode(texts) if texts else np.zeros((0, 1))
    out, k = [], 0
    for rs in readable:
        m = len(rs)
        out.append(mean_pairwise_cosine(vecs[k : k + m]))
        k += m
    return out


def chosen(game: dict[str, Any], side: int) -> bool:
    """Whether a player's move in a game was its own (not a fallback for an unreadable reply)."""
    return game[f"player{side}_parse"] != "fallback"


def both_chosen(games: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The games whose two moves were both chosen."""
    return [g for g in games if chosen(g, 1) and chosen(g, 2)]


def _decisions(games: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every chosen move, from the mover's side, with the pair's previous game (chronological).

    The previous game is the one as played, fallback moves included: it is what
    the mover saw.
    """
    last: dict[tuple[int, int], str] = {}
    out = []
    for g in games:
        p1, p2 = g["player1_power_before"], g["player2_power_before"]
        asym = max(p1, p2) / min(p1, p2) > ASYMMETRY
        for side, me, opp, a in ((1, g["player1_id"], g["player2_id"], g["player1_action"]),
                                 (2, g["player2_id"], g["player1_id"], g["player2_action"])):
            if chosen(g, side):
                out.append({"me": me, "action": a, "opp_last": last.get((me, opp)), "asymmetric": asym})
        last[(g["player1_id"], g["player2_id"])] = g["player2_action"]
        last[(g["player2_id"], g["player1_id"])] = g["player1_action"]
    return out


def defection_triggers(decisions: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """For each trigger: its share of all defections and the defection rate with and without it."""
    tests = {
        TRIGGERS[0]: lambda d: d["opp_last"] == DEFECT,
        TRIGGERS[1]: lambda d: d["asymmetric"],
        TRIGGERS[2]: lambda d: d["opp_last"] is None,
    }
    defections = [d for d in decisions if d["action"] == DEFECT]
    table = []
    for name, test in tests.items():
        present = [d for d in decisions if test(d)]
        absent = [d for d in decisions if not test(d)]

        def rate(ds: list[dict[str, Any]]) -> float | None:
            return sum(d["action"] == DEFECT for d in ds) / len(ds) if ds else None

        with_it, without = rate(present), rate(absent)
        table.append({
            "trigger": name,
            "share_of_defections": sum(test(d) for d in defections) / len(defections) if defections else None,
            "defection_rate_when_present": with_it,
            "defection_rate_when_absent": without,
            "lift": None if with_it is None or without is None else with_it - without,
            "n_present": len(present),
        })
    return table


def cooperation_clusters(n: int, games: Sequence[dict[str, Any]], threshold: float = 0.5) -> list[list[int]]:
    """Groups of players linked by pairs whose games were mostly mutual cooperation."""
    per_pair: dict[tuple[int, int], list[bool]] = {}
    for g in games:
        key = (min(g["player1_id"], g["player2_id"]), max(g["player1_id"], g["player2_id"]))
        per_pair.setdefault(key, []).append(g["player1_action"] == g["player2_action"] == COOPERATE)
    graph = nx.Graph()
    graph.add_nodes_from(range(n))
    graph.add_edges_from(k for k, v in sorted(per_pair.items()) if np.mean(v) >= threshold)
    return sorted((sorted(c) for c in nx.connected_components(graph) if len(c) > 1), key=lambda c: (-len(c), c))


def payoff_matrix(n: int, games: Sequence[dict[str, Any]]) -> list[list[float]]:
    """Entry [i][j]: i's total payoff in its games against j."""
    m = np.zeros((n, n))
    for g in games:
        m[g["player1_id"], g["player2_id"]] += g["player1_payoff"]
        m[g["player2_id"], g["player1_id"]] += g["player2_payoff"]
    return m.tolist()


def _insights(strategies: Sequence[dict[str, Any]], limit: int = 20) -> list[dict[str, Any]]:
    out = []
    for s in strategies:
        for kind, keys in (("identity_recognition", IDENTITY_KEYWORDS), ("surprise_at_defection", SURPRISE_KEYWORDS)):
            text = s["full_reasoning"]
            if kind == "surprise_at_defection" and s["round"] < 2:
                continue
            sentence = next((x.strip() for x in _sentences(text) if has_keyword(x, keys)), None)
            if sentence:
                out.append({"agent_id": s["agent_id"], "round": s["round"], "insight_type": kind, "quote": sentence})
        if len(out) >= limit:
            break
    return out[:limit]


def _sentences(text: str) -> list[str]:
    return [x for x in re.split(r"(?<=[.!?])\s+", text) if x]


def _share(flags: Sequence[bool]) -> float | None:
    return sum(flags) / len(flags) if flags else None


def analyze(world: World, cfg: AcausalConfig) -> dict[str, Any]:
    """Results object: scalar metrics plus the per-round figures and indicators."""
    rounds: list[dict[str, Any]] = world.state.get("rounds", [])
    players = world.state.get("players", [])
    n = len(players)
    games = [g for rec in rounds for g in rec["games"]]
    strategies = [s for rec in rounds for s in rec["strategies"]]
    sims = strategy_similarity(rounds) if cfg.embeddings else [None] * len(rounds)

    per_round, totals = [], np.zeros(n)
    for rec, sim in zip(rounds, sims):
        gs = rec["games"]
        full = both_chosen(gs)
        moves = [d["action"] for d in _decisions(gs)]
        scores = round_scores(n, gs)
        totals += scores
        powers = np.array(rec.get("powers_final", rec["powers_initial"]))
        per_round.append({
            "round": rec["round"],
            "games": len(gs),
            "cooperation_rate": _share([a == COOPERATE for a in moves]),
            "mutual_cooperation_rate": _share([g["player1_action"] == g["player2_action"] == COOPERATE for g in full]),
            "any_cooperation_rate": _share([COOPERATE in (g["player1_action"], g["player2_action"]) for g in full]),
            "fallback_moves": sum(not chosen(g, k) for g in gs for k in (1, 2)),
            "games_both_chosen": len(full),
            "average_score": float(np.mean(scores)) if n else None,
            "score_variance": float(np.var(scores)) if n else None,
            "power_distribution": {
                "mean": float(powers.mean()), "std": float(powers.std()),
                "min": float(powers.min()), "max": float(powers.max()),
            },
            "strategy_similarity": sim,
        })
    complete = [r for r in per_round if r["games"]]
    trend = [r["mutual_cooperation_rate"] for r in complete if r["mutual_cooperation_rate"] is not None]
    converged, conv_round = convergence(trend)
    final_coop = complete[-1]["mutual_cooperation_rate"] if complete else None
    readable = [s for s in strategies if not s["parse_error"]]
    later = [s for s in readable if s["round"] >= 2]
    identity = _share([has_keyword(s["full_reasoning"], IDENTITY_KEYWORDS) for s in readable])
    surprise = _share([has_keyword(s["full_reasoning"], SURPRISE_KEYWORDS) for s in later])
    score = (
        None if final_coop is None
        else superrationality_score(identity or 0.0, final_coop, converged, conv_round, max(len(trend), 1))
    )

    decisions = _decisions(games)
    n_moves = 2 * len(games)
    full_games = both_chosen(games)
    fallback = n_moves - len(decisions)
    asym = [d["action"] == COOPERATE for d in decisions if d["asymmetric"]]
    sym = [d["action"] == COOPERATE for d in decisions if not d["asymmetric"]]
    table = defection_triggers(decisions)
    triggers = [t["trigger"] for t in sorted(table, key=lambda t: -(t["lift"] or 0)) if (t["lift"] or 0) >= 0.1]
    final_texts = Counter(s["strategy_text"] for s in rounds[-1]["strategies"] if not s["parse_error"]) if rounds else Counter()
    dominant = final_texts.most_common(1)[0] if final_texts else None
    llm_sims = [s for s in sims if s is not None]
    reads = Counter(g[k] for g in games for k in ("player1_parse", "player2_parse"))
    all_moves = [d["action"] == COOPERATE for d in decisions]

    indicators = {
        "identity_reasoning_frequency": identity,
        "cooperation_despite_asymmetry": _share(asym),
        "surprise_at_defection": surprise,
        "strategy_convergence": sims[-1] if sims else None,
        "final_cooperation_rate": final_coop,
        "convergence_round": conv_round,
        "overall_score": score,
    }
    metrics = {
        "n_players": n,
        "n_llm": cfg.n_agents,
        "n_scripted": len(cfg.scripts),
        "rounds": len(complete),
        "games": len(games),
        "cooperation_rate": _share(all_moves),
        "fallback_moves": fallback,
        "mutual_cooperation_rate": _share([g["player1_action"] == g["player2_action"] == COOPERATE for g in full_games]),
        "first_round_cooperation_rate": complete[0]["cooperation_rate"] if complete else None,
        "final_round_cooperation_rate": complete[-1]["cooperation_rate"] if complete else None,
        "final_cooperation_rate": final_coop,
        "converged": converged,
        "convergence_round": conv_round,
        "identity_reasoning_frequency": identity,
        "surprise_at_defection": surprise,
        "superrationality_score": score,
        "strategy_similarity_mean": float(np.mean(llm_sims)) if llm_sims else None,
        "strategy_similarity_final": sims[-1] if sims else None,
        "cooperation_despite_asymmetry": _share(asym),
        "cooperation_symmetric": _share(sym),
        "mean_score": float(np.mean(totals)) if n else None,
        "score_std": float(np.std(totals)) if n else None,
        "decision_parse_errors": reads.get("fallback", 0),
        "decision_prose_reads": reads.get("prose", 0) + reads.get("label", 0),
        "strategy_parse_errors": len(strategies) - len(readable),
        "sim_time_end": world.now,
    }
    fell = f"{fallback} fallback moves (unreadable decisions) left out"
    by_game = f"{len(games) - len(full_games)} games with a fallback move left out"
    last_games = rounds[-1]["games"] if rounds else []
    last_strats = rounds[-1]["strategies"] if rounds else []
    moves_basis = basis(len(decisions), n_moves, "moves", fell)
    bases = {
        "cooperation_rate": moves_basis,
        "mutual_cooperation_rate": basis(len(full_games), len(games), "games", by_game),
        "final_cooperation_rate": basis(len(both_chosen(last_games)), len(last_games), "games"),
        "first_round_cooperation_rate": basis(
            len(_decisions(rounds[0]["games"])) if rounds else 0, 2 * len(rounds[0]["games"]) if rounds else 0, "moves"
        ),
        "final_round_cooperation_rate": basis(len(_decisions(last_games)), 2 * len(last_games), "moves"),
        "cooperation_despite_asymmetry": moves_basis,
        "cooperation_symmetric": moves_basis,
        "identity_reasoning_frequency": basis(len(readable), len(strategies), "strategies"),
        "surprise_at_defection": basis(len(later), sum(s["round"] >= 2 for s in strategies), "strategies"),
        "strategy_similarity_mean": basis(len(readable), len(strategies), "strategies"),
        "strategy_similarity_final": basis(
            sum(not s["parse_error"] for s in last_strats), len(last_strats), "strategies"
        ),
        "superrationality_score": basis(
            len(readable) + len(both_chosen(last_games)), len(strategies) + len(last_games), "replies"
        ),
        "mean_score": basis(len(full_games), len(games), "games", f"{by_game.replace(' left out', '')} (payoffs as played)"),
    }
    return {
        "experiment_name": cfg.experiment_name,
        "identity_insight": cfg.identity_insight,
        "power_scaling": cfg.power_scaling,
        "decision_prompt": cfg.decision_prompt,
        "metrics": metrics,
        "basis": {k: b.to_dict() for k, b in bases.items()},
        "acausal_indicators": indicators,
        "cooperation_dynamics": {
            "cooperation_trend": trend,
            "action_cooperation_trend": [r["cooperation_rate"] for r in complete],
            "any_cooperation_trend": [r["any_cooperation_rate"] for r in complete],
            "final_cooperation_rate": final_coop,
            "converged": converged,
            "convergence_round": conv_round,
        },
        "pattern_analysis": {
            "rounds_to_convergence": conv_round if converged else None,
            "dominant_strategy": dominant[0] if dominant and dominant[1] > 1 else None,
            "defection_triggers": triggers,
            "defection_trigger_table": table,
            "cooperation_clusters": cooperation_clusters(n, games),
        },
        "round_stats": per_round,
        "players": players,
        "final_agent_scores": {str(i): float(s) for i, s in enumerate(totals)},
        "payoff_matrix": payoff_matrix(n, games),
    }


def condition_label(results: dict[str, Any], short: bool = False) -> str:
    """The run's condition in words; a run without LLM players has none (no prompt was read)."""
    if not results["metrics"]["n_llm"]:
        return "scripted only" if short else "no LLM players (scripted only; the insight reached no one)"
    if results["identity_insight"]:
        return "treatment" if short else "treatment (identical-copies insight)"
    return "control" if short else "control (no insight)"


def summarize(results: dict[str, Any]) -> str:
    """A few lines for the terminal; every figure says what it rests on when that is less than all."""
    m = results["metrics"]
    ind = results["acausal_indicators"]
    b = results.get("basis", {})

    def pct(key: str) -> str:
        return shown(m[key], b.get(key), ".1%")

    arm = condition_label(results)
    score = ind["overall_score"]
    return "\n".join([
        f"acausal cooperation: {arm}, status {results['status']}",
        f"  players {m['n_players']} ({m['n_llm']} LLM, {m['n_scripted']} scripted), rounds {m['rounds']}, "
        f"games {m['games']}, events {results['n_events']}",
        f"  cooperation {pct('cooperation_rate')} of chosen moves ({m['fallback_moves']} fallback moves beside), "
        f"mutual {pct('mutual_cooperation_rate')}; final round mutual {pct('final_cooperation_rate')}; "
        f"converged {m['converged']} (round {m['convergence_round']})",
        f"  identity reasoning {pct('identity_reasoning_frequency')}, superrationality score "
        f"{shown(score, b.get('superrationality_score'), '.2f')}, unreadable decisions {m['decision_parse_errors']}",
    ])


COMPARED = (
    "cooperation_rate", "mutual_cooperation_rate", "final_cooperation_rate",
    "identity_reasoning_frequency", "superrationality_score", "strategy_similarity_mean",
)
#: Every metric's kind and bounds (``Scenario.kinds``).
KINDS = {
    **dict.fromkeys((
        "cooperation_rate", "mutual_cooperation_rate", "first_round_cooperation_rate",
        "final_round_cooperation_rate", "final_cooperation_rate", "identity_reasoning_frequency",
        "surprise_at_defection", "cooperation_despite_asymmetry", "cooperation_symmetric", "converged",
    ), proportion_kind()),
    "superrationality_score": score_kind(0, 1),
    "strategy_similarity_mean": score_kind(-1, 1), "strategy_similarity_final": score_kind(-1, 1),
    **dict.fromkeys((
        "n_players", "n_llm", "n_scripted", "rounds", "games", "fallback_moves", "convergence_round",
        "decision_parse_errors", "decision_prose_reads", "strategy_parse_errors",
    ), count_kind()),
    "mean_score": continuous_kind(0), "score_std": continuous_kind(0), "sim_time_end": continuous_kind(0),
}
#: How people read each metric (``Scenario.metrics``); the key ones head every page about a run.
#: Cooperation figures count chosen moves only (a move played by fallback is left out).
METRICS = {
    "cooperation_rate": Metric("cooperation", "Share of chosen moves that were COOPERATE, over all games.",
                               percent=True, key=True),
    "mutual_cooperation_rate": Metric("mutual cooperation", "Share of games in which both players cooperated.",
                                      percent=True, key=True),
    "final_cooperation_rate": Metric("final mutual cooperation", "Share of the last round's games in which "
                                     "both players cooperated.", percent=True, key=True),
    "identity_reasoning_frequency": Metric(
        "identity reasoning", "Share of readable strategy replies that mention being identical copies (identical, "
        "same agent, same model, logical correlation, acausal, superrational).", percent=True, key=True),
    "superrationality_score": Metric(
        "superrationality score", "The seed's composite in [0, 1]: 0.4 x identity reasoning + 0.4 x final mutual "
        "cooperation + 0.2 x how early the cooperation trend converged.", key=True),
    "first_round_cooperation_rate": Metric("first-round cooperation", "Share of COOPERATE among the first "
                                           "round's chosen moves.", percent=True),
    "final_round_cooperation_rate": Metric("last-round cooperation", "Share of COOPERATE among the last "
                                           "round's chosen moves.", percent=True),
    "converged": Metric("converged", "Whether mutual cooperation settled: its last three rounds span less "
                        "than 0.1."),
    "convergence_round": Metric("convergence round", "The first of the three settled rounds, else the number "
                                "of rounds."),
    "surprise_at_defection": Metric("surprise at defection", "Share of readable strategy replies from round 2 "
                                    "on that voice surprise or betrayal.", percent=True),
    "strategy_similarity_mean": Metric("strategy similarity", "Mean pairwise cosine of the LLM players' "
                                       "strategy texts, averaged over rounds (embeddings)."),
    "strategy_similarity_final": Metric("final strategy similarity", "Mean pairwise cosine of the last "
                                        "round's strategy texts."),
    "cooperation_despite_asymmetry": Metric(
        "cooperation despite asymmetry", "Share of COOPERATE among moves in games whose players' powers "
        "differed by more than 30%.", percent=True),
    "cooperation_symmetric": Metric("cooperation, symmetric games", "Share of COOPERATE among moves in the "
                                    "other games.", percent=True),
    "mean_score": Metric("mean score", "Players' mean total payoff over the tournament."),
    "score_std": Metric("score spread", "Standard deviation of the players' total payoffs."),
    "n_players": Metric("players", "Players: LLM and scripted."),
    "n_llm": Metric("LLM players", "Players whose strategies an LLM writes."),
    "n_scripted": Metric("scripted players", "Players with a classic fixed strategy."),
    "rounds": Metric("rounds", "Rounds of the round robin played to the end."),
    "games": Metric("games", "Games played."),
    "fallback_moves": Metric("fallback moves", "Moves played by fallback because the decision reply was "
                             "unreadable; left out of every cooperation figure."),
    "decision_parse_errors": Metric("unreadable decisions", "Decision replies that could not be read."),
    "decision_prose_reads": Metric("decisions read from prose", "Decision replies read from prose or a "
                                   "label rather than JSON."),
    "strategy_parse_errors": Metric("unreadable strategies", "Strategy replies that could not be read."),
    "sim_time_end": Metric("simulated time", "Simulated time at the end of the run.", unit="s"),
}


def compare(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> dict[str, Any]:
    """Treatment (A) minus control (B) on :data:`COMPARED` (``Scenario.compare``).

    A module-level function rather than a lambda: the batch runner pickles scenarios.
    """
    return generic_compare(a, b, names=COMPARED, kinds=KINDS)


# -- files ------------------------------------------------------------------------


def write_artifacts(run_dir: Path, world: World, cfg: AcausalConfig, results: dict[str, Any]) -> dict[str, Any]:
    """The seed's files under ``rounds/`` and beside them, the report and the plots."""
    rounds: list[dict[str, Any]] = world.state.get("rounds", [])
    stats_by_round = {r["round"]: r for r in results["round_stats"]}
    for rec in rounds:
        r = rec["round"]
        write_json(run_dir / "rounds" / f"strategies_r{r}.json",
                   {"round": r, "sim_time": rec["t_start"], "strategies": rec["strategies"]})
        write_json(run_dir / "rounds" / f"games_r{r}.json", {
            "round": r, "sim_time": rec["t_start"], "games": rec["games"],
            "power_evolution": {
                "initial": {str(i): p for i, p in enumerate(rec["powers_initial"])},
                "final": {str(i): p for i, p in enumerate(rec.get("powers_final", rec["powers_initial"]))},
            },
        })
        summary = {k: v for k, v in stats_by_round[r].items() if k != "games"}
        write_json(run_dir / "rounds" / f"round_summary_r{r}.json",
                   {**summary, "anonymized_games": rec.get("anonymized_games", [])})
    usage = results.get("usage", {})
    experiment_id = results.get("run_id", "")
    write_json(run_dir / "experiment_summary.json", {
        "experiment_id": experiment_id,
        "experiment_name": cfg.experiment_name,
        "start_time": 0.0,
        "end_time": world.now,
        "duration_sim_s": world.now,
        "total_rounds": results["metrics"]["rounds"],
        "total_games": results["metrics"]["games"],
        "total_api_calls": sum(u.get("calls", 0) for u in usage.values()),
        "total_cost": results.get("cost_usd"),
        "cost_by_model": results.get("cost_by_model", {}),
        "unpriced_models": results.get("unpriced_models", []),
        "model_usage": usage,
        "identity_insight": cfg.identity_insight,
        "power_scaling": cfg.power_scaling,
        "decision_prompt": cfg.decision_prompt,
        "players": results["players"],
        "round_summaries": results["round_stats"],
        "final_agent_scores": results["final_agent_scores"],
    })
    strategies = [s for rec in rounds for s in rec["strategies"]]
    analysis = {
        "experiment_id": experiment_id,
        "acausal_indicators": results["acausal_indicators"],
        "pattern_analysis": results["pattern_analysis"],
        "strategy_analysis": {
            "identity_reasoning_frequency": results["acausal_indicators"]["identity_reasoning_frequency"],
            "total_strategies_analyzed": len(strategies),
            "identity_keywords": list(IDENTITY_KEYWORDS),
        },
        "cooperation_dynamics": results["cooperation_dynamics"],
        "round_summaries": [
            {"round": r["round"], "cooperation_rate": r["mutual_cooperation_rate"],
             "action_cooperation_rate": r["cooperation_rate"]}
            for r in results["round_stats"]
        ],
        "transcript_insights": _insights(strategies),
    }
    write_json(run_dir / "acausal_analysis.json", analysis)
    atomic_write(run_dir / "analysis_report.txt", report(results))
    atomic_write(run_dir / "experiment.log", experiment_log(rounds, results))
    if not run_plots_wanted():
        return {}
    plots = write_plots(run_dir / "plots", rounds, results)
    return {"plots": [str(p.relative_to(run_dir)) for p in plots]}


def report(results: dict[str, Any]) -> str:
    """The seed's readable report, with a few more lines."""
    ind = results["acausal_indicators"]
    dyn = results["cooperation_dynamics"]
    pat = results["pattern_analysis"]
    m = results["metrics"]
    s = ind["overall_score"]
    verdict = (
        "No verdict (no final-round game had two chosen moves)" if s is None
        else "Strong evidence" if s > 0.7 else "Moderate evidence" if s > 0.4 else "Weak evidence"
    )
    ident = ind["identity_reasoning_frequency"]
    conv = f"Round {dyn['convergence_round']}" if dyn["converged"] else f"not converged ({m['rounds']} rounds)"

    def pct(x: float | None) -> str:
        return "n/a" if x is None else f"{x:.1%}"

    name = results.get("experiment_name")
    lines = [
        "# Acausal Cooperation Analysis" + (f": {name}" if name else ""),
        "",
        f"Condition: {condition_label(results)}; "
        f"power scaling {'on' if results['power_scaling'] else 'off'}; "
        f"{m['n_llm']} LLM and {m['n_scripted']} scripted players; "
        f"decision prompt {results.get('decision_prompt', 'structured')}.",
        "",
        "## Summary",
        f"- **Identity Reasoning:** {pct(ident)} of strategies",
        f"- **Final Cooperation Rate:** {pct(dyn['final_cooperation_rate'])} (mutual cooperation, last round)",
        f"- **Convergence:** {conv}",
        f"- **Superrationality Score:** {'n/a' if s is None else format(s, '.2f')}/1.0",
        f"- **Cooperation despite power asymmetry:** {pct(ind['cooperation_despite_asymmetry'])} "
        f"(symmetric games: {pct(m['cooperation_symmetric'])})",
        f"- **Surprise at defection:** {pct(ind['surprise_at_defection'])} of strategies from round 2",
        f"- **Strategy similarity (final round):** "
        f"{'n/a' if ind['strategy_convergence'] is None else format(ind['strategy_convergence'], '.3f')}",
        f"- **Defection triggers:** {', '.join(pat['defection_triggers']) or 'none'}",
        f"- **Unreadable decisions (fallback moves, left out of every cooperation figure):** "
        f"{m['decision_parse_errors']} (read from labels or prose: {m['decision_prose_reads']})",
        "",
        "## Cooperation Over Time",
        "(mutual cooperation over games with two chosen moves; share of COOPERATE among chosen moves in brackets)",
        *(f"Round {r['round']}: {pct(r['mutual_cooperation_rate'])} ({pct(r['cooperation_rate'])})"
          + (f", {r['fallback_moves']} fallback moves left out" if r["fallback_moves"] else "")
          for r in results["round_stats"] if r["games"]),
        "",
        "## Interpretation",
        f"{verdict} of acausal cooperation.",
        "",
    ]
    return "\n".join(lines)


def experiment_log(rounds: Sequence[dict[str, Any]], results: dict[str, Any]) -> str:
    """The run as the original experiment's ``experiment.log`` told it: one line per
    event, stamped with simulated seconds (no wall clock, so the file is reproducible).

    Unreadable strategies and fallback moves are WARNING lines.
    """
    m = results["metrics"]
    names = {p["agent_id"]: p["name"] for p in results.get("players", [])}
    out: list[str] = []

    def log(t: float, level: str, text: str) -> None:
        out.append(f"t={t:10.3f} {level:<7} {text}")

    name = results.get("experiment_name") or "(unnamed)"
    log(0.0, "INFO", f"experiment {name} run {results.get('run_id', '')} seed {results.get('seed')}: "
        f"{m['n_llm']} LLM and {m['n_scripted']} scripted players, {len(rounds)} rounds; "
        f"{condition_label(results)}; power scaling {'on' if results['power_scaling'] else 'off'}; "
        f"decision prompt {results.get('decision_prompt', 'structured')}")
    for rec in rounds:
        r = rec["round"]
        powers = ", ".join(f"{names.get(i, i)} {p:.1f}" for i, p in enumerate(rec["powers_initial"]))
        log(rec["t_start"], "INFO", f"round {r} started; powers {powers}")
        for s in sorted(rec["strategies"], key=lambda s: (s["sim_time"], s["agent_id"])):
            who = names.get(s["agent_id"], s["agent_id"])
            if s["parse_error"]:
                log(s["sim_time"], "WARNING", f"round {r}: strategy of {who} unreadable; passed on raw "
                    f"({len(s['full_reasoning'])} characters)")
            else:
                log(s["sim_time"], "INFO", f"round {r}: strategy of {who} ({s['read']}; "
                    f"{s['prompt_tokens']} + {s['completion_tokens']} tokens): {s['strategy_text']}")
        for g in rec["games"]:
            a, b = names.get(g["player1_id"]), names.get(g["player2_id"])
            log(g["sim_time"], "INFO", f"round {r} game {g['game_number']}: {a} {g['player1_action']} "
                f"({g['player1_parse']}) vs {b} {g['player2_action']} ({g['player2_parse']}); payoffs "
                f"{g['player1_payoff']:.2f}/{g['player2_payoff']:.2f}; powers {g['player1_power_before']:.1f}->"
                f"{g['player1_power_after']:.1f}, {g['player2_power_before']:.1f}->{g['player2_power_after']:.1f}")
            for side, who in ((1, a), (2, b)):
                if not chosen(g, side):
                    log(g["sim_time"], "WARNING", f"round {r} game {g['game_number']}: the decision of {who} "
                        f"was unreadable; {g[f'player{side}_action']} played by fallback")
        stats = next((x for x in results["round_stats"] if x["round"] == r), None)
        if stats is not None and stats["games"]:
            log(rec.get("t_end", rec["t_start"]), "INFO", f"round {r} ended; cooperation "
                f"{_pct(stats['cooperation_rate'])} of chosen moves, mutual {_pct(stats['mutual_cooperation_rate'])}"
                f" of games, {stats['fallback_moves']} fallback moves")
    score = m["superrationality_score"]
    log(m["sim_time_end"], "INFO", f"experiment finished: {m['games']} games; final mutual cooperation "
        f"{_pct(m['final_cooperation_rate'])}; superrationality score {'n/a' if score is None else f'{score:.2f}'}")
    return "\n".join(out) + "\n"


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.1%}"


def _player_labels(players: Sequence[dict[str, Any]]) -> list[str]:
    return [p["name"] + (f" ({p['script']})" if p["script"] else "") for p in players]


def write_plots(plot_dir: Path, rounds: Sequence[dict[str, Any]], results: dict[str, Any]) -> list[Path]:
    """Cooperation per round, power evolution and the pairwise payoff heat map."""
    # Deferred on purpose: matplotlib (heavy) loads only when plots are drawn.
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    def save(fig: Any, name: str) -> Path:
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
        plt.close(fig)
        atomic_write(plot_dir / name, buf.getvalue())
        return plot_dir / name

    arm = condition_label(results, short=True)
    labels = _player_labels(results["players"])
    out = []
    stats_rows = [r for r in results["round_stats"] if r["games"]]
    xs = [r["round"] for r in stats_rows]

    fig, ax = plt.subplots(figsize=(7, 4))
    for key, name, style in (("cooperation_rate", "COOPERATE moves", "o-"),
                             ("mutual_cooperation_rate", "mutual cooperation (CC)", "s-"),
                             ("any_cooperation_rate", "games with any C", "^--")):
        ax.plot(xs, [np.nan if r[key] is None else r[key] for r in stats_rows], style, label=name)
    fell = sum(r["fallback_moves"] for r in stats_rows)
    if fell:  # said on the figure: the rates count chosen moves only
        ax.annotate(f"{fell} fallback moves (unreadable decisions) left out of every rate",
                    xy=(0.01, 0.01), xycoords="axes fraction", fontsize=8, color="firebrick")
    ax.set(xlabel="round", ylabel="share of chosen moves", ylim=(-0.02, 1.02), title=f"Cooperation per round ({arm})")
    ax.set_xticks(xs if len(xs) <= 20 else xs[:: max(1, len(xs) // 10)])
    ax.grid(alpha=0.3)
    ax.legend(loc="best")
    out.append(save(fig, "cooperation_per_round.png"))

    n = len(labels)
    series, bounds = [], []
    for rec in rounds:
        power = list(rec["powers_initial"])
        series.append(list(power))
        for g in rec["games"]:
            power[g["player1_id"]] = g["player1_power_after"]
            power[g["player2_id"]] = g["player2_power_after"]
            series.append(list(power))
        bounds.append(len(series) - 0.5)
    fig, ax = plt.subplots(figsize=(9, 4.5))
    arr = np.array(series) if series else np.zeros((0, n))
    for i in range(n):
        ax.plot(arr[:, i], lw=1, label=labels[i] if n <= 20 else None)
    for b in bounds[:-1]:
        ax.axvline(b, color="grey", ls=":", lw=0.8)
    ax.set(xlabel="game (all rounds in order; dotted lines: new round, powers redrawn)",
           ylabel="power", ylim=(45, 155), title=f"Power evolution ({arm})")
    if n <= 20:
        ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=8, title="player")
    out.append(save(fig, "power_evolution.png"))

    mat = np.array(results["payoff_matrix"]) if n else np.zeros((0, 0))
    fig, ax = plt.subplots(figsize=(max(5, 0.55 * n + 2), max(4, 0.5 * n + 1.5)))
    masked = np.ma.masked_where(np.eye(n, dtype=bool), mat)
    im = ax.imshow(masked, cmap="viridis")
    ax.set_xticks(range(n), labels, rotation=60, ha="right", fontsize=8)
    ax.set_yticks(range(n), labels, fontsize=8)
    ax.set(xlabel="opponent", ylabel="player", title=f"Total payoff of player against opponent ({arm})")
    fig.colorbar(im, ax=ax, label="total payoff over all rounds")
    if n <= 12:
        hi = mat.max() if mat.size else 0
        for i in range(n):
            for j in range(n):
                if i != j:
                    ax.text(j, i, f"{mat[i, j]:.0f}", ha="center", va="center", fontsize=7,
                            color="black" if mat[i, j] > 0.6 * hi else "white")
    out.append(save(fig, "payoff_heatmap.png"))
    return out


def outcome(results: dict[str, Any]) -> str | None:
    """The tournament's winner: the player with the highest final score (the first on a tie)."""
    scores = results.get("final_agent_scores") or {}
    players = {str(p["agent_id"]): p["name"] for p in results.get("players", [])}
    if not scores:
        return None
    best = max(scores, key=lambda k: (scores[k], -int(k)))
    return players.get(best, best)
