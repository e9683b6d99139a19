"""Analysis of a veil-of-ignorance run: metrics, the agent-centric JSON and plots.

Metrics (``results["metrics"]``, one scalar each, the batch runner's columns):

- ``consensus_reached``, ``rounds_taken``, ``end_reason`` (consensus, max_rounds
  or timeout), ``chosen_principle`` (key or None), ``chosen_amount``;
- ``agreement_first_round`` / ``agreement_last_round``: share of agents holding
  the most common choice (principle and amount), and
  ``principle_agreement_last_round`` (principle only);
- ``likert_shift_mean`` (final minus initial score, over agents and principles),
  ``likert_abs_shift_mean``, and ``likert_shift_<principle>`` (mean over agents);
  ``likert_initial_<principle>`` and ``likert_final_<principle>`` (mean scores);
- ``distribution``, ``fallback``, ``constraint_met``, ``mean_income``,
  ``min_income`` (the veil);
- ``invalid_choices`` (turns without a usable choice), ``parse_errors`` (replies
  that stayed unreadable), ``n_agents``, ``deliberation_time`` and ``sim_time_end``
  (simulated seconds).

Every figure rests on readable replies only: each rating item counts on its own
(a reply with one unreadable item keeps the other three; the unreadable one, and a
shift that needs it, is undefined), and an unreadable turn abstains. ``basis`` says, per metric, how many agents or turns it rests on (see
:mod:`simcore.analysis.basis`); a figure with none is None, and the summary says why.

Per-agent detail (Likert shift per principle per agent, choices per round,
incomes) is in the results object beside the metrics.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from scenarios.veil_of_ignorance.config import VeilConfig, record_name
from scenarios.veil_of_ignorance.principles import (
    KEYS,
    LIKERT,
    PRINCIPLES,
    Choice,
    agreement,
    choice_from_key,
)
from simcore.api import (
    Metric,
    World,
    basis,
    category,
    continuous,
    count,
    proportion,
    run_plots_wanted,
    score,
    shown,
    write_json,
)

#: Every metric's kind and bounds (``Scenario.kinds``); Likert ratings are 1 to 4.
KINDS = {
    "consensus_reached": proportion(), "fallback": proportion(), "constraint_met": proportion(),
    "agreement_first_round": proportion(), "agreement_last_round": proportion(),
    "principle_agreement_last_round": proportion(),
    "likert_abs_shift_mean": score(0, 3), "likert_shift_*": score(-3, 3),
    "likert_initial_*": score(1, 4), "likert_final_*": score(1, 4),
    "end_reason": category(), "chosen_principle": category(), "distribution": category(),
    "chosen_amount": continuous(0), "mean_income": continuous(0), "min_income": continuous(0),
    "rounds_taken": count(), "invalid_choices": count(), "parse_errors": count(), "n_agents": count(),
    "deliberation_time": continuous(0), "sim_time_end": continuous(0),
}

#: How people read each metric (``Scenario.metrics``); the key ones head every page about a run.
METRICS = {
    "consensus_reached": Metric(
        "consensus", "Whether the group agreed on one principle (and amount) before running out of rounds.",
        key=True),
    "chosen_principle": Metric(
        "chosen principle", "The principle the group agreed on (none without consensus).", key=True),
    "chosen_amount": Metric(
        "chosen amount", "The floor or range amount the agreed principle names, in dollars (none for the "
        "two principles without one).", unit="USD", key=True),
    "agreement_last_round": Metric(
        "agreement, last round", "Share of agents holding the most common choice (principle and amount) "
        "in the last round of deliberation.", percent=True, key=True),
    "rounds_taken": Metric("rounds", "Rounds of deliberation held before consensus or the round limit.",
                           key=True),
    "agreement_first_round": Metric(
        "agreement, first round", "Share of agents holding the most common choice (principle and amount) "
        "in the first round.", percent=True),
    "principle_agreement_last_round": Metric(
        "principle agreement, last round", "Share of agents on the most common principle in the last "
        "round, amounts ignored.", percent=True),
    "likert_shift_mean": Metric(
        "mean Likert shift", "Final minus initial rating (1 strongly disagree to 4 strongly agree), "
        "averaged over agents and the four principles."),
    "likert_abs_shift_mean": Metric(
        "mean absolute Likert shift", "How far ratings moved, whatever the direction: the mean of "
        "|final - initial| over agents and principles."),
    "likert_shift_*": Metric(
        "Likert shift", "Final minus initial rating of one principle (the last part of its name), averaged "
        "over the agents that rated it readably both times."),
    "likert_initial_*": Metric(
        "initial rating", "Mean rating of one principle (1 strongly disagree to 4 strongly agree) before "
        "deliberation."),
    "likert_final_*": Metric(
        "final rating", "Mean rating of one principle (1 strongly disagree to 4 strongly agree) after "
        "deliberation."),
    "end_reason": Metric("end", "Why deliberation ended: consensus, max_rounds or timeout."),
    "distribution": Metric("distribution", "The income distribution the veil applied."),
    "fallback": Metric(
        "random fallback", "Whether the veil drew a distribution at random because no principle was agreed."),
    "constraint_met": Metric(
        "constraint met", "Whether the applied distribution satisfies the agreed floor or range."),
    "mean_income": Metric("mean income", "The agents' mean income under the veil, in dollars.", unit="USD"),
    "min_income": Metric("lowest income", "The lowest income an agent drew under the veil, in dollars.",
                         unit="USD"),
    "invalid_choices": Metric("invalid choices", "Deliberation turns without a usable choice (abstentions)."),
    "parse_errors": Metric("unreadable replies", "Replies that stayed unreadable after any re-ask."),
    "n_agents": Metric("agents", "Agents in the group."),
    "deliberation_time": Metric("deliberation time", "Simulated time the deliberation took.", unit="s"),
    "sim_time_end": Metric("simulated time", "Simulated time at the end of the run.", unit="s"),
}


def _mean(values: list[Any]) -> float | None:
    vals = [v for v in values if v is not None]
    return float(np.mean(vals)) if vals else None


def _choice(key: str | None) -> Choice | None:
    return None if key is None else choice_from_key(key)


def analyze(world: World, cfg: VeilConfig) -> dict[str, Any]:
    """The results object (see the module docstring)."""
    st = world.state
    names: list[str] = st.get("names", [])
    initial = st.get("ratings", {}).get("initial", {})
    final = st.get("ratings", {}).get("final", {})
    shift = {
        n: {
            k: (final[n][k] - initial[n][k])
            if n in initial and n in final and initial[n][k] is not None and final[n][k] is not None
            else None
            for k in KEYS
        }
        for n in names
    }
    decisions = st.get("decisions", [])
    per_round = [[_choice(d["choices"][n]) for n in names] for d in decisions]
    agree = [agreement(c) for c in per_round]
    agree_p = [agreement(c, by_principle=True) for c in per_round]
    agreed = st.get("agreed")
    outcome = st.get("outcome")
    all_shifts = [s for n in names for s in shift[n].values()]
    metrics: dict[str, Any] = {
        "consensus_reached": agreed is not None,
        "rounds_taken": len(decisions),
        "end_reason": st.get("end_reason"),
        "chosen_principle": None if agreed is None else PRINCIPLES[agreed.principle - 1].key,
        "chosen_amount": None if agreed is None else agreed.amount,
        "agreement_first_round": agree[0] if agree else None,
        "agreement_last_round": agree[-1] if agree else None,
        "principle_agreement_last_round": agree_p[-1] if agree_p else None,
        "likert_shift_mean": _mean(all_shifts),
        "likert_abs_shift_mean": _mean([None if s is None else abs(s) for s in all_shifts]),
    }
    for k in KEYS:
        metrics[f"likert_shift_{k}"] = _mean([shift[n][k] for n in names])
    for k in KEYS:
        metrics[f"likert_initial_{k}"] = _mean([initial.get(n, {}).get(k) for n in names])
        metrics[f"likert_final_{k}"] = _mean([final.get(n, {}).get(k) for n in names])
    # The same columns in every trial, even one that failed before the veil lifted.
    metrics.update(
        distribution=None if outcome is None else cfg.distributions[outcome.distribution].name,
        fallback=None if outcome is None else outcome.fallback,
        constraint_met=None if outcome is None else outcome.constraint_met,
        mean_income=None if outcome is None else float(np.mean(outcome.incomes)),
        min_income=None if outcome is None else int(min(outcome.incomes)),
    )
    metrics.update(
        invalid_choices=sum(c is None for cs in per_round for c in cs),
        parse_errors=sum(c["unreadable"] for c in world.parse_quality.counts.values()),
        n_agents=len(names),
        deliberation_time=st.get("t_deliberation"),
        sim_time_end=world.now,
    )
    # Each rating counts on its own: a reply with one unreadable item keeps the other three.
    rated = lambda ratings, k: sum(1 for n in names if ratings.get(n, {}).get(k) is not None)  # noqa: E731
    pairs = sum(1 for n in names for k in KEYS if shift[n][k] is not None)
    bases = {"likert_shift_mean": basis(pairs, len(names) * len(KEYS), "ratings",
                                        _why(len(names) * len(KEYS) - pairs, "ratings"))}
    bases["likert_abs_shift_mean"] = bases["likert_shift_mean"]
    for k in KEYS:
        both = sum(1 for n in names if shift[n][k] is not None)
        bases[f"likert_shift_{k}"] = basis(both, len(names), "agents", _why(len(names) - both, "agents"))
        bases[f"likert_initial_{k}"] = basis(rated(initial, k), len(names), "agents")
        bases[f"likert_final_{k}"] = basis(rated(final, k), len(names), "agents")
    for key, index in (("agreement_first_round", 0), ("agreement_last_round", -1),
                       ("principle_agreement_last_round", -1)):
        if per_round:
            made = sum(c is not None for c in per_round[index])
            bases[key] = basis(made, len(names), "turns", f"{len(names) - made} turns without a readable choice (abstentions)")
    return {
        "experiment_id": cfg.experiment_id,
        "metrics": metrics,
        "basis": {k: b.to_dict() for k, b in bases.items()},
        "likert": {"initial": initial, "final": final, "shift": shift},
        "rounds": decisions,
        "agreement_by_round": agree,
        "principle_agreement_by_round": agree_p,
        "veil": None if outcome is None else veil_record(cfg, names, outcome),
    }


def _why(missing: int, what: str) -> str | None:
    return f"{missing} {what if missing > 1 else what[:-1]} without a readable initial and final rating" if missing else None


def veil_record(cfg: VeilConfig, names: list[str], outcome: Any) -> dict[str, Any]:
    """The outcome of the veil as plain JSON."""
    dist = cfg.distributions[outcome.distribution]
    return {
        "choice": None if outcome.choice is None else outcome.choice.key,
        "distribution": dist.name,
        "distribution_index": outcome.distribution,
        "incomes_by_class": dict(zip(cfg.classes, dist.incomes)),
        "fallback": outcome.fallback,
        "constraint_met": outcome.constraint_met,
        "assignments": {
            n: {"class": cfg.classes[c], "income": inc}
            for n, c, inc in zip(names, outcome.classes, outcome.incomes)
        },
    }


def summarize(results: dict[str, Any]) -> str:
    """A few lines for the terminal."""
    m = results["metrics"]
    if not m:
        return f"veil of ignorance: status {results['status']}, no metrics"
    lines = [
        f"veil of ignorance ({results.get('experiment_id')}): status {results['status']}, "
        f"{m['n_agents']} agents, {m['rounds_taken']} round(s), end: {m['end_reason']}",
    ]
    if m["consensus_reached"]:
        amount = f" at ${m['chosen_amount']:,}" if m["chosen_amount"] else ""
        lines.append(f"  consensus on {m['chosen_principle']}{amount}")
    elif m["agreement_last_round"] is not None:
        lines.append(f"  no consensus (agreement in the last round {m['agreement_last_round']:.0%})")
    if results.get("veil"):
        v = results["veil"]
        paid = ", ".join(f"{n} {a['class']} ${a['income']:,}" for n, a in v["assignments"].items())
        lines.append(f"  {v['distribution']}{' (random fallback)' if v['fallback'] else ''}: {paid}")
    b = results.get("basis", {})
    if m["likert_shift_mean"] is None:
        shifts = shown(None, b.get("likert_shift_mean"))
    else:
        shifts = ", ".join(f"{k} {m[f'likert_shift_{k}']:+.2f}" for k in KEYS)
        partial = b.get("likert_shift_mean") or {}
        if partial.get("n", 0) < partial.get("of", 0):
            shifts += f" ({partial['n']} of {partial['of']} ratings readable)"
    lines.append(f"  mean Likert shift: {shifts}; unreadable replies {m['parse_errors']}")
    return "\n".join(lines)


def agent_centric(world: World, cfg: VeilConfig, results: dict[str, Any]) -> dict[str, Any]:
    """The seed's agent-centric record: ``experiment_metadata`` plus one entry per agent."""
    m = results.get("metrics", {})
    agreed = world.state.get("agreed")
    meta = {
        "experiment_id": cfg.experiment_id,
        "scenario": world.scenario,
        "seed": world.seed,
        "run_id": results.get("run_id"),
        "config": cfg.to_dict(),
        "principles": [
            {"id": p.id, "key": p.key, "label": p.label, "description": p.description} for p in PRINCIPLES
        ],
        "income_classes": list(cfg.classes),
        "distributions": [{"name": d.name, "incomes": list(d.incomes)} for d in cfg.distributions],
        "decision_rule": cfg.decision_rule,
        "memory_strategy": cfg.memory,
        "max_rounds": cfg.max_rounds,
        "rounds_taken": m.get("rounds_taken"),
        "end_reason": m.get("end_reason"),
        "consensus": {
            "reached": agreed is not None,
            "choice": None if agreed is None else agreed.key,
            "principle": None if agreed is None else agreed.principle,
            "amount": None if agreed is None else agreed.amount,
            "label": None if agreed is None else agreed.describe(),
            "round": m.get("rounds_taken") if agreed is not None else None,
        },
        "rounds": results.get("rounds", []),
        "veil": results.get("veil"),
        "metrics": m,
    }
    return {"experiment_metadata": meta, **world.state.get("log", {})}


