"""The command line every scenario shares: ``python -m simcore.run NAME [flags]``.

Common flags: ``--seed``, ``--backend``, ``--model``, ``--base-url``, ``--out``,
``--config FILE`` (YAML, or the name of a config the scenario ships), ``--json``,
and the backend flags of :func:`backends.registry.add_backend_args` (limits, retries, ``--budget-usd``,
``--cassette``, ``--fail-fast``, ``--estimate``). Every config field becomes a flag too
(``rounds`` -> ``--rounds``; booleans get ``--x/--no-x``). Values resolve as
defaults < config file < flags. Bad input prints one line naming the field and
what is allowed, exits with status 2 and writes nothing.

Scenarios with a counterfactual axis also get ``--counterfactual`` (arm A and arm
B on the same seed) and ``--trials N`` (a Monte Carlo of N trials per arm with
shared seeds); see :mod:`simcore.runs.counterfactual`.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from backends.cassette import check_cassette
from backends.context import PROBES, probe_window
from backends.errors import BackendConfigError
from backends.providers import get_preset, split_model
from backends.registry import (
    BACKENDS,
    BackendSpec,
    add_backend_args,
    check_servers,
    spec_from_args,
)
from simcore.analysis import embed_cache, embeddings, plots, settings
from simcore.analysis.comparison_table import ComparisonRow, comparison_lines
from simcore.analysis.plots import PLOT_LEVELS
from simcore.analysis.readability import readability_lines
from simcore.analysis.stats import level_text
from simcore.base.config import (
    Config,
    ConfigError,
    _base_type,
    _describe,
    coerce_field,
    field_types,
)
from simcore.base.config_file import (
    config_file,
    load_config_file,
    shipped_configs,  # noqa: F401 (re-exported: the 3.x docs named it here)
)
from simcore.base.records import check_out_dir
from simcore.replies.quality import summary_lines
from simcore.runs.args import OneLineParser, fail, parse_int, parse_seed, say
from simcore.runs.counterfactual import (
    MAX_TRIALS,
    MIN_TRIALS,
    arm_configs,
    compared_metrics,
    run_arms,
    trial_seeds,
)
from simcore.runs.estimate import check_fit, estimate
from simcore.runs.marks import installed as installed_calibration
from simcore.runs.resume import COMMAND as RESUME_COMMAND
from simcore.runs.resume import finish_command, read_failed, recorded_calls
from simcore.runs.runner import TrialResult, build_world, run_trial, write_run
from simcore.runs.scenario import Scenario
from simcore.sim.trace import STREAM_FROM_AGENTS, TRACE_MODES


def add_common_args(parser: argparse.ArgumentParser) -> None:
    """Flags every scenario command takes."""
    parser.add_argument("--seed", default="42", help="run seed, 0..2**32-1 (default: 42)")
    parser.add_argument(
        "--backend", default="stub", help=f"LLM backend: {', '.join(BACKENDS)} (default: stub)"
    )
    parser.add_argument(
        "--model", default=None,
        help="model for agents that name none; 'preset:model' (e.g. openrouter:google/gemini-2.5-flash) "
        "picks a provider per model",
    )
    parser.add_argument("--base-url", default=None, help="endpoint of an HTTP backend")
    parser.add_argument("--out", "--output-dir", dest="out", default="runs",
                        help="output root (default: runs); --output-dir is another name for it")
    parser.add_argument(
        "--config", metavar="FILE|NAME", default=None,
        help="YAML file of config fields, or the NAME of a config the scenario ships (its configs/NAME.yaml)",
    )
    parser.add_argument(
        "--json", action="store_true", help="print the results JSON to stdout and nothing else"
    )
    add_backend_args(parser)
    add_analysis_args(parser)


def add_analysis_args(parser: argparse.ArgumentParser) -> None:
    """``--device``, ``--embed-cache`` and ``--plots``: where and how a run's analysis is done."""
    group = parser.add_argument_group("analysis")
    group.add_argument(
        "--device", default=None, metavar="auto|cpu|cuda|mps",
        help="where embeddings are computed: auto picks a GPU when torch sees one and a Monte Carlo or sweep "
        "has 200 trials or more, else the CPU; cuda and mps need the "
        "gpu extra (default: auto)",
    )
    group.add_argument(
        "--embed-cache", default=None, metavar="DIR|none",
        help="persistent embedding cache, shared by processes and later runs "
        "(default: $XDG_CACHE_HOME/simcore or ~/.cache/simcore; none turns it off)",
    )
    group.add_argument(
        "--plots", dest="plot_level", default=None, choices=PLOT_LEVELS,
        help="figures to draw: all (every run's plots too), summary (only the summary figure of a "
        "Monte Carlo or sweep) or none (default: all for a single run, summary for a Monte Carlo or sweep)",
    )


