"""Experiments, one package each; run any with ``python -m scenarios.<name> --help``."""
