"""``python -m scenarios.acausal_cooperation``: see ``--help``."""

from scenarios.acausal_cooperation import SCENARIO
from simcore.cli import main

raise SystemExit(main(SCENARIO))
