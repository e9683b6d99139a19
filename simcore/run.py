"""Run any scenario by name: ``python -m simcore.run NAME [flags]``.

``NAME`` is whatever :func:`simcore.runs.scenario.load_scenario` resolves: a built-in
scenario (``context_corrosion``), an entry point of the group ``simcore.scenarios``
(a package of your own, installed with ``pip install -e``), or a dotted path
(``mypkg.myexp`` or ``mypkg.myexp:SCENARIO``). The flags after it are the
scenario's own (see ``python -m simcore.run NAME --help``): the shared CLI of
:mod:`simcore.cli`. ``python -m scenarios.<name>`` is this command for a built-in.

``python -m simcore.run --list [--json]`` lists the installed scenarios;
``python -m simcore.run --resume RUN_DIR`` finishes a run that failed after paid
calls, from its own cassette (:mod:`simcore.runs.resume`). A name
that finds no scenario gets one line naming what was tried and the installed
scenarios, exit status 2.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import Sequence

from backends.errors import DamagedFile
from simcore.base.files import read_manifest
from simcore.cli import main as scenario_main
from simcore.runs.args import fail, say
from simcore.runs.scenario import ScenarioNotFound, installed_scenarios, load_scenario

PROG = "python -m simcore.run"
USAGE = (f"usage: {PROG} NAME [flags] | {PROG} NAME --help | {PROG} --list [--json] | "
         f"{PROG} --resume RUN_DIR [flags]")
HELP = f"""{USAGE}

Run one trial (or --counterfactual / --trials N) of any scenario.

NAME: a built-in scenario (context_corrosion), an entry point of the group
simcore.scenarios (your own package, see docs/tutorial.md), or a dotted path
(mypkg.myexp, mypkg.myexp:SCENARIO); perturbation.NAME runs one perturbation pair
of NAME. The flags after NAME are the scenario's own: {PROG} NAME --help.

  --list    list the installed scenarios (--json: as JSON)
  --resume RUN_DIR
            finish a run that failed after paid calls: run it again from its manifest,
            the calls it recorded answered from its cassette.sqlite and only the rest
            sent (the scenario comes from the manifest; see {PROG} NAME --help)
  -h, --help
"""


def run_scenario(name: str, argv: Sequence[str] | None = None, prog: str | None = None) -> int:
    """Resolve ``name`` and run the shared CLI on ``argv``; returns the exit status."""
    try:
        scenario = load_scenario(name)
    except ScenarioNotFound as exc:
        fail(str(exc))
    return scenario_main(scenario, argv, prog=prog or f"{PROG} {name}")


def list_scenarios(as_json: bool = False) -> int:
    """Print the installed scenarios, one a line (or as JSON)."""
    rows = installed_scenarios()
    if as_json:
        say(json.dumps([dataclasses.asdict(row) for row in rows], indent=2))
        return 0
    width = max(len(r.name) for r in rows) if rows else 0
    for row in rows:
        source = "" if row.source == "built-in" else f"  [{row.source}]"
        flag = "" if row.ok else "(unavailable) "
        say(f"{row.name:<{width}}  {flag}{row.description}{source}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point; returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv:
        print(USAGE, file=sys.stderr)
        return 2
    first, rest = argv[0], argv[1:]
    if first in ("-h", "--help"):
        say(HELP)
        return 0
    if first == "--list":
        if rest not in ([], ["--json"]):
            fail(f"list: takes only --json; got {' '.join(rest)}")
        return list_scenarios(as_json=bool(rest))
    if first == "--resume" or first.startswith("--resume="):
        return run_scenario(scenario_of(first.partition("=")[2] or (rest[:1] or [""])[0]), argv)
    if first.startswith("-"):
        fail(f"name: the scenario name comes first ({USAGE.removeprefix('usage: ')}); got {first}")
    return run_scenario(first, rest)


def scenario_of(run_dir: str) -> str:
    """The scenario of the run in ``run_dir``, from its manifest (one line and exit 2 when there is none)."""
    if not run_dir or not (Path(run_dir) / "manifest.json").is_file():
        fail(f"resume: {run_dir!r} is not a run directory (it has no manifest.json); {PROG} --resume RUN_DIR")
    try:
        return str(read_manifest(run_dir)["scenario"])
    except DamagedFile as exc:
        fail(f"resume: the run is damaged: {exc}")


if __name__ == "__main__":
    raise SystemExit(main())