def apply_analysis_args(args: argparse.Namespace, default_plots: str) -> dict[str, str]:
    """Check the analysis flags and put them in the environment, which pool workers inherit.

    Returns:
        The settings now in effect, as a record of the command's work keeps them
        (:func:`simcore.analysis.settings.recorded`).

    Raises:
        ConfigError: one line naming the flag, before any work is done.
    """
    device = getattr(args, "device", None)
    if device is not None:
        try:
            embeddings.check_device(device)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        os.environ[embeddings.DEVICE_ENV] = device
    note = embeddings.gpu_fallback_note()
    if note:
        print(note, file=sys.stderr)
    cache = getattr(args, "embed_cache", None)
    if cache is not None:
        if not cache.strip():
            raise ConfigError("embed_cache: must be a directory or none, got ''")
        if cache.strip().lower() != embed_cache.OFF and Path(cache).expanduser().exists() \
                and not Path(cache).expanduser().is_dir():
            raise ConfigError(f"embed_cache: {cache!r} exists and is not a directory")
        os.environ[embed_cache.ENV] = cache
    os.environ[plots.PLOTS_ENV] = getattr(args, "plot_level", None) or default_plots
    return settings.recorded()


def check_embed_cache(scenario: Scenario, configs: Iterable[Config]) -> None:
    """Before any work, if any of ``configs`` embeds texts: name missing encoder weights
    and a damaged embedding cache.

    Raises:
        ConfigError: one line saying what to install, for weights that are not installed.
        DamagedFile: one line naming the cache file and how to go on.
    """
    if scenario.embeds is None or not any(scenario.embeds(c) for c in configs):
        return
    try:
        embeddings.check_weights()
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    where = embed_cache.cache_dir()
    if where is not None:
        embed_cache.DiskCache(where / embed_cache.FILE, embeddings.DIM).check()


def add_config_args(parser: argparse.ArgumentParser, config_type: type[Config]) -> None:
    """One flag per config field, all defaulting to None ("not given")."""
    group = parser.add_argument_group(f"{config_type.__name__} fields")
    hints = field_types(config_type)
    for f in dataclasses.fields(config_type):
        tp, _ = _base_type(hints[f.name])
        flag = "--" + f.name.replace("_", "-")
        if flag in parser._option_string_actions:
            # A common flag of that name wins (context_corrosion's ``plots`` field and --plots
            # LEVEL); the field is still set by --config or a sweep's grid.
            continue
        desc = f.metadata.get("help", "")
        allowed = _describe(tp, f.metadata) if tp in (int, float, bool, str) else ""
        text = f"{desc} (default: {f.default!r}{'; ' + allowed if allowed else ''})".strip()
        text = text.replace("%", "%%")  # argparse %-formats help strings
        if tp is bool:
            group.add_argument(flag, dest=f.name, action=argparse.BooleanOptionalAction, default=None, help=text)
        elif tp in (int, float, str):
            group.add_argument(flag, dest=f.name, default=None, metavar=tp.__name__.upper(), help=text)


