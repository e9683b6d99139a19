"""Run a sweep end to end: plan, estimate, execute, record, report."""

from __future__ import annotations

import dataclasses
import math
import sys
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

import pandas as pd

from backends.errors import BackendConfigError
from backends.registry import (
    RUN_OPTIONS,
    BackendSpec,
    check_servers,
    check_spec,
    default_concurrency,
    missing_key,
)
from simcore.analysis import embeddings, settings
from simcore.analysis.encoder_service import EncoderService, use_service
from simcore.base.config import Config, ConfigError
from simcore.base.heartbeat import Heartbeat
from simcore.base.loops import outside_running_loop
from simcore.base.progress import progress_bar
from simcore.batch.breakers import BreakerBoard
from simcore.batch.executors import (
    EXECUTORS,
    Budget,
    Dispatcher,
    SweepAborted,
    run_with,
)
from simcore.batch.plan import SweepPlan, TrialJob, build_plan, check_buildable
from simcore.batch.report import (
    build_table,
    finish_command,
    indexed_arms,
    summarize,
    write_outputs,
)
from simcore.batch.store import SweepStore, finished_summary
from simcore.batch.worker import WorkerContext
from simcore.runs.estimate import estimate
from simcore.runs.marks import installed as installed_calibration
from simcore.runs.scenario import Scenario, load_scenario

DEFAULT = "default"


@dataclass(frozen=True)
class CostEstimate:
    """What trials are expected to cost, from one stub pilot trial per cell and condition.

    The pilot runs offline on the stub backend under the sweep's model names, so
    its token counts are priced as the real model's would be. Real replies differ
    in length from the stub's, so treat the figure as a rough guide.

    Attributes:
        per_trial: Pilot cost of one trial, by (cell, condition).
        tokens: Pilot tokens of one trial, by (cell, condition).
        models: The models the pilot priced.
        unpriced: Models with no price (their cost counts as 0).
    """

    per_trial: dict[tuple[int, int], float]
    tokens: dict[tuple[int, int], int]
    models: tuple[str, ...]
    unpriced: tuple[str, ...]

    def total(self, jobs: Sequence[TrialJob]) -> float:
        """Expected cost of ``jobs``."""
        return sum(self.per_trial[(j.cell, j.condition)] for j in jobs)

    def describe(self, jobs: Sequence[TrialJob]) -> str:
        """One line for the terminal."""
        tokens = sum(self.tokens[(j.cell, j.condition)] for j in jobs)
        text = (
            f"cost estimate: ${self.total(jobs):.4f} for {len(jobs)} trials (~{tokens:,} tokens, "
            f"from a stub pilot per cell priced as {', '.join(self.models) or 'no model'})"
        )
        if self.unpriced:
            text += f"; no price for {', '.join(self.unpriced)}: counted as $0, so a budget cannot cap it"
        return text


def resolve_conditions(scenario: Scenario, conditions: Any) -> tuple[str, Sequence[Any]] | None:
    """``"default"`` -> the scenario's counterfactual; None -> no condition axis."""
    if conditions is None:
        return None
    if isinstance(conditions, str):
        if conditions != DEFAULT:
            raise ConfigError(f"conditions: must be {DEFAULT!r}, None or (field, values); got {conditions!r}")
        cf = scenario.counterfactual
        return None if cf is None else (cf[0], list(cf[1:]))
    if isinstance(conditions, Mapping):
        if len(conditions) != 1:
            raise ConfigError("conditions: must name exactly one field")
        return next(iter(conditions.items()))
    field, values = conditions
    return field, values


