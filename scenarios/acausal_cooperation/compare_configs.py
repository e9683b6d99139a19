"""``python -m scenarios.acausal_cooperation compare``: several configs side by side.

The original experiment ran each of its configs (``baseline``, ``high_temp``,
``low_temp``) and compared them in ``experiment_comparison.csv``. This command
does the same: it runs every config of ``--configs`` (shipped names or YAML files;
default: the three shipped ones) on the same ``--trials`` trial seeds, and writes
one directory, atomically::

    <out>/acausal_cooperation/compare-<utc>-s<seed>-<hex>/
        experiment_comparison.csv   one row per config: the original's columns (name,
                                    cooperation_rate, superrationality_score,
                                    identity_reasoning, convergence_round), each with
                                    a 95% interval, and what the intervals rest on
        experiment_comparison.md    the same table in Markdown (as printed)
        experiment_comparison.json  the definition (configs as resolved, seeds,
                                    backend) and the rows
        trials.csv                  one row per (config, trial): seed, status, run, metrics
        runs/acausal_cooperation/<config>-t<i>/   every trial, an ordinary run directory

The original's columns: ``cooperation_rate`` is its final cooperation rate (mutual
cooperation in the last round), ``superrationality_score`` its overall score,
``identity_reasoning`` its identity-reasoning frequency and ``convergence_round``
its convergence round (the number of rounds when the trend did not converge).

Intervals: with two trials or more, over trials (the trial is the unit):
:func:`simcore.analysis.stats.describe` with each metric's declared kind
(:data:`~scenarios.acausal_cooperation.analysis.KINDS`). With one trial, the
shares get the Wilson interval of the run's own count (:func:`simcore.analysis.stats.proportion_ci`: final-round games, readable strategies),
which treats games as independent though players repeat; the score and the
round get none. ``interval`` in each row says which.

Trial 0 runs on ``--seed`` itself, so ``python -m scenarios.acausal_cooperation
--config baseline --seed S`` reproduces it; the others on seeds derived from it.
Every config shares the trial seeds.
"""

from __future__ import annotations

import asyncio
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import pandas as pd

from scenarios.acausal_cooperation.analysis import KINDS
from scenarios.acausal_cooperation.config import AcausalConfig
from simcore.api import (
    BackendConfigError,
    BackendSpec,
    ConfigError,
    OneLineParser,
    Scenario,
    add_common_args,
    add_config_args,
    apply_analysis_args,
    atomic_write,
    backend_spec,
    check_before_work,
    check_run_id,
    close_backend,
    code_revision,
    config_file,
    config_values,
    derive_seed,
    describe,
    fail,
    load_config_file,
    new_run_id,
    package_versions,
    parse_seed,
    parse_trials,
    print_estimate,
    progress_bar,
    proportion_ci,
    run_trial_async,
    scenario_backend,
    staged_dir,
    utc_now,
    write_json,
    write_run,
)

DEFAULT_CONFIGS = ("baseline", "high_temp", "low_temp")
#: The original experiment's columns: (column, metric); intervals follow the metric's kind.
COLUMNS = (
    ("cooperation_rate", "final_cooperation_rate"),
    ("superrationality_score", "superrationality_score"),
    ("identity_reasoning", "identity_reasoning_frequency"),
    ("convergence_round", "convergence_round"),
)


@dataclass
class Comparison:
    """Every trial of a comparison, in memory.

    Attributes:
        names: Short name of each config (run ids, the ``config`` column).
        configs: The configs as resolved (file < flags).
        seed: The comparison's seed.
        trial_seeds: The seeds every config runs on.
        trials: Per config, its trials in seed order.
    """

    names: list[str]
    configs: list[AcausalConfig]
    seed: int
    trial_seeds: list[int]
    trials: dict[str, list[Any]]


def trial_seeds(seed: int, n: int) -> list[int]:
    """``seed`` itself first (a plain run reproduces trial 0), then seeds derived from it."""
    return [seed] + [derive_seed(seed, f"acausal_cooperation.compare.{i}") for i in range(1, n)]


def short_name(value: str) -> str:
    """A config's name in run ids: a shipped name as it is, a file by its stem."""
    stem = Path(value).stem if value.endswith((".yaml", ".yml")) else value
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", stem).strip("._") or "config"


