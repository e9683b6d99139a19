"""Perturbation studies: baseline versus perturbed runs, and how they diverge.

Command line: ``python -m scenarios.perturbation --scenario NAME --perturb SPEC``
(see ``docs/perturbation.md``). Python::

    from simcore.perturbation import run_study, write_study
    study = run_study(SCENARIO, config, ["blank:agent=D,round=1"], pairs=5)
    study.results.summary()

Modules: :mod:`.operators` (the operators and SPEC strings), :mod:`.pairs`
(paired runs, prefix reuse, per-pair metrics, noise floor), :mod:`.results`
(summary, report, plots), :mod:`.study` (a whole study and its records). The
distance, alignment and taxonomy live in :mod:`simcore.analysis.divergence`.
"""

from __future__ import annotations

from typing import Any

_EXPORTS = {
    "parse_perturbation": "simcore.perturbation.operators",
    "Perturbation": "simcore.perturbation.operators",
    "Selector": "simcore.perturbation.operators",
    "OPERATORS": "simcore.perturbation.operators",
    "PerturbationError": "simcore.perturbation.operators",
    "pair_metrics": "simcore.perturbation.pairs",
    "run_seed": "simcore.perturbation.pairs",
    "PerturbationResults": "simcore.perturbation.results",
    "run_study": "simcore.perturbation.study",
    "run_study_async": "simcore.perturbation.study",
    "write_study": "simcore.perturbation.study",
    "comparable_signatures": "simcore.analysis.divergence",
    "compare_signatures": "simcore.analysis.divergence",
    "classify_manifestation": "simcore.analysis.divergence",
    "manifestation_group": "simcore.analysis.divergence",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        import importlib

        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'simcore.perturbation' has no attribute {name!r}")
