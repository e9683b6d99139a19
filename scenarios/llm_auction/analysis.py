"""Analysis of LLM-auction runs: the seed's five tables, metrics with CIs, plots.

One run has one mechanism. :func:`tables` turns a finished world into the seed's
CSV tables; :func:`metrics` and :func:`by_style` read them, so the comparison
across mechanisms (:mod:`.compare`) computes its figures with the same code on
tables concatenated over trials.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd

from scenarios.llm_auction.config import STYLES, AuctionConfig
from scenarios.llm_auction.kinds import COMPARED, KINDS
from scenarios.llm_auction.plots import participation_by_style
from simcore.api import (
    World,
    atomic_write,
    basis,
    describe,
    generic_compare,
    proportion_ci,
    run_plots_wanted,
    shown,
)

VIGNETTE_COLUMNS = (
    "mechanism", "seed", "vignette_index", "vignette_id", "title", "consensus", "decision",
    "correct", "decided_by", "majority_reached", "votes_for_decision", "abstentions", "n_agents",
    "proposer", "proposer_style", "proposer_option", "proposer_correct", "winning_bid",
    "price_paid", "n_bids", "n_late_bids", "n_proposals", "n_critiques", "participants",
    "message_tokens", "token_cost", "auction_payment", "total_cost", "total_reward",
    "private_accuracy", "t_start", "t_end", "duration",
)
ROUND_COLUMNS = (
    "mechanism", "seed", "vignette_index", "vignette_id", "agent", "communication_style",
    "style_multiplier", "private_option", "private_confidence", "private_correct", "bid",
    "bid_on_time", "won_auction", "bid_paid", "proposed", "critiqued", "participated",
    "message_tokens", "token_cost", "total_cost", "option_choice", "vote_correct",
    "group_decision", "group_correct", "expected_option", "expected_reasoning", "reward", "budget_after",
    "parse_errors",
)
BID_COLUMNS = (
    "mechanism", "seed", "vignette_index", "vignette_id", "agent", "communication_style",
    "confidence", "style_multiplier", "budget_before", "noise", "raw_bid", "bid", "submitted_at",
    "deadline", "on_time", "abstained", "won", "price_paid",
)
AGENT_SUMMARY_COLUMNS = (
    "mechanism", "seed", "agent", "communication_style", "n_vignettes", "n_proposals",
    "n_critiques", "participation_rate", "n_bids", "n_auction_wins", "message_tokens",
    "total_cost", "total_reward", "private_accuracy", "vote_accuracy", "final_budget",
)
FLAGGED_COLUMNS = ("vignette_id", "agent", "phase", "t", "why", "handling", "raw", "earlier_attempts")
TABLES = ("vignette_results", "agent_round_results", "bid_data", "agent_summary", "simulation_summary")


def _frame(records: Sequence[dict[str, Any]], columns: Sequence[str]) -> pd.DataFrame:
    return pd.DataFrame(list(records), columns=list(columns))


def agent_summary(rounds: pd.DataFrame) -> pd.DataFrame:
    """One row per (mechanism, seed, agent), from agent_round_results."""
    if rounds.empty:
        return _frame([], AGENT_SUMMARY_COLUMNS)
    # NOTE: counted from numpy arrays, agent by agent, rather than by a groupby per figure, for
    # performance (a pandas groupby costs about a millisecond per figure on a run's few hundred rows).
    keys = list(zip(rounds["mechanism"], rounds["seed"], rounds["agent"]))
    agents = sorted(set(keys))
    number = {key: i for i, key in enumerate(agents)}
    group = np.array([number[key] for key in keys])
    # Money is summed by pandas' own groupby (with compensation, or by numpy's reduceat where an agent's
    # rows are adjacent): the totals keep, to the last bit, those of the tables written before.
    totals = rounds[["total_cost", "reward"]].groupby(group).sum().to_numpy()
    columns = ("communication_style", "proposed", "critiqued", "participated", "bid", "won_auction",
               "message_tokens", "private_correct", "vote_correct", "budget_after")
    values = {c: rounds[c].to_numpy() for c in columns}
    out = []
    for i, (mechanism, seed, agent) in enumerate(agents):
        mine = {c: v[group == i] for c, v in values.items()}
        n = len(mine["participated"])
        out.append({
            "mechanism": mechanism, "seed": seed, "agent": agent,
            "communication_style": _first(mine["communication_style"]),
            "n_vignettes": n,
            "n_proposals": int(mine["proposed"].sum()),
            "n_critiques": int(mine["critiqued"].sum()),
            "participation_rate": mine["participated"].sum() / n,
            "n_bids": int(pd.notna(mine["bid"]).sum()),
            "n_auction_wins": int(mine["won_auction"].sum()),
            "message_tokens": int(mine["message_tokens"].sum()),
            "total_cost": totals[i, 0],
            "total_reward": totals[i, 1],
            "private_accuracy": _share(mine["private_correct"]),
            "vote_accuracy": _share(mine["vote_correct"]),
            "final_budget": _first(mine["budget_after"][::-1]),  # the last one
        })
    return _frame(out, AGENT_SUMMARY_COLUMNS)


def tables(world: World, cfg: AuctionConfig) -> dict[str, pd.DataFrame]:
    """The seed's tables for one run (bid_data has only a header outside the auction)."""
    return _tables_and_metrics(world, cfg)[0]