def resolve_configs(values: Sequence[str], args: Any) -> tuple[list[str], list[AcausalConfig]]:
    """Each config of ``--configs``: its file, then the flags (which apply to every config).

    Raises:
        ConfigError: one line naming the config and the field.
    """
    names, configs = [], []
    for value in values:
        data = load_config_file(config_file(AcausalConfig, value))
        try:
            cfg = AcausalConfig.from_mapping(config_values(AcausalConfig, args, base=data))
        except ConfigError as exc:
            raise ConfigError(f"configs: {value}: {exc}") from None
        name = short_name(value)
        if name in names:
            raise ConfigError(f"configs: {value!r} is given twice (as {name!r})")
        names.append(name)
        configs.append(cfg)  # type: ignore[arg-type]
    return names, configs


async def run_comparison_async(scenario: Scenario, names: Sequence[str], configs: Sequence[AcausalConfig], seed: int,
                               n_trials: int, spec: BackendSpec | None = None, progress: bool = False) -> Comparison:
    """Run every config on the same trial seeds (trials of ``scenario``, acausal_cooperation's), all on one loop."""
    spec = spec or BackendSpec()
    seeds = trial_seeds(seed, n_trials)
    jobs = [(name, cfg, s) for name, cfg in zip(names, configs) for s in seeds]
    # One real backend for every trial: its limits and budget hold for the whole comparison.
    shared = None if spec.name == "stub" else scenario_backend(scenario, configs[0], spec)
    bar = progress_bar(len(jobs), desc="acausal_cooperation compare", unit="trial", disable=not progress)

    async def one(cfg: AcausalConfig, s: int) -> Any:
        trial = await run_trial_async(scenario, cfg, s, spec, shared)
        bar.update(1)
        return trial

    try:
        done = await asyncio.gather(*(one(cfg, s) for _, cfg, s in jobs))
    finally:
        bar.close()
        await close_backend(shared)
    trials: dict[str, list[Any]] = {name: [] for name in names}
    for (name, _, _), trial in zip(jobs, done):
        trials[name].append(trial)
    return Comparison(list(names), list(configs), seed, seeds, trials)


def _counts(results: dict[str, Any], metric: str) -> tuple[int, int] | None:
    """(k, n) behind a share of one run: the readable items it rests on, and how many had it."""
    value = results["metrics"].get(metric)
    n = (results.get("basis", {}).get(metric) or {}).get("n")
    if value is None or not n:
        return None
    return int(round(value * n)), int(n)


def comparison_rows(c: Comparison) -> list[dict[str, Any]]:
    """One row per config: the original experiment's columns with 95% intervals."""
    rows = []
    for name, cfg in zip(c.names, c.configs):
        ok = [t.results for t in c.trials[name] if t.status == "ok"]
        row: dict[str, Any] = {"name": cfg.experiment_name or name, "config": name, "trials": len(ok),
                               "trials_failed": len(c.trials[name]) - len(ok)}
        per_trial = len(ok) >= 2
        for column, metric in COLUMNS:
            kind = KINDS[metric]
            summary = describe([r["metrics"].get(metric) for r in ok], kind=kind)
            lo, hi = summary.ci_low, summary.ci_high
            if kind.name == "proportion" and not per_trial and ok:
                counts = _counts(ok[0], metric)
                lo, hi = proportion_ci(*counts) if counts else (None, None)
            row.update({column: summary.mean, f"{column}_ci_low": lo, f"{column}_ci_high": hi})
        row["converged_trials"] = sum(bool(r["metrics"].get("converged")) for r in ok)
        row["interval"] = (
            f"95%, over {len(ok)} trials" if per_trial else
            "95% Wilson of one run's final-round games and readable strategies; none for score and round"
        )
        rows.append(row)
    return rows


def trial_table(c: Comparison, run_ids: dict[tuple[str, int], str]) -> pd.DataFrame:
    """One row per (config, trial): seed, status, run directory and every scalar metric."""
    rows = []
    for name in c.names:
        for i, trial in enumerate(c.trials[name]):
            metrics = {k: v for k, v in trial.results.get("metrics", {}).items()
                       if isinstance(v, (int, float, bool, str)) or v is None}
            rows.append({"config": name, "trial": i, "seed": trial.seed, "status": trial.status,
                         "run_dir": run_ids[(name, i)], **metrics})
    return pd.DataFrame(rows)


def markdown(rows: Sequence[dict[str, Any]]) -> str:
    """The comparison as a Markdown table (what the command prints)."""

    def cell(row: dict[str, Any], column: str, spec: str) -> str:
        mid, lo, hi = row[column], row[f"{column}_ci_low"], row[f"{column}_ci_high"]
        if mid is None:
            return "n/a"
        text = format(mid, spec)
        return text if lo is None else f"{text} [{lo:{spec}}, {hi:{spec}}]"

    head = ("| name | trials | cooperation_rate | superrationality_score | identity_reasoning | "
            "convergence_round | converged |")
    lines = [head, "|" + "---|" * 7]
    for r in rows:
        lines.append(
            f"| {r['name']} | {r['trials']} | {cell(r, 'cooperation_rate', '.3f')} | "
            f"{cell(r, 'superrationality_score', '.3f')} | {cell(r, 'identity_reasoning', '.3f')} | "
            f"{cell(r, 'convergence_round', '.1f')} | {r['converged_trials']} of {r['trials']} |"
        )
    return "\n".join(lines)


