"""The calls of the Python face: a run, a Monte Carlo, a sweep, a perturbation study.

Each one does what its command does, checked by the command's own code (see
:mod:`simcore.face.options`), and returns the object of its directory
(:mod:`simcore.face.objects`). The synchronous calls work inside a running event
loop (a Jupyter cell): from one, they run on a worker thread
(:mod:`simcore.base.loops`). The ``_async`` twins run on the caller's loop; a
sweep's executors are synchronous (processes, Dask), so :func:`sweep_async`
awaits it on a worker thread, and cancelling it stops the sweep as Ctrl-C does.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from pathlib import Path
from typing import Any, Sequence

from simcore.analysis import embeddings
from simcore.base.config import ConfigError
from simcore.base.loops import outside_running_loop, to_thread
from simcore.base.progress import shows_progress
from simcore.batch import command as batch_command
from simcore.batch.sweep import run_sweep
from simcore.cli import (
    build_parser,
    check_arms,
    check_before_work,
    check_run,
    ready_arms,
    ready_run,
)
from simcore.face.objects import MonteCarlo, Run, Study, Sweep
from simcore.face.options import analysis_env, command_args
from simcore.perturbation import command as study_command
from simcore.perturbation.study import run_study_async, write_study
from simcore.runs.counterfactual import run_arms_async
from simcore.runs.runner import run_trial_async, write_run
from simcore.runs.scenario import Scenario, load_scenario

# Flags of the commands that mean nothing in Python: the printed output's form, dry runs,
# and what the call itself decides (which command, where its directory goes).
NOT_IN_PYTHON = ("json", "estimate", "dry_run", "verbose", "trials", "counterfactual", "output_dir", "out")
# A failed run is finished by its command (python -m simcore.run --resume RUN_DIR), which it prints.
RUN_REFUSED = (*NOT_IN_PYTHON, "resume")


def _scenario(name: str | Scenario) -> Scenario:
    if isinstance(name, Scenario):
        return name
    try:
        return load_scenario(name)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


def _out(out: str | Path | None) -> str:
    """The output root; None: a new temporary directory (left in place for later :func:`load` calls).

    Called once the input is checked, so that bad input leaves nothing behind.
    """
    return tempfile.mkdtemp(prefix="simcore-") if out is None else str(out)


def _call(what: str, scenario: Scenario) -> str:
    return f"{what}({scenario.name!r})"


async def simulate_async(name: str | Scenario, *, seed: int = 42, backend: str = "stub", model: str | None = None,
                         out: str | Path | None = "runs", **fields: Any) -> Run:
    """The awaitable :func:`simulate`: the run's calls go on the caller's event loop."""
    scenario = _scenario(name)
    with analysis_env():
        args = command_args(build_parser(scenario), {**fields, "seed": seed, "backend": backend, "model": model},
                            call=_call("simulate", scenario), refused=RUN_REFUSED)
        seed_, config, spec = check_run(scenario, args)
        args.out = root = _out(out)
        spec = ready_run(scenario, args, seed_, config, spec)
        trial = await run_trial_async(scenario, config, seed_, spec, trace=args.trace,
                                      trace_dir=Path(root) / scenario.name)
        return Run(write_run(trial, root))


@outside_running_loop
def simulate(name: str | Scenario, *, seed: int = 42, backend: str = "stub", model: str | None = None,
             out: str | Path | None = "runs", **fields: Any) -> Run:
    """One run, written where ``python -m simcore.run NAME`` writes it: ``<out>/<scenario>/<run-id>/``.

    Args:
        name: A scenario name (``context_corrosion``), a dotted path or entry point, or a Scenario.
        seed: The run seed.
        backend: ``stub`` (offline, deterministic) or a real backend (see docs/backends.md).
        model: The model for agents that name none.
        out: The output root; None: a new temporary directory.
        **fields: Config fields and backend and analysis options, named as the command's
            flags are (``rounds=2``, ``n_agents=4``, ``json_mode="off"``, ``budget_usd=1.0``,
            ``config="small"``).

    Returns:
        The :class:`Run` (a failed trial too: see its ``results["status"]``).

    Raises:
        ConfigError: a bad field or option, with the command's one line, before any work.
        BackendConfigError: a backend that cannot be set up (a missing API key).
    """
    return asyncio.run(simulate_async(name, seed=seed, backend=backend, model=model, out=out, **fields))


async def monte_carlo_async(name: str | Scenario, *, trials: int, seed: int = 42, backend: str = "stub",
                            model: str | None = None, out: str | Path | None = "runs", **fields: Any) -> MonteCarlo:
    """The awaitable :func:`monte_carlo`: all trials' calls go on the caller's event loop."""
    scenario = _scenario(name)
    if scenario.counterfactual is None:
        raise ConfigError(f"scenario: {scenario.name} has no counterfactual axis, so it has no Monte Carlo of two "
                          "arms; use simcore.sweep")
    with analysis_env():
        args = command_args(build_parser(scenario), {**fields, "seed": seed, "backend": backend, "model": model},
                            call=_call("monte_carlo", scenario), refused=RUN_REFUSED)
        args.trials = str(trials)  # as typed on the command line
        arms = check_arms(scenario, args)
        args.out = root = _out(out)
        spec = ready_arms(scenario, args, arms)
        with embeddings.expecting(2 * len(arms.seeds)):
            summary = await run_arms_async(scenario, arms.config, arms.seed, n_trials=arms.n_trials, spec=spec,
                                           out=root, progress=shows_progress())
    return MonteCarlo(Path(root) / scenario.name / summary["experiment_id"])


@outside_running_loop
def monte_carlo(name: str | Scenario, *, trials: int, seed: int = 42, backend: str = "stub",
                model: str | None = None, out: str | Path | None = "runs", **fields: Any) -> MonteCarlo:
    """The scenario's two arms on shared trial seeds, as ``--trials N`` runs them.

    Writes every trial's run and the Monte Carlo's own directory,
    ``<out>/<scenario>/mc-<id>/`` (``summary.json``, ``trials.csv``, ``plots/``).
    Takes what :func:`simulate` takes; ``trials`` is per arm.

    Raises:
        ConfigError: a bad field or option, with the command's one line, before any work.
    """
    return asyncio.run(monte_carlo_async(name, trials=trials, seed=seed, backend=backend, model=model, out=out,
                                         **fields))


def _sweep_flags(trials: int, grid: Any, conditions: Any) -> dict[str, Any]:
    """``grid`` and ``conditions`` as the batch command's ``--grid`` and ``--conditions`` (JSON lists)."""
    def axis(name: str, values: Any) -> str:
        if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
            raise ConfigError(f"grid: {name}: must be a list of values, got {values!r}")
        return f"{name}={json.dumps(list(values))}"

    flags: dict[str, Any] = {"trials": str(trials)}  # as typed on the command line
    if grid:
        items = grid.items() if hasattr(grid, "items") else grid
        flags["grid"] = [axis(n, v) for n, v in items]
    if conditions is None:
        flags["conditions"] = "none"
    elif conditions != "default":
        axes = list(conditions.items()) if hasattr(conditions, "items") else [conditions]
        if len(axes) != 1 or not isinstance(axes[0], (tuple, list)) or len(axes[0]) != 2:
            raise ConfigError(f"conditions: must be 'default', None or {{field: values}}; got {conditions!r}")
        flags["conditions"] = axis(*axes[0])
    return flags


