"""The perturbation study's command line, ``python -m scenarios.perturbation``, and its checks.

:func:`build_parser` and :func:`check_study_args` are shared by the command and by
:func:`simcore.perturb` (:mod:`simcore.face.calls`): a keyword of the Python call is
the command's flag, checked by the same code. With neither ``--scenario`` nor
``--perturb`` the command runs a small default study (:data:`DEFAULT_SCENARIO` with
:data:`DEFAULT_PERTURB`, one pair), saying so. ``report DIR`` rebuilds the report of
a study directory, or makes one for a batch sweep of ``perturbation.<NAME>``.

Exit status: 0 when every run finished, 1 when a baseline failed, 2 on bad input
(one line, nothing written).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from backends.errors import BackendConfigError
from backends.registry import BackendSpec
from simcore.analysis.plots import summary_plots_wanted
from simcore.base.config import Config, ConfigError
from simcore.cli import (
    add_common_args,
    add_config_args,
    apply_analysis_args,
    backend_spec,
    check_before_work,
    print_estimate,
    resolve_config,
)
from simcore.perturbation.operators import operator_help
from simcore.perturbation.pairs import REUSE, pair_seeds
from simcore.perturbation.results import PerturbationResults
from simcore.perturbation.study import (
    check_study,
    cost_record,
    format_summary,
    run_study,
    write_study,
)
from simcore.runs.args import (
    OneLineParser,
    fail,
    parse_int,
    parse_scenario_args,
    parse_seed,
    say,
)
from simcore.runs.scenario import Scenario

PROG = "python -m scenarios.perturbation"
# The study run with no flags: P1's round-2 message dropped before the others hear it.
DEFAULT_SCENARIO = "context_corrosion"
DEFAULT_PERTURB = "drop:agent=P1,round=2"
STUDY_FLAGS = ("scenario", "perturb", "pairs", "noise_floor", "reuse", "no_plot", "no_progress")

EPILOG = f"""\
SPEC: OPERATOR[:KEY=VALUE,...], several joined with '+' (applied together in one
run); quote values holding , + = : or spaces ('...' or "..."). Operators:
{operator_help()}

Selectors (which event an operator acts on): agent, phase, round, field.NAME (any
other structural field, as in the trace), after=T (simulated time), nth=K (the
K-th match from 0; 'all' for every one; default 0, budget: all). Text operators
act on=message (default: what others hear), on=reply (the raw model reply) or,
for inject, on=prompt.

Examples:
  {PROG} --scenario context_corrosion --perturb "drop:agent=P1,round=2" \\
      --perturb "inject:agent=P2,round=1,text='D is wrong.'" --pairs 5
  {PROG} --scenario veil_of_ignorance --perturb "swap:phase=deliberation,round=1" --rounds 3
  {PROG} report runs/perturbation/<study-id>
"""


def build_parser(scenario: Scenario | None, add_help: bool = True) -> OneLineParser:
    """The study parser; with a scenario, its config fields become flags too."""
    parser = OneLineParser(
        prog=PROG,
        add_help=add_help,
        description=textwrap.fill(
            "Perturbation study: pairs of a clean baseline run and a perturbed run (same seed, same "
            "config), compared by their structural traces (d_norm, t*, control flow), final answers "
            "(manifestation taxonomy) and tokens, against a noise floor. Writes "
            "<out>/perturbation/<study-id>/ (study.json, pairs.csv/.jsonl, summary.csv, report.md, "
            "plots/, runs/). Subcommand: report DIR (see report --help).", 80
        ),
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    s = parser.add_argument_group("study")
    s.add_argument("--scenario", default=None,
                   help="the scenario to perturb: a name python -m simcore.run --list shows (e.g. "
                        "context_corrosion) or a dotted path (mypkg.myexp[:SCENARIO]) (default: "
                        f"{DEFAULT_SCENARIO})")
    s.add_argument("--perturb", action="append", default=None, metavar="SPEC",
                   help="a perturbation (repeat for more; each gets its own pairs; default, with no "
                        f"--scenario either: {DEFAULT_PERTURB})")
    s.add_argument("--pairs", default="1", metavar="N",
                   help="pairs per perturbation (seeds: --seed, then ones derived from it; default: 1)")
    s.add_argument("--noise-floor", default=None, metavar="K",
                   help="re-runs of each clean baseline (fresh calls) to measure the noise floor "
                        "(default: 0 on the stub, which is deterministic; 1 on real backends)")
    s.add_argument("--reuse", default="prefix", choices=REUSE,
                   help="prefix: answer the perturbed run's calls before the perturbation point from "
                        "the baseline, so only later calls are paid (default); none: send every call")
    s.add_argument("--no-plot", action="store_true",
                   help="skip the study's plots (--plots none also skips every run's own)")
    s.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_common_args(parser)
    if scenario is not None:
        add_config_args(parser, scenario.config_type)
    return parser


@dataclass(frozen=True)
class StudyArgs:
    """A study's flags, checked (:func:`check_study_args`)."""

    config: Config
    perturbations: tuple[str, ...]
    specs: tuple[str, ...]  # the perturbations, canonical
    pairs: int
    seed: int
    noise_floor: int | None  # None: the backend's default
    noise_runs: int  # re-runs per seed, the default resolved
    spec: BackendSpec
    reuse: str
    plots: bool  # the study's own figures


