"""Sweep throughput against the machine's: a stub sweep of context corrosion at 1, 2, 4, 8, 16 workers.

Measures, in one run:

1. **independent processes**: the stub trials ``benchmarks/bench_call_cost.py``
   times (context corrosion, no metrics) in 1 process, then in W processes
   released at once for each worker count W: the speed-up W processes that share
   nothing reach on this machine, the ceiling for a sweep;
2. **the sweep** (``--executor local``, metrics on, the CPU encoder, empty
   embedding caches: a new ``SIMCORE_EMBED_CACHE`` per run), each in a fresh
   process as a user's command runs (timed from ``run_sweep``'s start, so every row
   pays its own fork server, model loads and summary), at each worker count,
   its speed-up over 1 worker, and that speed-up as a share of the independent
   processes' at the same count; with each run's pace record (``summary.json``
   ``timing.pace``): the parent's work per trial, the workers' start-up and idle share;
3. **the same work in independent processes**: the sweep's own trials (metrics on,
   the CPU encoder on each process's share of the cores, one empty cache shared as
   the sweep's workers share theirs) dealt out to W processes that share nothing
   else, warmed up and released at once: what this workload itself reaches on this
   machine. The sweep's speed-up as a share of it is the sweep machinery's own
   cost; the rest of the gap to (1) is the workload's (its numpy work scales worse
   than the interpreter-bound stub trials). Its 1-process row runs on one core: the
   sweep at W workers against it is the speed-up over one core;
4. on a machine where torch sees a GPU, the same sweeps with the default device
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

``--summary N`` measures something else: the summary of a finished sweep of N stub
trials (veil of ignorance, which has no comparison of its own, so the sweep's generic
comparison and its readability test run), timed side by side in one process, in
alternation: from what each trial's index line (``ledger.jsonl``) recorded, against
reading every trial's ``results.json`` again for its replies (the way before the index
held them, which the summary still takes for a sweep recorded before it did). Both
summaries must be the same. ``--summary-dir DIR`` keeps the sweep for a later run.

    python benchmarks/bench_batch.py --summary 10000
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

import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from simcore.analysis.embed_cache import ENV  # noqa: E402
from simcore.analysis.embeddings import DEVICE_ENV, clear_cache, missing_gpu_packages  # noqa: E402
from simcore.analysis.minilm import THREADS_ENV  # noqa: E402
from simcore.base.records import atomic_write, utc_now  # noqa: E402
from simcore.batch import VOLATILE_COLUMNS, plan_sweep, run_sweep  # noqa: E402
from simcore.runs.runner import run_trial, write_run  # noqa: E402


def cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def physical_cores() -> int | None:
    """Distinct physical cores among those this process may use (hyperthreads share one), where Linux says."""
    try:
        return len({Path(f"/sys/devices/system/cpu/cpu{c}/topology/thread_siblings_list").read_text().strip()
                    for c in os.sched_getaffinity(0)})
    except (OSError, AttributeError):
        return None


def cpu_model() -> str:
    """The processor's name and cache sizes as lscpu gives them (empty where there is no lscpu)."""
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return ""
    keep = ("Model name", "Thread(s) per core", "Core(s) per socket", "Socket(s)", "L2 cache", "L3 cache")
    return "; ".join(" ".join(line.split()) for line in out.splitlines() if line.startswith(keep))


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
    print(json.dumps({"count": calls, "start": start, "end": time.time()}), flush=True)


def work_child(spec: str) -> None:
    """One independent process running its share of the sweep's trials: ``W:I:TRIALS:LIMIT:OUT:BASE_JSON``.

    Warms up (imports, the encoder's model and one text), says ready, waits for the
    go, then runs trials I, I+W, ... of the first LIMIT of the sweep's plan with the bare runner.
    """
    workers, index, trials, limit, out, base = spec.split(":", 5)
    from simcore.analysis import embeddings

    embeddings.get_model().embed(embeddings.get_model().token_ids(["warm up"]))
    plan = plan_sweep("context_corrosion", int(trials), base=json.loads(base))
    jobs = plan.jobs[:int(limit)][int(index)::int(workers)]
    print("ready", flush=True)
    sys.stdin.readline()
    start = time.time()
    for job in jobs:
        write_run(run_trial(plan.scenario, job.config, job.seed, plan.spec), Path(out), job.run_id)
    print(json.dumps({"count": len(jobs), "start": start, "end": time.time()}), flush=True)


