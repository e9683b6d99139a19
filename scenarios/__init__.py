"""Experiments, one package each; run any with ``python -m scenarios.<name> --help``.

simcore finds them as entry points of the group ``simcore.scenarios`` (``setup.cfg``),
as it finds any installed scenario.
"""
