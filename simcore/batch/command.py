"""The sweep command, ``python -m simcore.batch SCENARIO --trials N [--grid FIELD=V1,V2 ...] [...]``.

Runs a parameter sweep / Monte Carlo of any scenario; see ``--help`` and
docs/batch.md. :func:`build_parser`, :func:`check_sweep`, :func:`ready_sweep` and
:func:`execution` are shared with :func:`simcore.sweep` (:mod:`simcore.face.calls`). Exit status: 0 when every planned trial finished "ok", 1 when some
failed, were skipped or are pending, 2 on bad input (one line, nothing written),
130 when interrupted.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from backends.errors import BackendConfigError
from backends.registry import (
    BACKENDS,
    FLAG_OPTIONS,
    BackendSpec,
    add_backend_args,
    check_spec,
)
from simcore.analysis.encoder_service import MODES as ENCODER_MODES
from simcore.analysis.plots import summary_plots_wanted
from simcore.base.config import ConfigError
from simcore.base.records import check_out_dir
from simcore.batch.executors import EXECUTORS, SweepAborted
from simcore.batch.plan import SEED_SCOPES, SweepPlan, parse_values
from simcore.batch.report import finish_command, format_summary
from simcore.batch.store import read_backend_options, read_definition
from simcore.batch.sweep import default_out, estimate_cost, plan_sweep, run_sweep
from simcore.cli import (
    OneLineParser,
    add_analysis_args,
    add_config_args,
    apply_analysis_args,
    backend_spec,
    check_embed_cache,
    config_values,
    fail,
    parse_seed,
)
from simcore.runs.args import parse_scenario_args
from simcore.runs.estimate import check_fit
from simcore.runs.scenario import Scenario

PROG = "python -m simcore.batch"


def build_parser(scenario: Scenario | None, add_help: bool = True) -> OneLineParser:
    """The batch parser; with a scenario, its config fields become flags too.

    Without ``add_help`` (the first pass, which only looks for the scenario) the
    scenario argument is optional.
    """
    parser = OneLineParser(
        prog=PROG,
        add_help=add_help,
        description=(
            "Run a parameter sweep / Monte Carlo of a scenario: the Cartesian product of "
            "--grid values x the condition axis x --trials seeds. Writes one run directory "
            "per trial, results.csv/.parquet, summary.json/.csv and plots/metrics.png into "
            "the sweep directory. Fixed config fields are set with the scenario's own flags "
            "(below) or --config."
        ),
    )
    parser.add_argument("scenario", nargs=None if add_help else "?",
                        help="a scenario name (python -m simcore.run --list; e.g. context_corrosion) or "
                             "a dotted path (mypkg.myexp[:SCENARIO])")
    g = parser.add_argument_group("sweep")
    g.add_argument("--trials", type=str, default=None, metavar="N",
                   help="trials (seeds) per grid cell and condition (required unless --resume)")
    g.add_argument("--grid", action="append", default=None, metavar="FIELD=V1,V2",
                   help="a config field and its values; repeat for more fields (the grid is their "
                        "Cartesian product). Values holding commas: FIELD='[\"a,b\", \"c\"]' (JSON)")
    g.add_argument("--conditions", default=None, metavar="FIELD=A,B|none",
                   help="the compared axis; conditions of a cell share trial seeds (default: the "
                        "scenario's counterfactual, e.g. biased=true,false; 'none' for no axis)")
    g.add_argument("--seed", default=None, help="sweep seed, 0..2**32-1; every trial seed derives from it (default: 42)")
    g.add_argument("--seed-scope", default=None, choices=SEED_SCOPES,
                   help="cell: independent trial seeds per grid cell (default); sweep: the same "
                        "trial seeds in every cell (common random numbers across the grid)")
    g.add_argument("--config", metavar="FILE", default=None, help="YAML file of fixed config fields")
    r = parser.add_argument_group("execution")
    r.add_argument("--executor", default=None, choices=EXECUTORS,
                   help="local: process pool (default); serial; asyncio: many trials on one event "
                        "loop (LLM-bound work); dask: a Dask cluster (default when --address is given)")
    r.add_argument("--workers", type=str, default=None, metavar="W",
                   help="processes for local and for a Dask LocalCluster (default: CPU count)")
    r.add_argument("--address", default=None, metavar="ADDR",
                   help="address of a running Dask scheduler, e.g. tcp://10.0.0.5:8786 (workers must "
                        "import simcore and see the sweep directory); without it, dask starts a LocalCluster")
    r.add_argument("--concurrency", type=str, default=None, metavar="C",
                   help="trials in flight at once with --executor asyncio (default: 32)")
    r.add_argument("--encoder", default="auto", choices=ENCODER_MODES,
                   help="where the workers' texts are embedded: auto (one encoder in the sweep's own process "
                        "when the device is a GPU, so workers never load torch; else each worker its own), "
                        "shared (one encoder in the sweep's process, on any device) or per-worker (default: auto)")
    r.add_argument("--trial-timeout", default=None, metavar="S",
                   help="cancel a trial that runs longer than S seconds and record it as an error "
                        "(timeout); its partial files are removed and the other trials go on (default: off)")
    r.add_argument("--max-failed-trials", default=None, metavar="N",
                   help="stop dispatching once N trials failed; finished trials are kept and --resume "
                        "finishes the sweep")
    r.add_argument("--backend", default=None, help=f"LLM backend: {', '.join(BACKENDS)} (default: stub)")
    r.add_argument("--model", default=None, help="model for agents that name none")
    r.add_argument("--base-url", default=None, help="endpoint of an HTTP backend")
    o = parser.add_argument_group("output")
    o.add_argument("--out", default=None, metavar="DIR",
                   help="the sweep directory (default: runs/sweeps/<scenario>-<sweep id>)")
    o.add_argument("--resume", action="store_true",
                   help="finish the sweep in --out (without --out: the one these flags started in its default "
                        "directory) after a crash, kill or stop: run the trials not yet finished and re-run "
                        "(same seed) those that failed; flags not given are taken from its sweep.json, flags "
                        "that define the sweep must match it")
    o.add_argument("--keep-failed", action="store_true",
                   help="with --resume: keep failed trials as they are instead of re-running them")
    o.add_argument("--dry-run", action="store_true",
                   help="validate, print the plan and the cost estimate, write nothing")
    o.add_argument("--json", action="store_true", help="print summary.json to stdout instead of the table")
    o.add_argument("--verbose", "-v", action="store_true",
                   help="print the full detail (every summary column and comparison field) instead of the "
                   "compact table; the files hold it either way")
    o.add_argument("--no-progress", action="store_true", help="no progress bar")
    o.add_argument("--no-plot", action="store_true", help="skip plots/metrics.png")
    add_backend_args(parser, sweep=True)
    add_analysis_args(parser)
    if scenario is not None:
        add_config_args(parser, scenario.config_type)
    return parser


def _int(name: str, value: str | None) -> int | None:
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        raise ConfigError(f"{name}: must be an integer >= 1, got {value!r}") from None


def resolve(scenario: Scenario, args: argparse.Namespace) -> dict[str, Any]:
    """Turn the flags (and, on --resume, the stored sweep) into run_sweep arguments."""
    stored = None
    if args.resume:
        if args.out is None:
            args.out = str(default_dir(scenario, args))
        stored = read_definition(args.out) if Path(args.out).is_dir() else None
        if stored is None:
            raise ConfigError(f"resume: {args.out} holds no sweep to resume (no sweep.json)")
    base = config_values(scenario.config_type, args, stored["base_config"] if stored else None)

    trials = _int("trials", args.trials)
    if trials is None:
        if stored is None:
            raise ConfigError("trials: --trials N is required (an integer >= 1)")
        trials = stored["trials"]
    if args.grid is not None:
        grid = [parse_values(text, "grid") for text in args.grid]
    else:
        grid = [tuple(item) for item in stored["grid"]] if stored else []
    if args.conditions is not None:
        conditions: Any = None if args.conditions.strip().lower() == "none" else parse_values(args.conditions, "conditions")
    elif stored is not None:
        conditions = None if stored["conditions"] is None else tuple(stored["conditions"])
    else:
        conditions = "default"
    cname = conditions[0] if isinstance(conditions, tuple) else None
    if conditions == "default" and scenario.counterfactual is not None:
        cname = scenario.counterfactual[0]
    if cname is not None and getattr(args, cname, None) is not None:
        flag = cname.replace("_", "-")
        raise ConfigError(f"conditions: {cname} is the condition axis; drop --{flag} or pass --conditions none")
    seed = parse_seed(args.seed) if args.seed is not None else (stored["seed"] if stored else 42)
    seed_scope = args.seed_scope or (stored["seed_scope"] if stored else "cell")
    return {
        "trials": trials, "grid": grid, "conditions": conditions, "base": base,
        "seed": seed, "seed_scope": seed_scope, "spec": resolve_spec(args, stored),
    }


def default_dir(scenario: Scenario, args: argparse.Namespace) -> Path:
    """``--resume`` without ``--out``: the directory the first run chose from these same flags.

    Raises:
        ConfigError: when the flags do not define a sweep, or no sweep of them is there.
    """
    first = argparse.Namespace(**{**vars(args), "resume": False})
    try:
        kw = resolve(scenario, first)
    except ConfigError as exc:
        raise ConfigError(f"resume: without --out, give the flags the sweep was started with; {exc}") from None
    where = default_out(plan_sweep(scenario, kw.pop("trials"), kw.pop("grid"), **kw))
    if read_definition(where) is None:
        raise ConfigError(f"resume: these flags started no sweep here ({where} holds none); give the flags it "
                          "was started with, or --out DIR")
    return where


def resolve_spec(args: argparse.Namespace, stored: dict[str, Any] | None) -> BackendSpec:
    """The backend spec: the flags given, over (on --resume) the stored backend and its options.

    ``--budget-usd`` and ``--fail-fast`` act on the sweep, not on the spec.
    """
    flags = {n: getattr(args, n) for n in FLAG_OPTIONS if n not in ("budget_usd", "fail_fast")}
    ns = argparse.Namespace(backend=args.backend or "stub", model=args.model, base_url=args.base_url, **flags)
    if stored is None:
        return backend_spec(ns)
    stored_spec = BackendSpec.from_dict(stored["backend"])
    inherited = read_backend_options(args.out)
    if args.backend is None and args.model is None and args.base_url is None:
        ns.backend, ns.model, ns.base_url = stored_spec.name, stored_spec.model, stored_spec.base_url
        inherited = {**stored_spec.options, **inherited}
    given = backend_spec(ns)
    try:
        return check_spec(dataclasses.replace(given, options={**inherited, **given.options}))
    except BackendConfigError as exc:
        raise ConfigError(str(exc)) from None


def check_sweep(scenario: Scenario, args: argparse.Namespace) -> SweepPlan:
    """The sweep the flags define, checked completely (every config built once), with the
    analysis flags applied; nothing is written.

    Raises:
        ConfigError: one line naming the field, before any work is done.
    """
    kw = resolve(scenario, args)
    apply_analysis_args(args, "summary")
    if args.keep_failed and not args.resume:
        raise ConfigError("keep_failed: --keep-failed only applies with --resume")
    executor = args.executor or ("dask" if args.address else "local")
    if args.workers is not None and executor not in ("local", "dask"):
        raise ConfigError(f"workers: only the local and dask executors start worker processes (executor is "
                          f"{executor}); drop --workers")
    if args.concurrency is not None and executor != "asyncio":
        raise ConfigError(f"concurrency: only --executor asyncio runs trials side by side on one loop (executor is "
                          f"{executor}); drop --concurrency")
    return plan_sweep(scenario, kw.pop("trials"), kw.pop("grid"), **kw)


def ready_sweep(scenario: Scenario, plan: SweepPlan, out: str | Path) -> None:
    """What a checked sweep needs outside itself, checked before any trial: its directory
    ``out`` can be made, its prompts fit the context window, the encoder's weights and cache."""
    check_out_dir(out)
    # As a single run does: a prompt that cannot fit --context-window even with its history
    # trimmed is refused now, not once per trial (one pilot per cell and condition).
    check_fit(scenario, list({(j.cell, j.condition): (j.config, j.seed) for j in plan.jobs}.values()), plan.spec)
    check_embed_cache(scenario, (job.config for job in plan.jobs))


