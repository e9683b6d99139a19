"""Analysis speed: a context-corrosion Monte Carlo with metrics, cold and warm embedding cache.

    python benchmarks/bench_analysis.py [--trials 20] [--latency-trials 6] [--skip-latency]

Every arm runs in its own process (a fresh interpreter, as a user's run would):

- ``mc``: a 20-trial-per-arm Monte Carlo with metrics on (default ``--plots``),
  on the stub: this code with the cache off (``--embed-cache none``), with a cold
  cache, with the same cache warm, and the code of ``--previous`` (a checkout of
  the code before this change, when given) side by side. Each arm reports its
  wall time, the texts it encoded, the time inside the model's forward calls, and
  a bulk encode of the same texts in the same process (after the run).
- ``latency``: against ``python -m backends.fake_server`` with latency uniform in
  0.05-1.5 s, a Monte Carlo of ``--latency-trials`` trials per arm (3 rounds,
  plots none), metrics off and on (cache off, so the texts are encoded).

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
from simcore import embeddings
from simcore.counterfactual import run_arms
from simcore.scenario import load_scenario
from backends.registry import BackendSpec

args = json.loads(sys.argv[1])
texts, spent = [], [0.0]
real = embeddings._forward
def counted(batch):
    start = time.perf_counter()
    try:
        return real(batch)
    finally:
        spent[0] += time.perf_counter() - start
        texts.extend(batch)
embeddings._forward = counted
scenario = load_scenario("context_corrosion")
config = scenario.config_type.from_mapping(args["fields"])
spec = BackendSpec(**args["spec"]) if args.get("spec") else None
start = time.perf_counter()
run_arms(scenario, config, 42, n_trials=args["trials"], spec=spec, out=args["out"], progress=False)
wall = time.perf_counter() - start
out = {"wall_s": wall, "texts_encoded": len(texts), "forward_s": spent[0]}
if texts:
    embeddings._forward = real
    start = time.perf_counter()
    real(list(texts))
    out["bulk_s"] = time.perf_counter() - start
print("RESULT " + json.dumps(out))
'''


def child(code_root: Path, args: dict, env: dict[str, str]) -> dict:
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps(args)], cwd=code_root, capture_output=True, text=True,
        env={**os.environ, "PYTHONPATH": str(code_root), **env}, check=False,
    )
    line = next((x for x in proc.stdout.splitlines() if x.startswith("RESULT ")), None)
    if proc.returncode or line is None:
        raise RuntimeError(f"arm failed: {proc.stderr[-2000:]}")
    res = json.loads(line[7:])
    if res["texts_encoded"]:
        res["mc_rate_texts_per_s"] = res["texts_encoded"] / res["wall_s"]
        res["forward_rate_texts_per_s"] = res["texts_encoded"] / res["forward_s"]
        res["bulk_rate_texts_per_s"] = res["texts_encoded"] / res["bulk_s"]
        res["mc_over_bulk"] = res["mc_rate_texts_per_s"] / res["bulk_rate_texts_per_s"]
    return res


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
        if args.previous is not None:
            arms["previous_code_plots_all"] = (args.previous, {})
        mc = {}
        for i, (name, (code, env)) in enumerate(arms.items()):
            mc[name] = child(code, {**base, "out": str(Path(tmp) / f"mc{i}")}, env)
            print(name, json.dumps(mc[name]), file=sys.stderr)
        results["monte_carlo"] = {"trials_per_arm": args.trials, "arms": mc}
        if not args.skip_latency:
            proc, url = start_fake_server()
            try:
                spec = {"name": "openai-compatible", "model": "fake-1", "base_url": url + "/v1",
                        "options": {"max_concurrency": 32, "timeout_s": 60}}
                lat = {}
                for i, metrics in enumerate((False, True)):
                    a = {"trials": args.latency_trials, "fields": {"metrics": metrics, "rounds": 3},
                         "spec": spec, "out": str(Path(tmp) / f"lat{i}")}
                    name = "metrics_on" if metrics else "metrics_off"
                    lat[name] = child(ROOT, a, {"SIMCORE_EMBED_CACHE": "none", "SIMCORE_PLOTS": "none"})
                    print(name, json.dumps(lat[name]), file=sys.stderr)
                lat["on_over_off"] = lat["metrics_on"]["wall_s"] / lat["metrics_off"]["wall_s"]
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
