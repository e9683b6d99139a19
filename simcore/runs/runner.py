"""Run one trial of a scenario and record it.

:func:`run_trial_async` builds a world, runs it and analyses it; it never writes.
:func:`write_run` turns the outcome into a run directory:

- ``manifest.json``: scenario, resolved config, seed, backend spec, what the providers
  were sent beyond it (``sent``: model rules applied, parameters they refused), package
  versions, code revision, trace hash, and the sha256 of every other file
  (``files``), which :mod:`simcore.base.files` checks when the run is read back;
- ``trace.jsonl``: every event, byte-identical for the same seed and responses
  (a large world streams it there as it runs: :class:`~simcore.sim.trace.StreamedTrace`);
- ``results.json``: status, metrics and usage;
- ``timings.json``: wall-clock figures and backend counters, which replay ignores;
- ``cassette.sqlite``: every response and error of a run on a real backend (or
  with ``--cassette``), so ``python -m simcore.replay`` can replay it offline;
- whatever the scenario's ``write_artifacts`` adds (plots, seed-format files).

A trial whose backend fails for good still produces a run directory: status
"error", the partial trace, and an error record.
"""

from __future__ import annotations

import asyncio
import contextvars
import hashlib
import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from backends.base import Backend, canonical_json
from backends.pricing import usage_cost
from backends.registry import (
    CASSETTE_FILE,
    BackendSpec,
    make_backend,
    price_table,
    reask_settings,
)
from simcore.analysis import embeddings, settings
from simcore.base.config import Config
from simcore.base.files import file_sha256
from simcore.base.loops import outside_running_loop
from simcore.base.records import (
    atomic_write,
    check_run_id,
    code_revision,
    new_run_id,
    package_versions,
    staged_dir,
    utc_now,
    write_json,
)
from simcore.runs.scenario import Scenario
from simcore.sim.fitting import fitter_for
from simcore.sim.kernel import Intervention, World
from simcore.sim.trace import StreamedTrace, Trace, streams


@dataclass
class TrialResult:
    """The outcome of one trial (in memory)."""

    scenario: Scenario
    config: Config
    seed: int
    backend: BackendSpec
    status: str
    error: dict[str, Any] | None
    world: World | None  # None once a Monte Carlo has written the run (see run_arms_async)
    results: dict[str, Any]
    wall_s: float
    encoder: dict[str, str] | None = None  # model, device, dtype of the embeddings the analysis used
    resumed_from: str | None = None  # the failed run whose cassette answered its first calls

    @property
    def trace(self) -> Trace | StreamedTrace:
        return self.world.trace


def trial_scope(scenario: Scenario, config: Config, seed: int) -> str:
    """The trial's cassette scope: a hash of scenario, config and seed."""
    key = canonical_json({"scenario": scenario.name, "config": config.to_dict(), "seed": seed})
    return hashlib.sha256(key.encode()).hexdigest()[:16]


def scenario_backend(scenario: Scenario, config: Config, spec: BackendSpec) -> Backend:
    """A new backend for ``spec``, with the scenario's stub behaviour for ``config``.

    Close it with :func:`close_backend` when done.
    """
    return make_backend(spec, scenario.behaviour(config) if scenario.behaviour else None)


async def close_backend(backend: Backend | None) -> None:
    """Close ``backend`` if it holds connections (HTTP providers); others need nothing."""
    if backend is not None and hasattr(backend, "aclose"):
        await backend.aclose()


def build_world(
    scenario: Scenario,
    config: Config,
    seed: int,
    spec: BackendSpec,
    backend: Backend | None = None,
    intervention: Intervention | None = None,
) -> World:
    """Create a world with the scenario's agents and processes, ready to run.

    A backend shared by many trials (one with ``for_trial``) gets a per-trial view,
    which records the trial's cassette and counts its calls, and answers its stub
    calls with this config's behaviour.
    """
    if backend is None:
        backend = scenario_backend(scenario, config, spec)
    for_trial = getattr(backend, "for_trial", None)
    if for_trial is not None:
        # The trial's own stub behaviour: trials of other configs may share the backend.
        behaviour = scenario.behaviour(config) if scenario.behaviour else None
        backend = for_trial(trial_scope(scenario, config, seed), behaviour)
    reask, reask_max_tokens = reask_settings(spec)
    world = World(
        seed, backend, scenario=scenario.name, model_name=spec.model, intervention=intervention,
        reask=reask, reask_max_tokens=reask_max_tokens, fit=fitter_for(spec.options, spec.name),
    )
    try:
        scenario.build(world, config)
    except BaseException:
        world.release()  # half-built (e.g. a topology that does not fit): never runs
        raise
    return world