def config_values(config_type: type[Config], args: argparse.Namespace,
                  base: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Field values: ``base`` < ``--config`` file < flags (each flag coerced and checked).

    Fields go in declaration order, so the first bad flag reported is the same in
    every process.
    """
    data: dict[str, Any] = dict(base or {})
    if args.config:
        data.update(load_config_file(config_file(config_type, args.config)))
    for f in dataclasses.fields(config_type):
        value = getattr(args, f.name, None)
        if value is not None:
            data[f.name] = coerce_field(config_type, f.name, value)
    return data


def resolve_config(config_type: type[Config], args: argparse.Namespace) -> Config:
    """Defaults < ``--config`` file < flags; validated."""
    return config_type.from_mapping(config_values(config_type, args))


def backend_spec(args: argparse.Namespace) -> BackendSpec:
    """The backend spec the flags describe.

    An existing ``--cassette`` is checked entry by entry here, before any work, so
    that a damaged one is reported at once rather than halfway through a run.
    """
    if args.backend not in BACKENDS:
        raise ConfigError(f"backend: must be one of {', '.join(BACKENDS)}; got {args.backend!r}")
    try:
        spec = spec_from_args(args)
        cassette = spec.options.get("cassette")
        if cassette is not None and Path(cassette).exists():
            check_cassette(cassette, deep=True)
        return spec
    except BackendConfigError as exc:
        raise ConfigError(str(exc)) from None


def model_note(config: Config, args: argparse.Namespace) -> None:
    """Say on stderr, before any call, which calls a config file sends to models other than ``--model``.

    A config may name per-agent models (``named_models()``); they win over
    ``--model``, which is right when the user meant them and must not happen silently.
    """
    named = getattr(config, "named_models", None)
    given = getattr(args, "model", None)
    if named is None or not given:
        return
    other = {who: m for who, m in named().items() if m != given}
    if other:
        listed = ", ".join(f"{who}={m}" for who, m in other.items())
        print(f"note: the config names models for {listed}; --model {given} applies only to calls that "
              "name none", file=sys.stderr)


def check_before_work(out: str | Path, spec: BackendSpec) -> None:
    """What a run needs outside itself, checked before its first call.

    The output root must take a run directory, and a local server the backend
    names must be listening (see :func:`backends.registry.check_servers`).
    """
    check_out_dir(out)
    check_servers(spec)


def fit_to_window(scenario: Scenario, trials: Sequence[tuple[Config, int]], spec: BackendSpec) -> BackendSpec:
    """``spec`` with its model's context window, and the scenario checked against it, before any work.

    The window is ``--context-window``, else what a local server says
    (:func:`backends.context.probe_window`), recorded in the spec's options (so the
    manifest keeps it and a replay fits requests the same way). A server that says
    nothing gets a note: its requests are fitted once it refuses one naming its window.

    Raises:
        ConfigError: when a prompt cannot fit the window even with its history trimmed
            (:func:`simcore.runs.estimate.check_fit`).
    """

    opts = spec.options
    if opts.get("context_window") is None and spec.name in PROBES and opts.get("cassette_mode") != "replay":
        url = spec.base_url or get_preset(spec.name).base_url or ""
        model = split_model(spec.model, spec.name)[1]
        found = probe_window(spec.name, url, model)
        if found is None:
            print(f"note: {spec.name} at {url} does not say its context window; requests are fitted to it once "
                  "it refuses one that is too long, naming it (--context-window N fits them from the first call)",
                  file=sys.stderr)
        else:
            spec = dataclasses.replace(spec, options={**opts, "context_window": found[0]})
            print(f"note: the context window of {model} is {found[0]} tokens ({found[1]}); requests are fitted "
                  "to it", file=sys.stderr)
    check_fit(scenario, trials, spec)
    return spec


def print_estimate(scenario: Scenario, trials: Sequence[tuple[Config, int]], spec: BackendSpec,
                   as_json: bool = False) -> int:
    """``--estimate``: print calls, tokens and cost of ``trials`` from a stub dry run."""
    est = estimate(scenario, trials, spec)
    print(json.dumps(est.to_dict(), indent=2, sort_keys=True) if as_json else est.table())
    return 0


def build_parser(scenario: Scenario, prog: str | None = None) -> OneLineParser:
    """The scenario's argument parser (``prog``: default ``python -m simcore.run NAME``)."""
    extra = f" Subcommands: {', '.join(scenario.commands)} (each has --help)." if scenario.commands else ""
    parser = OneLineParser(
        prog=prog or f"python -m simcore.run {scenario.name}",
        description=scenario.description + extra,
    )
    add_common_args(parser)
    parser.add_argument(
        "--trace", choices=TRACE_MODES, default="auto",
        help="keep the trace in memory, or stream it to trace.jsonl as the run goes (memory stays flat); "
        f"auto streams from {STREAM_FROM_AGENTS:,} agents up (default: auto; --counterfactual and "
        "--trials keep traces in memory)",
    )
    parser.add_argument(
        "--resume", metavar="RUN_DIR", default=None,
        help="finish a run that failed after paid calls: run it again from its manifest, the calls it recorded "
        "answered from its cassette.sqlite and only the rest sent (its results are an uninterrupted run's; "
        f"{RESUME_COMMAND} RUN_DIR does the same); only its calls' limits, retries, timeout, budget and key, "
        "--base-url, --out, --json, --trace and the analysis flags may be given with it",
    )
    if scenario.counterfactual is not None:
        name, a, b = scenario.counterfactual
        group = parser.add_argument_group("counterfactual and Monte Carlo")
        group.add_argument(
            "--counterfactual", action="store_true",
            help=f"run arm A ({name}={a}) and arm B ({name}={b}) with the same seed and compare them",
        )
        group.add_argument(
            "--trials", metavar="N", default=None,
            help=f"Monte Carlo: N trials per arm ({name}={a} vs {b}), seeds drawn from --seed and "
            "shared by both arms; writes a summary directory with summary.json, trials.csv, plots/comparison.png",
        )
    add_config_args(parser, scenario.config_type)
    return parser


