"""Run one trial of a sweep and record it: the code every executor runs.

A worker runs the trial, writes its run directory (atomically, through
:func:`simcore.runner.write_run`) and returns its *outcome*: a small JSON-able
dict that becomes the trial's row. The outcome is computed from the results
exactly as written to ``results.json``, so a row rebuilt from a run directory
after a crash (:func:`outcome_from_run_dir`) equals the row the worker returned,
apart from the timing fields.

This module imports no pandas or matplotlib, to keep worker start-up light.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from backends.base import canonical_json
from backends.registry import BackendSpec
from simcore.batch.plan import TrialJob
from simcore.readers import DamagedFile, read_record, read_run
from simcore.runner import TrialResult, run_trial, run_trial_async, write_run
from simcore.scenario import Scenario


@dataclass(frozen=True)
class WorkerContext:
    """What every trial of a sweep shares (sent to each worker once per task).

    Attributes:
        scenario: The scenario (pickled by reference to its module).
        spec: Backend spec.
        sweep_dir: Absolute path of the sweep directory; run directories go to
            ``<sweep_dir>/<scenario>/<run_id>/``.
    """

    scenario: Scenario
    spec: BackendSpec
    sweep_dir: str


def run_dir_of(ctx: WorkerContext, run_id: str) -> Path:
    """Where a trial's run directory lives."""
    return Path(ctx.sweep_dir) / ctx.scenario.name / run_id


def execute(ctx: WorkerContext, job: TrialJob) -> dict[str, Any]:
    """Run and record one trial synchronously.

    A trial that fails is an outcome with status "error"; only a failure to write
    the run directory (an infrastructure problem) raises.
    """
    start = time.perf_counter()
    try:
        trial = run_trial(ctx.scenario, job.config, job.seed, ctx.spec)
    except Exception as exc:  # noqa: BLE001 - a crashing trial is a row, not a dead sweep
        return crash_outcome(job, exc, start)
    return record(ctx, job, trial, start)


async def execute_async(ctx: WorkerContext, job: TrialJob) -> dict[str, Any]:
    """:func:`execute` on the running event loop (for the asyncio executor)."""
    start = time.perf_counter()
    try:
        trial = await run_trial_async(ctx.scenario, job.config, job.seed, ctx.spec)
    except Exception as exc:  # noqa: BLE001
        return crash_outcome(job, exc, start)
    return record(ctx, job, trial, start)


def record(ctx: WorkerContext, job: TrialJob, trial: TrialResult, start: float) -> dict[str, Any]:
    """Write the trial's run directory and return its outcome."""
    final = run_dir_of(ctx, job.run_id)
    try:
        write_run(trial, ctx.sweep_dir, job.run_id)
    except OSError:
        # Another process (e.g. a worker orphaned by a killed sweep) finished the
        # same trial first; runs are deterministic, so its record is this one.
        if (final / "results.json").is_file():
            return outcome_from_run_dir(job, final)
        raise  # disk full, permissions...: stop the sweep; resume redoes the trial
    except Exception as exc:  # noqa: BLE001 - e.g. unserialisable results: a failed trial
        return crash_outcome(job, exc, start)
    results = json.loads(canonical_json(trial.results))  # exactly what results.json holds
    return outcome(job, results, wall_s=trial.wall_s, total_s=time.perf_counter() - start)


def outcome(job: TrialJob, results: Mapping[str, Any], wall_s: float | None, total_s: float | None) -> dict[str, Any]:
    """The row fields of a recorded trial, from its results object."""
    usage = results.get("usage") or {}
    err = results.get("error")
    error = f"{err.get('type')}: {err.get('message')}"[:300] if isinstance(err, Mapping) else None
    total = {k: sum(int(u.get(k, 0)) for u in usage.values()) for k in
             ("calls", "errors", "prompt_tokens", "completion_tokens")}
    return {
        "index": job.index,
        "run_id": job.run_id,
        "seed": job.seed,
        "status": results.get("status", "error"),
        "error": error,
        "metrics": scalar_metrics(results.get("metrics") or {}),
        "calls": total["calls"],
        "llm_errors": total["errors"],
        "prompt_tokens": total["prompt_tokens"],
        "completion_tokens": total["completion_tokens"],
        "tokens": total["prompt_tokens"] + total["completion_tokens"],
        "cost_usd": float(results.get("cost_usd") or 0.0),
        "unpriced_models": ";".join(results.get("unpriced_models") or []),
        "trace_sha256": results.get("trace_sha256"),
        "run_dir": f"{results.get('scenario')}/{job.run_id}",
        "wall_s": wall_s,
        "total_s": total_s,
    }


def crash_outcome(job: TrialJob, exc: BaseException, start: float) -> dict[str, Any]:
    """The row of a trial that raised outside the runner's own error handling.

    Such a trial has no run directory; its ledger line is its only record.
    """
    error = {"type": f"crash: {type(exc).__name__}", "message": str(exc)}
    row = outcome(job, {"status": "error", "error": error}, wall_s=None, total_s=time.perf_counter() - start)
    return {**row, "run_dir": None}


def outcome_from_run_dir(job: TrialJob, run_dir: Path) -> dict[str, Any]:
    """Rebuild a finished trial's outcome from its run directory, checking it first.

    Raises:
        DamagedFile: when the run directory fails its check (:func:`simcore.readers.read_run`)
            or is another trial's.
    """
    run = read_run(run_dir)
    if run.manifest["run_id"] != job.run_id or run.manifest["seed"] != job.seed:
        raise DamagedFile(run_dir / "manifest.json", f"run_id/seed: {run.manifest['run_id']}/"
                          f"{run.manifest['seed']} is not trial {job.run_id}/{job.seed}")
    timings = run_dir / "timings.json"
    wall = read_record(timings).get("wall_s") if timings.is_file() else None
    return outcome(job, run.results, wall_s=wall if isinstance(wall, (int, float)) else None, total_s=None)


def scalar_metrics(metrics: Mapping[str, Any]) -> dict[str, Any]:
    """The scalar entries of a metrics dict; booleans become 0/1, NaN becomes None."""
    out: dict[str, Any] = {}
    for name, value in metrics.items():
        if isinstance(value, bool):
            out[name] = int(value)
        elif isinstance(value, (int, str)) or value is None:
            out[name] = value
        elif isinstance(value, float):
            out[name] = None if math.isnan(value) else value
    return out
