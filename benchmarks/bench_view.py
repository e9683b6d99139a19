"""The run browser at scale. Writes benchmarks/results/bench_view.json.

Builds a synthetic but valid run directory of N trace events (default 10^5:
calls, replies and messages of 20 agents over simulated time, hashed into its
manifest like any run), then serves it with ``simcore.view`` in-process and
times, with aiohttp's test client:

1. the first open of the run page (the trace checked against the manifest and
   indexed), and a second open (index cached);
2. a page deep in the transcript (page 400), and a filtered page (one agent's
   messages);
3. the runs table of a RUNS_DIR holding that run;

and reports the size of each page, to show that no page carries the whole trace.

Usage: ``python benchmarks/bench_view.py [--events N]``
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import platform
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from aiohttp.test_utils import TestClient, TestServer  # noqa: E402

from simcore.base.records import write_json  # noqa: E402
from simcore.sim.trace import Trace  # noqa: E402
from simcore.view.app import make_app  # noqa: E402

OUT = ROOT / "benchmarks" / "results" / "bench_view.json"


def synthetic_run(root: Path, n_events: int, n_agents: int = 20) -> tuple[str, int]:
    """A run directory of ``n_events`` events whose manifest vouches for its files; (id, trace bytes)."""
    trace = Trace()
    agents = [f"A{i}" for i in range(n_agents)]
    t, k = 0.0, 0
    while len(trace) < n_events:
        agent = agents[k % n_agents]
        fields = {"phase": "discussion", "round": k // n_agents}
        trace.emit(t, "llm.call", agent, fields, {"request": f"{k:016x}", "max_tokens": 200})
        t += 1.5
        text = f"Turn {k} of {agent}: " + "a sentence of an agent's position, " * 6
        trace.emit(t, "llm.reply", agent, fields, {"text": text, "finish_reason": "stop", "tokens": [900, 60]})
        trace.emit(t, "message", agent, fields, {"text": text})
        k += 1
    trace.events[:] = trace.events[:n_events]
    run = root / "synthetic" / "big-run"
    run.mkdir(parents=True)
    data = trace.to_jsonl().encode()
    (run / "trace.jsonl").write_bytes(data)
    sha = hashlib.sha256(data).hexdigest()
    results = {"status": "ok", "trace_sha256": sha, "n_events": n_events, "seed": 1,
               "metrics": {"turns": k}, "usage": {"stub": {"calls": k}}, "cost_usd": 0.0}
    write_json(run / "results.json", results)
    write_json(run / "manifest.json", {
        "scenario": "synthetic", "run_id": "big-run", "seed": 1, "config": {}, "status": "ok",
        "backend": {"name": "stub", "model": "stub", "base_url": None, "options": {}},
        "models": ["stub"], "trace_sha256": sha, "n_events": n_events,
        "files": {"results.json": hashlib.sha256((run / "results.json").read_bytes()).hexdigest()},
    })
    return "synthetic/big-run", len(data)


async def measure(root: Path, run_id: str) -> dict[str, object]:
    client = TestClient(TestServer(make_app(root)))
    await client.start_server()
    out: dict[str, object] = {}
    try:
        for name, url in [
            ("run_page_first_open", f"/run/{run_id}"),
            ("run_page_second_open", f"/run/{run_id}"),
            ("run_page_400", f"/run/{run_id}?page=400"),
            ("run_page_one_agent_messages", f"/run/{run_id}?agent=A3&kind=message"),
            ("runs_table", "/"),
        ]:
            start = time.perf_counter()
            res = await client.get(url)
            body = await res.read()
            out[name] = {"seconds": round(time.perf_counter() - start, 4), "status": res.status,
                         "page_bytes": len(body)}
            assert res.status == 200, (url, res.status, body[:300])
    finally:
        await client.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=100_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        start = time.perf_counter()
        run_id, trace_bytes = synthetic_run(root, args.events)
        built = time.perf_counter() - start
        timings = asyncio.run(measure(root, run_id))
    result = {
        "events": args.events, "trace_bytes": trace_bytes, "build_run_s": round(built, 2),
        "page_size": 200, "timings": timings, "target": "run page opens in under 2 s",
        "machine": {"python": platform.python_version(), "platform": platform.platform()},
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
