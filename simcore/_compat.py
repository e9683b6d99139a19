"""The module paths of simcore 3.x, kept working for one release with a DeprecationWarning.

simcore 4 put its modules on floors (``simcore.base``, ``simcore.replies``,
``simcore.sim``, ``simcore.analysis``, ``simcore.runs``). ``import simcore.kernel``
still works: a finder on ``sys.meta_path`` answers each old path below with a module
that forwards every name to the module's new home, and warns once per import.
Scenario authors import from :mod:`simcore.api` instead.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import types
import warnings

#: Old module path -> its module now. To be removed in simcore 5.
MOVED = {
    "simcore.config": "simcore.base.config",
    "simcore.rng": "simcore.base.rng",
    "simcore.records": "simcore.base.records",
    "simcore.progress": "simcore.base.progress",
    "simcore.readers": "simcore.base.files",
    "simcore.schema": "simcore.replies.schema",
    "simcore.prose": "simcore.replies.prose",
    "simcore.echo": "simcore.replies.echo",
    "simcore.reading": "simcore.replies.reading",
    "simcore.quality": "simcore.replies.quality",
    "simcore.kernel": "simcore.sim.kernel",
    "simcore.agents": "simcore.sim.agents",
    "simcore.messages": "simcore.sim.messages",
    "simcore.memory": "simcore.sim.memory",
    "simcore.topology": "simcore.sim.topology",
    "simcore.protocols": "simcore.sim.protocols",
    "simcore.trace": "simcore.sim.trace",
    "simcore.collector": "simcore.sim.collector",
    "simcore.fitting": "simcore.sim.fitting",
    "simcore.metric_kinds": "simcore.analysis.metric_kinds",
    "simcore.stats": "simcore.analysis.stats",
    "simcore.basis": "simcore.analysis.basis",
    "simcore.embeddings": "simcore.analysis.embeddings",
    "simcore.embed_cache": "simcore.analysis.embed_cache",
    "simcore.minilm": "simcore.analysis.minilm",
    "simcore.divergence": "simcore.analysis.divergence",
    "simcore.plots": "simcore.analysis.plots",
    "simcore.scenario": "simcore.runs.scenario",
    "simcore.runner": "simcore.runs.runner",
    "simcore.estimate": "simcore.runs.estimate",
    "simcore.counterfactual": "simcore.runs.counterfactual",
}


class _Forward(importlib.abc.Loader):
    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        # A module of its own (not the new one itself, whose __spec__ must stay its own).
        return types.ModuleType(spec.name)

    def exec_module(self, module: types.ModuleType) -> None:
        new = MOVED[module.__name__]
        warnings.warn(f"{module.__name__} is deprecated since simcore 4 and goes in simcore 5: "
                      f"import from {new} (scenario authors: simcore.api)", DeprecationWarning, stacklevel=2)
        target = importlib.import_module(new)
        module.__dict__.update({k: v for k, v in vars(target).items() if not k.startswith("__")})
        module.__getattr__ = lambda name: getattr(target, name)  # names set on the new module later


class MovedModules(importlib.abc.MetaPathFinder):
    """Finds the old module paths in :data:`MOVED`."""

    def find_spec(self, fullname: str, path: object = None, target: object = None) -> importlib.machinery.ModuleSpec | None:
        if fullname not in MOVED:
            return None
        return importlib.machinery.ModuleSpec(fullname, _Forward())


def install() -> None:
    """Put the finder on ``sys.meta_path`` (once)."""
    if not any(isinstance(f, MovedModules) for f in sys.meta_path):
        sys.meta_path.append(MovedModules())
