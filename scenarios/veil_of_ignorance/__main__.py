"""``python -m scenarios.veil_of_ignorance``: see ``--help``."""

from scenarios.veil_of_ignorance import SCENARIO
from simcore.cli import main

raise SystemExit(main(SCENARIO))
