"""Experiments, one package each; run any with ``python -m scenarios.<name> --help``.

simcore finds them as entry points of the group ``simcore.scenarios`` (``setup.cfg``),
as it finds any installed scenario.
"""

import sys
from pathlib import Path

# ``python -m scenarios.<typo>`` gets one line naming the scenarios (as ``python -m
# simcore.run <typo>`` does) instead of Python's "No module named". This package is
# imported while ``-m`` looks for its module: sys.argv[0] is "-m" until it is found,
# and sys.orig_argv holds the name asked for. No finder is installed; a plain
# ``import`` of a missing module raises ImportError as usual.
_ASKED = sys.orig_argv[sys.orig_argv.index("-m") + 1] if sys.argv[:1] == ["-m"] and "-m" in sys.orig_argv[:-1] else ""
_HEAD, _, _REST = _ASKED.partition(".")
if _HEAD == __name__ and _REST.isidentifier() and not any(
        (Path(__file__).parent / p).is_file() for p in (f"{_REST}/__init__.py", f"{_REST}.py")):
    from simcore.api import load_scenario

    try:
        load_scenario(_REST)
    except ValueError as exc:  # ScenarioNotFound
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
