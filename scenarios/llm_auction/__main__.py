"""``python -m scenarios.llm_auction``: see ``--help``."""

from scenarios.llm_auction import SCENARIO
from simcore.cli import main

raise SystemExit(main(SCENARIO))