def execution(args: argparse.Namespace) -> dict[str, Any]:
    """The :func:`~simcore.batch.sweep.run_sweep` arguments that say how the sweep runs."""
    return {
        "executor": args.executor, "workers": _int("workers", args.workers), "address": args.address,
        "concurrency": _int("concurrency", args.concurrency), "resume": args.resume,
        "keep_failed": args.keep_failed, "budget_usd": args.budget_usd, "fail_fast": bool(args.fail_fast),
        "max_failed_trials": _int("max_failed_trials", args.max_failed_trials),
        "trial_timeout_s": args.trial_timeout, "encoder": args.encoder,
        "plot": not args.no_plot and summary_plots_wanted(),
    }


def main(argv: Sequence[str] | None = None) -> int:
    """Run the batch command; returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    scenario, args = parse_scenario_args(build_parser, argv)

    def say(msg: str) -> None:
        print(msg, file=sys.stderr)

    out = args.out
    try:
        plan = check_sweep(scenario, args)
        if args.dry_run or args.estimate:
            print(describe_plan(plan, args.out))
            print(estimate_cost(plan).describe(plan.jobs))
            return 0
        out = args.out or str(default_out(plan))
        ready_sweep(scenario, plan, out)
        df = run_sweep(scenario, plan.trials, plan=plan, out=out, progress=not args.no_progress, echo=say,
                       **execution(args))
    except (ConfigError, BackendConfigError) as exc:  # BackendConfigError: a damaged file, too
        fail(str(exc))
    except KeyboardInterrupt:
        say(f"interrupted; finished trials are saved. Finish with: {finish_command(scenario.name, out)}")
        return 130
    except SweepAborted as exc:
        say(f"sweep aborted ({exc}); finished trials are saved. Finish with: {finish_command(scenario.name, out)}")
        return 1
    summary = df.attrs["summary"]
    if args.json:
        print(json.dumps(summary, indent=2, sort_keys=True))
    else:
        print(format_summary(plan, summary, verbose=args.verbose))
        print()
        for name, path in summary["files"].items():
            print(f"{name}: {path}")
    return 0 if summary["n_ok"] == summary["n_planned"] else 1


def describe_plan(plan: Any, out: str | None) -> str:
    """The --dry-run report."""
    grid = ", ".join(f"{n}={list(v)}" for n, v in plan.grid) or "(no grid)"
    cond = "none" if plan.conditions is None else ", ".join(plan.condition_labels)
    return "\n".join([
        f"scenario: {plan.scenario.name}",
        f"sweep id: {plan.sweep_id} -> {out or default_out(plan)}",
        f"grid: {grid} ({len(plan.cells)} cells)",
        f"conditions: {cond}",
        f"trials per cell and condition: {plan.trials} (seed {plan.seed}, seed scope {plan.seed_scope})",
        f"total trials: {len(plan.jobs)}",
        f"backend: {plan.spec.name}, model {plan.spec.model}"
        + "".join(f", {k}={v}" for k, v in sorted(plan.spec.options.items())),
    ])