def _tables_and_metrics(world: World, cfg: AuctionConfig) -> tuple[dict[str, pd.DataFrame], dict[str, Any]]:
    # Built once per run (analysis, writers and the compare command all need them)
    # and kept in the world's state.
    if "analysis" in world.state:
        return world.state["analysis"]
    rounds = _frame(world.state.get("rows", []), ROUND_COLUMNS)
    out = {
        "vignette_results": _frame(world.state.get("vignettes", []), VIGNETTE_COLUMNS),
        "agent_round_results": rounds,
        "bid_data": _frame(world.state.get("bids", []), BID_COLUMNS),
        "agent_summary": agent_summary(rounds),
    }
    m = metrics(out["vignette_results"], rounds, out["bid_data"])
    out["simulation_summary"] = pd.DataFrame(
        [{"mechanism": cfg.mechanism, "seed": world.seed, **_config_columns(cfg), **m}]
    )
    world.state["analysis"] = out, m
    return out, m


def _config_columns(cfg: AuctionConfig) -> dict[str, Any]:
    keys = ("n_agents", "budget", "budget_scope", "token_price", "auction_rule", "bid_window", "no_majority")
    return {k: getattr(cfg, k) for k in keys}


def _known(values: Any) -> np.ndarray:
    """The values that are not missing (None or NaN), as an object array."""
    arr = np.asarray(values, dtype=object)
    return arr[pd.notna(arr)]


def _mean(values: Any) -> float | None:
    x = _known(values).astype(float)
    # The sum over the count, as pandas' Series.mean has it (so the figures are those of earlier runs).
    return float(x.sum() / len(x)) if len(x) else None


def _rate(flags: Any) -> dict[str, Any]:
    """Share of true values with its Wilson 95% CI (missing values left out)."""
    known = _known(flags).astype(bool)
    k, n = int(known.sum()), len(known)
    lo, hi = proportion_ci(k, n)
    return {"rate": k / n if n else None, "k": k, "n": n, "ci_low": lo, "ci_high": hi}


def _first(values: np.ndarray) -> Any:
    """The first value that is not missing, or None."""
    known = _known(values)
    return known[0] if len(known) else None


def _share(flags: np.ndarray) -> float:
    """Share of true values among those not missing (NaN without any)."""
    known = _known(flags).astype(float)
    return known.sum() / len(known) if len(known) else np.nan


def _style_rows(rounds: pd.DataFrame, columns: Sequence[str]) -> dict[str, dict[str, np.ndarray]]:
    """Each communication style's values of ``columns``, in row order (every style, each maybe empty).

    NOTE: numpy arrays split once rather than a frame filtered per style and a Series per
    figure, for performance (the compare command reads tables of thousands of rows).
    """
    styles = rounds["communication_style"].to_numpy()
    values = {c: rounds[c].to_numpy() for c in columns}
    out = {}
    for style in STYLES:
        mine = styles == style
        out[style] = {c: v[mine] for c, v in values.items()}
    return out


