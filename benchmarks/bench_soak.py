"""Soak: a 1,000-trial sweep against a fake provider that fails and hangs, resumed until done.

The fake OpenAI-compatible server (``backends.fake_server``, in its own process)
answers after ``--latency`` and injects, at random (seeded), about ``--fault-rate``
of transient faults, split evenly between HTTP 429 (Retry-After 0.5 s), 500, 503,
malformed bodies and dropped connections, plus ``--hang-rate`` of requests that
are accepted and never answered (until the client gives up). The sweep runs
through ``python -m simcore.batch``'s own code (``run_sweep``) with the flags a
user would give: a request timeout that cuts the hangs, retries, the provider's
concurrency cap, a budget, and the asyncio executor. When trials fail, the sweep
is resumed (``--resume`` re-runs failed trials with the same seed) up to
``--max-resumes`` times.

Reported per pass: trials ok, failed trials by kind, wall time; and overall:
duplicates (rows, run directories, "ok" ledger lines per trial), requests and
faults the server saw, the server's high-water mark of requests in flight against
the cap, retries, spending against the budget. The goal (issue 23): all trials ok
after at most one resume, nothing duplicated, spending within the budget.

The trials are context-corrosion trials kept small (``--n-peers 2 --rounds 1``,
embedding metrics off, 3 agents, 9 calls each) so that 1,000 of them take minutes
on two cores: the soak tests the runner, not the scenario's analysis.

    python benchmarks/bench_soak.py                   # writes benchmarks/results/bench_soak.json
    python benchmarks/bench_soak.py --trials 50       # 100 trials, a quick run
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from backends.registry import BackendSpec  # noqa: E402
from simcore.base.records import atomic_write, utc_now  # noqa: E402
from simcore.batch import estimate_cost, plan_sweep, run_sweep  # noqa: E402

KINDS = ("429", "500", "503", "malformed", "drop")
PRICES = {"fake-1": {"input": 1.0, "output": 2.0}}  # USD per million tokens


def start_server(args: argparse.Namespace) -> tuple[subprocess.Popen, str]:
    """The fake server in its own process; returns it and its OpenAI base URL."""
    each = 1 - (1 - args.fault_rate) ** (1 / len(KINDS))  # so that the kinds together make fault_rate
    faults = [f"timeout:rate={args.hang_rate},hang=600"]
    faults += [f"{k}:rate={each:.5f}" + (",retry_after=0.5" if k == "429" else "") for k in KINDS]
    argv = [sys.executable, "-m", "backends.fake_server", "--port", "0", "--seed", str(args.seed),
            "--latency", args.latency, *(x for f in faults for x in ("--fault", f))]
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    match = re.search(r"OpenAI base URL (\S+)\)", line)
    if not match:
        proc.kill()
        raise SystemExit(f"fake server did not start: {line!r}")
    return proc, match.group(1)


def server_stats(base_url: str) -> dict:
    with urllib.request.urlopen(base_url.removesuffix("/v1") + "/stats", timeout=10) as resp:
        stats = json.load(resp)
    stats.pop("arrivals", None)
    return stats


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=500, help="seeds per condition (default 500 -> 1,000 trials)")
    ap.add_argument("--fault-rate", type=float, default=0.10, help="share of requests answered with a fault")
    ap.add_argument("--hang-rate", type=float, default=0.01, help="share of requests never answered")
    ap.add_argument("--latency", default="uniform:0.02,0.2", help="fake server latency (default uniform:0.02,0.2)")
    ap.add_argument("--timeout", type=float, default=5.0, help="--timeout: seconds per request attempt")
    ap.add_argument("--max-retries", type=int, default=6, help="--max-retries")
    ap.add_argument("--max-concurrency", type=int, default=16, help="--max-concurrency: the provider's cap")
    ap.add_argument("--concurrency", type=int, default=32, help="--concurrency: trials in flight")
    ap.add_argument("--budget-factor", type=float, default=1.5,
                    help="--budget-usd as a multiple of the runner's own cost estimate (default 1.5)")
    ap.add_argument("--max-resumes", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0, help="the fake server's seed (which requests fail)")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "bench_soak.json"))
    args = ap.parse_args()
    logging.getLogger("simcore.backends").setLevel(logging.ERROR)  # one warning per retry is noise here

    prices = Path(tempfile.mkdtemp(prefix="soak-prices-")) / "prices.json"
    prices.write_text(json.dumps(PRICES))
    os.environ["SIMCORE_PRICES"] = str(prices)
    proc, url = start_server(args)
    sweep_dir = Path(tempfile.mkdtemp(prefix="soak-")) / "sweep"
    options = {"timeout_s": args.timeout, "max_retries": args.max_retries, "max_concurrency": args.max_concurrency}
    spec = BackendSpec("openai-compatible", "fake-1", base_url=url, options=options)
    base = {"n_peers": 2, "rounds": 1, "metrics": False}
    try:
        plan = plan_sweep("context_corrosion", args.trials, base=base, spec=spec)
        estimate = estimate_cost(plan).total(plan.jobs)
        budget = round(args.budget_factor * estimate, 4)
        kw = dict(base=base, spec=spec, executor="asyncio", concurrency=args.concurrency, out=sweep_dir,
                  budget_usd=budget, plot=False)
        passes = []
        started = time.perf_counter()
        for n in range(args.max_resumes + 1):
            t0 = time.perf_counter()
            df = run_sweep("context_corrosion", args.trials, resume=n > 0, **kw)
            summary = df.attrs["summary"]
            passes.append({
                "pass": "first" if n == 0 else f"resume {n}",
                "trials_run": summary["timing"]["trials_run"],
                "ok": summary["n_ok"], "error": summary["n_error"], "skipped": summary["n_skipped"],
                "failures": summary["failures"], "wall_s": round(time.perf_counter() - t0, 1),
            })
            print(f"{passes[-1]['pass']}: {summary['n_ok']}/{summary['n_planned']} ok "
                  f"({passes[-1]['wall_s']} s, failures {summary['failures']})", file=sys.stderr, flush=True)
            if summary["n_ok"] == summary["n_planned"]:
                break
        wall = time.perf_counter() - started
        stats = server_stats(url)
    finally:
        proc.terminate()
        proc.wait(10)

    ledger = [json.loads(line) for line in (sweep_dir / "ledger.jsonl").read_text().splitlines()]
    ok_lines = Counter(r["run_id"] for r in ledger if r["status"] == "ok")
    run_dirs = [p.name for p in (sweep_dir / "context_corrosion").iterdir()]
    duplicates = {
        "rows": int(len(df) - df["run_id"].nunique()),
        "run_dirs": len(run_dirs) - len(set(run_dirs)) + sum(1 for p in run_dirs if p not in set(df["run_id"])),
        "ok_ledger_lines": sum(n - 1 for n in ok_lines.values() if n > 1),
    }
    faults = stats["faults"]
    report = {
        "benchmark": "bench_soak",
        "when": utc_now(),
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count(), "load_avg": os.getloadavg()},
        "setup": {
            "scenario": "context_corrosion", "config": base, "trials": len(plan.jobs), "executor": "asyncio",
            "concurrency": args.concurrency, "backend_options": options, "latency": args.latency,
            "fault_rate": args.fault_rate, "hang_rate": args.hang_rate, "fault_kinds": list(KINDS),
            "server_seed": args.seed, "prices_usd_per_million": PRICES["fake-1"],
        },
        "passes": passes,
        "goal_met": passes[-1]["ok"] == len(plan.jobs) and len(passes) <= 2 and not any(duplicates.values())
        and float(df.attrs["summary"]["spent_usd"]) <= budget,
        "duplicates": duplicates,
        "requests": stats["requests"],
        "faults": faults,
        "fault_share": round(sum(v for k, v in faults.items() if k != "timeout") / stats["requests"], 4),
        "hang_share": round(faults.get("timeout", 0) / stats["requests"], 4),
        "in_flight_high_water": stats["max_concurrency"],
        "in_flight_cap": args.max_concurrency,
        "attempts_in_ledger": len(ledger),
        "retries": int(sum(r.get("retries", 0) for r in ledger)),
        "spent_usd": round(float(df.attrs["summary"]["spent_usd"]), 6),
        "estimate_usd": round(estimate, 6),
        "budget_usd": budget,
        "wall_s": round(wall, 1),
        "sweep_dir": str(sweep_dir),
    }
    atomic_write(args.out, json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))
    print(table(report))


def table(r: dict) -> str:
    """The figures as a Markdown table."""
    rows = [(p["pass"], f"{p['ok']:,} / {r['setup']['trials']:,} ok", f"{p['trials_run']:,} trials run, "
             f"failures {p['failures'] or 'none'}, {p['wall_s']} s") for p in r["passes"]]
    rows += [
        ("duplicates", str(sum(r["duplicates"].values())), ", ".join(f"{k} {v}" for k, v in r["duplicates"].items())),
        ("requests", f"{r['requests']:,}", f"faults {r['fault_share']:.1%} ({r['faults']}), hangs {r['hang_share']:.2%}"),
        ("in flight", f"{r['in_flight_high_water']} / {r['in_flight_cap']}", "server high-water mark / cap"),
        ("retries", f"{r['retries']:,}", f"{r['attempts_in_ledger']:,} trial attempts in the ledger"),
        ("spend", f"${r['spent_usd']:.4f} / ${r['budget_usd']:.4f}", f"every attempt; estimate ${r['estimate_usd']:.4f}"),
        ("wall", f"{r['wall_s']} s", "all passes"),
    ]
    lines = ["| | figure | detail |", "| --- | --- | --- |"]
    lines += [f"| {a} | {b} | {c} |" for a, b, c in rows]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