def _sweep(name: str | Scenario, *, trials: int, grid: Any, conditions: Any, seed: int, backend: str,
           model: str | None, out: str | Path | None, options: dict[str, Any]) -> Sweep:
    scenario = _scenario(name)
    with analysis_env():
        flags = {**options, "seed": seed, "backend": backend, "model": model}
        args = command_args(batch_command.build_parser(scenario), flags, call=_call("sweep", scenario),
                            positional=[scenario.name], refused=NOT_IN_PYTHON)
        for key, value in _sweep_flags(trials, grid, conditions).items():
            setattr(args, key, value)
        # The sweep's directory goes under ``out`` as the command's default goes under runs/; a
        # resumed sweep is found there from its definition, as the command finds it without --out.
        first = argparse.Namespace(**{**vars(args), "resume": False, "keep_failed": False})
        plan = batch_command.check_sweep(scenario, first)
        where = Path(_out(out)) / "sweeps" / f"{scenario.name}-{plan.sweep_id}"
        if args.resume or args.keep_failed:
            args.out = str(where)
            plan = batch_command.check_sweep(scenario, args)
        batch_command.ready_sweep(scenario, plan, where)

        def echo(msg: str) -> None:
            print(msg, file=sys.stderr)

        run_sweep(scenario, plan.trials, plan=plan, out=where, echo=echo,
                  progress=shows_progress() and not args.no_progress, **batch_command.execution(args))
    return Sweep(where)