def plan_sweep(
    scenario: str | Scenario,
    trials: int,
    grid: Mapping[str, Sequence[Any]] | None = None,
    *,
    conditions: Any = DEFAULT,
    base: Config | Mapping[str, Any] | None = None,
    seed: int = 42,
    seed_scope: str = "cell",
    spec: BackendSpec | None = None,
) -> SweepPlan:
    """Validate a sweep completely (every config built once) and return its plan.

    Raises:
        ConfigError: one line naming the field and what is allowed.
    """
    if isinstance(scenario, str):
        try:
            scenario = load_scenario(scenario)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
    plan = build_plan(
        scenario, trials, grid, resolve_conditions(scenario, conditions),
        base=base, seed=seed, seed_scope=seed_scope, spec=spec,
    )
    check_buildable(plan)
    return plan


def estimate_cost(plan: SweepPlan) -> CostEstimate:
    """Dry-run one pilot per cell and condition on the stub, priced for the sweep's backend.

    Uses :func:`simcore.runs.estimate.estimate`, the same dry run as ``--estimate``;
    nothing is sent or written.
    """
    per_trial: dict[tuple[int, int], float] = {}
    tokens: dict[tuple[int, int], int] = {}
    unpriced: set[str] = set()
    models: set[str] = set()
    for job in plan.jobs:
        key = (job.cell, job.condition)
        if key in per_trial:
            continue
        est = estimate(plan.scenario, [(job.config, job.seed)], plan.spec)
        per_trial[key] = float(est.total("cost_usd"))
        tokens[key] = int(est.total("prompt_tokens") + est.total("completion_tokens"))
        unpriced.update(est.unpriced_models)
        models.update(est.by_model)
    return CostEstimate(per_trial, tokens, tuple(sorted(models)), tuple(sorted(unpriced)))


def default_out(plan: SweepPlan) -> Path:
    """``runs/sweeps/<scenario>-<sweep id>``."""
    return Path("runs") / "sweeps" / f"{plan.scenario.name}-{plan.sweep_id}"


