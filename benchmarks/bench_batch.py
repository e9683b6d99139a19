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

from simcore.batch import plan_sweep, run_sweep  # noqa: E402
from simcore.records import atomic_write, utc_now  # noqa: E402
from simcore.runner import run_trial, write_run  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=500, help="seeds per condition (default 500 -> 1,000 trials)")
    ap.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE", help="fixed config field")
    ap.add_argument("--dask", action="store_true", help="also run a Dask LocalCluster with 2 workers")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "bench_batch.json"))
    args = ap.parse_args()
    base = dict(item.split("=", 1) for item in args.set)

    plan = plan_sweep("context_corrosion", args.trials, base=base)
    n = len(plan.jobs)
    work = Path(tempfile.mkdtemp(prefix="bench_batch."))
    load = [os.getloadavg()]
    results: dict[str, dict[str, float]] = {}
    try:
        t0 = time.perf_counter()
        for job in plan.jobs:
            write_run(run_trial(plan.scenario, job.config, job.seed, plan.spec), work / "bare", job.run_id)
        bare = time.perf_counter() - t0
        results["bare"] = {"wall_s": bare, "trials_per_s": n / bare}
        print(f"bare run_trial+write_run: {n / bare:.1f} trials/s", file=sys.stderr)

        runs = [("serial", "serial", 1), ("local_1_worker", "local", 1), ("local_2_workers", "local", 2)]
        if args.dask:
            runs.append(("dask_2_workers", "dask", 2))
        tables = {}
        for name, executor, workers in runs:
            t0 = time.perf_counter()
            df = run_sweep(
                "context_corrosion", args.trials, plan=plan, executor=executor, workers=workers,
                out=work / name, progress=True,
            )
            wall = time.perf_counter() - t0
            assert (df["status"] == "ok").all(), df["status"].value_counts()
            tables[name] = df.drop(columns=["wall_s", "total_s"])
            results[name] = {"wall_s": wall, "trials_per_s": n / wall}
            print(f"{name}: {n / wall:.1f} trials/s", file=sys.stderr)
            load.append(os.getloadavg())
        first = next(iter(tables.values()))
        identical = all(t.equals(first) for t in tables.values())
        metrics = sorted(c[len("metric_"):] for c in first.columns if c.startswith("metric_"))
    finally:
        shutil.rmtree(work, ignore_errors=True)

    report = {
        "benchmark": "bench_batch",
        "created_utc": utc_now(),
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(),
                    "load_avg_1_5_15_during": [list(map(float, x)) for x in load]},
        "scenario": "context_corrosion",
        "trials": n,
        "config": plan.base.to_dict(),
        "metrics": metrics,
        "embedding_metrics_module_present": importlib.util.find_spec("scenarios.context_corrosion.metrics") is not None,
        "results": results,
        "speedup_2_workers_vs_1": results["local_2_workers"]["trials_per_s"] / results["local_1_worker"]["trials_per_s"],
        "runner_overhead_per_trial_ms": 1000 * (results["serial"]["wall_s"] - bare) / n,
        "runner_overhead_ratio_serial_vs_bare": results["serial"]["wall_s"] / bare,
        "tables_identical_across_executors": identical,
        "notes": (
            "Wall times include each sweep's fixed costs (validation, process or cluster start-up, "
            "tables, summary, plot). The machine is shared; see the load averages."
        ),
    }
    atomic_write(args.out, json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
