"""Analysis speed: a context-corrosion Monte Carlo with metrics, cold and warm embedding cache.

    python benchmarks/bench_analysis.py [--trials 20] [--latency-trials 6] [--previous DIR] [--skip-latency]

Every arm runs in its own process (a fresh interpreter, as a user's run would):

- ``mc``: a 20-trial-per-arm Monte Carlo with metrics on (default ``--plots``),
  on the stub: this code with the cache off (``--embed-cache none``), with a cold
  cache, with the same cache warm, and the code of ``--previous`` (a checkout of
  the code before this change, when given) side by side. Each arm reports its
  wall time, the texts it encoded, the time inside the model's forward calls, and
  a bulk encode of the same texts in the same process (after the run); the
  encode rate inside the Monte Carlo leaves out the model's load, timed apart.
- ``latency``: against ``python -m backends.fake_server`` with latency uniform in
  0.05-1.5 s, a Monte Carlo of ``--latency-trials`` trials per arm (3 rounds,
  plots none), metrics off and on, alternating, ``--latency-repeats`` times each
  (cache off, so the texts are encoded).

- ``split``: on every stage of the first arm's runs, the exact k=2 split of
  context corrosion's entropy against scikit-learn's KMeans (10 starts): how often
  KMeans ended in a worse split, and the time of each.

Writes ``benchmarks/results/bench_analysis.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "bench_analysis.json"

CHILD = r'''
import json, sys, time
from simcore.analysis import embeddings
from simcore.runs.counterfactual import run_arms
from simcore.runs.scenario import load_scenario
from backends.registry import BackendSpec

args = json.loads(sys.argv[1])
texts, spent, loading = [], [0.0], [0.0]
real = embeddings._forward
def counted(batch):
    start = time.perf_counter()
    embeddings.get_model()  # loads the model on first use: timed apart from encoding
    loaded = time.perf_counter()
    try:
        return real(batch)
    finally:
        spent[0] += time.perf_counter() - loaded
        loading[0] += loaded - start
        texts.extend(batch)
embeddings._forward = counted
scenario = load_scenario("context_corrosion")
config = scenario.config_type.from_mapping(args["fields"])
spec = BackendSpec(**args["spec"]) if args.get("spec") else None
start = time.perf_counter()
import inspect
from simcore.runs.counterfactual import run_arms_async
# as the command line does (older code has no such switch)
extra = {"plot_processes": True} if "plot_processes" in inspect.signature(run_arms_async).parameters else {}
run_arms(scenario, config, 42, n_trials=args["trials"], spec=spec, out=args["out"], progress=False, **extra)
wall = time.perf_counter() - start
out = {"wall_s": wall, "texts_encoded": len(texts), "forward_s": spent[0], "model_load_in_forward_s": loading[0],
       "engine": embeddings.engine() if hasattr(embeddings, "engine") else "torch"}
if texts:
    embeddings._forward = real
    start = time.perf_counter()
    real(list(texts))
    out["bulk_s"] = time.perf_counter() - start
print("RESULT " + json.dumps(out))
'''


def child(code_root: Path, args: dict, env: dict[str, str]) -> dict:
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps(args)], cwd=code_root, capture_output=True, text=True,
        env={**os.environ, "PYTHONPATH": str(code_root), **env}, check=False,
    )
    line = next((x for x in proc.stdout.splitlines() if x.startswith("RESULT ")), None)
    if proc.returncode or line is None:
        raise RuntimeError(f"arm failed: {proc.stderr[-2000:]}")
    res = json.loads(line[7:])
    res["process_s"] = time.perf_counter() - start  # interpreter start and imports included
    if res["texts_encoded"]:
        # The encode rate inside the Monte Carlo: texts over the time in forward calls
        # (the model's load, paid once, is timed apart).
        res["mc_encode_rate_texts_per_s"] = res["texts_encoded"] / res["forward_s"]
        res["bulk_rate_texts_per_s"] = res["texts_encoded"] / res["bulk_s"]
        res["mc_encode_rate_over_bulk"] = res["mc_encode_rate_texts_per_s"] / res["bulk_rate_texts_per_s"]
    return res


def split_check(runs: Path) -> dict:
    """The exact k=2 split against scikit-learn's KMeans (10 starts) on every stage of the runs under ``runs``.

    Counts the stages where KMeans ended in a split with a larger within-cluster sum
    of squares, and times both on five and on 17 agents (the scenario's largest group).
    """
    import numpy as np
    from sklearn.cluster import KMeans

    from scenarios.context_corrosion.metrics import best_split
    from simcore.analysis.embeddings import EmbeddingStore

    def sum_of_squares(points: np.ndarray, mask: np.ndarray) -> float:
        return sum(float(((c - c.mean(axis=0)) ** 2).sum()) for c in (points[mask], points[~mask]))

    stages = worse = 0
    for path in sorted(runs.rglob("embeddings.npz")):
        store = EmbeddingStore.load(path)
        groups: dict = {}
        for key in store._vectors:
            groups.setdefault(key[:2], []).append(store[key])
        for i, vectors in enumerate(groups.values()):
            points = np.stack(vectors).astype(np.float64)
            if len(points) < 2 or (np.round(points, 12) == np.round(points[0], 12)).all():
                continue
            stages += 1
            labels = KMeans(n_clusters=2, n_init=10, random_state=i).fit_predict(points).astype(bool)
            worse += sum_of_squares(points, labels) > sum_of_squares(points, best_split(points)) + 1e-9
    timing = {}
    rng = np.random.default_rng(0)
    for n in (5, 17):
        sets = [rng.normal(size=(n, 384)) for _ in range(50)]
        start = time.perf_counter()
        for p in sets:
            best_split(p)
        exact = (time.perf_counter() - start) / len(sets)
        start = time.perf_counter()
        for p in sets:
            KMeans(n_clusters=2, n_init=10, random_state=0).fit_predict(p)
        kmeans = (time.perf_counter() - start) / len(sets)
        timing[f"{n}_agents"] = {"exact_ms": exact * 1e3, "kmeans_10_starts_ms": kmeans * 1e3,
                                 "kmeans_over_exact": kmeans / exact}
    return {"stages": stages, "kmeans_worse_split": int(worse), "per_split": timing}


def start_fake_server() -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "backends.fake_server", "--port", "0", "--latency", "uniform:0.05,1.5"],
        cwd=ROOT, stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    line = proc.stdout.readline()  # type: ignore[union-attr]
    match = re.search(r"http://127\.0\.0\.1:\d+", line)
    if not match:
        proc.kill()
        raise RuntimeError(f"fake server did not start: {line!r}")
    return proc, match.group(0)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--latency-trials", type=int, default=6)
    parser.add_argument("--previous", type=Path, default=None,
                        help="a checkout of the code before this change, run side by side")
    parser.add_argument("--latency-repeats", type=int, default=2,
                        help="runs of each latency arm, alternating (default 2)")
    parser.add_argument("--skip-latency", action="store_true")
    args = parser.parse_args()
    results: dict = {"machine": {"cpus": os.cpu_count(), "load_avg_at_start": os.getloadavg()},
                     "note": "a shared, busy 2-core machine: compare arms of one run as ratios"}
    with tempfile.TemporaryDirectory() as tmp:
        fields = {"metrics": True}
        base = {"trials": args.trials, "fields": fields}
        cache = str(Path(tmp) / "cache")
        arms = {
            "cache_off": (ROOT, {"SIMCORE_EMBED_CACHE": "none", "SIMCORE_PLOTS": "summary"}),
            "cold_cache": (ROOT, {"SIMCORE_EMBED_CACHE": cache, "SIMCORE_PLOTS": "summary"}),
            "warm_cache": (ROOT, {"SIMCORE_EMBED_CACHE": cache, "SIMCORE_PLOTS": "summary"}),
            "cache_off_plots_all": (ROOT, {"SIMCORE_EMBED_CACHE": "none", "SIMCORE_PLOTS": "all"}),
        }
        if args.previous is not None:  # the same settings as cache_off, on the older code
            arms["previous_code_cache_off"] = (args.previous, arms["cache_off"][1])
        mc = {}
        for i, (name, (code, env)) in enumerate(arms.items()):
            mc[name] = child(code, {**base, "out": str(Path(tmp) / f"mc{i}")}, env)
            print(name, json.dumps(mc[name]), file=sys.stderr)
        results["monte_carlo"] = {"trials_per_arm": args.trials, "arms": mc}
        results["exact_split_vs_kmeans"] = split_check(Path(tmp) / "mc0")
        print("split", json.dumps(results["exact_split_vs_kmeans"]), file=sys.stderr)
        if not args.skip_latency:
            proc, url = start_fake_server()
            try:
                spec = {"name": "openai-compatible", "model": "fake-1", "base_url": url + "/v1",
                        "options": {"max_concurrency": 32, "timeout_s": 60}}
                lat: dict = {"metrics_off": [], "metrics_on": []}
                for i in range(2 * args.latency_repeats):  # off, on, off, on: the server's noise spread over both
                    metrics = bool(i % 2)
                    a = {"trials": args.latency_trials, "fields": {"metrics": metrics, "rounds": 3},
                         "spec": spec, "out": str(Path(tmp) / f"lat{i}")}
                    name = "metrics_on" if metrics else "metrics_off"
                    lat[name].append(child(ROOT, a, {"SIMCORE_EMBED_CACHE": "none", "SIMCORE_PLOTS": "none"}))
                    print(name, json.dumps(lat[name][-1]), file=sys.stderr)
                walls = {k: [r["wall_s"] for r in v] for k, v in lat.items()}
                lat["on_over_off"] = sum(walls["metrics_on"]) / sum(walls["metrics_off"])
                results["latency_uniform_0.05_1.5"] = {"trials_per_arm": args.latency_trials, "rounds": 3,
                                                       "arms": lat}
            finally:
                proc.kill()
    results["written_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")
    print(json.dumps(results, indent=2, sort_keys=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
