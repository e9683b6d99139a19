"""Sweep throughput against the machine's: a stub sweep of context corrosion at 1, 2, 4, 8, 16 workers.

Measures, in one run:

1. **independent processes**: the stub trials ``benchmarks/bench_call_cost.py``
   times (context corrosion, no metrics) in 1 process, then in W processes
   released at once for each worker count W: the speed-up W processes that share
   nothing reach on this machine, the ceiling for a sweep;
2. **the sweep** (``--executor local``, metrics on, the CPU encoder, empty
   embedding caches: a new ``SIMCORE_EMBED_CACHE`` per run) at each worker count,
   its speed-up over 1 worker, and that speed-up as a share of the independent
   processes' at the same count; with each run's pace record (``summary.json``
   ``timing.pace``): the parent's work per trial, the workers' start-up and idle share;
3. on a machine where torch sees a GPU, the same sweeps with the default device
   (``auto``: the GPU, one shared encoder in the sweep's process) beside
   ``--device cpu``; with ``--shared``, also the CPU encoder shared the same way.

Worker counts above this machine's cores, and the GPU rows on a machine without a
GPU, are not run: the output lists them under ``not_measured`` with the reason.
Every results table must be the same (every metric column) across all runs;
the output says whether it was. Load averages are recorded before and after
every run: figures taken on a busy machine say little.

    python benchmarks/bench_batch.py                   # 400 seeds x 2 conditions = 800 trials
    python benchmarks/bench_batch.py --trials 60 --workers 1,2
    python benchmarks/bench_batch.py --overhead        # also: bare loop vs --executor serial
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from simcore.analysis.embed_cache import ENV  # noqa: E402
from simcore.analysis.embeddings import DEVICE_ENV, clear_cache, missing_gpu_packages  # noqa: E402
from simcore.base.records import atomic_write, utc_now  # noqa: E402
from simcore.batch import VOLATILE_COLUMNS, plan_sweep, run_sweep  # noqa: E402
from simcore.runs.runner import run_trial, write_run  # noqa: E402


def cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def gpu_seen() -> str | None:
    """Why the GPU rows cannot run here, or None when torch sees a CUDA device."""
    if missing_gpu_packages():
        return f"the gpu extra is not installed ({', '.join(missing_gpu_packages())} missing)"
    import torch

    return None if torch.cuda.is_available() else "torch sees no CUDA device on this machine"


def window_child(trials: int) -> None:
    """One independent process: warm up, say ready, wait for the go, then time three passes."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from bench_call_cost import _trials

    _trials(trials)
    print("ready", flush=True)
    sys.stdin.readline()
    start = time.time()
    calls = sum(n for _ in range(3) for _, n in _trials(trials))
    print(json.dumps({"calls": calls, "start": start, "end": time.time()}), flush=True)


