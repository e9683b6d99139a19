"""The simulation: the kernel, agents, messages, memory, topology, protocols, traces."""
