"""Analysis of a context-corrosion run: embeddings, the seed's metrics, artifacts.

:func:`analyze` embeds what every agent said (one batched encode per phase or
round, through :mod:`simcore.embeddings`) and computes the metrics of
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
from simcore.kernel import World
from simcore.records import write_json
from simcore.rng import derive_seed

STRUCTURED = ("convergence_matrix", "directional_convergence", "lifecycle_entropy", "metrics_summary")


def label(cfg: CorrosionConfig) -> str:
    """Plot label of a run: run_a (biased D) or run_b."""
    return "run_a" if cfg.biased else "run_b"


def embed(texts: dict[tuple[str, int, str], str]) -> Any:
    """An EmbeddingStore of ``texts``, one encode call per (phase, round)."""
    from simcore.embeddings import EmbeddingStore

    store = EmbeddingStore()
    groups: dict[tuple[str, int], list[tuple[tuple[str, int, str], str]]] = {}
    for key, text in texts.items():
        groups.setdefault(key[:2], []).append((key, text))
    for items in groups.values():
        store.add_batch(items)
    return store


def analyze(world: World, cfg: CorrosionConfig) -> dict[str, Any]:
    """Results: scalar metrics (batch-runner columns) and the seed's metric objects."""
    log = world.state.get("log", [])
    finals = [e for e in log if e["phase"] == "final"]
    initials = [e for e in log if e["phase"] == "phase1"]

    def mean(entries: list[dict[str, Any]], key: str) -> float | None:
        vals = [e["parsed"][key] for e in entries if e["parsed"] is not None]
        return float(np.mean(vals)) if vals else None

    metrics: dict[str, Any] = {
        "n_agents": 1 + cfg.n_peers,
        "rounds": cfg.rounds,
        "parse_errors": sum(e["parse_error"] for e in log),
        "changed_position_count": sum(
            bool(e["parsed"] and e["parsed"]["changed_position"]) for e in finals
        ),
        "mean_initial_confidence": mean(initials, "confidence"),
        "mean_final_confidence": mean(finals, "final_confidence"),
        "sim_time_end": world.now,
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
        names = agent_names(cfg)
        structured = corrosion_metrics(store, names[0], names[1:], cfg.rounds, world.seed)
        summary = structured["metrics_summary"]
        dc = structured["directional_convergence"]
        le = structured["lifecycle_entropy"]
        metrics.update({k: summary[k] for k in COMPARED})
        metrics.update(
            avg_initial_alignment=_avg(dc["initial_alignment"].values()),
            avg_final_alignment=_avg(dc["final_alignment"].values()),
            entropy_phase1=le["phase1"],
            entropy_final=le["final"],
        )
        results.update(structured)
    results["metrics"] = metrics
    return results


def _avg(values: Any) -> float | None:
    vals = list(values)
    return float(np.mean(vals)) if vals else None


def compare(a: Sequence[dict[str, Any]], b: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The scenario's ``compare`` hook: :func:`.metrics.compare_runs` on results objects.

    One result per arm gives the single-pair delta; lists give the Monte Carlo
    statistics, paired when both arms ran the same seeds in the same order. The
    bootstrap is seeded from those trial seeds.
    """
    seeds_a, seeds_b = [r.get("seed") for r in a], [r.get("seed") for r in b]
    rows_a, rows_b = [r["metrics"] for r in a], [r["metrics"] for r in b]
    if len(a) == 1 and len(b) == 1:
        return compare_runs(rows_a[0], rows_b[0])
    seed = derive_seed(int(seeds_a[0] or 0), "context_corrosion.bootstrap." + ",".join(map(str, seeds_a)))
    return compare_runs(rows_a, rows_b, paired=seeds_a == seeds_b, seed=seed)


def summarize(results: dict[str, Any]) -> str:
    """A few lines for the terminal (a failed trial may lack the analysis)."""
    m = results.get("metrics", {})
    arm = {True: "A (biased D)", False: "B (unbiased D)"}.get(results.get("biased_dominant"), "?")
    lines = [
        f"context corrosion: task {results.get('task_id', '?')} ({results.get('task_title', '?')}), "
        f"run {arm}, status {results.get('status')}",
    ]
    if "n_agents" in m:
        lines.append(
            f"  agents {m['n_agents']}, rounds {m['rounds']}, events {results.get('n_events')}, "
            f"parse errors {m['parse_errors']}, changed position {m['changed_position_count']}"
        )
    if "avg_peer_directional_delta" in m:
        le = results["lifecycle_entropy"]
        lines += [
            f"  directional delta {_f(m['avg_peer_directional_delta'], '+.3f')} "
            f"(alignment to D {_f(m['avg_initial_alignment'])} -> {_f(m['avg_final_alignment'])}), "
            f"D self-drift {_f(m['dominant_self_drift'])}",
            f"  final-round peer->D {_f(m['avg_peer_convergence_final_round'])}, "
            f"peer<->peer {_f(m['avg_peer_to_peer_convergence'])}",
            "  entropy " + " -> ".join(f"{k} {_f(v, '.2f')}" for k, v in le.items())
            + f" (decay {_f(m['entropy_decay_phase1_to_final'], '+.2f')})",
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
        from scenarios.context_corrosion.plots import write_run_plots

        store.save(run_dir / "embeddings.npz")
        if cfg.plots:
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
