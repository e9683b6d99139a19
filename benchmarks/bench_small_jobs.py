"""Wall time of the small jobs a newcomer runs first, each in a fresh process.

Every figure is a whole command as a user types it, interpreter start-up, imports
and writing included, on the stub backend:

- ``python -c pass`` and ``python -c "import mesa"``: the floor every run pays;
- a default context_corrosion run (with its embedding metrics and plots): with the
  embedding cache warm (its texts encoded before, as on a repeat run), with an empty
  cache (a first run on a fresh machine), and with a new random seed each round on the
  warm cache (new texts); and the default run with ``--no-metrics``;
- ``python -m simcore.replay`` of that default run (trace comparison only) and
  with ``--analysis``;
- a default acausal_cooperation run;
- one perturbation pair of the default context_corrosion config.

The jobs are run in turn, ``--repeats`` rounds, so the machine's load falls on
all of them alike; the JSON holds every time, the median and the minimum, with
the date and the load average. Compare figures as ratios within one file.

    python benchmarks/bench_small_jobs.py [--repeats N]

Writes ``benchmarks/results/bench_small_jobs.json``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable

# name -> argv (after the interpreter); "{out}" is a fresh output root, "{run}" the recorded run
JOBS: dict[str, list[str]] = {
    "python_startup": ["-c", "pass"],
    "import_mesa": ["-c", "import mesa"],
    "context_corrosion_default": ["-m", "scenarios.context_corrosion", "--out", "{out}"],
    "context_corrosion_default_empty_cache": ["-m", "scenarios.context_corrosion", "--out", "{out}"],
    "context_corrosion_new_seed": ["-m", "scenarios.context_corrosion", "--seed", "{seed}", "--out", "{out}"],
    "context_corrosion_no_metrics": ["-m", "scenarios.context_corrosion", "--no-metrics", "--out", "{out}"],
    "replay_default_run": ["-m", "simcore.replay", "{run}"],
    "replay_default_run_with_analysis": ["-m", "simcore.replay", "{run}", "--analysis"],
    "acausal_cooperation_default": ["-m", "scenarios.acausal_cooperation", "--out", "{out}"],
    "perturbation_one_pair": ["-m", "scenarios.perturbation", "--scenario", "context_corrosion",
                              "--perturb", "drop:agent=P1,round=2", "--pairs", "1", "--no-progress",
                              "--out", "{out}"],
}


def timed(argv: list[str], env: dict[str, str]) -> float:
    """Seconds for one fresh process running ``argv``; a failure stops the benchmark."""
    start = time.perf_counter()
    proc = subprocess.run([PY, *argv], cwd=ROOT, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({proc.returncode}): {proc.stderr.strip()[-500:]}")
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="rounds over all jobs (default 3)")
    parser.add_argument("--only", nargs="*", choices=list(JOBS), help="run only these jobs")
    args = parser.parse_args()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    jobs = {k: v for k, v in JOBS.items() if not args.only or k in args.only or k == "context_corrosion_default"}
    times: dict[str, list[float]] = {name: [] for name in jobs}
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        # Every job's embedding cache is this benchmark's own: warm (filled by the
        # recorded run) unless the job is the empty-cache one, which gets a new one.
        env["SIMCORE_EMBED_CACHE"] = f"{tmp}/cache"
        # the run that the replays replay: a default run, recorded once
        subprocess.run([PY, "-m", "scenarios.context_corrosion", "--out", f"{tmp}/recorded"],
                       cwd=ROOT, env=env, check=True, capture_output=True)
        (run,) = Path(tmp, "recorded", "context_corrosion").iterdir()
        for r in range(args.repeats):
            for name, argv in jobs.items():
                out = Path(tmp, f"{name}-{r}")
                job_env = {**env, "SIMCORE_EMBED_CACHE": f"{tmp}/cache-empty-{r}"} if "empty_cache" in name else env
                times[name].append(timed([a.format(out=out, run=run, seed=1000 + r) for a in argv], job_env))
                print(f"round {r + 1}/{args.repeats} {name}: {times[name][-1]:.2f} s", file=sys.stderr)
    result = {
        "benchmark": "bench_small_jobs",
        "created_utc": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform(),
                    "load_avg_before": [round(x, 2) for x in load_before],
                    "load_avg_after": [round(x, 2) for x in os.getloadavg()]},
        "repeats": args.repeats,
        "commands": {name: " ".join(["python", *argv]) for name, argv in jobs.items()},
        "embedding_cache": "warm (the recorded run's texts) for every job but *_empty_cache; "
                           "*_new_seed uses seed 1000 + round, so its texts are new",
        "seconds": {name: [round(t, 3) for t in ts] for name, ts in times.items()},
        "median_s": {name: round(statistics.median(ts), 3) for name, ts in times.items()},
        "min_s": {name: round(min(ts), 3) for name, ts in times.items()},
    }
    if "import_mesa" in times and "replay_default_run" in times:
        result["replay_over_import_mesa"] = round(
            statistics.median(times["replay_default_run"]) / statistics.median(times["import_mesa"]), 2)
    path = ROOT / "benchmarks" / "results" / "bench_small_jobs.json"
    path.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
