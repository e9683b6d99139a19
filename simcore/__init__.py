"""simcore: discrete-event, agent-based simulations of groups of LLM agents."""

from simcore.agents import LLMAgent
from simcore.kernel import LLMCall, Reply, World, run_worlds

__version__ = "0.1.0"
__all__ = ["LLMAgent", "LLMCall", "Reply", "World", "run_worlds", "__version__"]
