"""``python -m scenarios.acausal_cooperation``: ``python -m simcore.run acausal_cooperation``; see ``--help``."""

from simcore.api import run_scenario

raise SystemExit(run_scenario("acausal_cooperation", prog="python -m scenarios.acausal_cooperation"))