@outside_running_loop
def run_sweep(
    scenario: str | Scenario,
    trials: int,
    grid: Mapping[str, Sequence[Any]] | None = None,
    *,
    conditions: Any = DEFAULT,
    base: Config | Mapping[str, Any] | None = None,
    seed: int = 42,
    seed_scope: str = "cell",
    spec: BackendSpec | None = None,
    executor: str | None = None,
    workers: int | None = None,
    address: str | None = None,
    concurrency: int = 32,
    out: str | Path | None = None,
    resume: bool = False,
    keep_failed: bool = False,
    budget_usd: float | None = None,
    fail_fast: bool = False,
    max_failed_trials: int | None = None,
    trial_timeout_s: float | None = None,
    progress: bool = False,
    plot: bool = True,
    echo: Callable[[str], None] | None = None,
    plan: SweepPlan | None = None,
    encoder: str = "auto",
) -> pd.DataFrame:
    """Run a parameter sweep / Monte Carlo and return its results table.

    Called from a running event loop (a Jupyter cell), the sweep runs on a worker
    thread while the caller waits (:mod:`simcore.base.loops`), with any executor.

    Args:
        scenario: Scenario name (``scenarios.<name>``) or object.
        trials: Repetitions per grid cell and condition.
        grid: Config field -> values; the cells are their Cartesian product.
        conditions: The compared axis: ``"default"`` (the scenario's
            counterfactual), None, or ``(field, values)``. Conditions of a cell
            share trial seeds.
        base: Fixed config values for every cell.
        seed: The sweep seed; all trial seeds derive from it.
        seed_scope: "cell" (independent seeds per cell) or "sweep" (the same
            trial seeds in every cell).
        spec: Backend spec (the stub by default). Its run options (limits,
            timeouts, retries, breaker) hold for the sweep as a whole, whatever
            the executor; a ``budget_usd`` option is the default for ``budget_usd``.
        executor: "local" (process pool; the default), "serial", "asyncio" or
            "dask" (the default when ``address`` is given).
        workers: Processes for "local" and a Dask LocalCluster (default: CPU count).
        address: A running Dask scheduler.
        concurrency: Trials in flight at once for "asyncio".
        out: The sweep directory (default ``runs/sweeps/<scenario>-<sweep id>``).
            If it holds this sweep, finished, its stored results come back and
            nothing runs (see :func:`simcore.batch.store.finished_summary`).
        resume: Finish the sweep already in ``out``: run the trials that have not
            finished and, unless ``keep_failed``, those whose last attempt failed.
        keep_failed: On resume, keep failed trials as they are.
        budget_usd: Cap on the cost of the whole sweep, every attempt counted.
        fail_fast: Stop dispatching after the first failed trial.
        max_failed_trials: Stop dispatching once this many trials failed in this pass.
        trial_timeout_s: Cancel a trial that runs longer; it is recorded as an error.
        progress: Show a progress bar on stderr.
        plot: Write ``plots/metrics.png``.
        echo: Where notes go (estimate, resume, budget, breaker pauses); None for silence.
        plan: A plan from :func:`plan_sweep` (then the definition arguments are unused).
        encoder: Where worker processes' texts are encoded: ``auto`` (one encoder
            in this process for all workers when the device is a GPU, else each
            worker its own), ``shared`` (one encoder in this process, also on the
            CPU) or ``per-worker`` (see :mod:`simcore.analysis.encoder_service`).

    Returns:
        One row per planned trial (see :mod:`simcore.batch.report`); ``attrs``
        holds ``sweep_dir``, ``summary`` (the summary.json content) and ``files``.

    Raises:
        ConfigError: for bad input, before anything is written.
        SweepAborted: when the executor itself fails; finished trials are kept.
    """
    say = echo or (lambda _msg: None)
    if spec is not None and {"budget_usd", "fail_fast"} & set(spec.options):
        # In a sweep these act on the whole sweep (below), not on each backend.
        if budget_usd is None:
            budget_usd = spec.options.get("budget_usd")
        fail_fast = fail_fast or bool(spec.options.get("fail_fast"))
        spec = dataclasses.replace(spec, options={k: v for k, v in spec.options.items()
                                                  if k not in ("budget_usd", "fail_fast")})
    if plan is None:
        plan = plan_sweep(scenario, trials, grid, conditions=conditions, base=base,
                          seed=seed, seed_scope=seed_scope, spec=spec)
    executor = executor or ("dask" if address else "local")
    if executor not in EXECUTORS:
        raise ConfigError(f"executor: must be one of {', '.join(EXECUTORS)}; got {executor!r}")
    if address and executor != "dask":
        raise ConfigError(f"address: only the dask executor uses a scheduler address (executor is {executor})")
    try:
        share_encoder = use_service(encoder, executor, address, _embeds(plan, plan.jobs), trials=len(plan.jobs))
    except ValueError as exc:  # an unknown mode, or a device this machine lacks
        raise ConfigError(str(exc)) from None
    workers = _positive("workers", workers, default=_cpu_count())
    concurrency = _positive("concurrency", concurrency, default=32)
    max_failed_trials = None if max_failed_trials is None else _positive("max_failed_trials", max_failed_trials, 1)
    trial_timeout_s = _seconds("trial_timeout", trial_timeout_s)
    if budget_usd is not None:
        try:
            budget_usd = float(budget_usd)
        except (TypeError, ValueError):
            raise ConfigError(f"budget_usd: must be a number >= 0, got {budget_usd!r}") from None
        if not budget_usd >= 0:
            raise ConfigError(f"budget_usd: must be a number >= 0, got {budget_usd!r}")
    slots = {"local": workers, "dask": None if address else workers}.get(executor, 1)
    _check_backend(plan.spec, slots)
    installed_calibration(plan.scenario)  # a damaged calibration.json is named before any trial runs

    sweep_dir = Path(out) if out is not None else default_out(plan)
    if not resume:
        done = finished_summary(sweep_dir, plan)
        if done is not None:  # the same sweep run again: its results, nothing re-run
            say(f"sweep {plan.sweep_id}: finished before in {sweep_dir.resolve()}; its results follow "
                "(nothing was run again)")
            df = read_results(sweep_dir)
            df.attrs.update(sweep_dir=str(sweep_dir.resolve()), summary=done, files=done.get("files", {}))
            return df
    store = SweepStore(sweep_dir, plan, resume, keep_failed=keep_failed)
    store.check()
    estimate = None
    if budget_usd is not None or plan.spec.name != "stub":
        estimate = estimate_cost(plan)

    say(f"sweep {plan.sweep_id}: {len(plan.jobs)} trials -> {store.path}")
    finished = store.open()
    board = BreakerBoard(store.path)
    board.clear()
    heartbeat = Heartbeat(store.path, "sweep", len(plan.jobs), len(finished),
                          sum(r["status"] != "ok" for r in finished.values()))
    ended = "failed"
    try:
        for note in store.notes:
            say(f"resume: {note}")
        if resume:
            say(f"resume: {len(finished)} of {len(plan.jobs)} trials already finished")
            n_kept = sum(r["status"] != "ok" for r in finished.values())
            if store.rerun:
                say(f"resume: re-running {len(store.rerun)} failed trial(s) with the same seeds "
                    "(--keep-failed keeps them as they are)")
            elif n_kept:
                say(f"resume: keeping {n_kept} failed trial(s) as they are (--keep-failed)")
        todo_groups = [[j for j in g if j.index not in finished] for g in plan.dispatch_groups()]
        todo_groups = [g for g in todo_groups if g]
        todo = [j for g in todo_groups for j in g]
        if estimate is not None:
            say(estimate.describe(todo))
        budget = None
        run_spec = plan.spec
        if budget_usd is not None:
            budget = Budget(budget_usd, store.spent_usd, None if estimate is None else estimate.per_trial)
            if run_spec.name != "stub":
                # The hard cap: no call may take the sweep past its budget.
                left = max(0.0, budget_usd - store.spent_usd)
                run_spec = dataclasses.replace(run_spec, options={**run_spec.options, "budget_usd": left})

        bar = SweepProgress(len(todo), progress, board, say, finished.values())

        def on_done(job: TrialJob, row: dict[str, Any]) -> None:
            bar.done(store.append(row))
            heartbeat.trial(row["status"] == "ok")

        dispatcher = Dispatcher(todo_groups, on_done, budget, fail_fast, max_failed=max_failed_trials,
                                paused=board.paused, batch=store.batch)
        ctx = WorkerContext(plan.scenario, run_spec, str(store.path), trial_timeout_s=trial_timeout_s,
                            token=uuid.uuid4().hex)
        started, cpu0 = time.perf_counter(), time.process_time()
        stopped: BaseException | None = None
        service = None
        try:
            # This process's encoder (the shared one, or the serial and asyncio executors') serves
            # every trial; a pool worker's own encoder expects one, so auto keeps it on the CPU.
            with embeddings.expecting(len(todo)):
                if share_encoder and todo:
                    service = EncoderService(preload=True)
                    ctx = dataclasses.replace(ctx, encoder=(service.address, service.authkey))
                run_with(executor, ctx, dispatcher, workers=workers, address=address, concurrency=concurrency)
        except (KeyboardInterrupt, SweepAborted) as exc:
            stopped = exc  # finished trials are safe; write the tables, then re-raise
        finally:
            bar.close()
            if service is not None:
                service.close()
        elapsed = time.perf_counter() - started
        pace = dispatcher.pace.report()
        pace["parent_cpu_ms_per_trial"] = (1000 * (time.process_time() - cpu0) / pace["trials"]
                                           if pace["trials"] else None)
        pace["encoder"] = "shared" if service is not None else "in each process"
        if service is not None:
            pace["encoder_service"] = service.stats()

        reason = dispatcher.stop_reason
        unrun = {}
        for job in plan.jobs:
            if job.index in finished:
                continue
            skipped = (stopped is None and reason in ("budget", "fail-fast", "max-failed-trials")
                       and job.index not in dispatcher.dispatched)
            unrun[job.index] = f"skipped: {reason}" if skipped else "pending"
        n_skipped = sum(v.startswith("skipped") for v in unrun.values())
        if reason == "budget" and budget is not None and n_skipped:
            say(f"budget: stopped dispatching at ${budget.spent:.4f} spent of ${budget.cap:.4f}; "
                f"{n_skipped} trials skipped (--resume with a larger --budget-usd runs them)")
        if reason in ("fail-fast", "max-failed-trials") and n_skipped:
            say(f"{reason}: stopped dispatching after {dispatcher.failed} failed trial(s); "
                f"{n_skipped} trials skipped")

        df = build_table(plan, finished, unrun)
        summary = summarize(plan, df, store.path, indexed_arms(finished))
        summary["timing"] = {
            "executor": executor,
            "workers": {"local": workers, "dask": None if address else workers}.get(executor, 1),
            "elapsed_s": elapsed,
            "trials_run": sum(1 for j in todo if j.index in finished),
            "trials_rerun": sum(1 for i in store.rerun if i in dispatcher.dispatched),
            "stopped": None if stopped is None else f"{type(stopped).__name__}: {stopped}",
            "pace": pace,
        }
        # How this pass ran, beyond the sweep's definition: the execution flags and the analysis settings.
        summary["options"] = {
            "executor": executor, "workers": workers, "address": address, "concurrency": concurrency,
            "encoder": encoder, "trial_timeout_s": trial_timeout_s, "max_failed_trials": max_failed_trials,
            "fail_fast": fail_fast, "resume": resume, "keep_failed": keep_failed, "plot": plot, **settings.recorded(),
        }
        summary["attempts"] = sum(store.attempts.values())
        summary["spent_usd"] = store.spent_usd
        summary["backend_options"] = {k: v for k, v in plan.spec.options.items() if k in RUN_OPTIONS}
        if budget_usd is not None:
            summary["budget_usd"] = budget_usd
        summary["finish_command"] = None
        if summary["n_ok"] < summary["n_planned"]:
            flags = _execution_flags(executor, workers, address, concurrency, trial_timeout_s)
            if reason == "budget" and budget is not None and n_skipped:
                need = budget.spent + sum(budget.expected(j) for j in plan.jobs if j.index in unrun)
                flags += ["--budget-usd", f"{math.ceil(need * 1.1 * 100) / 100:.2f}"]
            summary["finish_command"] = finish_command(plan.scenario.name, store.path, flags)
        files = write_outputs(plan, df, summary, store.path, plot=plot)
        ended = "finished" if stopped is None else "interrupted"
    finally:
        heartbeat.close(ended)
        board.clear()
        store.close()
    df.attrs.update(sweep_dir=str(store.path), summary={**summary, "files": files}, files=files)
    if stopped is not None:
        raise stopped
    return df