def sweep_child(spec_json: str) -> None:
    """One sweep in this fresh process; prints its wall time (from run_sweep's start) and timing record.

    The results table, less its volatile columns, goes to ``<out>/bench-table.pkl``.
    """
    spec = json.loads(spec_json)
    plan = plan_sweep("context_corrosion", spec["trials"], base=spec["base"])
    w0 = time.perf_counter()
    df = run_sweep("context_corrosion", spec["trials"], plan=plan, executor=spec["executor"],
                   workers=spec["workers"], out=spec["out"], progress=True, plot=False, encoder=spec["encoder"])
    wall = time.perf_counter() - w0
    df.drop(columns=list(VOLATILE_COLUMNS)).to_pickle(Path(spec["out"]) / "bench-table.pkl")
    print(json.dumps({"wall_s": wall, "timing": df.attrs["summary"]["timing"]}, default=str), flush=True)


def released_together(commands: list[list[str]], env: dict[str, str] | None = None) -> dict[str, Any]:
    """Start the processes, wait until each is warm, release them at once; their work per second in all.

    The span is the time they ran side by side, not their staggered start-up.
    """
    children = [subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 text=True, env=env)
                for cmd in commands]
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
    return {"processes": len(commands), "per_s": sum(w["count"] for w in windows) / span, "span_s": span}


def independent(processes: int, trials: int) -> dict[str, Any]:
    """``processes`` processes timing stub trials (bench_call_cost's) at once: calls per second in all."""
    got = released_together([[sys.executable, __file__, "--child-window", str(trials)]] * processes)
    return {"processes": processes, "calls_per_s": got["per_s"]}


def same_work(processes: int, threads: int, trials: int, limit: int, base: dict[str, Any],
              work: Path) -> dict[str, Any]:
    """The sweep's first ``limit`` trials dealt out to ``processes`` independent processes.

    Each process's encoder embeds on ``threads`` threads (a sweep's worker takes
    its share of the cores), and all share one new, empty embedding cache, as a
    sweep's workers do. Returns their trials per second in all.
    """
    tag = f"same-work-{processes}x{threads}"
    env = {**os.environ, ENV: str(work / f"cache-{tag}"), DEVICE_ENV: "cpu", THREADS_ENV: str(threads),
           **{var: str(threads) for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}}
    commands = [[sys.executable, __file__, "--child-work",
                 ":".join(map(str, (processes, i, trials, limit, work / tag, json.dumps(base))))]
                for i in range(processes)]
    got = released_together(commands, env=env)
    return {"processes": processes, "encoder_threads_each": threads, "trials": limit,
            "trials_per_s": got["per_s"], "span_s": got["span_s"]}


SUMMARY_SCENARIO = "veil_of_ignorance"  # no comparison of its own: the generic one, readability included
SUMMARY_BASE = {"max_rounds": 1}
SUMMARY_CONDITIONS = ("announce_choices", [True, False])


