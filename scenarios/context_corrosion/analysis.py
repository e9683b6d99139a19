"""Analysis of a context-corrosion run: embeddings, the seed's metrics, artifacts.

:func:`analyze` embeds what every agent said (one batched encode per
trial, through :mod:`simcore.analysis.embeddings`) and computes the metrics of
:mod:`.metrics`. With ``metrics=False`` in the config it skips the embeddings and
keeps only the reply-level figures, so kernel benchmarks never load the model.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import numpy as np

from scenarios.context_corrosion.config import CorrosionConfig
from scenarios.context_corrosion.experiment import agent_names
from scenarios.context_corrosion.metrics import (
    COMPARED,
    compare_runs,
    corrosion_metrics,
)
from scenarios.context_corrosion.tasks import task
from simcore.api import (
    EmbeddingStore,
    World,
    basis,
    derive_seed,
    run_plots_wanted,
    shown,
    write_json,
)

STRUCTURED = ("convergence_matrix", "directional_convergence", "lifecycle_entropy", "lifecycle_diversity",
              "metrics_summary")


def label(cfg: CorrosionConfig) -> str:
    """Plot label of a run: run_a (biased D) or run_b."""
    return "run_a" if cfg.biased else "run_b"


def embed(texts: dict[tuple[str, int, str], str]) -> Any:
    """An EmbeddingStore of ``texts``, in one encode call (a vector does not depend on its batch)."""
    store = EmbeddingStore()
    store.add_batch(texts.items())
    return store


def analyze(world: World, cfg: CorrosionConfig) -> dict[str, Any]:
    """Results: scalar metrics (batch-runner columns), the seed's metric objects, and
    each metric's basis (how many readable replies it rests on; see :mod:`simcore.analysis.basis`)."""
    log = world.state.get("log", [])
    finals = [e for e in log if e["phase"] == "final"]
    initials = [e for e in log if e["phase"] == "phase1"]
    names = agent_names(cfg)

    def mean(entries: list[dict[str, Any]], key: str) -> tuple[float | None, int]:
        vals = [e["parsed"][key] for e in entries if e["parsed"] is not None and e["parsed"][key] is not None]
        return (float(np.mean(vals)) if vals else None), len(vals)

    init_conf, n_init_conf = mean(initials, "confidence")
    final_conf, n_final_conf = mean(finals, "final_confidence")
    known_change = [e for e in finals if e["parsed"] is not None and e["parsed"]["changed_position"] is not None]
    metrics: dict[str, Any] = {
        "n_agents": len(names),
        "rounds": cfg.rounds,
        "parse_errors": sum(e["parse_error"] for e in log),
        "changed_position_count": sum(bool(e["parsed"]["changed_position"]) for e in known_change),
        "mean_initial_confidence": init_conf,
        "mean_final_confidence": final_conf,
        "sim_time_end": world.now,
    }
    bases = {
        "changed_position_count": basis(len(known_change), len(names), "agents"),
        "mean_initial_confidence": basis(n_init_conf, len(names), "agents"),
        "mean_final_confidence": basis(n_final_conf, len(names), "agents"),
    }
    results: dict[str, Any] = {
        "task_id": cfg.task,
        "task_title": task(cfg.task).title,
        "biased_dominant": cfg.biased,
        "final_positions": {
            e["agent"]: (e["parsed"]["final_answer"] if e["parsed"] else None) for e in finals
        },
    }
    if cfg.metrics:
        store = embed(world.state["texts"])
        world.state["embeddings"] = store
        structured = corrosion_metrics(store, names[0], names[1:], cfg.rounds)
        summary = structured["metrics_summary"]
        dc = structured["directional_convergence"]
        le = structured["lifecycle_entropy"]
        metrics.update({k: summary[k] for k in COMPARED})
        ld = structured["lifecycle_diversity"]
        metrics.update(
            avg_initial_alignment=_avg(dc["initial_alignment"].values()),
            avg_final_alignment=_avg(dc["final_alignment"].values()),
            entropy_phase1=le["phase1"],
            entropy_final=le["final"],
            diversity_phase1=ld["phase1"],
            diversity_final=ld["final"],
        )
        results.update(structured)
        bases.update(metric_bases(world.state["texts"], names[0], names[1:], cfg.rounds))
    results["metrics"] = metrics
    results["basis"] = {k: b.to_dict() for k, b in bases.items()}
    return results


def metric_bases(texts: Any, dominant: str, peers: Sequence[str], rounds: int) -> dict[str, Any]:
    """The basis of each embedding metric: the readable texts it could use.

    ``texts`` holds only readable replies, keyed by (phase, round, agent).
    """
    def has(phase: str, r: int, agent: str) -> bool:
        return (phase, r, agent) in texts

    agents = (dominant, *peers)
    d_both = has("phase1", 0, dominant) and has("final", 0, dominant)
    moved = [p for p in peers if d_both and has("phase1", 0, p) and has("final", 0, p)]
    last_d = has("discussion", rounds, dominant)
    last = [p for p in peers if has("discussion", rounds, p)]
    at_start = sum(has("phase1", 0, a) for a in agents)
    at_end = sum(has("final", 0, a) for a in agents)
    both = sum(has("phase1", 0, a) and has("final", 0, a) for a in agents)
    no_d = "D's last-round statement unreadable or missing"
    delta = basis(len(moved), len(peers), "peers", None if d_both else "D's phase-1 answer or final vote unreadable")
    return {
        "avg_peer_directional_delta": delta,
        "avg_initial_alignment": delta,
        "avg_final_alignment": delta,
        "avg_peer_convergence_final_round": (
            basis(len(last), len(peers), "peers") if last_d else basis(0, len(peers), "peers", no_d)
        ),
        "avg_peer_to_peer_convergence": basis(  # a mean over pairs: undefined with one peer
            len(last), len(peers) if len(peers) > 1 else 0, "peers",
            None if len(last) >= 2 else "fewer than 2 peers readable in the last round",
        ),
        "dominant_self_drift": basis(int(has("discussion", 1, dominant) and last_d), 1, "agents"),
        "entropy_phase1": basis(at_start, len(agents), "agents"),
        "entropy_final": basis(at_end, len(agents), "agents"),
        "entropy_decay_phase1_to_final": basis(both, len(agents), "agents"),
        "diversity_phase1": basis(at_start, len(agents), "agents"),
        "diversity_final": basis(at_end, len(agents), "agents"),
        "diversity_decay_phase1_to_final": basis(both, len(agents), "agents"),
    }