def main(scenario: Scenario, argv: Sequence[str] | None = None, prog: str | None = None) -> int:
    """Run one trial from the command line; returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in scenario.commands:
        return scenario.commands[argv[0]](argv[1:])
    args = build_parser(scenario, prog).parse_args(argv)
    if args.resume is not None:
        return main_resume(scenario, args, given_flags(build_parser(scenario, prog), argv))
    if getattr(args, "counterfactual", False) or getattr(args, "trials", None) is not None:
        return main_arms(scenario, args)
    try:
        seed, config, spec = check_run(scenario, args)
        if getattr(args, "estimate", False):
            return print_estimate(scenario, [(config, seed)], spec, as_json=args.json)
        spec = ready_run(scenario, args, seed, config, spec)
        # builds first: bad input fails here
        trial = run_trial(scenario, config, seed, spec, trace=args.trace, trace_dir=Path(args.out) / scenario.name)
    except (ConfigError, BackendConfigError) as exc:
        fail(str(exc))
    return report_run(scenario, args, trial)


def report_run(scenario: Scenario, args: argparse.Namespace, trial: TrialResult) -> int:
    """Write the trial's run directory and say what it holds; a failed run that recorded paid
    calls also gets the command that finishes it from its cassette. Returns the exit status."""
    run_dir = write_run(trial, args.out)
    results = {**trial.results, "run_dir": str(run_dir)}
    finish = finish_command(run_dir, results)
    if "artifact_error" in results:  # the run is whole (trace, results, cassette); its figures are not
        print(f"warning: the run was written without its plots and files: {results['artifact_error']}",
              file=sys.stderr)
    if args.json:
        say(json.dumps({**results, **({"finish_command": finish} if finish else {})}, indent=2, sort_keys=True,
                       default=str))
    else:
        for line in run_lines(scenario, results):
            say(line)
        if trial.status != "ok":
            print(f"trial failed: {error_sentence(trial.error)}", file=sys.stderr)
        if finish:
            print(f"finish it from its cassette ({recorded_calls(run_dir)} calls recorded there are answered from "
                  f"it, only the rest are sent): {finish}", file=sys.stderr)
        say(f"run directory: {run_dir}")
    return 0 if trial.status == "ok" else 1


def given_flags(parser: argparse.ArgumentParser, argv: Sequence[str]) -> dict[str, Any]:
    """The flags ``argv`` gives, by their dest, and nothing for those left at their default."""
    parser.set_defaults(**{a.dest: None for a in parser._actions if a.dest != "help"})
    return {k: v for k, v in vars(parser.parse_args(argv)).items() if v is not None}


def main_resume(scenario: Scenario, args: argparse.Namespace, given: Mapping[str, Any]) -> int:
    """``--resume RUN_DIR``: run a failed run again from its manifest, the calls it recorded answered
    from its cassette and only the rest sent (:mod:`simcore.runs.resume`)."""
    try:
        failed = read_failed(args.resume, given)
        if failed.scenario != scenario.name:
            raise ConfigError(f"resume: {failed.run_dir} is a run of {failed.scenario}, not {scenario.name}; "
                              f"{RESUME_COMMAND} {failed.run_dir} finishes it")
        config = scenario.config_type.from_mapping(failed.config)
        apply_analysis_args(args, "all")
        spec = ready_run(scenario, args, failed.seed, config, failed.spec)
        trial = run_trial(scenario, config, failed.seed, spec, trace=args.trace,
                          trace_dir=Path(args.out) / scenario.name)
    except (ConfigError, BackendConfigError) as exc:  # DamagedFile: a damaged run, too
        fail(str(exc))
    trial.resumed_from = str(failed.run_dir)
    stats = trial.world.backend.stats() if callable(getattr(trial.world.backend, "stats", None)) else {}
    if not args.json:
        print(f"resuming {failed.run_dir}: {stats.get('cassette_hits', 0)} calls answered from its cassette, "
              f"{stats.get('live_calls', 0)} sent", file=sys.stderr)
    return report_run(scenario, args, trial)


def check_run(scenario: Scenario, args: argparse.Namespace) -> tuple[int, Config, BackendSpec]:
    """One run's seed, config and backend from its flags, checked, and its analysis flags applied.

    Raises:
        ConfigError: one line naming the field, before any work is done.
    """
    seed = parse_seed(args.seed)
    config = resolve_config(scenario.config_type, args)
    spec = backend_spec(args)
    apply_analysis_args(args, "all")
    model_note(config, args)
    return seed, config, spec


def ready_run(scenario: Scenario, args: argparse.Namespace, seed: int, config: Config,
              spec: BackendSpec) -> BackendSpec:
    """What a checked run needs outside itself (output root, server, window, encoder), checked
    before its first call; returns the spec fitted to the model's context window."""
    check_before_work(args.out, spec)
    spec = fit_to_window(scenario, [(config, seed)], spec)
    check_embed_cache(scenario, [config])
    return spec


