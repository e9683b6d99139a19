"""Run a sweep end to end: plan, estimate, execute, record, report."""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import pandas as pd

from backends.registry import BackendSpec
from simcore.batch.executors import (
    EXECUTORS,
    Budget,
    Dispatcher,
    SweepAborted,
    run_with,
)
from simcore.batch.plan import SweepPlan, TrialJob, build_plan, check_buildable
from simcore.batch.report import build_table, summarize, write_outputs
from simcore.batch.store import SweepStore
from simcore.batch.worker import WorkerContext
from simcore.config import Config, ConfigError
from simcore.estimate import estimate
from simcore.scenario import Scenario, load_scenario

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

    Uses :func:`simcore.estimate.estimate`, the same dry run as ``--estimate``;
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
    budget_usd: float | None = None,
    fail_fast: bool = False,
    progress: bool = False,
    plot: bool = True,
    echo: Callable[[str], None] | None = None,
    plan: SweepPlan | None = None,
) -> pd.DataFrame:
    """Run a parameter sweep / Monte Carlo and return its results table.

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
        spec: Backend spec (the stub by default).
        executor: "local" (process pool; the default), "serial", "asyncio" or
            "dask" (the default when ``address`` is given).
        workers: Processes for "local" and a Dask LocalCluster (default: CPU count).
        address: A running Dask scheduler.
        concurrency: Trials in flight at once for "asyncio".
        out: The sweep directory (default ``runs/sweeps/<scenario>-<sweep id>``).
        resume: Finish the sweep already in ``out``.
        budget_usd: Cap on the cost of the whole sweep.
        fail_fast: Stop dispatching after the first failed trial.
        progress: Show a progress bar on stderr.
        plot: Write ``plots/metrics.png``.
        echo: Where notes go (estimate, resume, budget); None for silence.
        plan: A plan from :func:`plan_sweep` (then the definition arguments are unused).

    Returns:
        One row per planned trial (see :mod:`simcore.batch.report`); ``attrs``
        holds ``sweep_dir``, ``summary`` (the summary.json content) and ``files``.

    Raises:
        ConfigError: for bad input, before anything is written.
        SweepAborted: when the executor itself fails; finished trials are kept.
    """
    say = echo or (lambda _msg: None)
    if plan is None:
        plan = plan_sweep(scenario, trials, grid, conditions=conditions, base=base,
                          seed=seed, seed_scope=seed_scope, spec=spec)
    executor = executor or ("dask" if address else "local")
    if executor not in EXECUTORS:
        raise ConfigError(f"executor: must be one of {', '.join(EXECUTORS)}; got {executor!r}")
    if address and executor != "dask":
        raise ConfigError(f"address: only the dask executor uses a scheduler address (executor is {executor})")
    workers = _positive("workers", workers, default=_cpu_count())
    concurrency = _positive("concurrency", concurrency, default=32)
    if budget_usd is not None:
        try:
            budget_usd = float(budget_usd)
        except (TypeError, ValueError):
            raise ConfigError(f"budget_usd: must be a number >= 0, got {budget_usd!r}") from None
        if not budget_usd >= 0:
            raise ConfigError(f"budget_usd: must be a number >= 0, got {budget_usd!r}")

    sweep_dir = Path(out) if out is not None else default_out(plan)
    store = SweepStore(sweep_dir, plan, resume)
    store.check()
    estimate = None
    if budget_usd is not None or plan.spec.name != "stub":
        estimate = estimate_cost(plan)

    say(f"sweep {plan.sweep_id}: {len(plan.jobs)} trials -> {store.path}")
    finished = store.open()
    try:
        for note in store.notes:
            say(f"resume: {note}")
        if resume:
            say(f"resume: {len(finished)} of {len(plan.jobs)} trials already finished")
        todo_groups = [[j for j in g if j.index not in finished] for g in plan.dispatch_groups()]
        todo_groups = [g for g in todo_groups if g]
        todo = [j for g in todo_groups for j in g]
        if estimate is not None:
            say(estimate.describe(todo))
        budget = None
        if budget_usd is not None:
            spent = sum(float(r.get("cost_usd") or 0.0) for r in finished.values())
            budget = Budget(budget_usd, spent, None if estimate is None else estimate.per_trial)

        bar = _progress(len(todo), progress)
        tally = {"fail": 0, "calls": 0, "tokens": 0, "cost": 0.0}

        def on_done(job: TrialJob, row: dict[str, Any]) -> None:
            store.append(row)
            tally["fail"] += row["status"] != "ok"
            tally["calls"] += row["calls"]
            tally["tokens"] += row["tokens"]
            tally["cost"] += row["cost_usd"]
            if bar is not None:
                bar.set_postfix_str(
                    f"fail={tally['fail']} calls={tally['calls']:,} "
                    f"tok={bar.format_sizeof(tally['tokens'])} ${tally['cost']:.4f}",
                    refresh=False,
                )
                bar.update(1)

        dispatcher = Dispatcher(todo_groups, on_done, budget, fail_fast)
        ctx = WorkerContext(plan.scenario, plan.spec, str(store.path))
        started = time.perf_counter()
        stopped: BaseException | None = None
        try:
            run_with(executor, ctx, dispatcher, workers=workers, address=address, concurrency=concurrency)
        except (KeyboardInterrupt, SweepAborted) as exc:
            stopped = exc  # finished trials are safe; write the tables, then re-raise
        finally:
            if bar is not None:
                bar.close()
        elapsed = time.perf_counter() - started

        reason = dispatcher.stop_reason
        unrun = {}
        for job in plan.jobs:
            if job.index in finished:
                continue
            skipped = stopped is None and reason in ("budget", "fail-fast") and job.index not in dispatcher.dispatched
            unrun[job.index] = f"skipped: {reason}" if skipped else "pending"
        n_skipped = sum(v.startswith("skipped") for v in unrun.values())
        if reason == "budget" and budget is not None and n_skipped:
            say(f"budget: stopped dispatching at ${budget.spent:.4f} spent of ${budget.cap:.4f}; "
                f"{n_skipped} trials skipped (--resume with a larger --budget-usd runs them)")
        if reason == "fail-fast" and n_skipped:
            say(f"fail-fast: stopped dispatching after a failed trial; {n_skipped} trials skipped")

        df = build_table(plan, finished, unrun)
        summary = summarize(plan, df, store.path)
        summary["timing"] = {
            "executor": executor,
            "workers": {"local": workers, "dask": None if address else workers}.get(executor, 1),
            "elapsed_s": elapsed,
            "trials_run": sum(1 for j in todo if j.index in finished),
            "stopped": None if stopped is None else f"{type(stopped).__name__}: {stopped}",
        }
        if budget_usd is not None:
            summary["budget_usd"] = budget_usd
        files = write_outputs(plan, df, summary, store.path, plot=plot)
    finally:
        store.close()
    df.attrs.update(sweep_dir=str(store.path), summary={**summary, "files": files}, files=files)
    if stopped is not None:
        raise stopped
    return df


def read_results(sweep_dir: str | Path) -> pd.DataFrame:
    """The results table of a finished sweep directory."""
    return pd.read_parquet(Path(sweep_dir) / "results.parquet")


def _positive(name: str, value: Any, default: int) -> int:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{name}: must be an integer >= 1, got {value!r}")
    return value


def _cpu_count() -> int:
    import os

    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def _progress(total: int, enabled: bool) -> Any:
    if not enabled or total == 0:
        return None
    from tqdm import tqdm

    return tqdm(total=total, unit="trial", file=sys.stderr, dynamic_ncols=True, smoothing=0.1)