def write_comparison(c: Comparison, rows: Sequence[dict[str, Any]], spec: BackendSpec, out: str | Path,
                     command: str = "", options: dict[str, str] | None = None) -> Path:
    """Write the comparison directory (see the module docstring); returns its path. ``options``:
    the analysis settings (:func:`simcore.api.apply_analysis_args`), recorded in the manifest."""
    run_id = check_run_id(f"compare-{new_run_id(c.seed)}")
    final = Path(out) / "acausal_cooperation" / run_id
    run_ids: dict[tuple[str, int], str] = {}
    with staged_dir(final) as stage:
        for name in c.names:
            for i, trial in enumerate(c.trials[name]):
                path = write_run(trial, stage / "runs", f"{name}-t{i}")
                run_ids[(name, i)] = (Path("runs") / path.relative_to(stage / "runs")).as_posix()
        pd.DataFrame(rows).to_csv(stage / "experiment_comparison.csv", index=False)
        atomic_write(stage / "experiment_comparison.md", markdown(rows) + "\n")
        trial_table(c, run_ids).to_csv(stage / "trials.csv", index=False)
        write_json(stage / "experiment_comparison.json", {
            "scenario": "acausal_cooperation", "command": command, "run_id": run_id, "seed": c.seed,
            "trial_seeds": c.trial_seeds, "configs": {n: cfg.to_dict() for n, cfg in zip(c.names, c.configs)},
            "backend": spec.to_dict(), "options": options or {}, "rows": rows, "versions": package_versions(),
            "code_revision": code_revision(), "created_utc": utc_now(),
        })
    return final


def build_parser() -> OneLineParser:
    parser = OneLineParser(
        prog="python -m scenarios.acausal_cooperation compare",
        description=(
            "Run several configs on the same trial seeds and write experiment_comparison.csv: the original "
            "experiment's columns with 95% intervals. Config flags apply to every config."
        ),
    )
    add_common_args(parser)
    parser.add_argument(
        "--configs", default=",".join(DEFAULT_CONFIGS),
        help=f"comma-separated shipped config names or YAML files (default: {','.join(DEFAULT_CONFIGS)})",
    )
    parser.add_argument("--trials", default="1", help="trial seeds per config, 1..10000 (default: 1, as the "
                        "original ran each config once)")
    add_config_args(parser, AcausalConfig)
    return parser


def main(scenario: Scenario, argv: Sequence[str]) -> int:
    """The ``compare`` subcommand of ``scenario`` (acausal_cooperation's, which passes itself); returns the exit status."""
    argv = list(argv)
    args = build_parser().parse_args(argv)
    try:
        if args.config is not None:
            raise ConfigError("config: compare runs several configs; name them with --configs")
        if args.experiment_name is not None:
            raise ConfigError("experiment_name: each config names itself; drop --experiment-name")
        seed = parse_seed(args.seed)
        n = parse_trials(args.trials, minimum=1)
        values = [v.strip() for v in args.configs.split(",") if v.strip()]
        if not values:
            raise ConfigError(f"configs: name at least one config; got {args.configs!r}")
        names, configs = resolve_configs(values, args)
        spec = backend_spec(args)
        options = apply_analysis_args(args, "all")  # as a single run: every run's own plots
        if args.estimate:
            runs = [(cfg, s) for cfg in configs for s in trial_seeds(seed, n)]
            return print_estimate(scenario, runs, spec, as_json=args.json)
        check_before_work(args.out, spec)
        c = asyncio.run(run_comparison_async(scenario, names, configs, seed, n, spec, progress=True))
    except (ConfigError, BackendConfigError) as exc:
        fail(str(exc))
    command = "python -m scenarios.acausal_cooperation compare " + " ".join(argv)
    rows = comparison_rows(c)
    out = write_comparison(c, rows, spec, args.out, command.strip(), options)
    failed = sum(t.status != "ok" for ts in c.trials.values() for t in ts)
    if args.json:
        print(json.dumps({"rows": rows, "run_dir": str(out)}, indent=2, sort_keys=True, default=str))
    else:
        print(markdown(rows))
        if failed:
            print(f"{failed} trial(s) failed; see trials.csv")
        print(f"comparison directory: {out}")
    return 0 if not failed else 1
