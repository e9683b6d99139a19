"""Every scenario against small real models: how replies are read, and how many are cut.

For each local model (llama.cpp server, see ``backends/llamacpp.py``), JSON mode on
and off, and each scenario (a small config that keeps the scenario's default token
budgets), run trials and count, per scenario and phase:

- replies whose first attempt was cut at max_tokens (``finish_reason: length``);
- how the turns were read in the end (json / label / prose / unreadable), and re-asks.

Writes ``benchmarks/results/real_models.json`` (and a Markdown table beside it).
Slow: minutes per model on two cores. Run::

    python benchmarks/bench_real_models.py --models smollm2,qwen --json-modes on,off

``--report BEFORE.json AFTER.json [AFTER2.json ...]`` runs nothing: it merges the
runs of the AFTER files (runs split over several invocations) and writes, to
``--out`` and its ``.md``, the before/after truncation table and the parse-quality
table of the after runs.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from backends.llamacpp import llama_server, model_path  # noqa: E402
from backends.registry import BackendSpec  # noqa: E402
from simcore.base.records import write_json  # noqa: E402
from simcore.runs.runner import run_trial_async, write_run  # noqa: E402
from simcore.runs.scenario import load_scenario  # noqa: E402

# Small worlds that keep each scenario's default token budgets.
CONFIGS: dict[str, dict[str, Any]] = {
    "context_corrosion": {"rounds": 1, "n_peers": 2, "metrics": False},
    "acausal_cooperation": {"n_agents": 3, "rounds": 1, "embeddings": False},
    "llm_auction": {"n_agents": 5, "n_vignettes": 1},
    "veil_of_ignorance": {"n_agents": 3, "max_rounds": 1},
}
JSON_MODES = {"on": "auto", "off": "off"}


def phase_table(trace: Any) -> dict[str, dict[str, int]]:
    """Per phase: first-attempt replies, how many were cut, re-asks, and final outcomes."""
    out: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for e in trace:
        if e.kind != "llm.reply":
            continue
        row = out[str(e.fields.get("phase", ""))]
        if e.fields.get("reask"):
            row["reasks"] += 1
            continue
        row["replies"] += 1
        row["truncated"] += e.payload.get("finish_reason") == "length"
    return {p: dict(r) for p, r in out.items()}


async def run_one(name: str, url: str, model: str, mode: str, seed: int, out: Path) -> dict[str, Any]:
    scenario = load_scenario(name)
    fields = set(scenario.config_type.__dataclass_fields__)
    config = scenario.config_type.from_mapping({k: v for k, v in CONFIGS[name].items() if k in fields})
    spec = BackendSpec("llamacpp", model, base_url=url, options={"json_mode": JSON_MODES[mode], "timeout_s": 900})
    start = time.perf_counter()
    trial = await run_trial_async(scenario, config, seed, spec)
    run_dir = write_run(trial, out)
    return {
        "scenario": name, "model": model, "json_mode": mode, "seed": seed, "status": trial.status,
        "error": trial.error, "wall_s": round(time.perf_counter() - start, 1), "run_dir": str(run_dir),
        "phases": phase_table(trial.trace), "parse_quality": trial.results.get("parse_quality", {}),
    }


def markdown(rows: list[dict[str, Any]]) -> str:
    """Truncation at default budgets, per scenario and phase, summed over seeds."""
    acc: dict[tuple[str, str, str, str], list[int]] = defaultdict(lambda: [0, 0, 0])
    for r in rows:
        for phase, c in r["phases"].items():
            a = acc[(r["scenario"], phase, r["model"], r["json_mode"])]
            a[0] += c.get("replies", 0)
            a[1] += c.get("truncated", 0)
            a[2] += c.get("reasks", 0)
    lines = ["| scenario | phase | model | JSON mode | replies | cut at max_tokens | share | re-asks |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for (scenario, phase, model, mode), (n, cut, reasks) in sorted(acc.items()):
        share = f"{cut / n:.0%}" if n else "n/a"
        lines.append(f"| {scenario} | {phase} | {model} | {mode} | {n} | {cut} | {share} | {reasks} |")
    return "\n".join(lines) + "\n"


def cut_shares(rows: list[dict[str, Any]]) -> dict[tuple[str, str, str, str], tuple[int, int]]:
    """(scenario, phase, model, JSON mode) -> (first replies, cut at max_tokens)."""
    acc: dict[tuple[str, str, str, str], list[int]] = defaultdict(lambda: [0, 0])
    for r in rows:
        for phase, c in r["phases"].items():
            a = acc[(r["scenario"], phase, r["model"], r["json_mode"])]
            a[0] += c.get("replies", 0)
            a[1] += c.get("truncated", 0)
    return {k: (n, cut) for k, (n, cut) in acc.items()}


def report(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> str:
    """Markdown: truncation before and after, then how the after runs' replies were read."""
    b, a = cut_shares(before), cut_shares(after)
    fmt = lambda nc: f"{nc[1]}/{nc[0]} ({nc[1] / nc[0]:.0%})" if nc and nc[0] else "-"  # noqa: E731
    lines = ["| scenario | phase | model | JSON mode | cut before | cut after |", "| --- | --- | --- | --- | --- | --- |"]
    for key in sorted(set(b) | set(a)):
        lines.append(f"| {' | '.join(key)} | {fmt(b.get(key))} | {fmt(a.get(key))} |")
    return "\n".join(lines) + "\n\n" + quality_table(after)