def _embeds(plan: SweepPlan, jobs: Sequence[TrialJob]) -> bool:
    """Whether any of ``jobs`` may embed texts (a scenario that does not say: it may)."""
    says = plan.scenario.embeds
    return says is None or any(says(job.config) for job in jobs)


def _check_backend(spec: BackendSpec, slots: int | None) -> None:
    """Bad backend options or a missing key, and a concurrency limit too small to share."""
    try:
        check_spec(spec)
    except BackendConfigError as exc:
        raise ConfigError(str(exc)) from None
    if spec.name == "stub":
        return
    env = missing_key(spec)
    if env:
        raise ConfigError(f"backend: {spec.name} needs the {env} environment variable (your API key)")
    try:
        check_servers(spec)
    except BackendConfigError as exc:
        raise ConfigError(str(exc)) from None
    cap = default_concurrency(spec)
    if slots is not None and cap < slots:
        raise ConfigError(
            f"max_concurrency: {cap} cannot be shared among {slots} worker processes (each needs at least "
            f"one request in flight); use --workers {cap} or fewer, or --executor asyncio"
        )


def _execution_flags(executor: str, workers: int, address: str | None, concurrency: int,
                     trial_timeout_s: float | None) -> list[str]:
    """The flags that run the rest of a sweep the way this pass ran."""
    flags = ["--executor", executor]
    if executor == "asyncio":
        flags += ["--concurrency", str(concurrency)]
    elif executor == "local" or (executor == "dask" and address is None):
        flags += ["--workers", str(workers)]
    if address:
        flags += ["--address", address]
    if trial_timeout_s is not None:
        flags += ["--trial-timeout", f"{trial_timeout_s:g}"]
    return flags


