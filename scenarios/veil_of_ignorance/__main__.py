"""``python -m scenarios.veil_of_ignorance``: ``python -m simcore.run veil_of_ignorance``; see ``--help``."""

from simcore.api import run_scenario

raise SystemExit(run_scenario("veil_of_ignorance", prog="python -m scenarios.veil_of_ignorance"))