def run_lines(scenario: Scenario, results: Mapping[str, Any]) -> list[str]:
    """What the command prints about a finished run: the scenario's summary and the replies' quality."""
    lines = [scenario.summarize(results)] if scenario.summarize else []
    return lines + summary_lines(results.get("parse_quality", {}))


def error_sentence(error: Mapping[str, Any] | None) -> str:
    """A recorded trial error (type, message, simulated time) as one line of prose."""
    if not error:
        return "no error was recorded"
    kind = error.get("type") or "error"
    when = f" at simulated time {error['sim_time']:g}" if isinstance(error.get("sim_time"), (int, float)) else ""
    return f"{error.get('message') or 'no message'} ({kind}{when})"


def parse_trials(value: Any, minimum: int | None = None) -> int:
    """Validate ``--trials``: an integer from ``minimum`` to MAX_TRIALS.

    ``minimum`` defaults to MIN_TRIALS, the range of a Monte Carlo here and in the
    HTTP API; a command whose single trial is a comparison in itself (llm_auction's
    ``compare``, all mechanisms on one seed) passes 1.
    """
    return parse_int("trials", value, MIN_TRIALS if minimum is None else minimum, MAX_TRIALS)


@dataclasses.dataclass(frozen=True)
class Arms:
    """A checked ``--counterfactual`` / ``--trials N`` (see :func:`check_arms`)."""

    seed: int
    n_trials: int | None  # None: one pair on ``seed``
    config: Config
    spec: BackendSpec
    configs: tuple[Config, Config]
    seeds: list[int]


def check_arms(scenario: Scenario, args: argparse.Namespace) -> Arms:
    """Both arms' configs, the trial seeds and the backend from the flags, checked, and the
    analysis flags applied.

    Raises:
        ConfigError: one line naming the field, before any work is done.
    """
    name = scenario.counterfactual[0]  # type: ignore[index]
    if getattr(args, name, None) is not None:
        flag = "--" + name.replace("_", "-")
        raise ConfigError(f"{name}: set per arm by --counterfactual/--trials; drop {flag}")
    if args.counterfactual and args.trials is not None:
        raise ConfigError("trials: --counterfactual runs one pair on one seed and --trials N runs a Monte "
                          "Carlo; give one of them")
    seed = parse_seed(args.seed)
    n_trials = None if args.trials is None else parse_trials(args.trials)
    config = resolve_config(scenario.config_type, args)
    if getattr(config, "metrics", True) is False:  # a scenario whose metrics can be switched off
        mode = "--counterfactual" if n_trials is None else "--trials N"
        raise ConfigError(f"metrics: {mode} compares the arms' metrics and --no-metrics computes none, "
                          "so every statistic would be n/a; drop --no-metrics")
    spec = backend_spec(args)
    apply_analysis_args(args, "all" if n_trials is None else "summary")
    model_note(config, args)
    installed_calibration(scenario)  # a damaged calibration.json is named before any trial runs
    seeds = [seed] if n_trials is None else trial_seeds(seed, n_trials)
    return Arms(seed, n_trials, config, spec, arm_configs(scenario, config), seeds)


