"""``python -m simcore.calibrate SCENARIO [flags]``: null calibration of a scenario's comparisons.

The command line of :mod:`simcore.runs.calibration` (what it computes and writes is
described there); ``--install`` writes the result beside the scenario
(:mod:`simcore.runs.marks`), where its comparisons read it.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import Sequence

from simcore.base.config import ConfigError
from simcore.base.records import check_out_dir, write_json
from simcore.cli import add_config_args, resolve_config
from simcore.runs.args import (
    OneLineParser,
    fail,
    parse_int,
    parse_scenario_args,
    parse_seed,
    say,
)
from simcore.runs.calibration import calibrate_async, format_table, summarize, write
from simcore.runs.marks import CALIBRATION_FILE, scenario_dir
from simcore.runs.scenario import Scenario


def build_parser(scenario: Scenario | None, add_help: bool = True) -> OneLineParser:
    """The calibrate parser; with a scenario, its config fields become flags too.

    Without ``add_help`` (the first pass, which only looks for the scenario) the
    scenario argument is optional.
    """
    parser = OneLineParser(
        prog="python -m simcore.calibrate",
        add_help=add_help,
        description="Null calibration of a scenario's comparisons: the false-positive rate and the power of "
        "every compared metric under its decision rule, from K Monte Carlos under the scenario's null and K "
        "under its default (stub backend).",
    )
    parser.add_argument("scenario", nargs=None if add_help else "?",
                        help="a scenario name (built-in, entry point or dotted path)")
    parser.add_argument("--trials", default="10", metavar="N", help="trials per arm of each Monte Carlo (default: 10)")
    parser.add_argument("--monte-carlos", default="30", metavar="K",
                        help="Monte Carlos per setting (default: 30)")
    parser.add_argument("--alpha", default="0.05", help="significance level (default: 0.05)")
    parser.add_argument("--seed", default="42", help="random seed of the calibration (default: 42)")
    parser.add_argument("--out", default="runs", help="output root (default: runs)")
    parser.add_argument("--config", metavar="FILE", default=None, help="YAML file of config fields")
    parser.add_argument("--install", action="store_true",
                        help=f"also write {CALIBRATION_FILE} beside the scenario, where its comparisons read it")
    parser.add_argument("--json", action="store_true", help="print calibration.json instead of the table")
    parser.add_argument("--no-progress", action="store_true", help="no progress output")
    if scenario is not None:
        add_config_args(parser, scenario.config_type)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m simcore.calibrate SCENARIO [flags]``."""

    argv = list(sys.argv[1:] if argv is None else argv)
    scenario, args = parse_scenario_args(build_parser, argv)
    try:
        if scenario.null is None:
            raise ConfigError(f"scenario: {scenario.name} declares no null (Scenario.null); nothing to calibrate")
        n = parse_int("trials", args.trials, 2, 1000)
        k = parse_int("monte-carlos", args.monte_carlos, 1, 10000)
        try:
            alpha = float(args.alpha)
        except ValueError:
            alpha = -1.0
        if not 0 < alpha < 1:
            raise ConfigError(f"alpha: must be a number between 0 and 1, got {args.alpha!r}")
        seed = parse_seed(args.seed)
        config = resolve_config(scenario.config_type, args)
        config.replace(**dict(scenario.null.config))  # a null that does not fit the config fails here
        out = check_out_dir(args.out)
    except ConfigError as exc:
        fail(str(exc))
    start = time.perf_counter()
    total = 2 * k
    done = [0]
    quiet = args.no_progress or args.json

    def progress(step: int) -> None:
        done[0] += step
        if not quiet:
            print(f"calibrate {scenario.name}: {done[0]}/{total} Monte Carlos, {time.perf_counter() - start:.0f} s",
                  file=sys.stderr, flush=True)

    outcomes = asyncio.run(calibrate_async(scenario, config, seed=seed, n_trials=n, monte_carlos=k, alpha=alpha,
                                           progress=progress))
    rows = summarize(scenario, outcomes, alpha)
    command = "python -m simcore.calibrate " + " ".join(argv)
    final, record = write(out, scenario, config, {"command": command, "seed": seed, "alpha": alpha, "trials": n,
                                                  "monte_carlos": k, "wall_s": round(time.perf_counter() - start, 1)},
                          outcomes, rows)
    if args.install:
        write_json(scenario_dir(scenario) / CALIBRATION_FILE, record)
    if args.json:
        say(json.dumps(record, indent=2, sort_keys=True))
        return 0
    say(f"{scenario.name}: null calibration ({k} Monte Carlos of {n} trials per arm under each setting; "
        f"null: {', '.join(f'{key}={v}' for key, v in scenario.null.config.items())}; alpha {alpha:g})")
    say(format_table(rows))
    for r in rows:
        if r.confounded:
            say(f"  CONFOUNDED UNDER THE NULL: {r.metric}: {r.reason}")
    say(f"calibration directory: {final}" + (f" (installed in {scenario_dir(scenario)})" if args.install else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