def independent(processes: int, trials: int) -> dict[str, Any]:
    """``processes`` processes timing stub trials (bench_call_cost's) at once, started together.

    Each warms up and waits; all are released at once, so the span is the time they
    ran side by side, not their staggered start-up. Returns their calls per second in all.
    """
    children = [subprocess.Popen([sys.executable, __file__, "--child-window", str(trials)],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                for _ in range(processes)]
    for child in children:
        if child.stdout.readline().strip() != "ready":  # type: ignore[union-attr]
            sys.exit(f"independent processes: a child failed: {child.stderr.read().strip()[-300:]}")  # type: ignore[union-attr]
    for child in children:
        child.stdin.write("go\n")  # type: ignore[union-attr]
        child.stdin.flush()  # type: ignore[union-attr]
    windows = []
    for child in children:
        out, err = child.communicate()
        if child.returncode != 0:
            sys.exit(f"independent processes: {err.strip().splitlines()[-1] if err.strip() else child.returncode}")
        windows.append(json.loads(out.strip().splitlines()[-1]))
    span = max(w["end"] for w in windows) - min(w["start"] for w in windows)
    return {"processes": processes, "calls_per_s": sum(w["calls"] for w in windows) / span}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=400, help="seeds per condition (default 400 -> 800 trials)")
    ap.add_argument("--workers", default="1,2,4,8,16", help="worker counts (default 1,2,4,8,16; "
                    "those above this machine's cores are not run)")
    ap.add_argument("--independent-trials", type=int, default=200,
                    help="stub trials per timing pass of each independent process (default 200)")
    ap.add_argument("--child-window", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--shared", action="store_true", help="also the CPU encoder shared by the workers")
    ap.add_argument("--overhead", action="store_true",
                    help="also a bare run_trial/write_run loop against --executor serial (the runner's own cost)")
    ap.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE", help="fixed config field")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "bench_batch.json"))
    args = ap.parse_args()
    if args.child_window:
        window_child(args.child_window)
        return
    base = {"plots": False, **dict(item.split("=", 1) for item in args.set)}
    asked = sorted({int(w) for w in args.workers.split(",")})
    n_cores = cores()
    counts = [w for w in asked if w <= n_cores]
    not_measured = {f"workers={w}": f"this machine has {n_cores} cores" for w in asked if w > n_cores}
    no_gpu = gpu_seen()
    if no_gpu:
        not_measured["default device (auto, the GPU) against --device cpu"] = no_gpu

    plan = plan_sweep("context_corrosion", args.trials, base=base)
    n = len(plan.jobs)
    work = Path(tempfile.mkdtemp(prefix="bench_batch."))
    load: list[dict[str, Any]] = []
    runs: dict[str, dict[str, Any]] = {}
    tables = {}

    def note(what: str) -> None:
        load.append({"after": what, "load_avg_1_5_15": [round(v, 2) for v in os.getloadavg()]})

    def cold(name: str, device: str) -> None:
        # An empty memory cache and a new, empty disk cache (pool workers take the variable).
        clear_cache()
        os.environ[ENV] = str(work / f"cache-{name}")
        os.environ[DEVICE_ENV] = device

    def sweep(name: str, workers: int, device: str, encoder: str = "auto", executor: str = "local") -> None:
        cold(name, device)
        note(f"before {name}")
        w0 = time.perf_counter()
        df = run_sweep("context_corrosion", args.trials, plan=plan, executor=executor, workers=workers,
                       out=work / name, progress=True, plot=False, encoder=encoder)
        wall = time.perf_counter() - w0
        failed = df[df["status"] != "ok"]
        for _, row in failed.iterrows():  # said, and the run kept out of the table comparison
            print(f"{name}: trial {row['run_id']} {row['status']}: {row['error']}", file=sys.stderr)
        if failed.empty:
            tables[name] = df.drop(columns=list(VOLATILE_COLUMNS))
        timing = df.attrs["summary"]["timing"]
        runs[name] = {"workers": workers, "device": device, "encoder": encoder, "executor": executor,
                      "failed": {str(r["run_id"]): str(r["error"]) for _, r in failed.iterrows()}, "wall_s": wall, "trials_per_s": n / wall, "executor_phase_s": timing["elapsed_s"],
                      "pace": timing["pace"]}
        note(name)
        print(f"{name}: {n / wall:.2f} trials/s (wall {wall:.1f} s), load {os.getloadavg()[0]:.2f}", file=sys.stderr)

    def bare() -> None:
        cold("bare", "cpu")
        w0 = time.perf_counter()
        for job in plan.jobs:
            write_run(run_trial(plan.scenario, job.config, job.seed, plan.spec), work / "bare", job.run_id)
        wall = time.perf_counter() - w0
        runs["bare"] = {"wall_s": wall, "trials_per_s": n / wall}
        note("bare")

    try:
        single = independent(1, args.independent_trials)
        note("independent x1")
        machine = {}
        for w in counts:
            together = single if w == 1 else independent(w, args.independent_trials)
            machine[w] = {**together, "speedup": together["calls_per_s"] / single["calls_per_s"]}
            note(f"independent x{w}")
        for w in counts:
            sweep(f"cpu_{w}", w, "cpu")
            if args.shared and w > 1:
                sweep(f"cpu_shared_{w}", w, "cpu", encoder="shared")
            if not no_gpu:
                sweep(f"auto_{w}", w, "auto")
        if args.overhead:
            bare()
            sweep("serial", 1, "cpu", executor="serial")
        first = next(iter(tables.values()))
        identical = all(t.equals(first) for t in tables.values())
        # Per device (its encoder's vectors): identical across worker counts and executors? And
        # between devices, how far apart the metric columns are (GPU and CPU floats differ).
        by_device: dict[str, list[str]] = {}
        for name in tables:
            by_device.setdefault(runs[name]["device"], []).append(name)
        same_device = {d: all(tables[n].equals(tables[names[0]]) for n in names) for d, names in by_device.items()}
        firsts = [tables[names[0]] for names in by_device.values()]
        cols = [c for c in first.columns if c.startswith("metric_")]
        across_devices = {c: float(max((abs(t[c].astype(float) - firsts[0][c].astype(float))).max() for t in firsts))
                          for c in cols} if len(firsts) > 1 else {}
        metrics = sorted(c[len("metric_"):] for c in first.columns if c.startswith("metric_"))
    finally:
        shutil.rmtree(work, ignore_errors=True)

    one = runs["cpu_1"]["trials_per_s"] if "cpu_1" in runs else None
    rows = []
    for w in counts:
        row: dict[str, Any] = {"workers": w, "independent_speedup": machine[w]["speedup"]}
        for kind in ("cpu", "cpu_shared", "auto"):
            r = runs.get(f"{kind}_{w}")
            if r is None:
                continue
            pace = r["pace"]
            row[kind] = {
                "wall_s": round(r["wall_s"], 2),
                "trials_per_s": round(r["trials_per_s"], 3),
                "speedup_vs_cpu_1": None if one is None else round(r["trials_per_s"] / one, 3),
                "parent_ms_per_trial": pace.get("parent_ms_per_trial"),
                "parent_cpu_ms_per_trial": pace.get("parent_cpu_ms_per_trial"),
                "worker_idle_share": pace.get("worker_idle_share"),
                "worker_startup_s_mean": pace.get("worker_startup_s_mean"),
                "workers_that_imported_torch": pace.get("workers_that_imported_torch"),
                "encoder": pace.get("encoder"),
            }
        if one is not None and "cpu" in row:
            row["sweep_share_of_independent_speedup"] = round(row["cpu"]["speedup_vs_cpu_1"]
                                                              / row["independent_speedup"], 3)
        rows.append(row)
    report = {
        "benchmark": "bench_batch",
        "created_utc": utc_now(),
        "machine": {"python": platform.python_version(), "cores": n_cores, "gpu": no_gpu or "CUDA"},
        "load": load,
        "scenario": "context_corrosion",
        "trials": n,
        "config": plan.base.to_dict(),
        "metrics": metrics,
        "embedding_metrics_module_present": importlib.util.find_spec("scenarios.context_corrosion.metrics") is not None,
        "independent_processes": {"trials_per_pass": args.independent_trials,
                                  "calls_per_s": {w: m["calls_per_s"] for w, m in machine.items()}},
        "rows": rows,
        "not_measured": not_measured,
        "runs": runs,
        "tables_identical_across_runs": identical,
        "tables_identical_within_each_device": same_device,
        "metric_max_abs_diff_across_devices": across_devices,
    }
    if args.overhead:
        report["runner_overhead_ms_per_trial"] = 1000 * (runs["serial"]["wall_s"] - runs["bare"]["wall_s"]) / n
    atomic_write(args.out, json.dumps(report, indent=2) + "\n")
    print(f"{n} trials, {n_cores} cores, load before/after: {load[0]['load_avg_1_5_15']} / {load[-1]['load_avg_1_5_15']}")
    print(f"{'workers':>7} {'indep. x':>8} {'sweep s':>8} {'sweep x':>8} {'share':>6} {'parent ms/trial':>15} "
          f"{'idle':>6} {'start s':>7}")
    for row in rows:
        cpu = row.get("cpu", {})
        print(f"{row['workers']:>7} {row['independent_speedup']:>8.2f} {cpu.get('wall_s', float('nan')):>8.1f} "
              f"{cpu.get('speedup_vs_cpu_1') or float('nan'):>8.2f} "
              f"{row.get('sweep_share_of_independent_speedup', float('nan')):>6.2f} "
              f"{cpu.get('parent_ms_per_trial') or float('nan'):>15.2f} {cpu.get('worker_idle_share') or 0:>6.1%} "
              f"{cpu.get('worker_startup_s_mean') or float('nan'):>7.2f}")
        for kind in ("cpu_shared", "auto"):
            if kind in row:
                r = row[kind]
                print(f"{'':>7} {kind + ':':>17} {r['wall_s']:>8.1f} s, {r['speedup_vs_cpu_1']:.2f}x, "
                      f"workers that imported torch: {r['workers_that_imported_torch']}")
    for what, why in not_measured.items():
        print(f"not measured: {what}: {why}")
    print(f"results tables identical across runs: {identical}; within each device: {same_device}")
    if across_devices:
        print(f"largest metric difference between devices: {max(across_devices.values()):.2e}")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
