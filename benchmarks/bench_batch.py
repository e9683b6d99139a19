"""Batch-runner throughput and overhead on a stub sweep of context corrosion.

Runs, side by side in one process, the same trials (default: 500 seeds x the
biased/unbiased counterfactual = 1,000 trials, default config, metrics on):

1. bare: ``run_trial`` + ``write_run`` in a plain loop (no batch runner);
2. the batch runner, ``--executor serial`` (same process, one trial at a time);
3. the batch runner, ``--executor local --workers 1`` and ``--workers 2``;
4. optionally (``--dask``) a Dask LocalCluster with 2 workers.

It reports trials/s for each, and the runner's overhead per trial: (serial batch
wall time - bare wall time) / trials, i.e. planning and validation, the ledger
(one fsynced append per trial), the results tables, the summary and the plot.

Every run starts with empty embedding caches, in memory and on disk (a new
``SIMCORE_EMBED_CACHE`` directory per run, which pool workers share): texts
repeat across trials, so a warm cache would make later runs look several times
faster for a reason that has nothing to do with the runner.

The context-corrosion metrics are whatever ``scenarios.context_corrosion``
computes; the JSON records the metric names and whether the embedding metrics
module (``scenarios/context_corrosion/metrics.py``) was present. Pass extra fixed
config fields with ``--set FIELD=VALUE`` (e.g. a switch that turns metrics on).

    python benchmarks/bench_batch.py                 # writes benchmarks/results/bench_batch.json
    python benchmarks/bench_batch.py --trials 50     # a quick run
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from simcore.analysis.embed_cache import ENV  # noqa: E402
from simcore.analysis.embeddings import clear_cache  # noqa: E402
from simcore.base.records import atomic_write, utc_now  # noqa: E402
from simcore.batch import plan_sweep, run_sweep  # noqa: E402
from simcore.runs.runner import run_trial, write_run  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=500, help="seeds per condition (default 500 -> 1,000 trials)")
    ap.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE", help="fixed config field")
    ap.add_argument("--dask", action="store_true", help="also run a Dask LocalCluster with 2 workers")
    ap.add_argument("--dask-only", action="store_true",
                    help="run only Dask LocalClusters of 1 and 2 workers (for Dask's own scaling)")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "bench_batch.json"))
    args = ap.parse_args()
    base = dict(item.split("=", 1) for item in args.set)

    plan = plan_sweep("context_corrosion", args.trials, base=base)
    n = len(plan.jobs)
    work = Path(tempfile.mkdtemp(prefix="bench_batch."))
    load = [os.getloadavg()]
    results: dict[str, list[dict[str, float]]] = {}
    tables = {}

    def cold(name: str) -> None:
        # An empty memory cache and a new, empty disk cache (pool workers inherit the variable).
        clear_cache()
        os.environ[ENV] = str(work / f"cache-{name}")

    def bare(name: str) -> None:
        cold(name)
        w0, c0 = time.perf_counter(), time.process_time()
        for job in plan.jobs:
            write_run(run_trial(plan.scenario, job.config, job.seed, plan.spec), work / name, job.run_id)
        record("bare", w0, c0, None)

    def batch(name: str, executor: str, workers: int) -> None:
        cold(name)
        w0, c0 = time.perf_counter(), time.process_time()
        df = run_sweep("context_corrosion", args.trials, plan=plan, executor=executor, workers=workers,
                       out=work / name, progress=True)
        assert (df["status"] == "ok").all(), df["status"].value_counts()
        tables[name] = df.drop(columns=["wall_s", "total_s"])
        record(f"{executor}_{workers}" if executor in ("local", "dask") else executor, w0, c0,
               df.attrs["summary"]["timing"]["elapsed_s"])

    def record(key: str, w0: float, c0: float, executor_s: float | None) -> None:
        wall, cpu = time.perf_counter() - w0, time.process_time() - c0
        entry = {"wall_s": wall, "trials_per_s": n / wall, "parent_cpu_s": cpu}
        if executor_s is not None:
            entry["executor_phase_s"] = executor_s
            entry["fixed_s"] = wall - executor_s
        results.setdefault(key, []).append(entry)
        load.append(os.getloadavg())
        print(f"{key}: {n / wall:.1f} trials/s (wall {wall:.1f} s, this process's CPU {cpu:.1f} s)", file=sys.stderr)

    try:
        if args.dask_only:
            batch("dask1", "dask", 1)
            batch("dask2", "dask", 2)
            batch("dask1b", "dask", 1)
            report = {"benchmark": "bench_batch --dask-only", "created_utc": utc_now(), "trials": n,
                      "machine": {"cpus": os.cpu_count(), "load_avg_1_5_15_after_each_run": load},
                      "runs": results,
                      "speedup_dask_2_vs_1_workers": (results["dask_2"][0]["trials_per_s"]
                                                      / (sum(r["trials_per_s"] for r in results["dask_1"]) / 2)),
                      "tables_identical": all(t.equals(next(iter(tables.values()))) for t in tables.values())}
            atomic_write(args.out, json.dumps(report, indent=2) + "\n")
            print(json.dumps(report, indent=2))
            return
        # ABAB order for the bare/serial pair, so that drifting machine load hits both.
        bare("bare1")
        batch("serial1", "serial", 1)
        batch("local1", "local", 1)
        batch("local2", "local", 2)
        if args.dask:
            batch("dask2", "dask", 2)
        bare("bare2")
        batch("serial2", "serial", 1)
        first = next(iter(tables.values()))
        identical = all(t.equals(first) for t in tables.values())
        metrics = sorted(c[len("metric_"):] for c in first.columns if c.startswith("metric_"))
    finally:
        shutil.rmtree(work, ignore_errors=True)

    def mean(key: str, field: str) -> float:
        return sum(r[field] for r in results[key]) / len(results[key])

    report = {
        "benchmark": "bench_batch",
        "created_utc": utc_now(),
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(),
                    "load_avg_1_5_15_after_each_run": [[round(v, 2) for v in x] for x in load]},
        "scenario": "context_corrosion",
        "trials": n,
        "config": plan.base.to_dict(),
        "metrics": metrics,
        "embedding_metrics_module_present": importlib.util.find_spec("scenarios.context_corrosion.metrics") is not None,
        "runs": results,
        "trials_per_s": {k: mean(k, "trials_per_s") for k in results},
        "speedup_local_2_vs_1_workers": mean("local_2", "trials_per_s") / mean("local_1", "trials_per_s"),
        "overhead_serial_vs_bare": {
            "wall_ms_per_trial": 1000 * (mean("serial", "wall_s") - mean("bare", "wall_s")) / n,
            "cpu_ms_per_trial": 1000 * (mean("serial", "parent_cpu_s") - mean("bare", "parent_cpu_s")) / n,
            "cpu_ratio": mean("serial", "parent_cpu_s") / mean("bare", "parent_cpu_s"),
            "bare_cpu_ms_per_trial": 1000 * mean("bare", "parent_cpu_s") / n,
            "fixed_s_per_sweep": mean("serial", "fixed_s"),
        },
        "tables_identical_across_executors": identical,
        "notes": (
            "Wall times include each sweep's fixed costs (validation, process or cluster start-up, "
            "tables, summary, plot); fixed_s is wall minus the executor phase. The serial/bare "
            "overhead is also given in this process's CPU time, which other load on the shared "
            "machine disturbs less than wall time. See the load averages."
        ),
    }
    atomic_write(args.out, json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
