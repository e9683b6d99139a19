"""The LLM auction's analysis: this checkout against an earlier revision, back to back.

    python benchmarks/bench_llm_auction_analysis.py [--previous main] [--repeats 3] [--skip-tests]

The earlier revision (``--previous``, default ``main``) is exported with ``git archive`` into a
temporary directory. Every arm runs in an interpreter of its own (this checkout's venv) with its
code first on PYTHONPATH, and the two revisions alternate, so that the machine's load falls on both:

- ``analyze``: the trials of a small comparison (3 trial seeds x 3 mechanisms, on the stub), in the
  default config and in the one the scenario's page documents (10 agents, 5 vignettes), run once;
  then ``analyze`` on the finished worlds with its cache cleared (min and median over 7 passes,
  per trial), and the comparison's statistics (by style on the tables of all 9 trials). Each arm
  also prints a hash of every result it computed: the two revisions' must be equal.
- ``compare``: ``python -m scenarios.llm_auction compare --plots none`` with ``--trials 3``, and the
  documented ``--trials 10 --n-agents 10 --n-vignettes 5``: wall time, and a hash of the files it
  writes (all but manifest.json, which holds the time and the code revision).
- ``tests``: the llm_auction tests that cost the most (the documented page's rerun, the degenerate
  intervals), under ``benchmarks/pytest_cost.py``: wall and CPU time per test (CPU time depends
  less on the machine's load).

Writes ``benchmarks/results/bench_llm_auction_analysis.json``; the ratios (this checkout over the
earlier revision) are the figures to quote on a shared machine.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
OUT = HERE / "results" / "bench_llm_auction_analysis.json"
CONFIGS = {"default": {}, "documented": {"n_agents": 10, "n_vignettes": 5}}
COMPARES = {"default_3_trials": ["--trials", "3"],
            "documented_10_trials": ["--trials", "10", "--n-agents", "10", "--n-vignettes", "5"]}
TESTS = ("tests/test_docs.py::test_documented_outputs_are_what_the_commands_print_now[scenarios/llm_auction.md]",
         "tests/test_llm_auction.py::test_compare_survives_degenerate_intervals")

CHILD = r'''
import hashlib, json, statistics, sys, time
import pandas as pd
from scenarios.llm_auction import SCENARIO, analysis
from scenarios.llm_auction.compare import Comparison, statistics as comparison_statistics
from scenarios.llm_auction.config import MECHANISMS
from simcore.runs.runner import run_trial

fields = json.loads(sys.argv[1])
seeds = [101, 102, 103]
worlds, finished = [], {m: [] for m in MECHANISMS}
for s in seeds:
    for m in MECHANISMS:
        cfg = SCENARIO.config_type.from_mapping({**fields, "mechanism": m})
        t = run_trial(SCENARIO, cfg, s)
        assert t.status == "ok", t.error
        worlds.append((t.world, cfg))
        finished[m].append(t.results)

def analyze_all():
    out = []
    for w, cfg in worlds:
        w.state.pop("analysis", None)  # the per-run cache of tables and metrics
        out.append(analysis.analyze(w, cfg))
    return out

results = analyze_all()
passes = []
for _ in range(7):
    start = time.perf_counter()
    analyze_all()
    passes.append((time.perf_counter() - start) / len(worlds))
frames = {n: pd.concat([analysis.tables(w, c)[n] for w, c in worlds], ignore_index=True) for n in analysis.TABLES}
# The comparison of these 9 trials, as the compare command holds it after its trials ran.
rows = [{"mechanism": m, "status": "ok", **r["metrics"]} for m, rs in finished.items() for r in rs]
c = Comparison(worlds[0][1], 42, seeds, list(MECHANISMS), frames, pd.DataFrame(rows), finished, None)
stats_passes = []
for _ in range(3):
    start = time.perf_counter()
    stats = comparison_statistics(c, SCENARIO)
    stats_passes.append(time.perf_counter() - start)
text = json.dumps([results, stats], sort_keys=True, default=str)
text += "".join(f.to_csv(index=False) for n, f in frames.items())
print("RESULT " + json.dumps({
    "code": analysis.__file__, "rows_per_trial": len(frames["agent_round_results"]) / len(worlds),
    "analyze_per_trial_ms": {"min": 1e3 * min(passes), "median": 1e3 * statistics.median(passes)},
    "comparison_statistics_ms": {"min": 1e3 * min(stats_passes)},
    "results_sha256": hashlib.sha256(text.encode()).hexdigest(),
}))
'''


def env_for(code: Path, **extra: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(code), str(HERE)]), **extra}


def analyze_arm(code: Path, fields: dict) -> dict:
    proc = subprocess.run([sys.executable, "-c", CHILD, json.dumps(fields)], cwd=code, env=env_for(code),
                          capture_output=True, text=True, check=False)
    line = next((x for x in proc.stdout.splitlines() if x.startswith("RESULT ")), None)
    if proc.returncode or line is None:
        raise RuntimeError(f"analyze arm failed in {code}: {proc.stderr[-2000:]}")
    res = json.loads(line[7:])
    if not res.pop("code").startswith(str(code)):
        raise RuntimeError(f"the arm in {code} imported another checkout's code")
    return res


def files_hash(run_dir: Path) -> str:
    h = hashlib.sha256()
    for path in sorted(p for p in run_dir.rglob("*") if p.is_file() and p.name != "manifest.json"):
        h.update(str(path.relative_to(run_dir)).encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


def compare_arm(code: Path, args: list[str], out: Path) -> dict:
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "scenarios.llm_auction", "compare", *args, "--plots", "none",
                           "--out", str(out)], cwd=code, env=env_for(code), capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    if proc.returncode:
        raise RuntimeError(f"compare failed in {code}: {proc.stderr[-2000:]}")
    run_dir = next((out / "llm_auction").iterdir())
    table = "\n".join(line for line in proc.stdout.splitlines() if not line.startswith("comparison directory:"))
    return {"wall_s": wall, "files_sha256": files_hash(run_dir),
            "printed_sha256": hashlib.sha256(table.encode()).hexdigest()}


def tests_arm(code: Path, where: Path) -> dict:
    where.mkdir(parents=True)
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "pytest_cost", *TESTS],
                          cwd=code, env=env_for(code, SIMCORE_TEST_COST=str(where)), capture_output=True, text=True,
                          check=False)
    if proc.returncode:
        raise RuntimeError(f"tests failed in {code}: {proc.stdout[-2000:]}")
    costs: dict[str, dict] = {}
    for f in where.glob("*.jsonl"):
        for line in f.read_text().splitlines():
            r = json.loads(line)
            name = r["test"].split("::")[-1].split("[")[0]
            c = costs.setdefault(name, {"wall_s": 0.0, "cpu_s": 0.0, "n": 0})
            c["wall_s"] += r["wall_s"]
            c["cpu_s"] += r["cpu_s"]
            c["n"] += 1
    return costs


def export(rev: str, where: Path) -> str:
    """The tracked files of ``rev`` in ``where``; its full commit id."""
    commit = subprocess.run(["git", "rev-parse", "--verify", f"{rev}^{{commit}}"], cwd=ROOT, capture_output=True,
                            text=True, check=True).stdout.strip()
    archive = subprocess.run(["git", "archive", "--format=tar", commit], cwd=ROOT, capture_output=True, check=True)
    with tempfile.TemporaryFile() as f:
        f.write(archive.stdout)
        f.seek(0)
        with tarfile.open(fileobj=f) as tar:
            tar.extractall(where, filter="data")
    return commit


def ratio(mine: list[float], theirs: list[float]) -> float:
    return statistics.median(mine) / statistics.median(theirs)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--previous", default="main", help="the earlier revision (default: main)")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each compare and test arm (default 3)")
    parser.add_argument("--skip-tests", action="store_true", help="leave the test arm out")
    args = parser.parse_args()
    results: dict = {"machine": {"cpus": os.cpu_count(), "load_avg_at_start": os.getloadavg()},
                     "note": "a shared, busy 2-core machine: compare the two revisions' figures as ratios"}
    with tempfile.TemporaryDirectory() as tmp:
        previous = Path(tmp) / "previous"
        results["previous"] = {"rev": args.previous, "commit": export(args.previous, previous)}
        arms = {"previous": previous, "this": ROOT}
        analyze: dict = {}
        for name, fields in CONFIGS.items():
            analyze[name] = {arm: analyze_arm(code, fields) for arm, code in arms.items()}
            a = analyze[name]
            a["identical_results"] = a["this"]["results_sha256"] == a["previous"]["results_sha256"]
            a["this_over_previous"] = {
                "analyze_per_trial_min": a["this"]["analyze_per_trial_ms"]["min"] / a["previous"]["analyze_per_trial_ms"]["min"],
                "comparison_statistics_min": (a["this"]["comparison_statistics_ms"]["min"]
                                              / a["previous"]["comparison_statistics_ms"]["min"]),
            }
            print(name, json.dumps(a), file=sys.stderr)
        results["analyze"] = analyze
        compare: dict = {}
        for name, cargs in COMPARES.items():
            runs: dict = {arm: [] for arm in arms}
            for i in range(args.repeats):
                for arm, code in arms.items():
                    runs[arm].append(compare_arm(code, cargs, Path(tmp) / f"{name}-{arm}-{i}"))
                    print(name, arm, json.dumps(runs[arm][-1]), file=sys.stderr)
            hashes = {(r["files_sha256"], r["printed_sha256"]) for rs in runs.values() for r in rs}
            compare[name] = {"args": cargs, "runs": runs, "identical_outputs": len(hashes) == 1,
                             "this_over_previous_median_wall": ratio([r["wall_s"] for r in runs["this"]],
                                                                     [r["wall_s"] for r in runs["previous"]])}
        results["compare"] = compare
        if not args.skip_tests:
            tests: dict = {arm: [] for arm in arms}
            for i in range(args.repeats):
                for arm, code in arms.items():
                    tests[arm].append(tests_arm(code, Path(tmp) / f"tests-{arm}-{i}"))
                    print("tests", arm, json.dumps(tests[arm][-1]), file=sys.stderr)
            tests["this_over_previous_median"] = {
                name: {key: ratio([t[name][key] for t in tests["this"]], [t[name][key] for t in tests["previous"]])
                       for key in ("wall_s", "cpu_s")}
                for name in tests["this"][0]
            }
            results["tests"] = {"ids": list(TESTS), **tests}
    results["written_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")
    print(json.dumps(results, indent=2, sort_keys=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