async def run_trial_async(
    scenario: Scenario,
    config: Config,
    seed: int,
    spec: BackendSpec | None = None,
    backend: Backend | None = None,
    intervention: Intervention | None = None,
    analyze: bool = True,
    trace: str = "memory",
    trace_dir: str | Path | None = None,
) -> TrialResult:
    """Run one trial to the end and analyse it.

    Args:
        scenario: The scenario.
        config: A validated config.
        seed: The run seed.
        spec: Backend spec (recorded in the manifest); the stub by default.
        backend: A ready backend to use instead of building one from ``spec``
            (shared backends are not closed here; their owner closes them).
        intervention: Perturbation hooks (see :class:`simcore.sim.kernel.Intervention`).
        analyze: Run the scenario's analysis (False: the trace and the usage
            only, as a replay that compares traces needs; a scenario that runs
            its own ``trial`` analyses regardless).
        trace: ``memory``, ``stream`` or ``auto`` (see :data:`simcore.sim.trace.TRACE_MODES`);
            a streamed trace goes to a hidden file in ``trace_dir`` (default: the
            system's temporary directory) until :func:`write_run` moves it into
            the run directory. A scenario with its own trial function keeps it in memory.
        trace_dir: Where a streamed trace is written while the trial runs.

    Returns:
        The :class:`TrialResult`; status "error" if the run raised.
    """
    spec = spec or BackendSpec()
    if backend is None:
        owned = scenario_backend(scenario, config, spec)
        try:
            return await run_trial_async(scenario, config, seed, spec, owned, intervention, analyze, trace, trace_dir)
        finally:
            await close_backend(owned)
    if scenario.trial is not None:
        return await scenario.trial(config, seed, spec, backend)
    world = build_world(scenario, config, seed, spec, backend, intervention)
    if analyze and spec.name != "stub" and scenario.embeds is not None and scenario.embeds(config):
        # Load the model while the LLM calls go on (a stub run is over before it would help).

        embeddings.preload()
    if streams(trace, len(world.by_name)):
        world.trace = StreamedTrace.temporary(trace_dir, world.trace.events)
    try:
        return await _run_built(scenario, config, seed, spec, world, analyze)
    except BaseException:
        if isinstance(world.trace, StreamedTrace):
            world.trace.discard()
        raise


async def _run_built(
    scenario: Scenario, config: Config, seed: int, spec: BackendSpec, world: World, analyze: bool,
) -> TrialResult:
    start = time.perf_counter()
    status, error = "ok", None
    try:
        await world.run_async()
    except Exception as exc:  # noqa: BLE001 - a failed trial is a result, not a crash
        status = "error"
        error = {"type": type(exc).__name__, "message": str(exc)[:2000], "sim_time": world.now}
    wall = time.perf_counter() - start
    metrics_error = None
    try:
        results, encoder = await analyze_off_loop(scenario, world, config) if analyze else ({}, None)
    except Exception as exc:  # noqa: BLE001
        if status == "ok":
            raise
        results, metrics_error, encoder = {"metrics": {}}, f"{type(exc).__name__}: {exc}", None
    results = {
        "scenario": scenario.name,
        "seed": seed,
        "status": status,
        "error": error,
        **results,
        "parse_quality": world.parse_quality.to_dict(),
        "reply_slots": world.parse_quality.slots(),
        "usage": world.usage,
        **usage_cost(world.usage, price_table(spec)),
        "n_events": len(world.trace),
        "trace_sha256": world.trace.sha256(),
    }
    if metrics_error:
        results["analysis_error"] = metrics_error
    return TrialResult(scenario, config, seed, spec, status, error, world, results, wall, encoder)


async def analyze_off_loop(scenario: Scenario, world: World, config: Config) -> tuple[dict[str, Any],
                                                                                      dict[str, str] | None]:
    """``scenario.analyze`` on a worker thread, so the loop goes on with other trials' calls
    (inline when the scenario says this config embeds nothing).

    Returns the results and, when the analysis embedded texts, the encoder's model,
    device and dtype (for the manifest). Analyses of concurrent trials run side by
    side; their texts meet in the one encoder of :mod:`simcore.analysis.embeddings`, which
    encodes them in batches.
    """
    if scenario.embeds is not None and not scenario.embeds(config):
        # Nothing to wait for: a worker thread would cost more than the analysis.
        return dict(scenario.analyze(world, config)), None
    used = embeddings.record_use()  # (this task's context; the worker thread gets a copy)
    results = await asyncio.get_running_loop().run_in_executor(_analysis_pool(), _call_in_context,
                                                                contextvars.copy_context(),
                                                                scenario.analyze, world, config)
    return dict(results), (embeddings.settings() if used else None)


def _call_in_context(context: contextvars.Context, fn: Any, *args: Any) -> Any:
    return context.run(fn, *args)


_pool: ThreadPoolExecutor | None = None
_pool_pid = -1