def check_study_args(scenario: Scenario, args: argparse.Namespace) -> StudyArgs:
    """The study the flags define, checked completely before any run, with the analysis
    flags applied (``--plots`` defaults to ``all``: the study's figures and every run's).

    Raises:
        ConfigError: one line naming the field, before any work is done.
    """
    if not args.perturb:
        raise ConfigError(f"perturb: give at least one --perturb SPEC for {scenario.name}")
    seed = parse_seed(args.seed)
    config = resolve_config(scenario.config_type, args)
    spec = backend_spec(args)
    pairs = parse_int("pairs", args.pairs, 1)
    noise = None if args.noise_floor is None else parse_int("noise_floor", args.noise_floor, 0)
    apply_analysis_args(args, "all")
    specs, noise_runs = check_study(scenario, config, args.perturb, pairs, seed, noise, spec, args.reuse)
    return StudyArgs(config, tuple(args.perturb), tuple(specs), pairs, seed, noise, noise_runs, spec, args.reuse,
                     plots=not args.no_plot and summary_plots_wanted())


def build_report_parser() -> OneLineParser:
    """The ``report`` subcommand's parser."""
    parser = OneLineParser(prog=f"{PROG} report",
                           description="Write report.md, plots/ and summary.csv of a perturbation study "
                                       "directory, or of a batch sweep of perturbation.<scenario>.")
    parser.add_argument("dir", help="runs/perturbation/<study-id> or a sweep directory")
    parser.add_argument("--no-plot", action="store_true", help="skip the plots")
    return parser


def report_main(argv: Sequence[str]) -> int:
    """``report DIR``: (re)write report.md and plots of a study or a batch sweep."""
    args = build_report_parser().parse_args(argv)
    path = Path(args.dir)
    study = (path / "study.json").is_file()
    try:
        if study:
            res = PerturbationResults.load(path)
        elif (path / "results.csv").is_file():
            res = PerturbationResults.from_sweep(path)
        else:
            raise ConfigError(f"dir: {args.dir!r} is neither a perturbation study nor a batch sweep")
    except (ConfigError, ValueError, KeyError) as exc:
        fail(str(exc))
    # A sweep keeps its own results tables; the pair tables go next to them.
    out = path if study else path / "perturbation_report"
    files = res.write_tables(out)
    files.update(res.report(out, plots=not args.no_plot))
    say(format_summary(res))
    for name, file in files.items():
        say(f"{name}: {file}")
    return 0


def _perturbable(scenario: Scenario, known: argparse.Namespace) -> None:
    """Refuse a scenario this command cannot perturb (between the two passes of the parse)."""
    if scenario.name.startswith("perturbation."):
        fail(f"scenario: {known.scenario!r} is already a perturbation scenario; name the scenario to "
             f"perturb (e.g. {scenario.name.removeprefix('perturbation.')})")
    clash = [f.name for f in dataclasses.fields(scenario.config_type) if f.name in STUDY_FLAGS]
    if clash:
        fail(f"scenario: {scenario.name}'s config field(s) {', '.join(clash)} clash with this command's flags")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the study command; returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "report":
        return report_main(argv[1:])
    scenario, args = parse_scenario_args(build_parser, argv, default=DEFAULT_SCENARIO, check=_perturbable)
    if args.scenario is None and not args.perturb:
        args.perturb = [DEFAULT_PERTURB]
        print(f"the default study: {DEFAULT_SCENARIO} with --perturb {DEFAULT_PERTURB!r} (P1's round-2 "
              "message dropped), one pair; --scenario and --perturb choose another", file=sys.stderr)
    try:
        plan = check_study_args(scenario, args)
        if args.estimate:
            runs = [(plan.config, s) for s in pair_seeds(plan.seed, plan.pairs)] * (1 + len(plan.specs)
                                                                                     + plan.noise_runs)
            print("upper bound: every run counted in full (prefix reuse saves the perturbed runs' "
                  "calls before the perturbation point)", file=sys.stderr)
            return print_estimate(scenario, runs, plan.spec, as_json=args.json)
        check_before_work(args.out, plan.spec)
        study = run_study(scenario, plan.config, plan.perturbations, pairs=plan.pairs, seed=plan.seed,
                          noise_floor=plan.noise_floor, spec=plan.spec, reuse=plan.reuse,
                          progress=not args.no_progress and not args.json)
    except (ConfigError, BackendConfigError) as exc:
        fail(str(exc))
    study_dir = write_study(study, args.out, plots=plan.plots)
    res = study.results
    calls = cost_record(study)
    failed = int((res.pairs["baseline_status"] != "ok").sum())
    if args.json:
        out = {
            "study_dir": str(study_dir),
            "warnings": res.warnings(),
            "noise_floor": {k: v for k, v in res.noise.items() if k != "reruns"},
            "calls": calls,
            "summary": res.summary().to_dict(orient="records"),
            "files": res.files,
        }
        say(json.dumps(out, indent=2, sort_keys=True, default=str))
    else:
        say(format_summary(res, calls))
        say(f"study directory: {study_dir} (runs took {study.wall_s:.2f} s)")
    return 1 if failed else 0
