"""Public messages and who sees them.

A message is visible to its speaker and to the speaker's successors in the
topology (edge u->v: v hears u). With no topology, or a complete one, every agent
hears every message, and one shared list serves them all.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping, NamedTuple

if TYPE_CHECKING:
    import networkx as nx


class Message(NamedTuple):
    """One public statement (a named tuple, for the same reason as TraceEvent)."""

    seq: int
    t: float
    speaker: str
    text: str
    fields: Mapping[str, Any] = {}


class Board:
    """Delivers each posted message to the inboxes of those who can hear it."""

    def __init__(self, graph: "nx.DiGraph | None" = None) -> None:
        self.graph = graph
        self.messages: list[Message] = []
        n = 0 if graph is None else graph.number_of_nodes()
        self.broadcast = graph is None or graph.number_of_edges() == n * (n - 1)
        self._inbox: dict[str, list[Message]] = {}

    def post(self, t: float, speaker: str, text: str, fields: Mapping[str, Any] | None = None) -> Message:
        """Publish a message and return it."""
        msg = Message(len(self.messages), t, speaker, text, dict(fields or {}))
        self.messages.append(msg)
        if not self.broadcast:
            assert self.graph is not None
            if speaker not in self.graph:
                raise KeyError(f"speaker {speaker!r} is not a node of the topology")
            self._inbox.setdefault(speaker, []).append(msg)
            for listener in self.graph.successors(speaker):
                if listener != speaker:
                    self._inbox.setdefault(listener, []).append(msg)
        return msg

    def visible(self, name: str) -> list[Message]:
        """Messages ``name`` can see, oldest first."""
        if self.broadcast:
            return self.messages
        return self._inbox.get(name, [])

    def audience(self, speaker: str) -> list[str]:
        """Who hears ``speaker`` (the speaker included), in graph order."""
        if self.graph is None:
            raise ValueError("no topology: everyone hears everyone")
        return [speaker] + [v for v in self.graph.successors(speaker) if v != speaker]