def _analysis_pool() -> ThreadPoolExecutor:
    """The process's analysis threads: many, since most of them wait for the encoder."""
    global _pool, _pool_pid
    if _pool is None or _pool_pid != os.getpid():
        _pool, _pool_pid = ThreadPoolExecutor(max_workers=32, thread_name_prefix="simcore-analysis"), os.getpid()
    return _pool


@outside_running_loop
def run_trial(
    scenario: Scenario, config: Config, seed: int, spec: BackendSpec | None = None,
    trace: str = "memory", trace_dir: str | Path | None = None,
) -> TrialResult:
    """Synchronous :func:`run_trial_async` on a fresh event loop (from a running loop: on a worker thread)."""
    return asyncio.run(run_trial_async(scenario, config, seed, spec, trace=trace, trace_dir=trace_dir))


def manifest(trial: TrialResult, run_id: str) -> dict[str, Any]:
    """The manifest of a finished trial.

    A run with an intervention that describes itself (a perturbation) records it
    as ``perturbation``, which :mod:`simcore.replay` applies again.
    """
    out = {
        "scenario": trial.scenario.name,
        "run_id": run_id,
        "seed": trial.seed,
        "config": trial.config.to_dict(),
        "backend": trial.backend.to_dict(),
        "models": sorted(trial.world.usage),
        "status": trial.status,
        "trace_sha256": trial.results["trace_sha256"],
        "n_events": trial.results["n_events"],
        # How it was run beyond its definition: the trace kept in memory or streamed, and the
        # analysis settings (--device, --embed-cache, --plots).
        "options": {"trace": "stream" if isinstance(trial.trace, StreamedTrace) else "memory",
                    **settings.recorded()},
        "versions": package_versions(),
        "code_revision": code_revision(),
        "created_utc": utc_now(),
    }
    sent = getattr(trial.world.backend, "sent", None)
    record = sent(out["models"]) if callable(sent) else None
    if record:  # what the providers were sent that the config does not say (model rules, refusals)
        out["sent"] = record
    described = trial.world.intervention.describe() if trial.world.intervention is not None else None
    if described is not None:
        out["perturbation"] = described
    if trial.encoder is not None:
        out["embeddings"] = trial.encoder
    if trial.resumed_from is not None:
        out["resumed_from"] = trial.resumed_from
    return out


def file_hashes(run_dir: Path) -> dict[str, str]:
    """sha256 of every file under ``run_dir`` but the manifest, by relative path."""
    files = (p.relative_to(run_dir).as_posix() for p in sorted(run_dir.rglob("*")) if p.is_file())
    return {rel: file_sha256(run_dir / rel) for rel in files if rel != "manifest.json"}


def write_run(trial: TrialResult, out: str | Path, run_id: str | None = None) -> Path:
    """Write ``trial`` to ``out/<scenario>/<run-id>/`` atomically; return the directory."""
    return write_run_into(trial, Path(out) / trial.scenario.name, run_id)


def write_run_into(trial: TrialResult, parent: str | Path, run_id: str | None = None) -> Path:
    """Write ``trial`` to ``parent/<run-id>/`` atomically (a group's trials: inside the group's
    directory); return the directory."""
    run_id = check_run_id(run_id or new_run_id(trial.seed))
    final = Path(parent) / run_id
    results = {**trial.results, "run_id": run_id}
    with staged_dir(final) as stage:
        if isinstance(trial.trace, StreamedTrace):
            trial.trace.move_to(stage / "trace.jsonl")  # written as the trial ran
        else:
            atomic_write(stage / "trace.jsonl", trial.trace.to_jsonl())
        save_cassette = getattr(trial.world.backend, "save_cassette", None)
        if save_cassette is not None:
            save_cassette(stage / CASSETTE_FILE)
        if trial.scenario.write_artifacts is not None and trial.status == "ok":
            try:
                results.update(trial.scenario.write_artifacts(stage, trial.world, trial.config, results) or {})
            except Exception as exc:  # noqa: BLE001 - a failed plot must not lose the run
                results["artifact_error"] = f"{type(exc).__name__}: {exc}"
        write_json(stage / "results.json", results)
        timings = {"wall_s": trial.wall_s, "latency_s": trial.world.latency_s, "written_utc": utc_now()}
        backend_stats = getattr(trial.world.backend, "stats", None)
        if callable(backend_stats):
            timings["backend"] = backend_stats()
        write_json(stage / "timings.json", timings)
        # Last, so that it can vouch for every other file (simcore.base.files checks them).
        write_json(stage / "manifest.json", {**manifest(trial, run_id), "files": file_hashes(stage)})
    if isinstance(trial.trace, StreamedTrace):
        trial.trace.path = final / "trace.jsonl"  # the staging directory became the run directory
    trial.results = results
    return final