def ready_arms(scenario: Scenario, args: argparse.Namespace, arms: Arms) -> BackendSpec:
    """What checked arms need outside themselves, checked before any trial (see :func:`ready_run`);
    returns the fitted spec."""
    check_before_work(args.out, arms.spec)
    spec = fit_to_window(scenario, [(c, arms.seeds[0]) for c in arms.configs], arms.spec)
    check_embed_cache(scenario, arms.configs)
    for cfg in arms.configs:  # a config that cannot be built fails before anything runs
        build_world(scenario, cfg, arms.seed, BackendSpec()).release()
    return spec


def main_arms(scenario: Scenario, args: argparse.Namespace) -> int:
    """``--counterfactual`` / ``--trials N``: run both arms, write and report the comparison."""

    try:
        arms = check_arms(scenario, args)
        if getattr(args, "estimate", False):
            return print_estimate(scenario, [(c, s) for c in arms.configs for s in arms.seeds], arms.spec,
                                  as_json=args.json)
        spec = ready_arms(scenario, args, arms)
        # (a real backend without its key fails here too, before any trial is written)
        with embeddings.expecting(2 * len(arms.seeds)):  # this process encodes every trial's texts
            summary = run_arms(scenario, arms.config, arms.seed, n_trials=arms.n_trials, spec=spec, out=args.out,
                               progress=True, plot_processes=True)
    except (ConfigError, BackendConfigError) as exc:
        fail(str(exc))
    if args.json:
        say(json.dumps(summary, indent=2, sort_keys=True, default=str))
    else:
        say(format_arms(summary))
        say(f"summary directory: {Path(args.out) / scenario.name / summary['experiment_id']}")
    return 0 if not summary["failed_trials"] else 1


def arms_comparison(summary: Mapping[str, Any]) -> dict[str, Any]:
    """A group summary's comparison of its arms (a Monte Carlo's statistical one, a pair's)."""
    key = "statistical_comparison" if summary["mode"] == "monte_carlo" else "counterfactual_comparison"
    return summary[key]


def arms_headline(summary: Mapping[str, Any]) -> list[str]:
    """What a group's command says first and last around its table: what ran, and the verdict
    (the scenario's interpretation and the warnings). The run browser opens a group's page with them."""
    comparison = arms_comparison(summary)
    diff = comparison.get("difference_summary", {})
    level = level_text([diff[m] for m in compared_metrics(comparison)])
    cf = summary["counterfactual"]
    title = (f"{summary['scenario']} {summary['mode']}: {summary['n_trials']} trial(s) per arm, "
             f"A: {cf['field']}={cf['A']}, B: {cf['field']}={cf['B']}, "
             f"{len(summary['failed_trials'])} failed" + (f"; {level}" if level else ""))
    verdict = [f"  {diff['interpretation']}"] if diff.get("interpretation") else []
    return [title, *verdict, *(f"  {w}" for w in summary.get("warnings", []))]


def format_arms(summary: dict[str, Any]) -> str:
    """The compared metrics as a table for the terminal (:func:`~simcore.analysis.comparison_table.comparison_lines`),
    with the one rule that decides, between the lines of :func:`arms_headline`."""
    comparison = arms_comparison(summary)
    diff = comparison.get("difference_summary", {})
    agg_a, agg_b = summary["run_A_aggregate"], summary["run_B_aggregate"]
    rows = [ComparisonRow(m, diff[m], means=(agg_a.get(m, {}), agg_b.get(m, {})))
            for m in compared_metrics(comparison)]
    headline = arms_headline(summary)
    lines = [headline[0], *comparison_lines(None, rows, arms=("A", "B"))]
    lines += readability_lines(comparison.get("readability"), "A", "B")
    lines += headline[1:]
    return "\n".join(line.rstrip() for line in lines)
