"""Where a stub call's time goes on context corrosion. Writes benchmarks/results/call_cost.json.

``bench_kernel.py`` measures stub calls per second on context corrosion (whole
trials, no metrics, one process). This script splits that figure into what
reading the replies costs, what the stub's stance model costs, and everything
else (building the world, prompts and requests, their digests, SimPy, the
protocol, the trace and its hash, the analysis), by timing the same trials with
each of the two pieces taken out:

- ``as_shipped``: nothing changed;
- ``bare_reader``: ``simcore.sim.kernel.read_reply`` replaced by ``json.loads`` and
  the schema's constructor, none of the reader's checks;
- ``replayed_stance``: the stance model's replies looked up by request digest in
  a table recorded from the model in the same process, not computed;
- ``both``: both at once, which leaves everything else.

The stub's replies are clean JSON with exactly the schema's keys, so the bare
reader reads every one of them as the real reader does. Each variant checks this
before it is timed: every reading equal to the real reader's, every recorded
reply found, and the trials' trace sha256s the same as those of the code as
shipped. Each variant runs in a fresh process, the variants alternating, and
each timing is the best of three runs of the trials, as in ``bench_kernel.py``.
Last, the code as shipped runs in one process per core at once: the machine's
throughput (all their calls over the span from the first start to the last end),
beside the per-process figures.

Usage: ``python benchmarks/bench_call_cost.py [--trials 200] [--rounds 3] [--quick]``
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

OUT = ROOT / "benchmarks" / "results" / "call_cost.json"
VARIANTS = ("as_shipped", "bare_reader", "replayed_stance", "both")
TARGET_CALLS_PER_S = 20_000


def _trials(trials: int) -> list[tuple[str, int]]:
    """Run trials 0..trials-1 as the timing does; each one's trace sha256 and stub calls."""
    from backends.registry import BackendSpec
    from scenarios.context_corrosion import SCENARIO
    from scenarios.context_corrosion.config import CorrosionConfig
    from simcore.runs.runner import run_trial_async

    cfg = CorrosionConfig().replace(metrics=False)

    async def run() -> list[tuple[str, int]]:
        out = []
        for seed in range(trials):
            trial = await run_trial_async(SCENARIO, cfg, seed, BackendSpec(), None)
            out.append((trial.results["trace_sha256"], trial.world.usage["stub"]["calls"]))
        return out

    return asyncio.run(run())


def window(trials: int) -> dict:
    """The trials three times over after a warm-up, with the wall-clock window they took.

    Windows of processes that run at once give the machine's throughput: all their
    calls over the span from the first start to the last end, however they overlapped.
    """
    _trials(trials)
    start = time.time()
    calls = sum(n for _ in range(3) for _, n in _trials(trials))
    return {"calls": calls, "start": start, "end": time.time()}


def _bare_read(text: str, schema: type, **_: object):
    from simcore.replies.reading import Reading

    return Reading(schema(**json.loads(text)), "json")


def child(variant: str, trials: int) -> dict:
    """Check, then time, one variant in this process; returns its figures."""
    from bench_kernel import corrosion_calls_per_second

    import scenarios.context_corrosion.behaviour as behaviour
    from simcore.sim import kernel

    real_read, real_model = kernel.read_reply, behaviour.CorrosionBehaviour.__call__
    if variant in ("bare_reader", "both"):
        def checked_read(text: str, schema: type, **kwargs: object):
            reading = real_read(text, schema, **kwargs)
            bare = _bare_read(text, schema)
            if reading != bare:
                raise SystemExit(f"bare_reader: reads {text[:80]!r} as {bare}, the reader as {reading}")
            return reading

        kernel.read_reply = checked_read
    table: dict[str, object] = {}
    if variant in ("replayed_stance", "both"):
        def recording(self, request, rng):
            out = table[request.digest()] = real_model(self, request, rng)
            return out

        behaviour.CorrosionBehaviour.__call__ = recording
    shas = [sha for sha, _ in _trials(trials)]  # the check pass, with the real pieces (recording the table)
    if variant in ("bare_reader", "both"):
        kernel.read_reply = _bare_read
    if variant in ("replayed_stance", "both"):
        def replayed(self, request, rng):
            return table[request.digest()]  # (a KeyError would mean another request: no fair comparison)

        behaviour.CorrosionBehaviour.__call__ = replayed
    if [sha for sha, _ in _trials(trials)] != shas:
        raise SystemExit(f"{variant}: the trials' traces differ from the real pieces'")
    timing = corrosion_calls_per_second(trials)
    return {"variant": variant, **timing, "traces_sha256": hashlib.sha256("".join(shas).encode()).hexdigest()}