def summary_bench(trials: int, repeats: int, keep: str | None, out: str) -> None:
    """``--summary N``: the summary of a finished sweep of N trials, from the index against
    re-reading every results.json (see the module docstring)."""
    from simcore.analysis.plots import PLOTS_ENV
    from simcore.base.files import read_ledger_line
    from simcore.batch import report

    plan = plan_sweep(SUMMARY_SCENARIO, trials // len(SUMMARY_CONDITIONS[1]), conditions=SUMMARY_CONDITIONS,
                      base=SUMMARY_BASE)
    where = Path(keep) if keep else Path(tempfile.mkdtemp(prefix="bench_summary."))
    load: list[dict[str, Any]] = []
    try:
        if not (where / "summary.json").is_file():
            load.append({"before": "sweep", "load_avg_1_5_15": [round(v, 2) for v in os.getloadavg()]})
            os.environ[PLOTS_ENV] = "summary"  # the batch command's default: no run draws its own plots
            w0 = time.perf_counter()
            run_sweep(plan.scenario, plan.trials, plan=plan, out=where, executor="serial",
                      plot=False, progress=False)
            print(f"sweep of {len(plan.jobs)} trials: {time.perf_counter() - w0:.0f} s", file=sys.stderr)
        load.append({"before": "summaries", "load_avg_1_5_15": [round(v, 2) for v in os.getloadavg()]})
        finished: dict[int, dict[str, Any]] = {}
        lines = (where / "ledger.jsonl").read_text().splitlines()
        for i, line in enumerate(lines):
            row = read_ledger_line(line, f"ledger.jsonl:{i + 1}")
            finished[row["index"]] = row  # a trial's last line is its state
        df = report.build_table(plan, finished, {})
        reads = {"index": 0, "results_json": 0}
        original = report.read_run

        def timed(way: str) -> tuple[float, dict[str, Any]]:
            def counting(*a: Any, **kw: Any) -> Any:
                reads[way] += 1
                return original(*a, **kw)

            report.read_run = counting  # type: ignore[assignment]
            try:
                t0 = time.perf_counter()
                arms = report.indexed_arms(finished) if way == "index" else None
                summary = report.summarize(plan, df, where, arms)
                return time.perf_counter() - t0, summary
            finally:
                report.read_run = original  # type: ignore[assignment]

        times: dict[str, list[float]] = {"index": [], "results_json": []}
        summaries = {}
        for r in range(repeats + 1):  # the first round warms the file cache for both, and is not counted
            for way in ("results_json", "index") if r % 2 else ("index", "results_json"):
                took, summaries[way] = timed(way)
                if r:
                    times[way].append(took)
        load.append({"after": "summaries", "load_avg_1_5_15": [round(v, 2) for v in os.getloadavg()]})
        same = json.dumps(summaries["index"]["comparisons"], sort_keys=True) == json.dumps(
            summaries["results_json"]["comparisons"], sort_keys=True)
    finally:
        if not keep:
            shutil.rmtree(where, ignore_errors=True)
    med = {way: sorted(t)[len(t) // 2] for way, t in times.items()}
    result = {
        "benchmark": "bench_batch --summary",
        "created_utc": utc_now(),
        "machine": {"python": platform.python_version(), "cores": cores(), "cpu": cpu_model()},
        "load": load,
        "note": "a shared, loaded machine: compare the two ways by their ratio, measured in alternation",
        "scenario": SUMMARY_SCENARIO, "config": SUMMARY_BASE, "conditions": list(SUMMARY_CONDITIONS),
        "trials": len(plan.jobs), "ok": int((df["status"] == "ok").sum()), "repeats": repeats,
        "summary_s": {way: [round(t, 3) for t in ts] for way, ts in times.items()},
        "summary_s_median": {way: round(t, 3) for way, t in med.items()},
        "results_json_reads_per_summary": {way: n // (repeats + 1) for way, n in reads.items()},
        "ratio_results_json_over_index": round(med["results_json"] / med["index"], 2),
        "same_comparisons": same,
    }
    atomic_write(out, json.dumps(result, indent=2) + "\n")
    print(f"summary of {len(plan.jobs)} trials ({result['ok']} ok), median of {repeats}: from the index "
          f"{med['index']:.2f} s ({result['results_json_reads_per_summary']['index']} results.json read), "
          f"re-reading results.json {med['results_json']:.2f} s "
          f"({result['results_json_reads_per_summary']['results_json']} read): "
          f"{result['ratio_results_json_over_index']}x; same comparisons: {same}; load {load}")
    print(f"wrote {out}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=400, help="seeds per condition (default 400 -> 800 trials)")
    ap.add_argument("--workers", default="1,2,4,8,16", help="worker counts (default 1,2,4,8,16; "
                    "those above this machine's cores are not run)")
    ap.add_argument("--independent-trials", type=int, default=200,
                    help="stub trials per timing pass of each independent process (default 200)")
    ap.add_argument("--one-core-trials", type=int,
                    help="trials of the one-core baseline (default all; the first N of the plan)")
    ap.add_argument("--child-window", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--child-work", help=argparse.SUPPRESS)
    ap.add_argument("--child-sweep", help=argparse.SUPPRESS)
    ap.add_argument("--shared", action="store_true", help="also the CPU encoder shared by the workers")
    ap.add_argument("--overhead", action="store_true",
                    help="also a bare run_trial/write_run loop against --executor serial (the runner's own cost)")
    ap.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE", help="fixed config field")
    ap.add_argument("--summary", type=int, metavar="N",
                    help="instead: time the summary of a sweep of N trials, from the index against re-reading "
                         "every results.json (writes benchmarks/results/bench_batch_summary.json)")
    ap.add_argument("--summary-repeats", type=int, default=5, help="timed summaries each way (default 5)")
    ap.add_argument("--summary-dir", help="keep (or reuse) the --summary sweep in this directory")
    ap.add_argument("--out", default=None,
                    help="where the figures go (default: benchmarks/results/bench_batch.json, or "
                         "bench_batch_summary.json with --summary)")
    args = ap.parse_args()
    if args.summary:
        summary_bench(args.summary, args.summary_repeats, args.summary_dir,
                      args.out or str(ROOT / "benchmarks" / "results" / "bench_batch_summary.json"))
        return
    args.out = args.out or str(ROOT / "benchmarks" / "results" / "bench_batch.json")
    if args.child_window:
        window_child(args.child_window)
        return
    if args.child_work:
        work_child(args.child_work)
        return
    if args.child_sweep:
        sweep_child(args.child_sweep)
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
        # Each sweep in a process of its own, as a user's command runs: every row pays the
        # fork server's start, its workers' model loads and (on a GPU) torch's, as users do.
        cold(name, device)
        note(f"before {name}")
        spec = {"trials": args.trials, "base": base, "executor": executor, "workers": workers, "encoder": encoder,
                "out": str(work / name)}
        child = subprocess.run([sys.executable, __file__, "--child-sweep", json.dumps(spec)],
                               stdout=subprocess.PIPE, text=True)
        if child.returncode != 0:
            sys.exit(f"{name}: the sweep's process exited with {child.returncode}")
        got = json.loads(child.stdout.strip().splitlines()[-1])
        df = pd.read_pickle(work / name / "bench-table.pkl")
        wall = got["wall_s"]
        failed = df[df["status"] != "ok"]
        for _, row in failed.iterrows():  # said, and the run kept out of the table comparison
            print(f"{name}: trial {row['run_id']} {row['status']}: {row['error']}", file=sys.stderr)
        if failed.empty:
            tables[name] = df
        timing = got["timing"]
        runs[name] = {"workers": workers, "device": device, "encoder": encoder, "executor": executor,
                      "failed": {str(r["run_id"]): str(r["error"]) for _, r in failed.iterrows()},
                      "wall_s": wall, "trials_per_s": n / wall, "executor_phase_s": timing["elapsed_s"],
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
        one_core = same_work(1, 1, args.trials, min(n, args.one_core_trials or n), base, work)
        note("same work, one core")
        ceiling = {}
        for w in counts:
            ceiling[w] = same_work(w, max(1, n_cores // w), args.trials, n, base, work)
            note(f"same work x{w}")
            print(f"same work in {w} independent processes: {ceiling[w]['trials_per_s']:.2f} trials/s",
                  file=sys.stderr)
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
                "worker_encode_share": pace.get("worker_encode_share"),
                "worker_write_share": pace.get("worker_write_share"),
                "workers_that_imported_torch": pace.get("workers_that_imported_torch"),
                "encoder": pace.get("encoder"),
            }
        same = ceiling[w]["trials_per_s"]
        row["same_work"] = {"trials_per_s": round(same, 3), "encoder_threads_each": ceiling[w]["encoder_threads_each"],
                            "speedup": round(same / ceiling[counts[0]]["trials_per_s"], 3),
                            "vs_one_core": round(same / one_core["trials_per_s"], 3)}
        if one is not None and "cpu" in row:
            row["sweep_share_of_independent_speedup"] = round(row["cpu"]["speedup_vs_cpu_1"]
                                                              / row["independent_speedup"], 3)
            row["sweep_share_of_same_work"] = round(row["cpu"]["trials_per_s"] / same, 3)
            row["cpu"]["vs_one_core"] = round(row["cpu"]["trials_per_s"] / one_core["trials_per_s"], 3)
            # Both speed-ups over one core: the independent processes' baseline is one
            # single-threaded process, while one sweep worker embeds on every core.
            row["sweep_share_of_independent_speedup_over_one_core"] = round(
                row["cpu"]["vs_one_core"] / row["independent_speedup"], 3)
        rows.append(row)
    report = {
        "benchmark": "bench_batch",
        "created_utc": utc_now(),
        "machine": {"python": platform.python_version(), "cores": n_cores, "physical_cores": physical_cores(),
                    "cpu": cpu_model(), "gpu": no_gpu or "CUDA"},
        "load": load,
        "scenario": "context_corrosion",
        "trials": n,
        "config": plan.base.to_dict(),
        "metrics": metrics,
        "embedding_metrics_module_present": importlib.util.find_spec("scenarios.context_corrosion.metrics") is not None,
        "same_work_one_core": one_core,
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
    print("indep. x: independent stub processes' speed-up; same x: the sweep's own trials in independent "
          "processes; share: sweep x / indep. x; of same: the sweep's throughput / the same work's; "
          f"1 core x: the sweep against its trials on one core ({one_core['trials_per_s']:.2f} trials/s); "
          "share 1c: 1 core x / indep. x; encode, write: shares of the workers' busy time")
    print(f"{n} trials, {n_cores} cores, load before/after: {load[0]['load_avg_1_5_15']} / {load[-1]['load_avg_1_5_15']}")
    print(f"{'workers':>7} {'indep. x':>8} {'same x':>7} {'sweep s':>8} {'sweep x':>8} {'share':>6} "
          f"{'of same':>7} {'1 core x':>8} {'share 1c':>8} {'parent ms/trial':>15} {'idle':>6} {'start s':>7} "
          f"{'encode':>6} {'write':>6}")
    nan = float("nan")
    for row in rows:
        cpu = row.get("cpu", {})
        print(f"{row['workers']:>7} {row['independent_speedup']:>8.2f} {row['same_work']['speedup']:>7.2f} "
              f"{cpu.get('wall_s', nan):>8.1f} {cpu.get('speedup_vs_cpu_1') or nan:>8.2f} "
              f"{row.get('sweep_share_of_independent_speedup', nan):>6.2f} {row.get('sweep_share_of_same_work', nan):>7.2f} "
              f"{cpu.get('vs_one_core') or nan:>8.2f} "
              f"{row.get('sweep_share_of_independent_speedup_over_one_core', nan):>8.2f} "
              f"{cpu.get('parent_ms_per_trial') or nan:>15.2f} {cpu.get('worker_idle_share') or 0:>6.1%} "
              f"{cpu.get('worker_startup_s_mean') or nan:>7.2f} {cpu.get('worker_encode_share') or 0:>6.1%} "
              f"{cpu.get('worker_write_share') or 0:>6.1%}")
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
