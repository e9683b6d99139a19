"""simcore: discrete-event, agent-based simulations of groups of LLM agents.

The Python face, for notebooks and scripts (see docs/python.md)::

    import simcore
    run = simcore.simulate("context_corrosion", rounds=2)      # one run -> Run
    mc = simcore.monte_carlo("context_corrosion", trials=10)    # two arms -> MonteCarlo
    sw = simcore.sweep("context_corrosion", trials=4, grid={"rounds": [1, 3]})  # -> Sweep
    st = simcore.perturb("context_corrosion", perturb="drop:agent=P1,round=2")  # -> Study
    simcore.load(run.dir)                                       # any run directory, offline

with ``simulate_async``, ``monte_carlo_async``, ``sweep_async`` and
``perturb_async`` to await, and ``ConfigError``, ``BackendConfigError`` and
``DamagedFile`` as the errors they raise. The names resolve on first use, so
``import simcore.<module>`` stays as light as the module. ``tests/golden/python_face.json``
records this face.

Floors, each importing only those below it: ``base`` (configs, seeds, run files),
``replies`` (reading model replies), ``sim`` (the kernel and its agents),
``analysis`` (statistics, embeddings, plots), ``runs`` (scenarios, trials,
comparisons), then the commands (``cli``, ``run``, ``batch``, ``replay``, ``view``,
``calibrate``, ``new``, ``capture``, ``perturbation``) and the Python face
(``face``). Scenario authors import from :mod:`simcore.api`.
"""

from __future__ import annotations

import importlib
import warnings
from typing import Any

from simcore import _compat

_compat.install()

__version__ = "0.1.0"

#: Name -> the module that defines it.
_FACE = {
    "simulate": "simcore.face.calls",
    "simulate_async": "simcore.face.calls",
    "monte_carlo": "simcore.face.calls",
    "monte_carlo_async": "simcore.face.calls",
    "sweep": "simcore.face.calls",
    "sweep_async": "simcore.face.calls",
    "perturb": "simcore.face.calls",
    "perturb_async": "simcore.face.calls",
    "load": "simcore.face.objects",
    "Run": "simcore.face.objects",
    "MonteCarlo": "simcore.face.objects",
    "Sweep": "simcore.face.objects",
    "Study": "simcore.face.objects",
    "ConfigError": "simcore.base.config",
    "BackendConfigError": "backends.errors",
    "DamagedFile": "backends.errors",
}
#: The kernel's names that simcore 4 exported here (Scenario API 4.0); kept until 5 with a DeprecationWarning.
_MOVED = {
    "LLMAgent": "simcore.sim.agents",
    "LLMCall": "simcore.sim.kernel",
    "Reply": "simcore.sim.kernel",
    "World": "simcore.sim.kernel",
    "run_worlds": "simcore.sim.kernel",
}

__all__ = sorted(_FACE) + ["__version__"]


def __getattr__(name: str) -> Any:
    if name in _FACE:
        value = getattr(importlib.import_module(_FACE[name]), name)
    elif name in _MOVED:
        warnings.warn(f"simcore.{name} is deprecated since simcore 4.1 and goes in simcore 5: import it from "
                      f"{_MOVED[name]} (scenario authors: simcore.api)", DeprecationWarning, stacklevel=2)
        return getattr(importlib.import_module(_MOVED[name]), name)
    else:
        raise AttributeError(f"module 'simcore' has no attribute {name!r}")
    globals()[name] = value  # resolved once
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
