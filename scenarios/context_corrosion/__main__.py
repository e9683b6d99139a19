"""``python -m scenarios.context_corrosion``: ``python -m simcore.run context_corrosion``; see ``--help``."""

from simcore.api import run_scenario

raise SystemExit(run_scenario("context_corrosion", prog="python -m scenarios.context_corrosion"))