def metrics(vignettes: pd.DataFrame, rounds: pd.DataFrame, bids: pd.DataFrame) -> dict[str, Any]:
    """Scalar metrics of one run (the batch runner's columns)."""
    nv = len(vignettes)

    def per_v(col: str) -> float | None:
        return float(vignettes[col].sum()) / nv if nv else None

    correct = _rate(vignettes["correct"])
    auction = bool((vignettes["mechanism"] == "auction").any())
    on_time = bids["on_time"].dropna()
    out: dict[str, Any] = {
        "n_vignettes": nv,
        "n_agents": int(vignettes["n_agents"].iloc[0]) if nv else 0,
        "correctness": correct["rate"],
        "correctness_ci_low": correct["ci_low"],
        "correctness_ci_high": correct["ci_high"],
        "n_correct": correct["k"],
        "majority_rate": _mean(vignettes["majority_reached"]),
        "no_decision_rate": _mean(vignettes["decided_by"] == "none") if nv else None,
        "private_accuracy": _mean(rounds["private_correct"]),
        "vote_accuracy": _mean(rounds["vote_correct"]),
        "proposer_accuracy": _mean(vignettes["proposer_correct"]) if auction else None,
        "total_cost": float(vignettes["total_cost"].sum()),
        "cost_per_vignette": per_v("total_cost"),
        "spend_per_vignette": (
            float(vignettes["token_cost"].sum() + vignettes["auction_payment"].sum()) / nv if nv else None
        ),
        "message_tokens_per_vignette": per_v("message_tokens"),
        "total_reward": float(vignettes["total_reward"].sum()),
        "mean_reward": _mean(rounds["reward"]),
        "participation": _mean(rounds["participated"]),
        "proposals_per_vignette": per_v("n_proposals"),
        "critiques_per_vignette": per_v("n_critiques"),
        "late_bid_rate": float((~on_time.astype(bool)).mean()) if auction and len(on_time) else None,
        "mean_price": _mean(vignettes["price_paid"]) if auction else None,
        "parse_errors": int(rounds["parse_errors"].sum()),
        "sim_time_end": float(vignettes["t_end"].max()) if nv else 0.0,
    }
    proposer_styles = vignettes["proposer_style"].to_numpy()
    for style, mine in _style_rows(rounds, ("participated", "vote_correct", "reward")).items():
        out[f"participation_{style}"] = _mean(mine["participated"])
        out[f"vote_accuracy_{style}"] = _mean(mine["vote_correct"])
        out[f"mean_reward_{style}"] = _mean(mine["reward"])
        out[f"proposer_share_{style}"] = _mean(proposer_styles == style) if auction and nv else None
    return out


def by_style(rounds: pd.DataFrame, vignettes: pd.DataFrame) -> dict[str, Any]:
    """Per communication style: vote accuracy, participation, cost, reward, with CIs."""
    out = {}
    auction = bool((vignettes["mechanism"] == "auction").any())
    proposer_styles = vignettes["proposer_style"].to_numpy()
    columns = ("private_correct", "vote_correct", "participated", "total_cost", "reward")
    for style, mine in _style_rows(rounds, columns).items():
        n = len(mine["reward"])  # the style's agent-vignettes
        if not n:
            continue
        out[style] = {
            "agent_vignettes": n,
            "private_accuracy": _rate(mine["private_correct"]),
            "vote_accuracy": _rate(mine["vote_correct"]),
            "participation": _rate(mine["participated"]),
            "proposer": _rate(proposer_styles == style) if auction else None,
            "cost": describe(mine["total_cost"].tolist(), kind=KINDS["total_cost"]).to_dict(),
            "reward": describe(mine["reward"].tolist(), kind=KINDS["mean_reward"]).to_dict(),
        }
    return out


def bases(vignettes: pd.DataFrame, rounds: pd.DataFrame, bids: pd.DataFrame,
          quality: dict[str, dict[str, int]]) -> dict[str, Any]:
    """What each metric rests on: readable assessments, ballots, proposals and critiques.

    An unreadable assessment leaves the agent without a private view (and, in the
    auction, without a bid); an unreadable ballot is an abstention; an unreadable
    proposal or critique is not posted. Those are the protocol's handling; the
    figures that rest on the replies say how many were readable.
    """
    n = len(rounds)
    readable_private = int(rounds["private_correct"].notna().sum())
    readable_votes = int(rounds["vote_correct"].notna().sum())
    talk = [quality.get(k, {}) for k in ("proposal", "critique")]
    said, of = sum(c.get("replies", 0) - c.get("unreadable", 0) for c in talk), sum(c.get("replies", 0) for c in talk)
    out = {
        "private_accuracy": basis(readable_private, n, "assessments"),
        "vote_accuracy": basis(readable_votes, n, "ballots"),
        "correctness": basis(readable_votes, n, "ballots", f"{n - readable_votes} unreadable ballots counted as abstentions"),
        "majority_rate": basis(readable_votes, n, "ballots", f"{n - readable_votes} unreadable ballots counted as abstentions"),
        "participation": basis(said, of, "proposals and critiques", f"{of - said} unreadable, so not posted"),
    }
    if bool((vignettes["mechanism"] == "auction").any()):
        abstained = int((bids["abstained"] == "unreadable").sum())
        out["mean_price"] = basis(len(bids) - abstained, len(bids), "bidders", f"{abstained} unreadable assessments: no bid")
        out["late_bid_rate"] = out["mean_price"]
        proposers = vignettes["proposer"].notna()
        known = int((proposers & vignettes["proposer_correct"].notna()).sum())
        out["proposer_accuracy"] = basis(known, int(proposers.sum()), "proposers")
    return {k: b.to_dict() for k, b in out.items()}