def quality_table(rows: list[dict[str, Any]]) -> str:
    """Markdown: how each run's replies were read, per reply kind."""
    lines = ["| scenario | model | JSON mode | reply kind | replies | JSON | label | prose | unreadable | "
             "truncated | salvaged | re-asked |", "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in sorted(rows, key=lambda r: (r["scenario"], r["model"], r["json_mode"])):
        for kind, c in sorted((r.get("parse_quality") or {}).items()):
            counts = " | ".join(str(c.get(k, 0)) for k in ("replies", "json", "label", "prose", "unreadable",
                                                           "truncated", "salvaged", "reasked"))
            lines.append(f"| {r['scenario']} | {r['model']} | {r['json_mode']} | {kind} | {counts} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default="smollm2,qwen", help="comma-separated: gemma, smollm2, qwen")
    p.add_argument("--json-modes", default="on,off", help="comma-separated: on, off")
    p.add_argument("--scenarios", default=",".join(CONFIGS), help="comma-separated scenario names")
    p.add_argument("--seeds", default="1", help="comma-separated random seeds")
    p.add_argument("--n-ctx", type=int, default=8192, help="the server's context window")
    p.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "real_models.json"))
    p.add_argument("--report", nargs="+", metavar="FILE", help="BEFORE.json AFTER.json...: tables only, no runs")
    args = p.parse_args(argv)
    if args.report:
        if len(args.report) < 2:
            p.error("--report: give BEFORE.json and at least one AFTER.json")
        before = json.loads(Path(args.report[0]).read_text())["runs"]
        after = [r for f in args.report[1:] for r in json.loads(Path(f).read_text())["runs"]]
        write_json(Path(args.out), {"written": time.strftime("%Y-%m-%d"), "configs": CONFIGS, "runs": after,
                                    "before": args.report[0], "complete": True})
        Path(args.out).with_suffix(".md").write_text(report(before, after))
        print(report(before, after))
        return 0
    rows: list[dict[str, Any]] = []
    runs = ROOT / "runs" / "bench_real_models"
    runs.mkdir(parents=True, exist_ok=True)
    for model in args.models.split(","):
        with llama_server(model_path(model), n_ctx=args.n_ctx, log=runs / f"{model}.server.log") as url:
            for mode in args.json_modes.split(","):
                for name in args.scenarios.split(","):
                    for seed in (int(s) for s in args.seeds.split(",")):
                        row = asyncio.run(run_one(name, url, model, mode, seed, runs))
                        rows.append(row)
                        write_json(Path(args.out), {"written": time.strftime("%Y-%m-%d"), "configs": CONFIGS,
                                                    "runs": rows, "complete": False})
                        print(f"{model} json={mode} {name} seed {seed}: {row['status']} in {row['wall_s']} s; "
                              f"{json.dumps(row['phases'])}", flush=True)
    result = {"written": time.strftime("%Y-%m-%d"), "configs": CONFIGS, "runs": rows, "complete": True}
    write_json(Path(args.out), result)
    tables = markdown(rows) + "\n" + quality_table(rows)
    Path(args.out).with_suffix(".md").write_text(tables)
    print(tables)
    return 0


if __name__ == "__main__":
    sys.exit(main())
