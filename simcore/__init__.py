"""simcore: discrete-event, agent-based simulations of groups of LLM agents.

Floors, each importing only those below it: ``base`` (configs, seeds, run files),
``replies`` (reading model replies), ``sim`` (the kernel and its agents),
``analysis`` (statistics, embeddings, plots), ``runs`` (scenarios, trials,
comparisons), then the commands (``cli``, ``run``, ``batch``, ``replay``, ``view``,
``calibrate``, ``new``, ``capture``, ``perturbation``). Scenario authors import from
:mod:`simcore.api`.
"""

from simcore import _compat
from simcore.sim.agents import LLMAgent
from simcore.sim.kernel import LLMCall, Reply, World, run_worlds

_compat.install()

__version__ = "0.1.0"
__all__ = ["LLMAgent", "LLMCall", "Reply", "World", "run_worlds", "__version__"]
