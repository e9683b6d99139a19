"""Kernel speed and scale. Writes benchmarks/results/kernel.json.

Measures, in one run on one machine:

1. raw SimPy events per second (a bare timeout loop), as the yardstick;
2. end-to-end stub LLM calls per second on the context-corrosion workload
   without metrics (build world, run, analyse; the stub with its behaviour
   model), trials one after another on one core; best of three runs;
3. a scale series: N agents on a small-world graph (k=4, p=0.1), one parallel
   round and one sequential round on the stub, for N = 10^2 .. 10^5; wall time
   and peak memory, each N in a fresh subprocess.

Usage: ``python benchmarks/bench_kernel.py [--quick]``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

OUT = ROOT / "benchmarks" / "results" / "kernel.json"


def simpy_events_per_second(n_events: int = 300_000) -> float:
    """Events/s of a bare SimPy loop: 100 processes each yielding timeouts."""
    import simpy

    env = simpy.Environment()
    per = n_events // 100

    def proc(env):
        for _ in range(per):
            yield env.timeout(1)

    for _ in range(100):
        env.process(proc(env))
    start = time.perf_counter()
    env.run()
    return n_events / (time.perf_counter() - start)


def corrosion_calls_per_second(trials: int, behaviour: bool = True) -> dict:
    """Stub calls/s on context corrosion (no embedding metrics), trials in sequence.

    Each trial is built, run and analysed (``run_trial_async``), nothing written.
    With ``behaviour=False`` the stub answers with its generic schema sampler
    instead of the scenario's stance model, which isolates the framework's cost.
    """
    from backends.registry import BackendSpec
    from backends.stub import StubBackend
    from scenarios.context_corrosion import SCENARIO
    from scenarios.context_corrosion.config import CorrosionConfig
    from simcore.runner import run_trial_async

    cfg = CorrosionConfig()
    if "metrics" in {f for f in CorrosionConfig.__dataclass_fields__}:
        cfg = cfg.replace(metrics=False)

    async def run() -> tuple[int, float, float]:
        calls = 0
        start, cpu = time.perf_counter(), time.process_time()
        for seed in range(trials):
            backend = None if behaviour else StubBackend()
            trial = await run_trial_async(SCENARIO, cfg, seed, BackendSpec(), backend)
            calls += trial.world.usage["stub"]["calls"]
        return calls, time.perf_counter() - start, time.process_time() - cpu

    asyncio.run(run())  # warm-up: imports and caches
    runs = [asyncio.run(run()) for _ in range(3)]
    calls, wall, cpu = min(runs, key=lambda r: r[1])  # best of three: the least disturbed
    return {"trials": trials, "calls": calls, "wall_s": wall, "cpu_s": cpu,
            "calls_per_s": calls / wall, "calls_per_cpu_s": calls / cpu,
            "calls_per_s_each_run": [r[0] / r[1] for r in runs]}


SCALE_CHILD = r"""
import asyncio, json, resource, sys, time, tracemalloc
sys.path.insert(0, sys.argv[2])
n = int(sys.argv[1])
traced = sys.argv[3] == "traced"
from backends.stub import StubBackend
from simcore import LLMAgent, World
from simcore.protocols import parallel, speaking_round
from simcore.topology import small_world
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
if traced:
    tracemalloc.start()
start = time.perf_counter()
world = World(1, StubBackend())
names = [f"a{i}" for i in range(n)]
agents = [LLMAgent(world, name, max_output_tokens=40) for name in names]
world.set_topology(small_world(names, k=4, p=0.1, seed=1))
built = time.perf_counter()

def experiment(world):
    yield from parallel(world, agents, "State your view briefly.", phase="parallel")
    yield from speaking_round(world, agents, "Respond briefly.", round_index=1, phase="sequential")

world.process(experiment(world))
world.run()
done = time.perf_counter()
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
heap_peak = tracemalloc.get_traced_memory()[1] if traced else None
print(json.dumps({
    "python_heap_peak_mb": None if heap_peak is None else heap_peak / 2**20,
    "n_agents": n, "calls": world.usage["stub"]["calls"], "events": len(world.trace),
    "build_s": built - start, "run_s": done - built, "wall_s": done - start,
    "peak_rss_mb": peak / 1024, "baseline_rss_mb": base / 1024,
}))
"""


def scale_series(sizes: list[int]) -> list[dict]:
    """Run each size in fresh interpreters: once timed, once under tracemalloc.

    Peak RSS includes the interpreter and imports (about 160 MB here), which hides
    small worlds; the traced run's peak of Python allocations shows the world's
    own memory. Tracing slows a run, so timings come from the untraced run.
    """
    rows = []
    for n in sizes:
        def child(mode: str) -> dict:
            out = subprocess.run(
                [sys.executable, "-c", SCALE_CHILD, str(n), str(ROOT), mode],
                capture_output=True, text=True, check=True,
            )
            return json.loads(out.stdout)

        row = child("timed")
        row["python_heap_peak_mb"] = child("traced")["python_heap_peak_mb"]
        row["added_rss_mb"] = row["peak_rss_mb"] - row["baseline_rss_mb"]
        rows.append(row)
        print(f"  N={n:>6}: {row['wall_s']:.2f} s, peak RSS {row['peak_rss_mb']:.0f} MB, "
              f"Python heap peak {row['python_heap_peak_mb']:.1f} MB", file=sys.stderr)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes, for a smoke run")
    args = parser.parse_args()
    sizes = [100, 1000, 10_000] if args.quick else [100, 1000, 10_000, 100_000]

    print("SimPy baseline ...", file=sys.stderr)
    simpy_rate = simpy_events_per_second()
    print("context corrosion on the stub ...", file=sys.stderr)
    cc = corrosion_calls_per_second(40 if args.quick else 200)
    cc_generic = corrosion_calls_per_second(40 if args.quick else 200, behaviour=False)
    print("scale series ...", file=sys.stderr)
    scale = scale_series(sizes)
    big, small = scale[-1], scale[-2]
    result = {
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
        "simpy_events_per_s": simpy_rate,
        "context_corrosion_stub": cc,
        "context_corrosion_generic_stub": cc_generic,
        "calls_per_s_vs_simpy_events_per_s": cc["calls_per_s"] / simpy_rate,
        "scale": scale,
        "scale_ratios_last_step": {
            "n_ratio": big["n_agents"] / small["n_agents"],
            "time_ratio": big["wall_s"] / small["wall_s"],
            "python_heap_ratio": big["python_heap_peak_mb"] / small["python_heap_peak_mb"],
        },
        "targets": {
            "calls_per_s_at_least": 10_000,
            "largest_n_under_s": 60,
        },
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: result[k] for k in ("simpy_events_per_s", "calls_per_s_vs_simpy_events_per_s")}, indent=2))
    print(f"context corrosion: {cc['calls_per_s']:.0f} stub calls/s "
          f"({cc_generic['calls_per_s']:.0f} with the generic stub instead of the stance model)")
    print(f"wrote {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
