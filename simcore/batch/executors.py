"""Executors: where the trials of a sweep run.

- ``serial``: one after another in this process.
- ``asyncio``: many trials at once on one event loop in this process (bounded by
  ``concurrency``); for LLM-bound work, where trials wait on the network.
- ``local``: a pool of worker processes on this machine (the default; for the
  stub and other CPU-bound work).
- ``dask``: a Dask distributed cluster, either a running scheduler (``address``)
  or a LocalCluster started for the sweep. Workers write run directories into the
  sweep directory, so remote workers need it on a shared filesystem.

All of them pull work from a :class:`Dispatcher`, which hands out matched groups
of trials while the budget allows, the failures stay under their cap and no
provider's circuit breaker is open, and feed each finished trial back to it. The
results never depend on the executor: every trial's seed and config are fixed in
the plan, and rows are put in plan order afterwards.

Provider limits hold for the sweep as a whole: the trials of one process (or Dask
worker thread) share one backend, and each of the ``slots`` that run trials at
once gets 1/slots of the concurrency limit, rates and budget (see
:func:`simcore.batch.worker.shared_backend`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures as cf
import contextlib
import dataclasses
import multiprocessing
import os
import sys
import time
from typing import Any, Callable, ContextManager, Iterable, Iterator

from simcore.analysis.minilm import THREADS_ENV
from simcore.batch.plan import TrialJob
from simcore.batch.worker import (
    WorkerContext,
    execute,
    execute_async,
    execute_in_pool,
    release_shared,
)

POLL_S = 1.0  # how often a waiting executor looks again at the dispatcher (breaker pauses)

EXECUTORS = ("local", "serial", "asyncio", "dask")


class SweepAborted(RuntimeError):
    """The executor itself failed (e.g. a worker process died); the sweep can resume."""


class Budget:
    """Stops dispatching when the sweep's cost would pass a cap.

    A group of trials is dispatched only if ``spent + expected cost of trials in
    flight + expected cost of the group <= cap``. A trial's expected cost is the
    mean cost of the finished trials of its cell and condition, or else the pilot
    estimate for them, or else the mean over all finished trials.

    Args:
        cap: The most the whole sweep may cost, in USD.
        spent: What earlier (resumed) trials already cost.
        estimates: Pilot cost per trial by (cell, condition).
    """

    def __init__(self, cap: float, spent: float = 0.0, estimates: dict[tuple[int, int], float] | None = None) -> None:
        self.cap = cap
        self.spent = spent
        self.estimates = estimates or {}
        self.inflight: dict[int, float] = {}
        self._sums: dict[tuple[int, int], tuple[float, int]] = {}
        self._total = (0.0, 0)

    def expected(self, job: TrialJob) -> float:
        """Expected cost of ``job``."""
        s, n = self._sums.get((job.cell, job.condition), (0.0, 0))
        if n:
            return s / n
        if (job.cell, job.condition) in self.estimates:
            return self.estimates[(job.cell, job.condition)]
        s, n = self._total
        return s / n if n else 0.0

    def allows(self, group: list[TrialJob]) -> bool:
        """Whether ``group`` fits in what is left."""
        want = sum(self.expected(j) for j in group)
        return self.spent + sum(self.inflight.values()) + want <= self.cap

    def start(self, job: TrialJob) -> None:
        self.inflight[job.index] = self.expected(job)

    def finish(self, job: TrialJob, cost: float) -> None:
        self.inflight.pop(job.index, None)
        self.spent += cost
        s, n = self._sums.get((job.cell, job.condition), (0.0, 0))
        self._sums[(job.cell, job.condition)] = (s + cost, n + 1)
        self._total = (self._total[0] + cost, self._total[1] + 1)


class Dispatcher:
    """Hands out groups of trials and takes their outcomes back.

    Args:
        groups: Matched groups of jobs still to run, in dispatch order.
        on_done: Called with (job, outcome) as each trial finishes.
        budget: The cost cap, or None.
        fail_fast: Stop dispatching after the first failed trial.
        max_failed: Stop dispatching once this many trials failed (None: never).
        paused: Says whether a provider's circuit breaker is open; while it is,
            only a trial to probe with is dispatched (when none is in flight).
        batch: Wraps the recording of outcomes that finished together (the
            sweep's ledger syncs once per batch).
    """

    def __init__(
        self,
        groups: Iterable[list[TrialJob]],
        on_done: Callable[[TrialJob, dict[str, Any]], None],
        budget: Budget | None = None,
        fail_fast: bool = False,
        max_failed: int | None = None,
        paused: Callable[[], bool] | None = None,
        batch: Callable[[], ContextManager[Any]] | None = None,
    ) -> None:
        self._groups: Iterator[list[TrialJob]] = iter(groups)
        self.batch = batch or contextlib.nullcontext
        self.pace = Pace()
        self._on_done = on_done
        self.budget = budget
        self.fail_fast = fail_fast
        self.max_failed = 1 if fail_fast else max_failed
        self.paused = paused or (lambda: False)
        self.failed = 0
        self.stop_reason: str | None = None
        self.dispatched: set[int] = set()

    def next_group(self) -> list[TrialJob] | None:
        """The next group to run, or None when done or stopped."""
        if self.stop_reason is not None:
            return None
        group = next(self._groups, None)
        if group is None:
            self.stop_reason = "done"
            return None
        if self.budget is not None and not self.budget.allows(group):
            self.stop_reason = "budget"
            return None
        for job in group:
            self.dispatched.add(job.index)
            if self.budget is not None:
                self.budget.start(job)
        return group

    def done(self, job: TrialJob, outcome: dict[str, Any]) -> None:
        """Record a finished trial."""
        if self.budget is not None:
            self.budget.finish(job, outcome["cost_usd"])
        if outcome["status"] != "ok":
            self.failed += 1
            if self.max_failed is not None and self.failed >= self.max_failed and self.stop_reason is None:
                self.stop_reason = "fail-fast" if self.fail_fast else "max-failed-trials"
        self._on_done(job, outcome)


class Pace:
    """How busy a sweep's processes were: the parent's work per trial and the workers' idle time.

    The parent's work is what its dispatching thread did between waits (submitting,
    recording outcomes in the ledger, the progress bar, the budget), apart from the
    first submission, which starts the pool; a worker's
    time is split into start-up (pool start to its first trial), trials, gaps
    between them, and the tail (its last trial's end to the end of the pool); its
    trials' time into encoding, writing run directories and the rest.
    """

    def __init__(self) -> None:
        self.parent_s = 0.0
        self.trials = 0
        self.samples: list[dict[str, Any]] = []
        self.started: float | None = None
        self.ended: float | None = None
        self.slots = 0

    @contextlib.contextmanager
    def pool(self, slots: int) -> Iterator[None]:
        """Marks the span in which the pool's ``slots`` processes existed."""
        self.slots, self.started = slots, time.monotonic()
        try:
            yield
        finally:
            self.ended = time.monotonic()

    def report(self) -> dict[str, Any]:
        """The figures ``summary.json`` keeps under ``timing.pace``."""
        out: dict[str, Any] = {
            "trials": self.trials,
            "parent_ms_per_trial": 1000 * self.parent_s / self.trials if self.trials else None,
        }
        if not self.samples or self.started is None or self.ended is None:
            return out
        by_pid: dict[int, list[dict[str, Any]]] = {}
        for sample in self.samples:
            by_pid.setdefault(sample["pid"], []).append(sample)
        span = self.ended - self.started
        busy = sum(s["end"] - s["start"] for s in self.samples)
        startup = [min(s["start"] for s in ss) - self.started for ss in by_pid.values()]
        tail = [self.ended - max(s["end"] for s in ss) for ss in by_pid.values()]
        # Slots whose process never ran a trial were idle all along.
        never = max(0, self.slots - len(by_pid)) * span
        idle = self.slots * span - busy
        out.update({
            "pool_s": span,
            "worker_processes": len(by_pid),
            "worker_busy_s": busy,
            "worker_idle_share": idle / (self.slots * span) if span > 0 and self.slots else None,
            "worker_startup_s_mean": sum(startup) / len(startup),
            "worker_tail_s_mean": sum(tail) / len(tail),
            "worker_gaps_s": max(0.0, idle - never - sum(startup) - sum(tail)),
            # Where the workers' busy time went: a share that grows with the worker count
            # names what contends (the encoders' arithmetic, or the disk).
            "worker_encode_share": sum(s.get("encode_s", 0.0) for s in self.samples) / busy if busy > 0 else None,
            "worker_write_share": sum(s.get("write_s", 0.0) for s in self.samples) / busy if busy > 0 else None,
            "workers_that_loaded_a_model": sum(any(s["model_loaded"] for s in ss) for ss in by_pid.values()),
            "workers_that_imported_torch": sum(any(s["torch_imported"] for s in ss) for ss in by_pid.values()),
        })
        return out


class _InFlight:
    """Up to ``capacity`` trials in flight (futures or tasks), refilled group by group.

    Shared by the concurrent executors, so that they all dispatch and hand
    outcomes back to the dispatcher the same way. With ``sampled``, a future's
    result is (outcome, worker sample) (:func:`simcore.batch.worker.execute_in_pool`).
    """

    def __init__(self, dispatcher: Dispatcher, capacity: int, sampled: bool = False) -> None:
        self.dispatcher = dispatcher
        self.capacity = capacity
        self.sampled = sampled
        self.buffer: list[TrialJob] = []
        self.pending: dict[Any, TrialJob] = {}

    def fill(self, submit: Callable[[TrialJob], Any]) -> bool:
        """Submit trials until full or dry; return whether any are in flight.

        While a breaker is open nothing more is submitted, except one trial when
        none is in flight: something has to probe the provider.
        """
        while len(self.pending) < self.capacity:
            if self.pending and self.dispatcher.paused():
                break
            if not self.buffer:
                self.buffer = list(self.dispatcher.next_group() or [])
                if not self.buffer:
                    break
            job = self.buffer.pop(0)
            self.pending[submit(job)] = job
        return bool(self.pending)

    def settle(self, finished: Iterable[Any]) -> None:
        """Hand finished futures' outcomes to the dispatcher, in job order.

        Raises:
            SweepAborted: a future failed (the executor itself, not its trial).
        """
        with self.dispatcher.batch():
            for fut in sorted(finished, key=lambda f: self.pending[f].index):
                job = self.pending.pop(fut)
                try:
                    out = fut.result()
                except Exception as exc:
                    raise SweepAborted(f"{type(exc).__name__}: {exc}") from exc
                if self.sampled:
                    out, sample = out
                    self.dispatcher.pace.samples.append(sample)
                self.dispatcher.done(job, out)


def _drive(
    submit: Callable[[TrialJob], Any],
    wait_first: Callable[[list[Any]], Iterable[Any]],
    dispatcher: Dispatcher,
    capacity: int,
) -> None:
    """Keep up to ``capacity`` worker trials in flight until the dispatcher runs dry.

    ``submit`` runs :func:`~simcore.batch.worker.execute_in_pool`; ``wait_first``
    returns the finished futures, or none after :data:`POLL_S`. The time spent
    between waits is the parent's work (:class:`Pace`).
    """
    flight = _InFlight(dispatcher, capacity, sampled=True)
    pace = dispatcher.pace
    first = True
    while True:
        t0 = time.perf_counter()
        more = flight.fill(submit)
        if not first:  # the first submit starts the pool's processes: start-up, not per-trial work
            pace.parent_s += time.perf_counter() - t0
        first = False
        if not more:
            return
        finished = wait_first(list(flight.pending))
        t0 = time.perf_counter()
        n = len(flight.pending)
        flight.settle(finished)
        pace.trials += n - len(flight.pending)
        pace.parent_s += time.perf_counter() - t0


def run_serial(ctx: WorkerContext, dispatcher: Dispatcher) -> None:
    """Run the trials one after another in this process."""
    try:
        while (group := dispatcher.next_group()) is not None:
            for job in group:
                try:
                    out = execute(ctx, job)
                except Exception as exc:
                    raise SweepAborted(f"{type(exc).__name__}: {exc}") from exc
                dispatcher.done(job, out)
    finally:
        asyncio.run(release_shared(ctx))


def run_asyncio(ctx: WorkerContext, dispatcher: Dispatcher, concurrency: int) -> None:
    """Run up to ``concurrency`` trials at once on one event loop."""

    async def main() -> None:
        flight = _InFlight(dispatcher, concurrency)
        try:
            while flight.fill(lambda job: asyncio.ensure_future(execute_async(ctx, job))):
                done, _ = await asyncio.wait(list(flight.pending), timeout=POLL_S,
                                             return_when=asyncio.FIRST_COMPLETED)
                flight.settle(done)
        except BaseException:
            for other in flight.pending:
                other.cancel()
            await asyncio.gather(*flight.pending, return_exceptions=True)
            raise
        finally:
            await release_shared(ctx)

    asyncio.run(main())


def _init_worker(threads: int, environ: dict[str, str] | None = None, path: list[str] | None = None) -> None:
    """Set up a pool worker: the sweep's environment and import path, and its share of the threads."""
    if environ is not None:
        # A worker forked from the fork server has the environment the server started
        # with; the sweep's (its --device, --embed-cache ...) is the one that counts.
        os.environ.clear()
        os.environ.update(environ)
    if path is not None:
        sys.path[:] = path
    # Several workers on few cores: keep the numeric libraries a worker loads from now
    # on from starting a thread per core. (Lowering the BLAS that numpy already loaded
    # as well, with threadpoolctl, made one worker 10x slower here: measured, left out.)
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ.setdefault(var, str(threads))
    # The CPU encoder spreads texts over as many threads as BLAS had when numpy loaded in
    # the fork server (every core): each worker takes its share instead, or W workers run
    # W x cores threads (2 workers on 2 cores: 9% slower, measured).
    os.environ[THREADS_ENV] = str(threads)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


# What the fork server imports once for every worker: the worker's own modules and
# the CPU encoder's libraries (never torch: a CUDA context does not survive a fork).
PRELOAD = ("simcore.batch.worker", "simcore.analysis.embeddings", "simcore.analysis.minilm", "scipy.special", "tokenizers",
           "safetensors.numpy", "threadpoolctl")


def scenario_modules(ctx: WorkerContext) -> list[str]:
    """The modules the scenario's functions live in (a worker imports them to unpickle it)."""
    names = {getattr(value, "__module__", None) for value in vars(ctx.scenario).values() if callable(value)}
    return sorted(n for n in names if n)


def pool_context(ctx: WorkerContext) -> multiprocessing.context.BaseContext:
    """The fork server, preloaded, where there is one and the scenario is importable; else spawn."""
    modules = scenario_modules(ctx)
    if "forkserver" not in multiprocessing.get_all_start_methods() or "__main__" in modules:
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    # Only the first sweep of a process sets what the server imports; a later sweep
    # of another scenario imports its modules in each worker.
    context.set_forkserver_preload([*PRELOAD, *modules])
    return context


def run_local(ctx: WorkerContext, dispatcher: Dispatcher, workers: int) -> None:
    """Run the trials on a pool of ``workers`` processes (see :func:`pool_context`).

    Each process runs one trial at a time, so each is one of ``workers`` slots.
    """
    ctx = dataclasses.replace(ctx, slots=workers)
    threads = max(1, (os.cpu_count() or 1) // workers)
    with dispatcher.pace.pool(workers):
        pool = cf.ProcessPoolExecutor(
            max_workers=workers,
            mp_context=pool_context(ctx),
            initializer=_init_worker,
            initargs=(threads, dict(os.environ), list(sys.path)),
        )
        try:
            _drive(
                lambda job: pool.submit(execute_in_pool, ctx, job),
                lambda fs: cf.wait(fs, timeout=POLL_S, return_when=cf.FIRST_COMPLETED).done,
                dispatcher,
                capacity=2 * workers,
            )
        finally:
            pool.shutdown(wait=True, cancel_futures=True)


def run_dask(ctx: WorkerContext, dispatcher: Dispatcher, workers: int, address: str | None) -> None:
    """Run the trials on a Dask cluster: the scheduler at ``address``, or a LocalCluster.

    Every worker thread counts as a slot. Workers that join a running cluster after
    the sweep started would add slots beyond the count, so their trials could
    take a provider past its limits: the documented exception.
    """
    import logging
    import uuid

    from distributed import Client, LocalCluster, wait

    cluster = None
    if address is None:
        cluster = LocalCluster(
            n_workers=workers,
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
            # No dashboard, but the scheduler's HTTP server (health routes) still listens: on a
            # port the OS picks, not 8787, which another cluster may hold (dask then warns).
            scheduler_kwargs={"dashboard_address": ":0"},
            silence_logs=logging.WARNING,
        )
        client = Client(cluster)
    else:
        client = Client(address, timeout="30s")
    # Keys unique to this run: a long-lived scheduler must never hand back a result
    # computed for another sweep directory.
    token = uuid.uuid4().hex[:8]
    try:
        slots = sum(client.nthreads().values()) or workers
        ctx = dataclasses.replace(ctx, slots=slots)

        def wait_first(fs: list[Any]) -> Iterable[Any]:
            try:
                return wait(fs, timeout=POLL_S, return_when="FIRST_COMPLETED").done
            except TimeoutError:
                return ()

        # Worker idle time only where the workers share this machine's clock.
        with dispatcher.pace.pool(slots) if cluster is not None else contextlib.nullcontext():
            _drive(
                lambda job: client.submit(execute_in_pool, ctx, job, key=f"simcore-{token}-{job.run_id}",
                                          pure=False),
                wait_first,
                dispatcher,
                capacity=2 * slots,
            )
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


def run_with(
    executor: str, ctx: WorkerContext, dispatcher: Dispatcher, *, workers: int, address: str | None, concurrency: int
) -> None:
    """Run the dispatcher's trials on the named executor (see :data:`EXECUTORS`)."""
    if executor == "serial":
        run_serial(ctx, dispatcher)
    elif executor == "asyncio":
        run_asyncio(ctx, dispatcher, concurrency)
    elif executor == "local":
        run_local(ctx, dispatcher, workers)
    elif executor == "dask":
        run_dask(ctx, dispatcher, workers, address)
    else:
        raise ValueError(f"executor: must be one of {', '.join(EXECUTORS)}; got {executor!r}")
