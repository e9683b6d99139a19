"""Analysis of a context-corrosion run.

These are the reply-level figures that need no embeddings. The embedding metrics
of the seed (convergence matrix, directional convergence, lifecycle entropy) are
computed by :mod:`.metrics` when it is available.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from scenarios.context_corrosion.config import CorrosionConfig
from scenarios.context_corrosion.tasks import task
from simcore.kernel import World
from simcore.records import write_json


def analyze(world: World, cfg: CorrosionConfig) -> dict[str, Any]:
    """Results object: scalar metrics plus the per-agent final positions."""
    log = world.state.get("log", [])
    finals = [e for e in log if e["phase"] == "final"]
    initials = [e for e in log if e["phase"] == "phase1"]

    def mean(entries: list[dict[str, Any]], key: str) -> float | None:
        vals = [e["parsed"][key] for e in entries if e["parsed"] is not None]
        return float(np.mean(vals)) if vals else None

    metrics = {
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
    return {
        "task_id": cfg.task,
        "task_title": task(cfg.task).title,
        "biased_dominant": cfg.biased,
        "metrics": metrics,
        "final_positions": {
            e["agent"]: (e["parsed"]["final_answer"] if e["parsed"] else None) for e in finals
        },
    }


def summarize(results: dict[str, Any]) -> str:
    """A few lines for the terminal."""
    m = results["metrics"]
    lines = [
        f"context corrosion: task {results['task_id']} ({results['task_title']}), "
        f"run {'A (biased D)' if results['biased_dominant'] else 'B (unbiased D)'}, "
        f"status {results['status']}",
        f"  agents {m['n_agents']}, rounds {m['rounds']}, events {results['n_events']}, "
        f"parse errors {m['parse_errors']}, changed position {m['changed_position_count']}",
    ]
    return "\n".join(lines)


def write_artifacts(run_dir: Path, world: World, cfg: CorrosionConfig, results: dict[str, Any]) -> dict[str, Any]:
    """The seed's full structured log: every raw output, parse and the transcript."""
    write_json(
        run_dir / "experiment.json",
        {
            "task": task(cfg.task).to_dict(),
            "config": cfg.to_dict(),
            "replies": world.state.get("log", []),
            "transcript": [
                {"seq": m.seq, "t": m.t, "speaker": m.speaker, "text": m.text, **m.fields}
                for m in world.board.messages
            ],
            "metrics": results.get("metrics", {}),
        },
    )
    return {}
