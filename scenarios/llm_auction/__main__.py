"""``python -m scenarios.llm_auction``: ``python -m simcore.run llm_auction``; see ``--help``."""

from simcore.api import run_scenario

raise SystemExit(run_scenario("llm_auction", prog="python -m scenarios.llm_auction"))