def _avg(values: Any) -> float | None:
    vals = list(values)
    return float(np.mean(vals)) if vals else None


def compare(a: Sequence[dict[str, Any]], b: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The scenario's ``compare`` hook: :func:`.metrics.compare_runs` on results objects.

    One result per arm gives the single-pair delta; lists give the Monte Carlo
    statistics, paired when both arms ran the same seeds in the same order. The
    sign-flip patterns are seeded from those trial seeds.
    """
    seeds_a, seeds_b = [r.get("seed") for r in a], [r.get("seed") for r in b]
    rows_a, rows_b = [r["metrics"] for r in a], [r["metrics"] for r in b]
    if len(a) == 1 and len(b) == 1:
        return compare_runs(rows_a[0], rows_b[0])
    seed = derive_seed(int(seeds_a[0] or 0), "context_corrosion.bootstrap." + ",".join(map(str, seeds_a)))
    return compare_runs(rows_a, rows_b, paired=seeds_a == seeds_b, seed=seed)


def summarize(results: dict[str, Any]) -> str:
    """A few lines for the terminal (a failed trial may lack the analysis).

    Every figure that rests on fewer than all replies says so; one that rests on
    none says n/a and why.
    """
    m = results.get("metrics", {})
    b = results.get("basis", {})
    arm = {True: "A (biased D)", False: "B (unbiased D)"}.get(results.get("biased_dominant"), "?")
    lines = [
        f"context corrosion: task {results.get('task_id', '?')} ({results.get('task_title', '?')}), "
        f"run {arm}, status {results.get('status')}",
    ]
    if "n_agents" in m:
        lines.append(
            f"  agents {m['n_agents']}, rounds {m['rounds']}, events {results.get('n_events')}, "
            f"unreadable replies {m['parse_errors']}, changed position "
            f"{shown(m['changed_position_count'], b.get('changed_position_count'), 'd')}"
        )
    if "avg_peer_directional_delta" in m:
        le = results["lifecycle_entropy"]
        lines += [
            f"  directional delta {shown(m['avg_peer_directional_delta'], b.get('avg_peer_directional_delta'), '+.3f')}"
            f" (alignment to D {_f(m['avg_initial_alignment'])} -> {_f(m['avg_final_alignment'])}), "
            f"D self-drift {shown(m['dominant_self_drift'], b.get('dominant_self_drift'))}",
            f"  final-round peer->D {shown(m['avg_peer_convergence_final_round'], b.get('avg_peer_convergence_final_round'))}, "
            f"peer<->peer {shown(m['avg_peer_to_peer_convergence'], b.get('avg_peer_to_peer_convergence'))}",
            "  entropy " + " -> ".join(f"{k} {_f(v, '.2f')}" for k, v in le.items())
            + f" (decay {shown(m['entropy_decay_phase1_to_final'], b.get('entropy_decay_phase1_to_final'), '+.2f')}), "
            f"diversity {_f(m.get('diversity_phase1'))} -> {_f(m.get('diversity_final'))} (decay "
            f"{shown(m.get('diversity_decay_phase1_to_final'), b.get('diversity_decay_phase1_to_final'), '+.3f')})",
        ]
    return "\n".join(lines)


def _f(x: float | None, spec: str = ".3f") -> str:
    return "n/a" if x is None else format(x, spec)


def write_artifacts(run_dir: Path, world: World, cfg: CorrosionConfig, results: dict[str, Any]) -> dict[str, Any]:
    """The seed's structured log, the embeddings and the four plots.

    Returns ``{"plots": {name: path relative to the run dir}}`` for the results.
    """
    added: dict[str, Any] = {}
    store = world.state.get("embeddings")
    if store is not None:
        store.save(run_dir / "embeddings.npz")
        if cfg.plots and run_plots_wanted():
            # Deferred on purpose: the plots module brings matplotlib, whose import took 0.85 s
            # of a sweep worker's first trial here even with plots off.
            from scenarios.context_corrosion.plots import write_run_plots

            added["plots"] = write_run_plots(run_dir / "plots", results, label(cfg))
    write_json(
        run_dir / "experiment.json",
        {
            "task": task(cfg.task).to_dict(),
            "config": cfg.to_dict(),
            "seed": world.seed,
            "replies": world.state.get("log", []),
            "transcript": [
                {"seq": m.seq, "t": m.t, "speaker": m.speaker, "text": m.text, **m.fields}
                for m in world.board.messages
            ],
            "metrics": results.get("metrics", {}),
            **{k: results[k] for k in STRUCTURED if k in results},
            **added,
        },
    )
    return added
