"""``python -m scenarios.context_corrosion``: see ``--help``."""

from scenarios.context_corrosion import SCENARIO
from simcore.cli import main

raise SystemExit(main(SCENARIO))
