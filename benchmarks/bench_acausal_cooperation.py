"""How long a default acausal-cooperation stub run takes (10 agents, 10 rounds).

Measures, side by side in one process: the simulation (1000 stub calls: 100
strategies + 900 decisions), the analysis without and with MiniLM strategy
embeddings, and writing the run directory (seed files, report, three plots).
Then the whole CLI command in fresh processes, with and without embeddings.

    python benchmarks/bench_acausal_cooperation.py [--repeats N]

Writes ``benchmarks/results/bench_acausal_cooperation.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def cli_seconds(*flags: str) -> float:
    with tempfile.TemporaryDirectory() as out:
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "scenarios.acausal_cooperation", "--out", out, *flags],
                       cwd=ROOT, check=True, capture_output=True)
        return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="timed repetitions (default 3)")
    args = parser.parse_args()

    t0 = time.perf_counter()
    from scenarios.acausal_cooperation import SCENARIO
    from simcore.runs.runner import run_trial_async, write_run
    import_s = time.perf_counter() - t0

    cfg_off = SCENARIO.config_type(embeddings=False)
    cfg_on = SCENARIO.config_type(embeddings=True)
    sim, analyze_off, analyze_on, write = [], [], [], []
    calls = 0
    for k in range(args.repeats):
        t = time.perf_counter()
        trial = asyncio.run(run_trial_async(SCENARIO, cfg_off, 42 + k))
        sim.append(trial.wall_s)
        analyze_off.append(time.perf_counter() - t - trial.wall_s)
        calls = sum(u["calls"] for u in trial.world.usage.values())
        t = time.perf_counter()
        SCENARIO.analyze(trial.world, cfg_on)  # first repeat includes loading MiniLM
        analyze_on.append(time.perf_counter() - t)
        with tempfile.TemporaryDirectory() as out:
            t = time.perf_counter()
            write_run(trial, out, "bench")
            write.append(time.perf_counter() - t)
    result = {
        "benchmark": "bench_acausal_cooperation",
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(),
                    "load_avg_1m": os.getloadavg()[0]},
        "config": "defaults: 10 agents, 10 rounds, stub backend",
        "llm_calls_per_run": calls,
        "import_s": import_s,
        "simulate_s": sim,
        "calls_per_s": [calls / s for s in sim],
        "analyze_no_embeddings_s": analyze_off,
        "analyze_with_embeddings_s": analyze_on,
        "write_run_dir_s": write,
        "cli_no_embeddings_s": cli_seconds("--no-embeddings"),
        "cli_default_s": cli_seconds(),
    }
    path = ROOT / "benchmarks" / "results" / "bench_acausal_cooperation.json"
    path.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
