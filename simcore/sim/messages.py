"""Public messages and who sees them.

A message is visible to its speaker and to the speaker's successors in the
topology (edge u->v: v hears u). With no topology, or a complete one, every agent
hears every message, and one shared list serves them all.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable, Mapping, NamedTuple

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
        # Speakers outside the graph (e.g. a moderator) reach everyone on a broadcast
        # board; they still do once remove_edge has turned it into inboxes.
        self._open = False

    def post(self, t: float, speaker: str, text: str, fields: Mapping[str, Any] | None = None) -> Message:
        """Publish a message and return it."""
        return self._post(t, speaker, text, dict(fields or {}))

    def _post(self, t: float, speaker: str, text: str, fields: dict[str, Any]) -> Message:
        # post() for a fields dict made for this message alone: kept, not copied
        # (a million messages need not hold two dicts each).
        msg = Message(len(self.messages), t, speaker, text, fields)
        self.messages.append(msg)
        if not self.broadcast:
            assert self.graph is not None
            if speaker not in self.graph:
                if not self._open:
                    raise KeyError(f"speaker {speaker!r} is not a node of the topology")
                listeners: Iterable[str] = self.graph.nodes
            else:
                listeners = self.graph.successors(speaker)
            self._inbox.setdefault(speaker, []).append(msg)
            for listener in listeners:
                if listener != speaker:
                    self._inbox.setdefault(listener, []).append(msg)
        return msg

    def remove_edge(self, u: str, v: str, names: Iterable[str]) -> bool:
        """From now on ``v`` no longer hears ``u``; what ``v`` has heard stays.

        Args:
            u: The speaker.
            v: The listener.
            names: Every agent, for a board without a topology (everyone hears
                everyone, and speakers who are not agents still reach all).

        Returns:
            False when ``v`` did not hear ``u`` (nothing changes).
        """
        import networkx as nx

        if self.graph is None:
            graph = nx.complete_graph(list(names), create_using=nx.DiGraph)
        else:
            graph = self.graph.copy()  # the world may share its graph object
        if u == v or not graph.has_edge(u, v):
            return False
        graph.remove_edge(u, v)
        if self.broadcast:
            # Everyone has heard everything so far, speakers outside the graph included.
            self._inbox = {n: list(self.messages) for n in graph.nodes}
            self.broadcast = False
            self._open = True
        self.graph = graph
        return True

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