def write_artifacts(run_dir: Path, world: World, cfg: VeilConfig, results: dict[str, Any]) -> dict[str, Any]:
    """``experiment.json`` and the same record as ``<experiment_id>.json``, the original
    experiment's name for it (unless logging is off), and the two plots."""
    out: dict[str, Any] = {}
    if cfg.logging.enabled:
        record = agent_centric(world, cfg, results)
        named = record_name(cfg.experiment_id)
        for name in dict.fromkeys(("experiment.json", named)):
            write_json(run_dir / name, record)
        out["experiment_json"] = "experiment.json"
        out["experiment_record"] = named
    if run_plots_wanted():
        out["plots"] = [str(p.relative_to(run_dir)) for p in plot(run_dir / "plots", world, results)]
    return out


COLOURS = ("#4C72B0", "#DD8452", "#55A868", "#C44E52")


def plot(folder: Path, world: World, results: dict[str, Any]) -> list[Path]:
    """``likert.png`` (mean rating per principle, before and after) and ``choices.png``."""
    # Deferred on purpose: matplotlib (heavy) loads only when plots are drawn.
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    folder.mkdir(parents=True, exist_ok=True)
    names = world.state.get("names", [])
    likert = results["likert"]
    labels = [p.label.replace("maximize the ", "max. ").replace(" with a ", "\n+ ") for p in PRINCIPLES]
    x = np.arange(len(KEYS))

    fig, ax = plt.subplots(figsize=(8, 4.5))
    bases = results.get("basis", {})
    for j, (phase, colour) in enumerate((("initial", "#9DB4D3"), ("final", "#2F5F98"))):
        means = [results["metrics"][f"likert_{phase}_{k}"] for k in KEYS]
        b = bases.get(f"likert_{phase}_{KEYS[0]}", {})
        read = f", {b['n']} of {b['of']} agents readable" if b.get("n", 0) < b.get("of", 0) else ""
        ax.bar(x + (j - 0.5) * 0.38, [np.nan if m is None else m for m in means], 0.36, color=colour,
               label=f"{'before' if phase == 'initial' else 'after'} deliberation (mean{read})")
        for i, mean in enumerate(means):
            if mean is None:  # said on the figure, not left as a silent gap
                ax.text(i + (j - 0.5) * 0.38, 0.1, "n/a:\nno readable\nrating", ha="center", va="bottom",
                        fontsize=7, color="firebrick", rotation=90)
        for i, k in enumerate(KEYS):
            pts = [likert[phase].get(n, {}).get(k) for n in names]
            pts = [p for p in pts if p is not None]
            offsets = np.linspace(-0.1, 0.1, len(pts)) if len(pts) > 1 else [0.0]
            ax.scatter(i + (j - 0.5) * 0.38 + np.asarray(offsets), pts, s=14, color="black", zorder=3,
                       label="one agent" if (i == 0 and j == 0) else None)
    ax.set_xticks(x, labels, fontsize=8)
    ax.set_yticks([1, 2, 3, 4], [lab.replace(" ", "\n") for lab in LIKERT], fontsize=8)
    ax.set_ylim(0, 4.6)
    ax.set_ylabel("Likert rating")
    ax.set_title(f"Ratings of the principles before and after deliberation ({len(names)} agents)")
    ax.legend(fontsize=8, loc="upper right", ncols=3)
    fig.tight_layout()
    likert_png = folder / "likert.png"
    fig.savefig(likert_png, dpi=110)
    plt.close(fig)

    rounds = results.get("rounds", [])
    fig, ax = plt.subplots(figsize=(8, 4.5))
    r_idx = np.arange(1, len(rounds) + 1)
    bottom = np.zeros(len(rounds))
    for p, colour in zip(PRINCIPLES, COLOURS):
        counts = np.array(
            [sum(1 for c in d["choices"].values() if c and c.split(":")[0] == p.key) for d in rounds]
        )
        ax.bar(r_idx, counts, 0.6, bottom=bottom, color=colour, label=p.label)
        bottom += counts
    invalid = np.array([sum(1 for c in d["choices"].values() if c is None) for d in rounds])
    if invalid.any():
        ax.bar(r_idx, invalid, 0.6, bottom=bottom, color="lightgrey", hatch="//", label="no valid choice")
    for d, r in zip(rounds, r_idx):
        if d["reached"]:
            ax.annotate("consensus", (r, len(names)), xytext=(0, 4), textcoords="offset points",
                        ha="center", fontsize=8)
    ax.set_xticks(r_idx)
    ax.set_xlabel("deliberation round")
    ax.set_ylabel("agents choosing")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    top = len(names) * 1.15 + 0.3
    ax.set_ylim(0, top)
    reached = any(d["reached"] for d in rounds)
    ax.set_title(f"Principle chosen in each round ({'consensus' if reached else 'no consensus'})")
    share = ax.twinx()
    share.plot(r_idx, results.get("agreement_by_round", []), "k-o", markersize=4,
               label="agreement (share of agents on the most common choice, amount included)")
    share.set_ylim(0, top / max(1, len(names)))  # 1.0 lines up with all agents
    share.set_yticks([0, 0.25, 0.5, 0.75, 1.0])
    share.set_ylabel("agreement (share of agents)")
    handles, texts = ax.get_legend_handles_labels()
    h2, t2 = share.get_legend_handles_labels()
    ax.legend(handles + h2, texts + t2, fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncols=2)
    fig.tight_layout()
    choices_png = folder / "choices.png"
    fig.savefig(choices_png, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return [likert_png, choices_png]


def outcome(results: dict[str, Any]) -> dict[str, Any] | None:
    """The group's decision: consensus or not, and the principle (and amount) agreed on."""
    m = results.get("metrics") or {}
    if "consensus_reached" not in m:
        return None
    return {"consensus": m["consensus_reached"], "principle": m["chosen_principle"], "amount": m["chosen_amount"]}
