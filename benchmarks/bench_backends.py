"""Benchmark: a context-corrosion Monte Carlo against the fake server, and Gemma's speed.

    python benchmarks/bench_backends.py [--trials 20] [--rounds 3] [--latency 0.1]
                                        [--concurrency 64] [--skip-naive] [--skip-gemma]

1. **Concurrent**: 2 arms (biased / unbiased D) x ``--trials`` trials, run as
   concurrent worlds on one asyncio loop (``simcore.run_worlds``) through one
   OpenAI-compatible backend limited to ``--concurrency`` requests in flight,
   against ``python -m backends.fake_server`` (a separate process) at a fixed
   ``--latency``.
2. **Ideal**: the larger of the critical path (the most sequential call steps of
   any trial, times the latency) and calls x latency / concurrency. Also reported:
   the best schedule of the same dependency structure in fixed-latency waves (what
   any scheduler could reach), and the same worlds on an in-process backend that
   just sleeps (scheduling without HTTP).
3. **Naive**: the same trials one after another, one call at a time. Its traces
   must equal the concurrent ones (the server's replies are a function of the
   request), which the script checks.
4. **Gemma**: completion tokens per second of Gemma 3 270M behind
   ``python -m llama_cpp.server`` (needs the ``local-llm`` extra).

Writes ``benchmarks/results/bench_backends.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tqdm import tqdm  # noqa: E402

from backends.base import LLMRequest, Message  # noqa: E402
from backends.registry import BackendSpec, make_backend  # noqa: E402
from backends.stub import StubBackend  # noqa: E402
from scenarios.context_corrosion import SCENARIO  # noqa: E402
from scenarios.context_corrosion.config import CorrosionConfig  # noqa: E402
from scenarios.context_corrosion.experiment import (  # noqa: E402
    Initial,
    initial_prompt,
    system_prompt,
)
from scenarios.context_corrosion.tasks import task  # noqa: E402
from simcore.base.rng import derive_seed  # noqa: E402
from simcore.replies.schema import json_schema  # noqa: E402
from simcore.runs.runner import build_world  # noqa: E402
from simcore.sim.kernel import run_worlds  # noqa: E402

OUT = ROOT / "benchmarks" / "results" / "bench_backends.json"
NOTE = ("fixed-latency waves of the same dependency structure, FIFO or narrowest step first; "
        "for the default workload no schedule needs fewer than 21 waves (see the README)")


def trials(n: int, rounds: int) -> list[tuple[CorrosionConfig, int]]:
    """Both arms, sharing trial seeds."""
    seeds = [derive_seed(2026, f"bench.trial.{i}") for i in range(n)]
    return [(CorrosionConfig(rounds=rounds, biased=arm), s) for arm in (True, False) for s in seeds]


class StepCounter:
    """The stub, recording the width of each sequential dispatch step of one world."""

    name = "steps"

    def __init__(self, behaviour) -> None:
        self.stub = StubBackend(behaviour)
        self.widths: list[int] = []

    async def complete_batch(self, requests):
        self.widths.append(len(requests))
        return await self.stub.complete_batch(requests)


async def structure(work) -> list[list[int]]:
    """Per trial, the widths of its sequential call steps (a stub dry run)."""
    counters, worlds = [], []
    for cfg, seed in work:
        c = StepCounter(SCENARIO.behaviour(cfg))
        counters.append(c)
        worlds.append(build_world(SCENARIO, cfg, seed, BackendSpec(), c))
    await run_worlds(worlds)
    return [c.widths for c in counters]


def wave_schedule(widths: list[list[int]], slots: int, narrow_first: bool) -> int:
    """Waves needed when every call takes one fixed latency and ``slots`` run at once.

    Each trial is a chain of steps; a step's calls may run together and the next
    step starts when all are done. Free slots go to waiting calls FIFO, or to
    calls of the narrowest steps first (a singleton step blocks its whole trial).
    """
    n = len(widths)
    step, left = [0] * n, [w[0] for w in widths]
    queue = [(w, 0) for w in range(n) for _ in range(widths[w][0])]
    queue = [(w, i) for i, (w, _) in enumerate(queue)]  # arrival order: trial by trial
    seq, waves, done = len(queue), 0, 0
    while done < n:
        if narrow_first:
            queue.sort(key=lambda x: (widths[x[0]][step[x[0]]], x[1]))
        running, queue = queue[:slots], queue[slots:]
        waves += 1
        for w, _ in running:
            left[w] -= 1
            if left[w] == 0:
                step[w] += 1
                if step[w] == len(widths[w]):
                    done += 1
                    continue
                left[w] = widths[w][step[w]]
                queue += [(w, seq + i) for i in range(left[w])]
                seq += left[w]
    return waves


class Sleeper:
    """No HTTP: each call holds a slot of a shared semaphore for the latency (pure scheduling)."""

    name = "sleeper"

    def __init__(self, sem: asyncio.Semaphore, behaviour, latency: float) -> None:
        self.sem, self.stub, self.latency = sem, StubBackend(behaviour), latency

    async def complete(self, request):
        async with self.sem:
            await asyncio.sleep(self.latency)
        return self.stub.respond(request)


async def in_process(work, latency: float, concurrency: int) -> float:
    sem = asyncio.Semaphore(concurrency)
    worlds = [build_world(SCENARIO, cfg, seed, BackendSpec(), Sleeper(sem, SCENARIO.behaviour(cfg), latency))
              for cfg, seed in work]
    start = time.perf_counter()
    await run_worlds(worlds)
    return time.perf_counter() - start


async def concurrent(work, spec) -> tuple[float, list[str]]:
    backend = make_backend(spec)
    try:
        worlds = [build_world(SCENARIO, cfg, seed, spec, backend) for cfg, seed in work]
        start = time.perf_counter()
        await run_worlds(worlds)
        wall = time.perf_counter() - start
    finally:
        await backend.aclose()
    return wall, [w.trace.to_jsonl() for w in worlds]


async def naive(work, spec) -> tuple[float, list[str]]:
    backend = make_backend(BackendSpec(spec.name, spec.model, spec.base_url, {**spec.options, "max_concurrency": 1}))
    traces = []
    try:
        start = time.perf_counter()
        for cfg, seed in tqdm(work, desc="naive loop", unit="trial", file=sys.stderr):
            world = build_world(SCENARIO, cfg, seed, spec, backend)
            await world.run_async()
            traces.append(world.trace.to_jsonl())
        wall = time.perf_counter() - start
    finally:
        await backend.aclose()
    return wall, traces


def start_fake_server(latency: float) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "backends.fake_server", "--port", "0", "--latency", f"fixed:{latency}"],
        cwd=ROOT, stdout=subprocess.PIPE, text=True,
    )
    line = proc.stdout.readline()  # type: ignore[union-attr]
    match = re.search(r"http://127\.0\.0\.1:\d+", line)
    if not match:
        proc.kill()
        raise RuntimeError(f"fake server did not start: {line!r}")
    return proc, match.group(0)


def server_stats(url: str) -> dict:
    import urllib.request

    with urllib.request.urlopen(url + "/stats") as r:
        return json.loads(r.read())


def reset_server(url: str) -> None:
    import urllib.request

    urllib.request.urlopen(urllib.request.Request(url + "/reset", method="POST")).read()


async def gemma_speed(url: str, n: int, max_tokens: int) -> dict:
    """Completion tokens per second over ``n`` sequential JSON-mode requests."""
    t = task(0)
    spec = BackendSpec("llamacpp", "gemma-3-270m", base_url=url, options={"timeout_s": 600})
    backend = make_backend(spec)
    tokens, latency, prompt = 0, 0.0, 0
    try:
        start = time.perf_counter()
        for i in range(n):
            req = LLMRequest(
                "gemma-3-270m",
                (Message("system", system_prompt(t, False, False)), Message("user", initial_prompt(t))),
                max_tokens=max_tokens, temperature=0.7, seed=i, schema=json_schema(Initial), metadata={"i": i},
            )
            res = await backend.complete(req)
            tokens += res.usage.completion_tokens
            prompt += res.usage.prompt_tokens
            latency += res.latency_s
        wall = time.perf_counter() - start
    finally:
        await backend.aclose()
    return {"requests": n, "max_tokens": max_tokens, "prompt_tokens": prompt, "completion_tokens": tokens,
            "wall_s": round(wall, 3), "completion_tokens_per_s": round(tokens / wall, 2),
            "total_tokens_per_s": round((tokens + prompt) / wall, 2)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, default=20, help="trials per arm (default: 20)")
    ap.add_argument("--rounds", type=int, default=3, help="discussion rounds (default: 3)")
    ap.add_argument("--latency", type=float, default=0.1, help="fake server latency, s (default: 0.1)")
    ap.add_argument("--concurrency", type=int, default=64, help="requests in flight (default: 64)")
    ap.add_argument("--repeats", type=int, default=3, help="concurrent runs; the best is reported (default: 3)")
    ap.add_argument("--skip-naive", action="store_true", help="skip the one-call-at-a-time loop (~100 s)")
    ap.add_argument("--skip-gemma", action="store_true", help="skip the llama.cpp tokens/s measurement")
    ap.add_argument("--gemma-requests", type=int, default=4, help="requests for the Gemma measurement")
    ap.add_argument("--out", type=Path, default=OUT, help=f"output JSON (default: {OUT.relative_to(ROOT)})")
    args = ap.parse_args()

    work = trials(args.trials, args.rounds)
    widths = asyncio.run(structure(work))
    calls = sum(map(sum, widths))
    steps = max(map(len, widths))
    path_s = steps * args.latency
    throughput_s = calls * args.latency / args.concurrency
    ideal = max(path_s, throughput_s)
    waves = {p: wave_schedule(widths, args.concurrency, p == "narrow_first") for p in ("fifo", "narrow_first")}
    best_schedule = min(waves.values()) * args.latency
    sleeper = min(asyncio.run(in_process(work, args.latency, args.concurrency)) for _ in range(args.repeats))
    result: dict = {
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "load_avg_at_start": [round(x, 2) for x in os.getloadavg()]},
        "setup": {"trials_per_arm": args.trials, "rounds": args.rounds, "n_peers": 4, "worlds": len(work),
                  "latency_s": args.latency, "concurrency": args.concurrency},
        "calls": calls, "critical_path_steps": steps,
        "ideal_s": {"critical_path": round(path_s, 3), "calls_x_latency_over_concurrency": round(throughput_s, 3),
                    "ideal": round(ideal, 3)},
        "best_schedule_s": {"waves_fifo": waves["fifo"], "waves_narrow_first": waves["narrow_first"],
                            "best": round(best_schedule, 3),
                            "note": NOTE},
        "in_process_no_http_s": round(sleeper, 3),
    }
    proc, url = start_fake_server(args.latency)
    try:
        spec = BackendSpec("openai-compatible", "fake-1", base_url=url + "/v1",
                           options={"max_concurrency": args.concurrency, "timeout_s": 60})
        walls, reference = [], None
        for _ in range(args.repeats):
            reset_server(url)
            wall, traces = asyncio.run(concurrent(work, spec))
            stats = server_stats(url)
            if reference is None:
                reference = traces
            assert traces == reference, "concurrent runs gave different traces"
            assert stats["requests"] == calls, (stats["requests"], calls)
            walls.append(round(wall, 3))
            print(f"concurrent: {wall:.2f} s, {stats['requests']} requests, "
                  f"max concurrency seen by the server {stats['max_concurrency']}", file=sys.stderr)
        best = min(walls)
        result["concurrent"] = {"wall_s_runs": walls, "wall_s": best, "server_requests": stats["requests"],
                                "server_max_concurrency": stats["max_concurrency"],
                                "ratio_to_ideal": round(best / ideal, 3),
                                "ratio_to_best_schedule": round(best / best_schedule, 3),
                                "ratio_to_in_process_no_http": round(best / sleeper, 3),
                                "target_ratio_to_ideal": 1.2, "meets_target": best / ideal <= 1.2}
        if not args.skip_naive:
            reset_server(url)
            naive_wall, naive_traces = asyncio.run(naive(work, spec))
            result["naive"] = {"wall_s": round(naive_wall, 3), "server_requests": server_stats(url)["requests"],
                               "same_traces_as_concurrent": naive_traces == reference,
                               "speedup_of_concurrent": round(naive_wall / best, 1),
                               "target_speedup": 20, "meets_target": naive_wall / best >= 20}
    finally:
        proc.terminate()
        proc.wait(10)
    if not args.skip_gemma:
        from backends.llamacpp import llama_server

        with llama_server() as gurl:
            result["gemma_llamacpp"] = asyncio.run(gemma_speed(gurl, args.gemma_requests, 64))
    result["load_avg_at_end"] = [round(x, 2) for x in os.getloadavg()]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