class SweepProgress:
    """The progress bar (tqdm on stderr): trials, failures, calls, tokens, cost, and
    breaker pauses, which are also written as notes as they start and end.

    A background thread refreshes the pause state once a second, so that it shows
    even while the executor waits.
    """

    def __init__(self, total: int, enabled: bool, board: BreakerBoard, say: Callable[[str], None],
                 finished: Iterable[Mapping[str, Any]] = ()) -> None:
        self.bar = _progress(total, enabled)
        self.board = board
        self.say = say
        self.tally = {"fail": 0, "calls": 0, "tokens": 0, "cost": 0.0}
        for row in finished:  # a resumed sweep's totals start from what earlier passes did, as its summary's do
            self._add(row)
        self.pause: str | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="simcore-progress", daemon=True)
        self._thread.start()

    def done(self, row: Mapping[str, Any]) -> None:
        """Count a finished trial."""
        with self._lock:
            self._add(row)
            # The totals first: a bar draws (at most every tenth of a second, not once a
            # trial) on update, with the totals it has.
            self._show(refresh=False)
            if self.bar is not None:
                self.bar.update(1)

    def _add(self, row: Mapping[str, Any]) -> None:
        t = self.tally
        t["fail"] += row["status"] != "ok"
        t["calls"] += row.get("calls") or 0
        t["tokens"] += row.get("tokens") or 0
        t["cost"] += row.get("cost_usd") or 0.0

    def _show(self, refresh: bool = True) -> None:
        if self.bar is None:
            return
        t = self.tally
        text = (f"fail={t['fail']} calls={t['calls']:,} tok={self.bar.format_sizeof(t['tokens'])} "
                f"${t['cost']:.4f}")
        self.bar.set_postfix_str(f"{self.pause} | {text}" if self.pause else text, refresh=refresh)

    def _note(self, text: str) -> None:
        if self.bar is not None:
            self.bar.write(text, file=sys.stderr)
        else:
            self.say(text)

    def _watch(self) -> None:
        while not self._stop.wait(1.0):
            self._refresh()

    def _refresh(self) -> None:
        pause = self.board.describe()
        with self._lock:
            if (pause is None) != (self.pause is None):
                self._note(f"breaker: {pause}" if pause else "breaker: closed again; dispatching resumes")
            if pause != self.pause:
                self.pause = pause
                self._show()

    def close(self) -> None:
        """Stop the refresher, show the last state and close the bar."""
        self._stop.set()
        self._thread.join(5)
        self.board.open_breakers(max_age_s=0)  # not the cached view
        self._refresh()
        if self.bar is not None:
            self.bar.close()


def read_results(sweep_dir: str | Path) -> pd.DataFrame:
    """The results table of a finished sweep directory."""
    return pd.read_parquet(Path(sweep_dir) / "results.parquet")


def _positive(name: str, value: Any, default: int) -> int:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{name}: must be an integer >= 1, got {value!r}")
    return value


def _seconds(name: str, value: Any) -> float | None:
    if value is None:
        return None
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        seconds = math.nan
    if not seconds > 0 or math.isinf(seconds):
        raise ConfigError(f"{name}: must be a number of seconds > 0, got {value!r}")
    return seconds


def _cpu_count() -> int:
    import os

    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def _progress(total: int, enabled: bool) -> Any:
    if not enabled or total == 0:
        return None

    return progress_bar(total, desc="sweep", unit="trial", dynamic_ncols=True, smoothing=0.1)
