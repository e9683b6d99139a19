"""``python -m scenarios.context_corrosion``: see ``--help``."""

from simcore.cli import main

from scenarios.context_corrosion import SCENARIO

raise SystemExit(main(SCENARIO))
