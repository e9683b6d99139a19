"""Run one trial of a sweep and record it: the code every executor runs.

A worker runs the trial, writes its run directory (atomically, through
:func:`simcore.runs.runner.write_run`) and returns its *outcome*: a small JSON-able
dict that becomes the trial's row. The outcome is computed from the results
exactly as written to ``results.json``, so a row rebuilt from a run directory
after a crash (:func:`outcome_from_run_dir`) equals the row the worker returned,
apart from the timing fields.

Every trial a worker runs in one sweep pass shares one backend per thread
(:func:`shared_backend`), so a provider's concurrency limit, rate limits, budget
and circuit breaker hold across those trials; the sweep gives each of its
``slots`` (trials running at once in different backends) an equal share of
them. A trial that runs past the trial timeout is cancelled and becomes an error
row with no run directory.

This module imports no pandas or matplotlib, to keep worker start-up light.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import math
import os
import shutil
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Awaitable, Mapping, TypeVar

from backends.base import Backend, canonical_json
from backends.errors import (
    AuthenticationError,
    BadRequest,
    BudgetExceeded,
    CassetteMiss,
    HTTPStatusError,
    MalformedResponse,
    MissingAPIKey,
    RateLimited,
    RequestTimeout,
    RunHalted,
    ServerError,
    TransportError,
    UnpricedModel,
)
from backends.registry import BackendSpec, make_backend
from simcore.analysis import embeddings, encoder_service
from simcore.analysis.basis import shares
from simcore.analysis.readability import arm_of
from simcore.base.files import DamagedFile, read_record, read_run
from simcore.batch.breakers import BreakerBoard
from simcore.batch.plan import TrialJob
from simcore.replies import quality
from simcore.runs.runner import TrialResult, run_trial_async, write_run
from simcore.runs.scenario import Scenario

T = TypeVar("T")

FAILED_DIR = "failed"


class TrialTimeout(Exception):
    """The trial ran past the sweep's trial timeout and was cancelled.

    Attributes:
        backend: The trial's own backend counters when it was cancelled (what it
            had spent), or None.
    """

    backend: dict[str, Any] | None = None


# Why a trial failed, from the type of its error, in the order reports list them.
FAILURE_KINDS: dict[str, tuple[type[BaseException], ...]] = {
    "rate limit": (RateLimited,),
    "server error": (ServerError, HTTPStatusError),
    "timeout": (RequestTimeout, TrialTimeout),
    "malformed": (MalformedResponse,),
    "budget": (BudgetExceeded, UnpricedModel),
    "connection": (TransportError,),
    "rejected": (AuthenticationError, BadRequest, MissingAPIKey),
    "cassette": (CassetteMiss,),
    "halted": (RunHalted,),
}
_KIND_OF = {cls.__name__: kind for kind, classes in FAILURE_KINDS.items() for cls in classes}
OTHER_KIND = "trial"  # an exception in the scenario or its analysis


def error_kind(type_name: str | None) -> str | None:
    """The failure kind of an error type name (see :data:`FAILURE_KINDS`); None for no error."""
    if type_name is None:
        return None
    return _KIND_OF.get(type_name, OTHER_KIND)


@dataclass(frozen=True)
class WorkerContext:
    """What every trial of a sweep shares (sent to each worker once per task).

    Attributes:
        scenario: The scenario (pickled by reference to its module).
        spec: Backend spec, with the options of this pass (limits, timeouts,
            retries, and as ``budget_usd`` what is left of the sweep's budget).
        sweep_dir: Absolute path of the sweep directory; run directories go to
            ``<sweep_dir>/<scenario>/<run_id>/``.
        slots: Trials that run at once in different backends (worker processes
            or threads); each backend gets 1/slots of the limits and budget.
        trial_timeout_s: Cancel a trial that runs longer (None: no limit).
        token: Identifies the sweep pass; a worker's shared backend lives for one pass.
        encoder: (address, authkey) of the sweep's shared encoder
            (:mod:`simcore.analysis.encoder_service`), or None: each process encodes itself.
    """

    scenario: Scenario
    spec: BackendSpec
    sweep_dir: str
    slots: int = 1
    trial_timeout_s: float | None = None
    token: str = ""
    encoder: tuple[str, bytes] | None = None


#: Seconds this process has spent writing run directories (for the pace record).
_spent = {"write_s": 0.0}


def run_dir_of(ctx: WorkerContext, run_id: str) -> Path:
    """Where a trial's run directory lives."""
    return Path(ctx.sweep_dir) / ctx.scenario.name / run_id


_held = threading.local()


def shared_backend(ctx: WorkerContext) -> Backend | None:
    """The backend this thread's trials share during the pass ``ctx.token`` (None: the stub).

    Stub trials build their own (it has no limits to share). A new pass, or
    another sweep in the same process, gets a new backend.
    """
    if ctx.spec.name == "stub":
        return None
    held = getattr(_held, "backend", None)
    if held is not None and held[0] == ctx.token:
        return held[1]
    backend = make_backend(ctx.spec, share=ctx.slots)
    router = getattr(backend, "inner", None)
    if hasattr(router, "breaker_listeners"):
        timeout = float(ctx.spec.options.get("timeout_s", 120.0))
        router.breaker_listeners.append(BreakerBoard(ctx.sweep_dir).publisher(timeout))
    _held.backend = (ctx.token, backend)
    return backend


async def release_shared(ctx: WorkerContext) -> None:
    """Close this thread's shared backend of pass ``ctx.token`` (the asyncio executor's end)."""
    held = getattr(_held, "backend", None)
    if held is not None and held[0] == ctx.token:
        _held.backend = None
        await held[1].aclose()


async def within(timeout_s: float | None, work: Awaitable[T]) -> T:
    """Await ``work``; cancel it and raise :class:`TrialTimeout` after ``timeout_s``."""
    if timeout_s is None:
        return await work
    deadline = asyncio.timeout(timeout_s)
    try:
        async with deadline:
            return await work
    except TimeoutError:
        if not deadline.expired():
            raise  # the trial's own TimeoutError, not ours
        raise TrialTimeout(f"the trial ran past --trial-timeout {timeout_s:g} s and was cancelled") from None


class _Watched:
    """A shared backend that remembers the per-trial view it hands out, so that a
    cancelled trial's calls and spending can still be counted."""

    def __init__(self, backend: Backend) -> None:
        self._backend = backend
        self.view: Any = None

    def for_trial(self, *args: Any, **kwargs: Any) -> Any:
        self.view = self._backend.for_trial(*args, **kwargs)  # type: ignore[attr-defined]
        return self.view

    def __getattr__(self, name: str) -> Any:
        return getattr(self._backend, name)


async def _run(ctx: WorkerContext, job: TrialJob, close_sessions: bool) -> TrialResult:
    backend = shared_backend(ctx)
    watched = None if backend is None else _Watched(backend)
    try:
        return await within(ctx.trial_timeout_s,
                            run_trial_async(ctx.scenario, job.config, job.seed, ctx.spec, watched))
    except TrialTimeout as exc:
        if watched is not None and watched.view is not None:
            exc.backend = watched.view.stats()
        raise
    finally:
        if backend is not None and close_sessions:
            # HTTP sessions belong to this trial's event loop; limits, the budget and
            # the breaker live on in the backend for the next trial.
            await backend.close_sessions()  # type: ignore[attr-defined]


def execute(ctx: WorkerContext, job: TrialJob) -> dict[str, Any]:
    """Run and record one trial synchronously (on a new event loop).

    A trial that fails is an outcome with status "error"; only a failure to write
    the run directory (an infrastructure problem) raises.
    """
    start = time.perf_counter()
    set_aside_failed_run(ctx, job)
    try:
        trial = asyncio.run(_run(ctx, job, close_sessions=True))
    except Exception as exc:  # noqa: BLE001 - a crashing trial is a row, not a dead sweep
        return failed_outcome(ctx, job, exc, start)
    return record(ctx, job, trial, start)


def execute_in_pool(ctx: WorkerContext, job: TrialJob) -> tuple[dict[str, Any], dict[str, Any]]:
    """:func:`execute` in a worker process, with what the sweep learns about the worker.

    Returns the outcome and a sample: the process id, when the trial started and
    ended on this machine's monotonic clock (the same in every process, so the
    sweep can add up how long its workers sat idle), how long this process's
    encoder computed vectors meanwhile and how long writing the run directory
    took, and whether this process has loaded an encoder model or imported torch.
    """
    start = time.monotonic()
    if ctx.encoder is not None:
        encoder_service.attach(*ctx.encoder)
    encoded_ns, written_s = embeddings.counts()["forward_ns"], _spent["write_s"]
    out = execute(ctx, job)
    return out, {"pid": os.getpid(), "start": start, "end": time.monotonic(),
                 "encode_s": (embeddings.counts()["forward_ns"] - encoded_ns) / 1e9,
                 "write_s": _spent["write_s"] - written_s,
                 "model_loaded": embeddings.model_loaded(),
                 "torch_imported": "torch" in sys.modules}


async def execute_async(ctx: WorkerContext, job: TrialJob) -> dict[str, Any]:
    """:func:`execute` on the running event loop (for the asyncio executor)."""
    start = time.perf_counter()
    set_aside_failed_run(ctx, job)
    try:
        trial = await _run(ctx, job, close_sessions=False)
    except Exception as exc:  # noqa: BLE001
        return failed_outcome(ctx, job, exc, start)
    return record(ctx, job, trial, start)


def set_aside_failed_run(ctx: WorkerContext, job: TrialJob) -> Path | None:
    """Move the run directory of an earlier failed attempt to ``failed/<run-id>-<n>``.

    The re-run then writes a fresh run directory in its place; the failed attempt
    stays on disk (and in the ledger) as evidence. Returns where it went.
    """
    final = run_dir_of(ctx, job.run_id)
    if not final.is_dir():
        return None
    try:
        if read_record(final / "results.json").get("status") == "ok":
            return None  # finished meanwhile (an orphaned worker): record() reads it back
    except DamagedFile:
        pass  # unreadable: not a finished trial either
    archive = Path(ctx.sweep_dir) / FAILED_DIR
    archive.mkdir(exist_ok=True)
    n = 1 + sum(1 for p in archive.glob(f"{job.run_id}-*"))
    target = archive / f"{job.run_id}-{n}"
    os.replace(final, target)
    return target


def _clean_partial(ctx: WorkerContext, job: TrialJob) -> None:
    # A cancelled trial leaves nothing behind: no staging directory of its run.
    parent = run_dir_of(ctx, job.run_id).parent
    for stage in parent.glob(f".{job.run_id}.*.tmp"):
        shutil.rmtree(stage, ignore_errors=True)


def record(ctx: WorkerContext, job: TrialJob, trial: TrialResult, start: float) -> dict[str, Any]:
    """Write the trial's run directory and return its outcome."""
    final = run_dir_of(ctx, job.run_id)
    begun = time.perf_counter()
    try:
        write_run(trial, ctx.sweep_dir, job.run_id)
    except OSError:
        # Another process (e.g. a worker orphaned by a killed sweep) finished the
        # same trial first; runs are deterministic, so its record is this one.
        if (final / "results.json").is_file():
            return outcome_from_run_dir(job, final)
        raise  # disk full, permissions...: stop the sweep; resume redoes the trial
    except Exception as exc:  # noqa: BLE001 - e.g. unserialisable results: a failed trial
        return failed_outcome(ctx, job, exc, start)
    finally:
        _spent["write_s"] += time.perf_counter() - begun
    results = json.loads(canonical_json(trial.results))  # exactly what results.json holds
    stats = getattr(trial.world.backend, "stats", None) if trial.world is not None else None
    return outcome(job, results, wall_s=trial.wall_s, total_s=time.perf_counter() - start,
                   backend=stats() if callable(stats) else None)


def outcome(job: TrialJob, results: Mapping[str, Any], wall_s: float | None, total_s: float | None,
            backend: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The row fields of a recorded trial, from its results object.

    ``backend`` is the trial's backend counters (``timings.json``'s ``backend``),
    which give its retries.
    """
    usage = results.get("usage") or {}
    err = results.get("error")
    error = f"{err.get('type')}: {err.get('message')}"[:300] if isinstance(err, Mapping) else None
    kind = error_kind(str(err.get("type")).removeprefix("crash: ")) if isinstance(err, Mapping) else None
    total = {k: sum(int(u.get(k, 0)) for u in usage.values()) for k in
             ("calls", "errors", "prompt_tokens", "completion_tokens")}
    providers = (backend or {}).get("providers") or {}
    return {
        "index": job.index,
        "run_id": job.run_id,
        "seed": job.seed,
        "status": results.get("status", "error"),
        "error": error,
        "error_kind": kind,
        "metrics": scalar_metrics(results.get("metrics") or {}),
        # What the metrics rest on: readable share per metric, and how replies were read.
        "quality": {**shares(results.get("basis") or {}), **quality.columns(results.get("parse_quality") or {})},
        # The replies as the readability test reads them, so that the summary reads no run again.
        "readability": dataclasses.asdict(arm_of(results)),
        "calls": total["calls"],
        "llm_errors": total["errors"],
        "prompt_tokens": total["prompt_tokens"],
        "completion_tokens": total["completion_tokens"],
        "tokens": total["prompt_tokens"] + total["completion_tokens"],
        "retries": sum(int(p.get("retries", 0)) for p in providers.values()),
        "cost_usd": float(results.get("cost_usd") or 0.0),
        "unpriced_models": ";".join(results.get("unpriced_models") or []),
        "trace_sha256": results.get("trace_sha256"),
        "run_dir": f"{results.get('scenario')}/{job.run_id}",
        "wall_s": wall_s,
        "total_s": total_s,
    }


def failed_outcome(ctx: WorkerContext, job: TrialJob, exc: BaseException, start: float) -> dict[str, Any]:
    """The row of a trial that timed out, or raised outside the runner's own error handling.

    Such a trial has no run directory (a timed-out trial's partial files are
    removed); its ledger line is its only record.
    """
    timed_out = isinstance(exc, TrialTimeout)
    if timed_out:
        _clean_partial(ctx, job)
    error = {"type": type(exc).__name__ if timed_out else f"crash: {type(exc).__name__}", "message": str(exc)}
    backend = exc.backend if timed_out else None
    row = outcome(job, {"status": "error", "error": error}, wall_s=None, total_s=time.perf_counter() - start,
                  backend=backend)
    if backend:
        # What the cancelled trial had already used, so that the sweep's spending adds up.
        tally = backend.get("providers") or {}
        prompt = sum(int(p.get("prompt_tokens", 0)) for p in tally.values())
        completion = sum(int(p.get("completion_tokens", 0)) for p in tally.values())
        row.update(calls=int(backend.get("calls", 0)), llm_errors=int(backend.get("errors", 0)),
                   prompt_tokens=prompt, completion_tokens=completion, tokens=prompt + completion,
                   cost_usd=float(backend.get("spent_usd", 0.0)))
    return {**row, "run_dir": None}


def outcome_from_run_dir(job: TrialJob, run_dir: Path) -> dict[str, Any]:
    """Rebuild a finished trial's outcome from its run directory, checking it first.

    Raises:
        DamagedFile: when the run directory fails its check (:func:`simcore.base.files.read_run`)
            or is another trial's.
    """
    run = read_run(run_dir)
    if run.manifest["run_id"] != job.run_id or run.manifest["seed"] != job.seed:
        raise DamagedFile(run_dir / "manifest.json", f"run_id/seed: {run.manifest['run_id']}/"
                          f"{run.manifest['seed']} is not trial {job.run_id}/{job.seed}")
    timings = run_dir / "timings.json"
    timing = read_record(timings) if timings.is_file() else {}
    wall = timing.get("wall_s")
    return outcome(job, run.results, wall_s=wall if isinstance(wall, (int, float)) else None, total_s=None,
                   backend=timing.get("backend"))


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