def analyze(world: World, cfg: AuctionConfig) -> dict[str, Any]:
    """Results object: scalar metrics plus CIs by style, the per-vignette outcomes and each metric's basis."""
    t, m = _tables_and_metrics(world, cfg)
    vign, rounds = t["vignette_results"], t["agent_round_results"]
    return {
        "mechanism": cfg.mechanism,
        "metrics": dict(m),
        "basis": bases(vign, rounds, t["bid_data"], world.parse_quality.to_dict()),
        "correctness": _rate(vign["correct"]),
        "cost_per_vignette": describe(vign["total_cost"].tolist(), kind=KINDS["total_cost"]).to_dict(),
        "reward_per_agent_vignette": describe(rounds["reward"].tolist(), kind=KINDS["mean_reward"]).to_dict(),
        "participation": _rate(rounds["participated"]),
        "by_style": by_style(rounds, vign),
        "per_vignette": [
            {k: _plain(x) for k, x in r.items()}
            for r in vign[["vignette_id", "consensus", "decision", "correct", "decided_by", "proposer"]].to_dict("records")
        ],
    }


def _plain(x: Any) -> Any:
    if x is None or (isinstance(x, float) and np.isnan(x)):
        return None
    return x.item() if isinstance(x, np.generic) else x


def _fmt(x: Any, spec: str = ".2f") -> str:
    return "-" if x is None else format(x, spec)


def summarize(results: dict[str, Any]) -> str:
    """A few lines for the terminal; a figure resting on fewer than all replies says so."""
    m = results["metrics"]
    b = results.get("basis", {})
    c = results.get("correctness") or {}
    ci = f"[{_fmt(c.get('ci_low'))}, {_fmt(c.get('ci_high'))}]"
    lines = [
        f"llm_auction: mechanism {results.get('mechanism')}, {m.get('n_agents')} agents, "
        f"{m.get('n_vignettes')} vignettes, status {results['status']}",
        f"  correct {m.get('n_correct')}/{m.get('n_vignettes')} = {shown(m.get('correctness'), b.get('correctness'), '.2f')} "
        f"{ci} (Wilson 95%), majority reached {_fmt(m.get('majority_rate'))}",
        f"  private accuracy {shown(m.get('private_accuracy'), b.get('private_accuracy'), '.2f')}, "
        f"vote accuracy {shown(m.get('vote_accuracy'), b.get('vote_accuracy'), '.2f')}",
        f"  spend/vignette ${_fmt(m.get('spend_per_vignette'), '.3f')}, charged/vignette "
        f"${_fmt(m.get('cost_per_vignette'), '.3f')}, mean reward "
        f"${_fmt(m.get('mean_reward'), '.3f')} per agent and vignette, participation "
        f"{shown(m.get('participation'), b.get('participation'), '.2f')}, unreadable replies {m.get('parse_errors')}",
    ]
    if m.get("proposer_accuracy") is not None:
        lines.append(
            f"  proposer right {_fmt(m['proposer_accuracy'])}, mean price "
            f"${shown(m['mean_price'], b.get('mean_price'), '.3f')}, late bids {_fmt(m['late_bid_rate'])}"
        )
    return "\n".join(lines)


def write_tables(directory: Path, frames: dict[str, pd.DataFrame]) -> list[str]:
    """Write the seed's tables as CSV files; returns their names."""
    names = []
    for name in TABLES:
        atomic_write(directory / f"{name}.csv", frames[name].to_csv(index=False))
        names.append(f"{name}.csv")
    return names


def write_artifacts(run_dir: Path, world: World, cfg: AuctionConfig, results: dict[str, Any]) -> dict[str, Any]:
    """The seed's five CSV tables and the participation-by-style plot."""
    t = tables(world, cfg)
    files = write_tables(run_dir, t)
    # Every unreadable reply, with its raw text and what the protocol did instead.
    flagged = _frame(world.state.get("flagged", []), FLAGGED_COLUMNS)
    atomic_write(run_dir / "flagged_replies.csv", flagged.to_csv(index=False))
    files.append("flagged_replies.csv")
    if run_plots_wanted():
        participation_by_style(t["agent_round_results"], run_dir / "plots" / "participation_by_style.png")
        files.append("plots/participation_by_style.png")
    return {"artifacts": files}


# -- comparisons between two arms ------------------------------------------------
def compare_arms(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> dict[str, Any]:
    """Arm A minus arm B on :data:`COMPARED` (``Scenario.compare``), paired by trial seed.

    A module-level function rather than a lambda: the batch runner pickles scenarios.
    """
    return generic_compare(a, b, names=COMPARED, kinds=KINDS)


def outcome(results: dict[str, Any]) -> dict[str, Any] | None:
    """The group's decision on each vignette ({vignette id: option, or None without one})."""
    decisions = {v["vignette_id"]: v["decision"] for v in results.get("per_vignette", [])}
    return decisions or None
