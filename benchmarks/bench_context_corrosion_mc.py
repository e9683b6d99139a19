"""Benchmark: a context-corrosion Monte Carlo on the stub, end to end.

10 trials per arm (20 trials), 3 rounds: simulation, embeddings (all-MiniLM-L6-v2
on the CPU), metrics, four plots per trial, the run directories, and the group
summary with its comparison figure. Reports the wall time and where it goes:

- ``model_load_s``: loading the model (on the CPU, the numpy encoder);
- ``encoding_s``: inside ``simcore.analysis.embeddings.encode``, summed over the trials'
  analysis threads, which wait on the one encoder side by side: it can exceed
  the wall time;
- ``metrics_s``: the metric functions (cosines, the exact k=2 split);
- ``plots_s``: drawing and saving PNGs, on the writer thread, overlapping the
  main thread's work;
- ``simulation_s``: the same 20 trials with ``metrics=False`` and nothing
  written, timed separately in the same process.

Run: ``python benchmarks/bench_context_corrosion_mc.py [--trials N] [--out DIR]``.
Writes ``benchmarks/results/bench_context_corrosion_mc.json``. The target is a
wall time under 30 s on a 2-core machine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

START = time.perf_counter()
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from scenarios.context_corrosion import SCENARIO, analysis, plots  # noqa: E402
from simcore.analysis import embeddings  # noqa: E402
from simcore.analysis import plots as shared_plots  # noqa: E402
from simcore.runs.counterfactual import run_arms, trial_seeds  # noqa: E402
from simcore.runs.runner import run_trial_async  # noqa: E402

TIMES: dict[str, float] = {"encoding_s": 0.0, "metrics_s": 0.0, "plots_s": 0.0}
COUNTS: dict[str, int] = {"encode_calls": 0, "texts_encoded": 0, "plot_files": 0}  # encoded = cache misses
LOCK = threading.Lock()


def timed(module, name: str, key: str, count: str | None = None, size=None):
    """Wrap ``module.name`` so that its time adds to TIMES[key]."""
    inner = getattr(module, name)

    def wrapper(*args, **kwargs):
        extra = size[1](*args) if size else 0
        t = time.perf_counter()
        try:
            return inner(*args, **kwargs)
        finally:
            with LOCK:
                TIMES[key] += time.perf_counter() - t
                if count:
                    COUNTS[count] += 1
                if size:
                    COUNTS[size[0]] += extra

    setattr(module, name, wrapper)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=10, help="trials per arm (default 10)")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--out", default=None, help="output root (default: a temporary directory)")
    parser.add_argument("--results", default=str(Path(__file__).parent / "results" / "bench_context_corrosion_mc.json"))
    args = parser.parse_args()
    load_start = os.getloadavg()

    t = time.perf_counter()
    embeddings.get_model()
    model_load = time.perf_counter() - t

    missing = lambda texts: sum(embeddings.text_key(x) not in embeddings._cache for x in texts)  # noqa: E731
    timed(embeddings, "encode", "encoding_s", "encode_calls", ("texts_encoded", missing))
    timed(analysis, "corrosion_metrics", "metrics_s")
    timed(plots, "_save", "plots_s", "plot_files")
    timed(shared_plots, "comparison_plot", "plots_s", "plot_files")

    out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="bench-cc-"))
    cfg = SCENARIO.config_type()
    t = time.perf_counter()
    summary = run_arms(SCENARIO, cfg, args.seed, n_trials=args.trials, out=out, progress=True)
    mc_wall = time.perf_counter() - t
    total = time.perf_counter() - START

    # The simulation alone, side by side: same trials, no metrics, nothing written.
    bare = cfg.replace(metrics=False)
    seeds = trial_seeds(args.seed, args.trials)

    async def simulate() -> None:
        jobs = [run_trial_async(SCENARIO, bare.replace(biased=b), s) for b in (True, False) for s in seeds]
        await asyncio.gather(*jobs)

    t = time.perf_counter()
    asyncio.run(simulate())
    simulation = time.perf_counter() - t

    diff = summary["statistical_comparison"]["difference_summary"]["avg_peer_directional_delta"]
    result = {
        "benchmark": "context_corrosion Monte Carlo, stub backend, end to end",
        "trials_per_arm": args.trials,
        "rounds": cfg.rounds,
        "total_wall_s": round(total, 2),
        "monte_carlo_wall_s": round(mc_wall, 2),
        "split_s": {
            "imports_before_model_s": round(total - mc_wall - model_load, 2),
            "model_load_s": round(model_load, 2),
            "encoding_s": round(TIMES["encoding_s"], 2),
            "metrics_s": round(TIMES["metrics_s"], 2),
            "plots_s_writer_thread": round(TIMES["plots_s"], 2),
            "simulation_s": round(simulation, 2),
        },
        "counts": COUNTS,
        "target_s": 30,
        "meets_target": total < 30,
        "directional_delta": {k: diff[k] for k in ("delta_mean", "test", "p_value", "p_adjusted", "family")},
        "failed_trials": len(summary["failed_trials"]),
        "machine": {
            "cpus": os.cpu_count(),
            "load_avg_1m_start": round(load_start[0], 2),
            "load_avg_1m_end": round(os.getloadavg()[0], 2),
            "python": platform.python_version(),
        },
    }
    Path(args.results).parent.mkdir(parents=True, exist_ok=True)
    Path(args.results).write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    if not args.out:
        shutil.rmtree(out, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