@outside_running_loop
def sweep(name: str | Scenario, *, trials: int, grid: Any = None, conditions: Any = "default", seed: int = 42,
          backend: str = "stub", model: str | None = None, out: str | Path | None = "runs",
          **options: Any) -> Sweep:
    """A parameter sweep, as ``python -m simcore.batch`` runs it, in ``<out>/sweeps/<scenario>-<sweep id>/``.

    Args:
        name: The scenario.
        trials: Trials (seeds) per grid cell and condition.
        grid: Config field -> values (``{"rounds": [1, 3]}``); the cells are their product.
        conditions: The compared axis: ``"default"`` (the scenario's counterfactual, as the
            command's default), None (no axis), or ``{field: values}``.
        seed: The sweep seed; every trial seed derives from it.
        backend: The backend (``stub`` by default).
        model: The model for agents that name none.
        out: The output root; None: a new temporary directory.
        **options: Config fields, and the command's execution and backend flags
            (``executor="serial"``, ``"asyncio"``, ``"local"`` or ``"dask"``, ``workers=2``,
            ``budget_usd=1.0``, ``resume=True`` ...).

    Raises:
        ConfigError: a bad field or option, with the command's one line, before any work.
        SweepAborted: when the executor itself fails (finished trials are kept; ``resume=True`` finishes).
    """
    return _sweep(name, trials=trials, grid=grid, conditions=conditions, seed=seed, backend=backend, model=model,
                  out=out, options=options)


async def sweep_async(name: str | Scenario, *, trials: int, grid: Any = None, conditions: Any = "default",
                      seed: int = 42, backend: str = "stub", model: str | None = None,
                      out: str | Path | None = "runs", **options: Any) -> Sweep:
    """The awaitable :func:`sweep`; the sweep runs on a worker thread while the caller's loop goes on,
    and cancelling the await stops it as Ctrl-C does (finished trials are kept)."""
    return await to_thread(_sweep, name, trials=trials, grid=grid, conditions=conditions, seed=seed, backend=backend,
                           model=model, out=out, options=options)


async def perturb_async(name: str | Scenario, *, perturb: str | Sequence[str], pairs: int = 1, seed: int = 42,
                        backend: str = "stub", model: str | None = None, out: str | Path | None = "runs",
                        **fields: Any) -> Study:
    """The awaitable :func:`perturb`: every run's calls go on the caller's event loop."""
    scenario = _scenario(name)
    specs = [perturb] if isinstance(perturb, str) else list(perturb)
    with analysis_env():
        flags = {**fields, "perturb": specs, "pairs": pairs, "seed": seed, "backend": backend, "model": model}
        args = command_args(study_command.build_parser(scenario), flags, call=_call("perturb", scenario),
                            refused=(*NOT_IN_PYTHON, "scenario"))
        plan = study_command.check_study_args(scenario, args)
        root = _out(out)
        check_before_work(root, plan.spec)
        study = await run_study_async(scenario, plan.config, plan.perturbations, pairs=plan.pairs, seed=plan.seed,
                                      noise_floor=plan.noise_floor, spec=plan.spec, reuse=plan.reuse,
                                      progress=shows_progress() and not args.no_progress)
        return Study(write_study(study, root, plots=plan.plots))


@outside_running_loop
def perturb(name: str | Scenario, *, perturb: str | Sequence[str], pairs: int = 1, seed: int = 42,
            backend: str = "stub", model: str | None = None, out: str | Path | None = "runs", **fields: Any) -> Study:
    """A perturbation study, as ``python -m scenarios.perturbation`` runs it, in ``<out>/perturbation/<study-id>/``.

    Args:
        name: The scenario to perturb (it must define an outcome).
        perturb: A perturbation SPEC (``"drop:agent=P1,round=2"``) or several, each with its own pairs.
        pairs: Pairs (seeds) per perturbation.
        seed: The first pair's seed.
        backend: The backend (``stub`` by default).
        model: The model for agents that name none.
        out: The output root; None: a new temporary directory.
        **fields: Config fields, backend and analysis options, named as the command's flags
            are, and the study's own: ``noise_floor`` (re-runs of each baseline; default 0 on
            the stub, 1 on real backends), ``reuse`` (``"prefix"`` or ``"none"``), ``no_plot``,
            ``no_progress``.

    Raises:
        ConfigError: a bad field, option or SPEC, with the command's one line, before any work.
    """
    return asyncio.run(perturb_async(name, perturb=perturb, pairs=pairs, seed=seed, backend=backend, model=model,
                                     out=out, **fields))