def _spawn(variant: str, trials: int) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, __file__, "--child", variant, "--trials", str(trials)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _result(process: subprocess.Popen, variant: str) -> dict:
    """A child's figures, once it ends; a failed child ends the benchmark with its last line."""
    out, err = process.communicate()
    if process.returncode != 0:
        sys.exit(f"{variant}: {err.strip().splitlines()[-1] if err.strip() else process.returncode}")
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=200, help="trials per timed run (default: 200)")
    parser.add_argument("--rounds", type=int, default=3, help="fresh processes per variant (default: 3)")
    parser.add_argument("--quick", action="store_true", help="40 trials, one round: a smoke run")
    parser.add_argument("--out", type=Path, default=OUT, help=f"result file (default: {OUT.relative_to(ROOT)})")
    parser.add_argument("--child", choices=(*VARIANTS, "window"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.trials < 1:
        parser.error(f"--trials: at least 1, got {args.trials}")
    if args.rounds < 1:
        parser.error(f"--rounds: at least 1, got {args.rounds}")
    trials, rounds = (40, 1) if args.quick else (args.trials, args.rounds)
    if args.child:
        print(json.dumps(window(trials) if args.child == "window" else child(args.child, trials)))
        return

    runs: dict[str, list[dict]] = {v: [] for v in VARIANTS}
    for r in range(rounds):
        order = VARIANTS[r % len(VARIANTS):] + VARIANTS[: r % len(VARIANTS)]  # each variant first in turn
        for variant in order:
            print(f"round {r + 1}/{rounds}: {variant} ...", file=sys.stderr)
            runs[variant].append(_result(_spawn(variant, trials), variant))
    cores = os.cpu_count() or 1
    print(f"as shipped, {cores} processes at once ...", file=sys.stderr)
    together = [_result(p, "window") for p in [_spawn("window", trials) for _ in range(cores)]]
    digests = {run["traces_sha256"] for rs in runs.values() for run in rs}
    best = {v: max(run["calls_per_s"] for run in rs) for v, rs in runs.items()}
    us = {v: 1e6 / rate for v, rate in best.items()}
    result = {
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(),
                    "load_average_at_end": os.getloadavg()},
        "trials": trials,
        "rounds": rounds,
        "same_traces_in_every_variant": len(digests) == 1,
        "calls_per_s_best": best,
        "calls_per_s_median": {v: statistics.median(run["calls_per_s"] for run in rs) for v, rs in runs.items()},
        "us_per_call": us,
        "pieces_us_per_call": {
            "reading_replies": us["as_shipped"] - us["bare_reader"],
            "stance_model": us["as_shipped"] - us["replayed_stance"],
            "everything_else": us["both"],
        },
        "target_calls_per_s": TARGET_CALLS_PER_S,
        "runs": runs,
        # Throughput of the whole machine, not the per-process figure above: one process per core.
        "as_shipped_every_core_at_once": {
            "processes": cores,
            "calls_per_s_each_process": [w["calls"] / (w["end"] - w["start"]) for w in together],
            "calls_per_s_total": sum(w["calls"] for w in together) / (
                max(w["end"] for w in together) - min(w["start"] for w in together)),
            "windows": together,
        },
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    for v in VARIANTS:
        print(f"{v:16s} {best[v]:8,.0f} calls/s  {us[v]:5.1f} us/call")
    pieces = result["pieces_us_per_call"]
    print("per call: " + ", ".join(f"{k.replace('_', ' ')} {v:.1f} us" for k, v in pieces.items()))
    machine = result["as_shipped_every_core_at_once"]
    print(f"as shipped, {cores} processes at once: {machine['calls_per_s_total']:,.0f} calls/s in all")
    print(f"same traces in every variant: {result['same_traces_in_every_variant']}")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
