"""Start an experiment of your own: ``python -m simcore.new NAME [--out DIR]``.

Writes ``DIR/NAME/``, a small project that works as it is (the package in
``src/NAME/``, a src layout, so that the project directory never shadows the
installed package): a config with three
fields (a group size, the counterfactual's field, and the stub's planted effect, whose
null value lets ``python -m simcore.calibrate`` run), a two-phase protocol (a parallel opening, then one
speaking round), a stub behaviour model with a planted effect, one metric and a
compare, a test, and a ``pyproject.toml`` that registers the scenario under the
``simcore.scenarios`` entry point. After ``pip install -e DIR/NAME`` the scenario
runs (``python -m simcore.run NAME``), sweeps (``python -m simcore.batch NAME``)
and replays (``python -m simcore.replay``). ``docs/tutorial.md`` starts from it.

The files come from ``simcore/templates/scenario/`` (``$name`` and ``$Title`` are
filled in). The package appears whole or not at all; bad input is one line, exit
status 2.
"""

from __future__ import annotations

import argparse
import importlib.util
import keyword
import re
from pathlib import Path
from string import Template
from typing import Sequence

from simcore.base.config import ConfigError
from simcore.base.records import staged_dir
from simcore.runs.args import OneLineParser, fail
from simcore.runs.scenario import installed_names

TEMPLATE = Path(__file__).parent / "templates" / "scenario"
_NAME = re.compile(r"^[a-z][a-z0-9_]{0,63}$")


def check_name(name: str) -> None:
    """A package name that is free: lower-case identifier, not importable yet, not built in.

    Raises:
        ConfigError: naming what is wrong.
    """
    if not _NAME.match(name) or keyword.iskeyword(name):
        raise ConfigError(f"name: must be a lower-case Python identifier (letters, digits, _), got {name!r}")
    if name in installed_names():
        raise ConfigError(f"name: {name!r} is a built-in scenario; pick another name")
    if importlib.util.find_spec(name) is not None:
        raise ConfigError(f"name: a module {name!r} can already be imported here; pick another name")


def render(name: str) -> dict[str, str]:
    """The package's files, relative path -> text."""
    values = {"name": name, "Title": "".join(part.capitalize() for part in name.split("_"))}
    files = {}
    for path in sorted(TEMPLATE.rglob("*.tmpl")):
        rel = path.relative_to(TEMPLATE).as_posix().removesuffix(".tmpl").replace("NAME", name)
        files[rel] = Template(path.read_text()).substitute(values)
    return files


def create(name: str, out: str | Path = ".") -> Path:
    """Write the package to ``out/name`` and return that directory.

    Raises:
        ConfigError: for a bad or taken name, or a target that exists.
    """
    check_name(name)
    final = Path(out) / name
    if final.exists():
        raise ConfigError(f"out: {str(final)!r} already exists; pick another --out or name")
    with staged_dir(final) as stage:
        for rel, text in render(name).items():
            (stage / rel).parent.mkdir(parents=True, exist_ok=True)
            (stage / rel).write_text(text)
    return final


def build_parser() -> OneLineParser:
    """The command's parser."""
    parser = OneLineParser(
        prog="python -m simcore.new",
        description="Write a small, working scenario package to DIR/NAME (see docs/tutorial.md).",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="then:\n  pip install -e DIR/NAME\n  python -m simcore.run NAME\n"
               "and for its tests (the extra adds pytest):\n  pip install -e 'DIR/NAME[test]'\n  python -m pytest DIR/NAME",
    )
    parser.add_argument("name", help="package and scenario name, a lower-case identifier (e.g. rumour)")
    parser.add_argument("--out", default=".", metavar="DIR", help="where to create NAME/ (default: .)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point; returns the exit status."""
    args = build_parser().parse_args(argv)
    try:
        path = create(args.name, args.out)
    except ConfigError as exc:
        fail(str(exc))
    print(f"created {path}/ ({sum(1 for p in path.rglob('*') if p.is_file())} files). Next:")
    print(f"  pip install -e {path}")
    print(f"  python -m simcore.run {args.name}")
    print("Its tests (the extra 'test' adds pytest):")
    print(f"  pip install -e '{path}[test]'")
    print(f"  python -m pytest {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
